#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "expert/kernel_codegen.h"
#include "expert/plan.h"

namespace egg::expert {
namespace {

const Value& ValueAt(const Graph& graph, int value) { return graph.values.at(static_cast<size_t>(value)); }

int64_t NormalizeDim(int64_t dim, size_t rank) { return dim < 0 ? dim + static_cast<int64_t>(std::max<size_t>(rank, 1)) : dim; }

int64_t IntArg(const Node& node, size_t position, const std::string& key, int64_t fallback) {
  const Arg* arg = node.ArgAt(position, key);
  if (arg == nullptr || arg->kind != Arg::Kind::kInt) {
    return fallback;
  }
  return arg->i;
}

bool BoolArg(const Node& node, size_t position, const std::string& key, bool fallback) {
  const Arg* arg = node.ArgAt(position, key);
  if (arg == nullptr || arg->kind != Arg::Kind::kBool) {
    return fallback;
  }
  return arg->b;
}

// getitem users of a tuple-producing node: element index -> value (-1 when unused).
std::vector<int> TupleOutputs(const Graph& graph, const Node& node, size_t count) {
  std::vector<int> outputs(count, -1);
  for (int user : ValueAt(graph, node.value).users) {
    const Node& getitem = graph.nodes.at(static_cast<size_t>(user));
    if (getitem.op != "getitem" || getitem.args.size() < 2 || getitem.args[1].kind != Arg::Kind::kInt) {
      continue;
    }
    const auto index = static_cast<size_t>(getitem.args[1].i);
    if (index < count) {
      outputs[index] = getitem.value;
    }
  }
  return outputs;
}

std::vector<int64_t> ExpandTo(std::vector<int64_t> values, int count, int64_t fallback) {
  if (values.empty()) {
    values.push_back(fallback);
  }
  while (static_cast<int>(values.size()) < count) {
    values.push_back(values.back());
  }
  return values;
}

// The tensor value of a node's first argument, or nullptr.
const Value* TensorInput(const Graph& graph, const Node& node) {
  if (node.args.empty() || node.args[0].kind != Arg::Kind::kValue) {
    return nullptr;
  }
  const Value& input = ValueAt(graph, node.args[0].value);
  return input.meta ? &input : nullptr;
}

}  // namespace

std::string KernelKindName(KernelKind kind) {
  switch (kind) {
    case KernelKind::kPointwise:
      return "pointwise";
    case KernelKind::kReduction:
      return "reduction";
    case KernelKind::kPool:
      return "pool";
    case KernelKind::kScan:
      return "scan";
    case KernelKind::kMatmul:
      return "matmul";
    case KernelKind::kRecurrent:
      return "recurrent";
    case KernelKind::kAttention:
      return "attention";
  }
  return "pointwise";
}

std::optional<ReductionSpec> ParseReduction(const Graph& graph, const Node& node) {
  const Value* tensor = TensorInput(graph, node);
  if (tensor == nullptr) {
    return std::nullopt;
  }
  const Value& input = *tensor;
  const size_t rank = input.meta->shape.size();
  ReductionSpec spec;
  spec.node = static_cast<int>(&node - graph.nodes.data());
  spec.input = node.args[0].value;
  const std::string& op = node.op;
  const std::string base = op.substr(op.find('.') + 1, op.rfind('.') - op.find('.') - 1);
  std::optional<std::vector<int64_t>> dims;
  bool all = false;
  auto dims_at = [&](size_t position, const std::string& key) {
    const Arg* arg = node.ArgAt(position, key);
    if (arg == nullptr || arg->kind == Arg::Kind::kNone) {
      all = true;
      return;
    }
    dims = arg->AsInts();
    if (dims && dims->empty()) {
      all = true;
    }
  };
  if (op == "aten.sum.default" || op == "aten.mean.default" || op == "aten.prod.default" ||
      op == "aten.max.default" || op == "aten.min.default" || op == "aten.any.default" || op == "aten.all.default") {
    all = true;
  } else if (op == "aten.var.correction" || op == "aten.std.correction" || op == "aten.var_mean.correction") {
    dims_at(1, "dim");
    const Arg* correction = node.Kwarg("correction");
    spec.correction = correction != nullptr && correction->IsNumber() ? correction->AsDouble() : 1.0;
  } else if (op == "aten.var.dim") {
    dims_at(1, "dim");
    spec.correction = BoolArg(node, 2, "unbiased", true) ? 1.0 : 0.0;
  } else if (op == "prims.var.default") {
    dims_at(1, "dims");
    const Arg* correction = node.ArgAt(2, "correction");
    spec.correction = correction != nullptr && correction->IsNumber() ? correction->AsDouble() : 1.0;
  } else if (op == "aten.argmax.default" || op == "aten.argmin.default") {
    dims_at(1, "dim");
  } else {
    dims_at(1, "dim");
  }
  std::vector<int64_t> reduced;
  if (all) {
    for (size_t d = 0; d < rank; ++d) {
      reduced.push_back(static_cast<int64_t>(d));
    }
  } else {
    if (!dims) {
      return std::nullopt;
    }
    for (int64_t d : *dims) {
      reduced.push_back(NormalizeDim(d, rank));
    }
  }
  std::sort(reduced.begin(), reduced.end());
  reduced.erase(std::unique(reduced.begin(), reduced.end()), reduced.end());
  if (rank == 0 || reduced.empty() || reduced.back() >= static_cast<int64_t>(rank) || reduced.front() < 0) {
    return std::nullopt;
  }
  spec.dims = reduced;
  if (base == "sum" || op == "prims.sum.default") {
    spec.kind = "sum";
  } else if (base == "mean") {
    spec.kind = "mean";
  } else if (base == "amax" || op == "aten.max.default") {
    spec.kind = "max";
  } else if (base == "amin" || op == "aten.min.default") {
    spec.kind = "min";
  } else if (base == "prod") {
    spec.kind = "prod";
  } else if (base == "var") {
    spec.kind = "var";
  } else if (base == "std") {
    spec.kind = "std";
  } else if (base == "argmax" || base == "argmin" || base == "any" || base == "all") {
    spec.kind = base;
  } else if (op == "aten.max.dim") {
    spec.kind = "max_with_index";
  } else if (op == "aten.min.dim") {
    spec.kind = "min_with_index";
  } else if (op == "aten.var_mean.correction") {
    spec.kind = "var_mean";
  } else {
    return std::nullopt;
  }
  if ((spec.kind == "argmax" || spec.kind == "argmin" || spec.kind == "max_with_index" ||
       spec.kind == "min_with_index") &&
      spec.dims.size() != 1 && !all) {
    return std::nullopt;
  }
  if (spec.kind == "max_with_index" || spec.kind == "min_with_index" || spec.kind == "var_mean") {
    spec.outputs = TupleOutputs(graph, node, 2);
  } else {
    spec.outputs = {node.value};
  }
  if (spec.outputs[0] < 0 && (spec.outputs.size() < 2 || spec.outputs[1] < 0)) {
    return std::nullopt;
  }
  for (int output : spec.outputs) {
    if (output >= 0 && !ValueAt(graph, output).meta) {
      return std::nullopt;
    }
  }
  std::vector<bool> is_reduced(rank, false);
  for (int64_t d : spec.dims) {
    is_reduced[static_cast<size_t>(d)] = true;
  }
  for (size_t d = 0; d < rank; ++d) {
    (is_reduced[d] ? spec.reduced_shape : spec.kept_shape).push_back(input.meta->shape[d]);
  }
  if (spec.Length() == 0 || spec.Rows() == 0) {
    return std::nullopt;
  }
  return spec;
}

std::optional<PoolSpec> ParsePool(const Graph& graph, const Node& node) {
  const Value* tensor = TensorInput(graph, node);
  if (tensor == nullptr) {
    return std::nullopt;
  }
  const Value& input = *tensor;
  PoolSpec pool;
  pool.node = static_cast<int>(&node - graph.nodes.data());
  pool.input = node.args[0].value;
  const std::string& op = node.op;
  pool.spatial = op.find("3d") != std::string::npos ? 3 : (op.find("1d") != std::string::npos ? 1 : 2);
  auto ints = [&](size_t position, const std::string& key) {
    const Arg* arg = node.ArgAt(position, key);
    return arg == nullptr ? std::vector<int64_t>{} : arg->AsInts().value_or(std::vector<int64_t>{});
  };
  const TensorMeta& in = *input.meta;
  if (static_cast<int>(in.shape.size()) < pool.spatial + 1) {
    return std::nullopt;
  }
  if (op.find("adaptive_avg") != std::string::npos) {
    pool.kind = "avg";
    pool.adaptive = true;
    pool.output = node.value;
    const auto output_size = ExpandTo(ints(1, "output_size"), pool.spatial, 1);
    const size_t first = in.shape.size() - static_cast<size_t>(pool.spatial);
    for (int s = 0; s < pool.spatial; ++s) {
      const int64_t in_size = in.shape[first + static_cast<size_t>(s)];
      const int64_t out_size = output_size[static_cast<size_t>(s)];
      int64_t widest = 1;
      for (int64_t o = 0; o < out_size; ++o) {
        const int64_t start = o * in_size / out_size;
        const int64_t end = ((o + 1) * in_size + out_size - 1) / out_size;
        widest = std::max(widest, end - start);
      }
      pool.kernel.push_back(widest);
      pool.stride.push_back(1);
      pool.padding.push_back(0);
      pool.dilation.push_back(1);
    }
  } else {
    const bool is_max = op.find("max_pool") != std::string::npos;
    pool.kind = is_max ? "max" : "avg";
    pool.kernel = ExpandTo(ints(1, "kernel_size"), pool.spatial, 1);
    pool.stride = ExpandTo(ints(2, "stride"), pool.spatial, 0);
    if (ints(2, "stride").empty()) {
      pool.stride = pool.kernel;
    }
    pool.padding = ExpandTo(ints(3, "padding"), pool.spatial, 0);
    if (is_max) {
      pool.dilation = ExpandTo(ints(4, "dilation"), pool.spatial, 1);
      pool.ceil_mode = BoolArg(node, 5, "ceil_mode", false);
    } else {
      pool.dilation = std::vector<int64_t>(static_cast<size_t>(pool.spatial), 1);
      pool.ceil_mode = BoolArg(node, 4, "ceil_mode", false);
      pool.count_include_pad = BoolArg(node, 5, "count_include_pad", true);
      const Arg* divisor = node.ArgAt(6, "divisor_override");
      if (divisor != nullptr && divisor->kind == Arg::Kind::kInt) {
        pool.divisor_override = divisor->i;
      }
    }
    if (op.find("with_indices") != std::string::npos) {
      const auto outputs = TupleOutputs(graph, node, 2);
      if (outputs[1] >= 0 || outputs[0] < 0) {
        return std::nullopt;  // the indices are used: PyTorch computes them
      }
      pool.output = outputs[0];
    } else {
      pool.output = node.value;
    }
  }
  if (!ValueAt(graph, pool.output).meta) {
    return std::nullopt;
  }
  return pool;
}

std::optional<ScanSpec> ParseScan(const Graph& graph, const Node& node) {
  const Value* tensor = TensorInput(graph, node);
  if (tensor == nullptr || tensor->meta->shape.empty()) {
    return std::nullopt;
  }
  const Value& input = *tensor;
  ScanSpec scan;
  scan.node = static_cast<int>(&node - graph.nodes.data());
  scan.input = node.args[0].value;
  scan.kind = node.op == "aten.cumsum.default" ? "sum" : "prod";
  scan.dim = NormalizeDim(IntArg(node, 1, "dim", 0), input.meta->shape.size());
  return scan;
}

int64_t TransposedTapStep(const ConvShape& conv, size_t s) {
  return conv.stride[s] / std::gcd(conv.stride[s], conv.dilation[s]);
}

int64_t TransposedInputStep(const ConvShape& conv, size_t s) {
  return conv.dilation[s] / std::gcd(conv.stride[s], conv.dilation[s]);
}

std::vector<TransposedPhase> TransposedPhases(const ConvShape& conv, size_t s) {
  const int64_t stride = conv.stride[s];
  const int64_t step = TransposedTapStep(conv, s);
  std::vector<TransposedPhase> phases;
  for (int64_t phase = 0; phase < stride; ++phase) {
    // offset o reaches this phase where (phase + padding - o * dilation) % stride == 0: one residue mod step
    TransposedPhase taps;
    for (int64_t o = 0; o < step; ++o) {
      const int64_t numerator = phase + conv.padding[s] - o * conv.dilation[s];
      if (((numerator % stride) + stride) % stride == 0) {
        taps.first = o;
        taps.count = o < conv.kernel[s] ? (conv.kernel[s] - o + step - 1) / step : 0;
        taps.base = numerator / stride;  // exact
        break;
      }
    }
    phases.push_back(taps);
  }
  return phases;
}

int64_t TransposedMaxTaps(const ConvShape& conv, size_t s) {
  int64_t most = 0;
  for (const TransposedPhase& phase : TransposedPhases(conv, s)) {
    most = std::max(most, phase.count);
  }
  return most;
}

namespace {

// aten.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups), fp32.
// The weight is [out, in / groups, kernel...], transposed [in, out / groups, kernel...].
std::optional<MatmulSpec> ParseConvolution(const Graph& graph, const Node& node) {
  if (node.args.size() < 9 || node.args[0].kind != Arg::Kind::kValue || node.args[1].kind != Arg::Kind::kValue ||
      (node.args[2].kind != Arg::Kind::kValue && node.args[2].kind != Arg::Kind::kNone) ||
      node.args[8].kind != Arg::Kind::kInt) {
    return std::nullopt;
  }
  const bool transposed = BoolArg(node, 6, "transposed", false);
  const auto& in = ValueAt(graph, node.args[0].value).meta;
  const auto& weight = ValueAt(graph, node.args[1].value).meta;
  const auto& out = ValueAt(graph, node.value).meta;
  if (!in || !weight || !out || in->dtype != DType::kFloat32 || weight->dtype != DType::kFloat32 ||
      out->dtype != DType::kFloat32 || in->shape.size() < 3 || in->shape.size() > 5 ||
      weight->shape.size() != in->shape.size() || out->shape.size() != in->shape.size()) {
    return std::nullopt;
  }
  ConvShape conv;
  conv.transposed = transposed;
  conv.spatial = static_cast<int>(in->shape.size()) - 2;
  conv.images = in->shape[0];
  conv.in_channels = in->shape[1];
  conv.out_channels = out->shape[1];
  conv.groups = node.args[8].i;
  const int64_t weight_out = transposed ? weight->shape[1] * conv.groups : weight->shape[0];
  const int64_t weight_in = transposed ? weight->shape[0] : weight->shape[1] * conv.groups;
  if (conv.groups < 1 || conv.in_channels % conv.groups != 0 || conv.out_channels % conv.groups != 0 ||
      weight_out != conv.out_channels || weight_in != conv.in_channels) {
    return std::nullopt;
  }
  const auto spatial = static_cast<size_t>(conv.spatial);
  auto ints = [&](size_t position) {
    auto values = node.args[position].AsInts().value_or(std::vector<int64_t>{});
    return values.size() == 1 ? std::vector<int64_t>(spatial, values[0]) : values;
  };
  conv.stride = ints(3);
  conv.padding = ints(4);
  conv.dilation = ints(5);
  const std::vector<int64_t> output_padding = transposed ? ints(7) : std::vector<int64_t>(spatial, 0);
  if (conv.stride.size() != spatial || conv.padding.size() != spatial || conv.dilation.size() != spatial ||
      output_padding.size() != spatial) {
    return std::nullopt;
  }
  for (size_t s = 0; s < spatial; ++s) {
    conv.in_size.push_back(in->shape[s + 2]);
    conv.out_size.push_back(out->shape[s + 2]);
    conv.kernel.push_back(weight->shape[s + 2]);
    const int64_t span = conv.dilation[s] * (conv.kernel[s] - 1);
    const int64_t expected =
        transposed ? (conv.in_size[s] - 1) * conv.stride[s] - 2 * conv.padding[s] + span + output_padding[s] + 1
                   : (conv.in_size[s] + 2 * conv.padding[s] - span - 1) / conv.stride[s] + 1;
    if (conv.stride[s] < 1 || conv.dilation[s] < 1 || conv.padding[s] < 0 || expected != conv.out_size[s]) {
      return std::nullopt;
    }
  }
  MatmulSpec spec;
  spec.node = static_cast<int>(&node - graph.nodes.data());
  spec.a = node.args[0].value;
  spec.b = node.args[1].value;
  spec.bias = node.args[2].kind == Arg::Kind::kValue ? node.args[2].value : -1;
  spec.batch = conv.groups;
  spec.m = conv.images;
  spec.n = conv.out_channels / conv.groups;
  spec.k = conv.in_channels / conv.groups;
  for (size_t s = 0; s < spatial; ++s) {
    if (transposed) {  // one dense convolution per output phase: rows q = out / stride, the phase's taps
      spec.batch *= conv.stride[s];
      spec.m *= (conv.out_size[s] + conv.stride[s] - 1) / conv.stride[s];
      spec.k *= TransposedMaxTaps(conv, s);
    } else {
      spec.m *= conv.out_size[s];
      spec.k *= conv.kernel[s];
    }
  }
  spec.batched = spec.batch > 1;
  if (spec.m * spec.n * spec.k == 0) {
    return std::nullopt;
  }
  spec.conv = std::move(conv);
  return spec;
}

}  // namespace

std::optional<MatmulSpec> ParseMatmul(const Graph& graph, const Node& node) {
  if (node.op == "aten.convolution.default") {
    return ParseConvolution(graph, node);
  }
  MatmulSpec spec;
  spec.node = static_cast<int>(&node - graph.nodes.data());
  const bool addmm = node.op == "aten.addmm.default";
  const size_t first = addmm ? 1 : 0;
  if (node.args.size() < first + 2 || node.args[first].kind != Arg::Kind::kValue ||
      node.args[first + 1].kind != Arg::Kind::kValue) {
    return std::nullopt;
  }
  spec.a = node.args[first].value;
  spec.b = node.args[first + 1].value;
  const auto& a = ValueAt(graph, spec.a).meta;
  const auto& b = ValueAt(graph, spec.b).meta;
  const auto& out = ValueAt(graph, node.value).meta;
  if (!a || !b || !out || a->dtype != DType::kFloat32 || b->dtype != DType::kFloat32 ||
      out->dtype != DType::kFloat32) {
    return std::nullopt;  // fp32 semantics only, for now
  }
  spec.batched = node.op == "aten.bmm.default";
  const size_t rank = spec.batched ? 3 : 2;
  if (a->shape.size() != rank || b->shape.size() != rank) {
    return std::nullopt;
  }
  const size_t o = spec.batched ? 1 : 0;
  spec.batch = spec.batched ? a->shape[0] : 1;
  spec.m = a->shape[o];
  spec.k = a->shape[o + 1];
  spec.n = b->shape[o + 1];
  if (b->shape[o] != spec.k || (spec.batched && b->shape[0] != spec.batch) || spec.m * spec.n * spec.k == 0) {
    return std::nullopt;
  }
  if (addmm) {
    if (node.args[0].kind != Arg::Kind::kValue || !ValueAt(graph, node.args[0].value).meta) {
      return std::nullopt;
    }
    spec.bias = node.args[0].value;
    const Arg* beta = node.ArgAt(3, "beta");
    const Arg* alpha = node.ArgAt(4, "alpha");
    spec.beta = beta != nullptr && beta->IsNumber() ? beta->AsDouble() : 1.0;
    spec.alpha = alpha != nullptr && alpha->IsNumber() ? alpha->AsDouble() : 1.0;
  }
  return spec;
}

Json KernelDesign::ToJson() const {
  Json json = {{"algorithm", algorithm},
               {"xblock", xblock},
               {"rblock", rblock},
               {"split", split},
               {"num_warps", num_warps},
               {"num_stages", num_stages}};
  if (yblock != 0) {
    json["yblock"] = yblock;
  }
  if (!precision.empty()) {
    json["precision"] = precision;
  }
  return json;
}

KernelDesign KernelDesign::FromJson(const Json& json) {
  KernelDesign design;
  design.algorithm = json.value("algorithm", "");
  design.xblock = json.value("xblock", int64_t{0});
  design.rblock = json.value("rblock", int64_t{0});
  design.split = json.value("split", int64_t{0});
  design.num_warps = json.value("num_warps", 4);
  design.num_stages = json.value("num_stages", 1);
  design.yblock = json.value("yblock", int64_t{0});
  design.precision = json.value("precision", "");
  return design;
}

Json PlanOptions::ToJson() const {
  Json json{{"fuse_reductions", fuse_reductions}, {"fuse_epilogues", fuse_epilogues}};
  if (cuda_graph) {
    json["cuda_graph"] = true;
  }
  if (!fuse_attention) {
    json["fuse_attention"] = false;
  }
  return json;
}

PlanOptions PlanOptions::FromJson(const Json& json) {
  PlanOptions options;
  options.fuse_reductions = json.value("fuse_reductions", true);
  options.fuse_epilogues = json.value("fuse_epilogues", true);
  options.cuda_graph = json.value("cuda_graph", false);
  options.fuse_attention = json.value("fuse_attention", true);
  return options;
}

namespace {

constexpr int64_t kPointwiseBlock = 1024;
constexpr int64_t kTileElements = 4096;
constexpr int64_t kLargeTileElements = 16384;
constexpr int64_t kLoopBlock = 2048;
constexpr int64_t kOuterXBlock = 64;
constexpr int64_t kOuterRBlock = 16;
constexpr int64_t kOuterPersistentLength = 256;
constexpr int64_t kPoolBlock = 256;
constexpr int64_t kSplitRowLimit = 256;
constexpr int64_t kSplitMinLength = 16384;
constexpr int64_t kSplitTargetPrograms = 1024;
constexpr int64_t kSplitBlock = 1024;
constexpr int64_t kMinSplitBlock = 16;
constexpr int kWideWarps = 8;

// The reduced (scanned) dimensions are the innermost of the anchor, so r walks contiguous memory.
bool InnerReduction(const KernelPlan& kernel) {
  for (size_t d = kernel.shape.size(); d-- > 0;) {
    if (kernel.shape[d] == 1) {
      continue;
    }
    return std::find(kernel.reduced.begin(), kernel.reduced.end(), static_cast<int64_t>(d)) != kernel.reduced.end();
  }
  return true;
}

constexpr int64_t kConvMaxRows = 256;  // BLOCK_M of a convolution with a narrow N tile
constexpr int64_t kMinDotSide = 16;    // tl.dot's smallest tile side
constexpr int64_t kRecurrentMinBlock = kMinDotSide;
// A mat-vec program: 16 rows x a K step of 512 products held elementwise (64 fp32 registers a thread at 4
// warps), summed once after the K loop.
constexpr int64_t kMatVecRows = 16;
constexpr int64_t kMatVecStep = 512;
constexpr int64_t kRecurrentMaxBatchBlock = 64;
constexpr int64_t kRecurrentMaxHiddenBlock = 64;
// Flash attention: 64 query rows x 64 keys a step, 4 warps, 2 stages (seed 2: 128 rows, 8 warps).
constexpr int64_t kAttentionRows = 64;
constexpr int64_t kAttentionKeys = 64;

KernelDesign RowDesign(const KernelPlan& kernel, const std::string& algorithm) {
  const int64_t rows = NextPowerOfTwo(std::max<int64_t>(kernel.rows, 1));
  const int64_t length = NextPowerOfTwo(std::max<int64_t>(kernel.length, 1));
  const bool inner = InnerReduction(kernel);
  KernelDesign design;
  design.algorithm = algorithm;
  if (algorithm == "persistent" || algorithm == "single") {
    design.rblock = length;
    design.xblock = std::min(rows, std::max<int64_t>(1, kTileElements / length));
  } else if (algorithm == "split") {
    design.rblock = std::min(length, kSplitBlock);
    design.xblock = 1;
    const int64_t chunks = (kernel.length + design.rblock - 1) / design.rblock;
    design.split = std::clamp<int64_t>(kSplitTargetPrograms / std::max<int64_t>(kernel.rows, 1), 2, chunks);
  } else if (inner) {
    design.rblock = std::min(length, kLoopBlock);
    design.xblock = 1;
  } else {
    design.rblock = std::min(length, kOuterRBlock);
    design.xblock = std::min(rows, kOuterXBlock);
  }
  design.num_warps = design.xblock * design.rblock >= kLoopBlock ? kWideWarps : 4;
  return design;
}

}  // namespace

bool DirectConvolutionFits(const MatmulSpec& mm) {
  constexpr int64_t kMaxOutPerGroup = 4;  // tl.dot's narrowest N tile is 16: wider groups are GEMM-shaped
  constexpr int64_t kMaxUnrolledProducts = 64;
  if (!mm.conv || mm.conv->transposed || mm.n > kMaxOutPerGroup) {
    return false;
  }
  return mm.conv->in_channels / mm.conv->groups * Product(mm.conv->kernel) <= kMaxUnrolledProducts;
}

bool MatVecFits(const MatmulSpec& mm) { return !mm.conv && mm.n == 1; }

bool ChannelsLastConvolutionFits(const MatmulSpec& mm) {
  if (!mm.conv || mm.conv->transposed) {
    return false;
  }
  // A pointwise convolution (1-wide kernel, stride 1, no padding) reads its NCHW input as a dense [K, M]
  // matrix already: the copy only adds a pass (1_87 measured 8.05 ms channels-last against 5.75 ms on the
  // H200).
  const ConvShape& conv = *mm.conv;
  const auto ones = [](const std::vector<int64_t>& values) {
    return std::all_of(values.begin(), values.end(), [](int64_t v) { return v == 1; });
  };
  const bool unpadded =
      std::all_of(conv.padding.begin(), conv.padding.end(), [](int64_t p) { return p == 0; });
  return !(ones(conv.kernel) && ones(conv.stride) && unpadded);
}

int64_t ChannelsLastMaxStep(const MatmulSpec& mm) {
  return mm.conv ? std::max(kMinDotSide, NextPowerOfTwo(mm.conv->in_channels / mm.conv->groups))
                 : kMinDotSide;
}

bool AlignedCopyFits(const MatmulSpec& mm) {
  constexpr int64_t kFloatsPer16Bytes = 4;
  return !mm.conv && mm.n > 1 && (mm.k % kFloatsPer16Bytes != 0 || mm.n % kFloatsPer16Bytes != 0);
}

int64_t SplitKFactor(const MatmulSpec& mm, const KernelDesign& design) {
  // Split K when the output tiles leave most of the GPU idle and K is deep enough that every slice still runs
  // several K steps: a power of two of slices bringing the programs near two waves of an H200's 132 SMs.
  constexpr int64_t kTargetPrograms = 264;
  constexpr int64_t kMinStepsPerSlice = 8;
  if (mm.conv || design.xblock <= 0 || design.yblock <= 0 || design.rblock <= 0) {
    return 1;
  }
  const int64_t tiles = ((mm.m + design.xblock - 1) / design.xblock) * ((mm.n + design.yblock - 1) / design.yblock) *
                        mm.batch;
  int64_t split = 1;
  while (tiles * split * 2 <= kTargetPrograms && mm.k / (split * 2) >= kMinStepsPerSlice * design.rblock) {
    split *= 2;
  }
  return split;
}

KernelDesign DefaultDesign(const KernelPlan& kernel, int seed, const std::string& precision) {
  KernelDesign design;
  switch (kernel.kind) {
    case KernelKind::kPointwise:
      design.algorithm = "flat";
      design.xblock = std::min(kPointwiseBlock, NextPowerOfTwo(std::max<int64_t>(Product(kernel.shape), 1)));
      return design;
    case KernelKind::kPool:
      design.algorithm = "direct";
      design.xblock = std::min(kPoolBlock, NextPowerOfTwo(std::max<int64_t>(Product(kernel.shape), 1)));
      return design;
    case KernelKind::kScan: {
      const int64_t length = NextPowerOfTwo(std::max<int64_t>(kernel.length, 1));
      const bool single = (length <= kTileElements) == (seed % 2 == 0);
      return RowDesign(kernel, single && length <= kLargeTileElements ? "single" : "blocked");
    }
    case KernelKind::kMatmul: {
      // Seeds {BLOCK_M, BLOCK_N, BLOCK_K, warps, stages}, by the products asked for. Convolutions: a 64x64
      // tile, a 128x128 tile with 8 warps, a 128x64 tile with a deeper K step. Matrix products take the tiles
      // an fp32 GEMM sweep on the H200 measured fastest for each precision (bench/results/h200-matmul-sweep:
      // 4096^3, 1024^3 and 1024x1024x8192): ieee FMA products in 64x64 tiles of 4 warps (128x128 of 8 warps
      // was 1.8x slower at 1024^3); tf32x3 in 128x64 tiles of 4 warps with 4 stages (1.26x faster than the
      // best ieee tile at 4096^3, 0.86x at 1024^3) or 32x64 ones (the best at 1024^3).
      static const int64_t kConvTiles[3][5] = {{64, 64, 32, 4, 3}, {128, 128, 32, 8, 3}, {128, 64, 64, 4, 3}};
      static const int64_t kTf32Tiles[3][5] = {{64, 64, 32, 4, 3}, {128, 128, 32, 8, 3}, {128, 64, 64, 4, 3}};
      static const int64_t kTf32x3Tiles[3][5] = {{128, 64, 32, 4, 4}, {128, 64, 32, 4, 4}, {32, 64, 32, 4, 3}};
      static const int64_t kIeeeTiles[3][5] = {{64, 64, 32, 4, 3}, {64, 64, 32, 4, 3}, {64, 128, 16, 4, 4}};
      const MatmulSpec& mm = *kernel.matmul;
      const std::string products = precision.empty() ? "ieee" : precision;
      const auto& tiles = mm.conv                   ? kConvTiles
                          : products == "tf32"      ? kTf32Tiles
                          : products == "tf32x3"    ? kTf32x3Tiles
                                                    : kIeeeTiles;
      const int64_t* tile = tiles[seed % 3];
      if (seed == 0 && DirectConvolutionFits(mm)) {  // seeds 1 and 2 keep the implicit GEMM to measure against
        design.algorithm = "direct";
        design.xblock = std::min(kPointwiseBlock, NextPowerOfTwo(std::max<int64_t>(mm.m * mm.n * mm.batch, 1)));
        design.precision = "ieee";
        return design;
      }
      if (seed == 0 && MatVecFits(mm)) {  // seeds 1 and 2 keep tl.dot tiles to measure against
        design.algorithm = "gemv";
        design.xblock = std::min(kMatVecRows, NextPowerOfTwo(mm.m));
        design.yblock = 1;
        design.rblock = std::clamp<int64_t>(NextPowerOfTwo(mm.k), 16, kMatVecStep);
        design.num_warps = 4;
        design.num_stages = 3;
        design.precision = "ieee";
        const int64_t split = SplitKFactor(mm, design);
        design.split = split > 1 ? split : 0;
        return design;
      }
      design.algorithm = "tiled";
      design.yblock = std::min(tile[1], std::max<int64_t>(16, NextPowerOfTwo(mm.n)));
      // A convolution's few output channels per group leave the N tile narrow: its rows take the tile area back
      // (fewer programs and K steps, which is also what the interpreter pays for).
      const int64_t rows = mm.conv ? std::min(kConvMaxRows, tile[0] * tile[1] / design.yblock) : tile[0];
      design.xblock = std::min(rows, std::max<int64_t>(16, NextPowerOfTwo(mm.m)));
      design.rblock = std::min(tile[2], std::max<int64_t>(16, NextPowerOfTwo(mm.k)));
      design.num_warps = static_cast<int>(tile[3]);
      design.num_stages = static_cast<int>(tile[4]);
      design.precision = products;
      if (seed == 2 && ChannelsLastConvolutionFits(mm) && !DirectConvolutionFits(mm) &&
          mm.conv->in_channels / mm.conv->groups >= kMinDotSide) {
        // Seed 2's convolutions of 16 channels a group or more are channels-last (input and weight copied, K
        // by tap then channel): on the H200 1.04-1.6x faster than the NCHW gather in the same tiles on four
        // of six level-1 convolutions, a tie on the 1-D one (bench/results/h200-nhwc-aligned). With fewer
        // channels a tap's K step would be mostly padding (a depthwise one: 1 of 16).
        design.algorithm = "nhwc";
        design.rblock = std::min(design.rblock, ChannelsLastMaxStep(mm));
        return design;
      }
      if (seed != 1) {  // seed 1 keeps one program per output tile: the structural alternative
        const int64_t split = SplitKFactor(mm, design);
        design.algorithm = split > 1 ? "splitk" : "tiled";
        design.split = split > 1 ? split : 0;
        // Misaligned operand rows and enough work that two copies of the operands (one read and one write of
        // each) cost little beside the product: seed 0 copies them aligned; seed 1 keeps them in place.
        constexpr int64_t kAlignedCopyMinWork = int64_t{1} << 30;  // multiply-adds
        if (seed == 0 && split == 1 && AlignedCopyFits(mm) &&
            mm.batch * mm.m * mm.n * mm.k >= kAlignedCopyMinWork) {
          design.algorithm = "aligned";
        }
      }
      return design;
    }
    case KernelKind::kRecurrent: {
      // Programs per batch block share its hidden units, 16 each (a step's work spread over many SMs, with a
      // barrier between steps); the K step of h @ W_hh^T up to 64. Products in ieee unless the candidate's
      // precision says otherwise.
      const RecurrentSpec& rnn = *kernel.recurrent;
      design.algorithm = "sequential";
      design.xblock = std::clamp<int64_t>(NextPowerOfTwo(rnn.batch), kRecurrentMinBlock, kRecurrentMaxBatchBlock);
      design.yblock = kRecurrentMinBlock;  // hidden units per program: many programs share a step
      design.rblock =
          std::clamp<int64_t>(NextPowerOfTwo(rnn.hidden), kRecurrentMinBlock, kRecurrentMaxHiddenBlock);
      design.precision = precision == "tf32" ? "tf32" : "ieee";  // tf32x3 is unmeasured in the time loop
      return design;
    }
    case KernelKind::kAttention: {
      const AttentionSpec& at = *kernel.attention;
      const int64_t rows = seed == 2 ? 2 * kAttentionRows : kAttentionRows;
      design.algorithm = "flash";
      design.xblock = std::clamp<int64_t>(NextPowerOfTwo(at.lq), kRecurrentMinBlock, rows);
      // a head dim over 128 (K and V tiles of 256 columns): half the keys a step, no second stage in flight
      const bool wide = std::max(at.d, at.dv) > 2 * kAttentionKeys;
      design.yblock = std::clamp<int64_t>(NextPowerOfTwo(at.lk), kRecurrentMinBlock,
                                          wide ? kAttentionKeys / 2 : kAttentionKeys);
      design.num_warps = seed == 2 ? 8 : 4;
      design.num_stages = wide ? 1 : 2;
      design.precision = "tf32x3";  // never ieee: a flash loop of FMA products is register-bound
      return design;
    }
    case KernelKind::kReduction:
      break;
  }
  const int64_t length = NextPowerOfTwo(std::max<int64_t>(kernel.length, 1));
  // Inner rows fit a tile up to kTileElements; outer ones (the row strided, neighbouring rows contiguous) fit
  // while a tile still holds enough rows side by side for coalesced loads.
  const bool fits = InnerReduction(kernel) ? length <= kTileElements : length <= kOuterPersistentLength;
  const bool split_worthy = kernel.splittable && kernel.rows < kSplitRowLimit && kernel.length >= kSplitMinLength;
  const std::string streamed = kernel.online_candidate ? "online" : "looped";
  std::string algorithm;
  if (seed == 0) {
    algorithm = split_worthy ? "split" : (fits ? "persistent" : streamed);
  } else if (seed == 1) {
    if (split_worthy || fits) {
      algorithm = "looped";
    } else {
      algorithm = length <= kLargeTileElements && InnerReduction(kernel) ? "persistent" : "looped";
    }
  } else {
    algorithm = kernel.online_candidate ? "online" : (kernel.splittable ? "split" : "looped");
  }
  design = RowDesign(kernel, algorithm);
  if (seed == 2 && algorithm == "looped") {
    design.rblock = std::max<int64_t>(design.rblock / 4, 1);
  }
  return design;
}

namespace {

class Planner {
 public:
  Planner(const Graph& graph, const PlanOptions& options, std::set<int> forced_extern, std::set<int> unfused)
      : graph_(graph), forced_extern_(std::move(forced_extern)), unfused_(std::move(unfused)) {
    plan_.options = options;
  }

  // False (with *failed_node set) when a root cannot be put in any kernel: the caller forces it to PyTorch.
  bool Run(int* failed_node) {
    Classify();
    FindAttention();
    for (int value = 0; value < static_cast<int>(graph_.values.size()); ++value) {
      const Value& v = ValueAt(graph_, value);
      if ((v.kind == ValueKind::kInput || v.kind == ValueKind::kState) && v.meta) {
        memory_[value] = *v.meta;
      }
    }
    MarkRealizations();
    for (size_t n = 0; n < graph_.nodes.size(); ++n) {
      const Node& node = graph_.nodes[n];
      const auto index = static_cast<int>(n);
      if (externs_.count(index) != 0) {
        plan_.steps.push_back({Step::Kind::kExtern, index});
        plan_.extern_ops.push_back(node.op);
        AddExternResults(node);
        continue;
      }
      if (roots_.count(node.value) == 0) {
        continue;
      }
      if (!Place(node)) {
        *failed_node = index;
        return false;
      }
    }
    FinalizeStores();
    return true;
  }

  Plan Take() { return std::move(plan_); }
  bool IsAttention(int node) const { return attentions_.count(node) != 0; }

 private:
  void Classify() {
    for (size_t n = 0; n < graph_.nodes.size(); ++n) {
      const Node& node = graph_.nodes[n];
      const auto index = static_cast<int>(n);
      OpClass op_class = ClassifyOp(node.op);
      if (forced_extern_.count(index) != 0) {
        op_class = OpClass::kExtern;
      }
      if (op_class == OpClass::kReduction) {
        if (auto spec = ParseReduction(graph_, node)) {
          reductions_[index] = *spec;
        } else {
          op_class = OpClass::kExtern;
        }
      } else if (op_class == OpClass::kPool) {
        if (auto spec = ParsePool(graph_, node)) {
          pools_[index] = *spec;
        } else {
          op_class = OpClass::kExtern;
        }
      } else if (op_class == OpClass::kScan) {
        if (auto spec = ParseScan(graph_, node)) {
          scans_[index] = *spec;
        } else {
          op_class = OpClass::kExtern;
        }
      } else if (op_class == OpClass::kMatmul) {
        if (auto spec = ParseMatmul(graph_, node)) {
          matmuls_[index] = *spec;
        } else {
          op_class = OpClass::kExtern;
        }
      } else if (op_class == OpClass::kRecurrent) {
        if (auto spec = ParseRecurrent(graph_, node)) {
          recurrents_[index] = *spec;
        } else {
          op_class = OpClass::kExtern;
        }
      } else if (op_class == OpClass::kGetItem) {
        op_class = OpClass::kGetItem;
      }
      if (op_class == OpClass::kExtern) {
        externs_.insert(index);
      }
      classes_[index] = op_class;
    }
  }

  // Attention patterns become one flash kernel each, anchored at bmm(P, V): the scores' product and the
  // softmax's reductions are no longer kernels of their own.
  void FindAttention() {
    std::vector<int> products;
    for (const auto& [index, mm] : matmuls_) {
      products.push_back(index);
    }
    std::set<int> taken;
    for (int index : products) {
      const Node& node = graph_.nodes.at(static_cast<size_t>(index));
      auto spec = ParseAttention(graph_, node);
      if (!spec || matmuls_.count(spec->scores) == 0 || taken.count(index) != 0) {
        continue;
      }
      bool clear = true;
      for (int absorbed : spec->absorbed) {
        clear = clear && externs_.count(absorbed) == 0 && taken.count(absorbed) == 0;
      }
      if (!clear) {
        continue;
      }
      if (!plan_.options.fuse_attention || unfused_.count(index) != 0) {
        plan_.unfused_attention += plan_.options.fuse_attention ? 0 : 1;
        continue;
      }
      for (int absorbed : spec->absorbed) {
        matmuls_.erase(absorbed);
        reductions_.erase(absorbed);
        taken.insert(absorbed);
      }
      matmuls_.erase(index);
      taken.insert(index);
      attentions_[index] = *spec;
    }
  }

  bool IsZeroCopyView(const Node& node) const {
    static const std::set<std::string> kCopies = {"aten.flip.default", "aten.clone.default",
                                                  "aten.contiguous.default", "aten.lift_fresh_copy.default",
                                                  "aten.expand_copy.default", "aten.view_copy.default",
                                                  "aten.permute_copy.default", "aten.unsqueeze_copy.default",
                                                  "aten.squeeze_copy.dims"};
    return ClassifyOp(node.op) == OpClass::kView && kCopies.count(node.op) == 0;
  }

  // `value` must exist in memory or as a PyTorch view of memory (for an extern op or an output); with
  // `allow_view` false, in memory with its own layout (a recurrent kernel's operand): a view is realized.
  void NeedMemory(int value, bool allow_view = true) {
    const Value& v = ValueAt(graph_, value);
    if (v.kind != ValueKind::kNode) {
      return;
    }
    const Node& node = graph_.nodes.at(static_cast<size_t>(v.node));
    const int index = v.node;
    if (externs_.count(index) != 0 || reductions_.count(index) != 0 || scans_.count(index) != 0 ||
        matmuls_.count(index) != 0 || recurrents_.count(index) != 0 || attentions_.count(index) != 0) {
      return;
    }
    if (node.op == "getitem") {
      const Value& parent = ValueAt(graph_, node.args.at(0).value);
      const int parent_node = parent.node;
      if (externs_.count(parent_node) != 0 || reductions_.count(parent_node) != 0 ||
          recurrents_.count(parent_node) != 0) {
        return;
      }
      if (pools_.count(parent_node) != 0 && pools_.at(parent_node).output == value) {
        return;
      }
    }
    if (pools_.count(index) != 0) {
      return;
    }
    if (allow_view && IsZeroCopyView(node) && v.meta) {
      torch_views_.insert(value);
      NeedMemory(ViewSource(node));
      return;
    }
    roots_.insert(value);
  }

  void MarkRealizations() {
    for (size_t n = 0; n < graph_.nodes.size(); ++n) {
      const Node& node = graph_.nodes[n];
      const auto index = static_cast<int>(n);
      if (reductions_.count(index) != 0 || scans_.count(index) != 0 || matmuls_.count(index) != 0 ||
          attentions_.count(index) != 0) {
        roots_.insert(node.value);
      } else if (pools_.count(index) != 0) {
        roots_.insert(node.value);
      } else if (recurrents_.count(index) != 0) {
        roots_.insert(node.value);
        for (const Arg& arg : node.args) {
          NeedArg(arg, /*allow_view=*/false);
        }
      } else if (externs_.count(index) != 0) {
        for (const Arg& arg : node.args) {
          NeedArg(arg);
        }
        for (const auto& [key, arg] : node.kwargs) {
          NeedArg(arg);
        }
      }
    }
    for (const Arg& output : graph_.outputs) {
      NeedMemory(output.value);
    }
    for (const auto& [target, arg] : graph_.mutations) {
      if (arg.kind == Arg::Kind::kValue) {
        NeedMemory(arg.value);
      }
    }
  }

  void NeedArg(const Arg& arg, bool allow_view = true) {
    if (arg.kind == Arg::Kind::kValue && ValueAt(graph_, arg.value).meta) {
      NeedMemory(arg.value, allow_view);
    }
    for (const Arg& item : arg.list) {
      NeedArg(item, allow_view);
    }
  }

  void AddExternResults(const Node& node) {
    const Value& v = ValueAt(graph_, node.value);
    if (v.meta) {
      memory_[node.value] = DenseLayout(*v.meta);
      extern_results_.insert(node.value);
    }
    for (int user : v.users) {
      const Node& getitem = graph_.nodes.at(static_cast<size_t>(user));
      const Value& item = ValueAt(graph_, getitem.value);
      if (getitem.op == "getitem" && item.meta) {
        memory_[getitem.value] = DenseLayout(*item.meta);
        extern_results_.insert(getitem.value);
      }
    }
  }

  // The values a kernel's roots leave in memory.
  std::vector<int> Results(const KernelPlan& kernel) const {
    std::vector<int> results;
    for (int root : kernel.roots) {
      bool reduction = false;
      for (const ReductionSpec& spec : kernel.reductions) {
        if (graph_.nodes.at(static_cast<size_t>(spec.node)).value == root) {
          reduction = true;
          for (int output : spec.outputs) {
            if (output >= 0) {
              results.push_back(output);
            }
          }
        }
      }
      if (!reduction) {
        results.push_back(root);
      }
    }
    return results;
  }

  std::map<int, TensorMeta> Layouts(const KernelPlan& kernel) const {
    std::map<int, TensorMeta> layouts;
    for (int value : Results(kernel)) {
      layouts[value] = DenseLayout(*ValueAt(graph_, value).meta);
    }
    return layouts;
  }

  // Whether `kernel` generates (all its results stored, as the trial's worst case).
  bool Generates(KernelPlan kernel, const std::map<int, TensorMeta>& memory, std::string* problem) const {
    kernel.design = DefaultDesign(kernel, 0);
    kernel.stores = Results(kernel);
    try {
      GenerateKernel(graph_, kernel, memory, Layouts(kernel));
      return true;
    } catch (const NotFusable& error) {
      *problem = error.what();
      return false;
    }
  }

  KernelPlan NewKernel(const Node& node) const {
    KernelPlan kernel;
    const auto index = static_cast<int>(&node - graph_.nodes.data());
    kernel.name = fmt::format("egg_k{}_{}", plan_.kernels.size(), node.name);
    if (reductions_.count(index) != 0) {
      const ReductionSpec& spec = reductions_.at(index);
      kernel.kind = KernelKind::kReduction;
      kernel.shape = ValueAt(graph_, spec.input).meta->shape;
      kernel.reduced = spec.dims;
      kernel.rows = spec.Rows();
      kernel.length = spec.Length();
      kernel.reductions.push_back(spec);
      kernel.roots.push_back(node.value);
      kernel.reasons.push_back(fmt::format("{} {} over {} of {} rows", spec.kind, node.name, kernel.length, kernel.rows));
    } else if (pools_.count(index) != 0) {
      const PoolSpec& pool = pools_.at(index);
      kernel.kind = KernelKind::kPool;
      kernel.shape = ValueAt(graph_, pool.output).meta->shape;
      kernel.rows = Product(kernel.shape);
      kernel.pool = pool;
      kernel.roots.push_back(pool.output);
      kernel.reasons.push_back(fmt::format("{} pooling {} ({} outputs)", pool.kind, node.name, kernel.rows));
    } else if (scans_.count(index) != 0) {
      const ScanSpec& scan = scans_.at(index);
      kernel.kind = KernelKind::kScan;
      kernel.shape = ValueAt(graph_, scan.input).meta->shape;
      kernel.reduced = {scan.dim};
      kernel.length = kernel.shape.at(static_cast<size_t>(scan.dim));
      kernel.rows = Product(kernel.shape) / std::max<int64_t>(kernel.length, 1);
      kernel.scan = scan;
      kernel.roots.push_back(node.value);
      kernel.reasons.push_back(fmt::format("cumulative {} {} along {} of {} rows", scan.kind, node.name,
                                           kernel.length, kernel.rows));
    } else if (matmuls_.count(index) != 0) {
      const MatmulSpec& mm = matmuls_.at(index);
      kernel.kind = KernelKind::kMatmul;
      kernel.shape = ValueAt(graph_, node.value).meta->shape;
      kernel.rows = Product(kernel.shape);
      kernel.matmul = mm;
      kernel.roots.push_back(node.value);
      kernel.reasons.push_back(fmt::format("{} {}: {}x[{}x{}] @ [{}x{}]", node.op, node.name, mm.batch, mm.m, mm.k,
                                           mm.k, mm.n));
    } else if (attentions_.count(index) != 0) {
      const AttentionSpec& at = attentions_.at(index);
      kernel.kind = KernelKind::kAttention;
      kernel.shape = ValueAt(graph_, node.value).meta->shape;
      kernel.rows = Product(kernel.shape);
      kernel.attention = at;
      kernel.roots.push_back(node.value);
      kernel.reasons.push_back(fmt::format(
          "attention {}: {} x softmax([{}x{}] @ [{}x{}]{}) @ [{}x{}] in one flash loop (scores {} and the "
          "softmax never stored)",
          node.name, at.batch, at.lq, at.d, at.d, at.lk, at.safe ? ", safe" : "", at.lk, at.dv,
          graph_.nodes.at(static_cast<size_t>(at.scores)).name));
    } else if (recurrents_.count(index) != 0) {
      const RecurrentSpec& rnn = recurrents_.at(index);
      kernel.kind = KernelKind::kRecurrent;
      kernel.shape = {rnn.seq, rnn.batch, rnn.Directions() * rnn.hidden};
      kernel.rows = rnn.batch;
      kernel.length = rnn.seq;
      kernel.recurrent = rnn;
      for (int output : rnn.outputs) {
        if (output >= 0) {
          kernel.roots.push_back(output);
        }
      }
      kernel.reasons.push_back(fmt::format(
          "{} {}: {} layer(s){}, {} steps of batch {}, hidden {}: per layer and direction an input projection GEMM "
          "of every step, then a time loop with the gates fused",
          rnn.cell, node.name, rnn.layers, rnn.bidirectional ? " x 2 directions" : "", rnn.seq, rnn.batch,
          rnn.hidden));
    } else {
      kernel.kind = KernelKind::kPointwise;
      kernel.shape = ValueAt(graph_, node.value).meta->shape;
      kernel.rows = Product(kernel.shape);
      kernel.roots.push_back(node.value);
      kernel.reasons.push_back(fmt::format("{} realized ({} elements){}", node.name, kernel.rows, RealizeWhy(node.value)));
    }
    return kernel;
  }

  std::string RealizeWhy(int value) const {
    for (const Arg& output : graph_.outputs) {
      if (output.value == value) {
        return ": a graph output";
      }
    }
    return ": read by an op that runs in PyTorch or through a view";
  }

  // The kernel `kernel` extended by the root of `node`, or nullopt when the domains cannot be shared.
  std::optional<KernelPlan> Extend(const KernelPlan& kernel, const Node& node) const {
    const auto index = static_cast<int>(&node - graph_.nodes.data());
    if (kernel.kind == KernelKind::kRecurrent || recurrents_.count(index) != 0 ||
        attentions_.count(index) != 0) {
      return std::nullopt;  // a time loop takes no epilogue and joins no kernel; attention starts its own
    }
    KernelPlan extended = kernel;
    if (reductions_.count(index) != 0) {
      if (!plan_.options.fuse_reductions) {
        return std::nullopt;
      }
      const ReductionSpec& spec = reductions_.at(index);
      if (kernel.kind == KernelKind::kPointwise && Product(kernel.shape) == spec.Rows() * spec.Length() &&
          plan_.options.fuse_epilogues) {
        extended.kind = KernelKind::kReduction;
        extended.shape = ValueAt(graph_, spec.input).meta->shape;
        extended.reduced = spec.dims;
        extended.rows = spec.Rows();
        extended.length = spec.Length();
      } else if (kernel.kind != KernelKind::kReduction || spec.Rows() != kernel.rows ||
                 spec.Length() != kernel.length) {
        return std::nullopt;
      }
      extended.reductions.push_back(spec);
      extended.roots.push_back(node.value);
      extended.reasons.push_back(fmt::format("+ {} {}: same {} rows x {}, reads earlier results at its own row",
                                             spec.kind, node.name, spec.Rows(), spec.Length()));
      return extended;
    }
    if (pools_.count(index) != 0 || scans_.count(index) != 0 || matmuls_.count(index) != 0 ||
        !plan_.options.fuse_epilogues) {
      return std::nullopt;
    }
    const int64_t numel = ValueAt(graph_, node.value).meta->Numel();
    const bool full = numel == kernel.rows * kernel.length;
    const bool row = kernel.kind == KernelKind::kReduction && numel == kernel.rows;
    if (!full && !row) {
      return std::nullopt;
    }
    if ((kernel.kind == KernelKind::kPool || kernel.kind == KernelKind::kMatmul ||
         kernel.kind == KernelKind::kAttention) &&
        !full) {
      return std::nullopt;
    }
    if (full && kernel.kind == KernelKind::kReduction && kernel.rows < kSplitRowLimit &&
        kernel.length >= kSplitMinLength && Splittable(kernel, kernel_memory_.back(), /*reductions_only=*/true)) {
      return std::nullopt;  // few long rows: the reduction splits across programs; elementwise work runs apart
    }
    extended.roots.push_back(node.value);
    extended.reasons.push_back(fmt::format("+ {}: {} consumer over the same {}", node.name,
                                           full ? "elementwise" : "per-row", full ? "elements" : "rows"));
    return extended;
  }

  bool Place(const Node& node) {
    if (!plan_.kernels.empty()) {
      const KernelPlan& last = plan_.kernels.back();
      if (auto extended = Extend(last, node)) {
        std::string problem;
        if (Generates(*extended, kernel_memory_.back(), &problem)) {
          plan_.kernels.back() = std::move(*extended);
          AddResults(plan_.kernels.back());
          return true;
        }
        plan_.notes.push_back(fmt::format("{} not fused into {}: {}", node.name, last.name, problem));
      }
    }
    KernelPlan kernel = NewKernel(node);
    std::string problem;
    bool generates = Generates(kernel, memory_, &problem);
    if (!generates && StoreMatmulOperands(node, problem)) {
      kernel = NewKernel(node);  // named after the kernels stored before it
      generates = Generates(kernel, memory_, &problem);
    }
    if (!generates) {
      plan_.notes.push_back(fmt::format("{} runs in PyTorch: {}", node.name, problem));
      return false;
    }
    Push(std::move(kernel));
    return true;
  }

  void Push(KernelPlan kernel) {
    kernel_memory_.push_back(memory_);
    plan_.steps.push_back({Step::Kind::kKernel, static_cast<int>(plan_.kernels.size())});
    plan_.kernels.push_back(std::move(kernel));
    AddResults(plan_.kernels.back());
  }

  // A matrix product whose operands cannot be computed inside its K loop (a concatenation of too many pieces):
  // each operand computed elementwise is stored by a kernel of its own first, the product then reads it. True
  // when one was stored.
  bool StoreMatmulOperands(const Node& node, const std::string& problem) {
    const auto index = static_cast<int>(&node - graph_.nodes.data());
    if (matmuls_.count(index) == 0) {
      return false;
    }
    const MatmulSpec& mm = matmuls_.at(index);
    bool stored = false;
    for (int operand : {mm.a, mm.b}) {
      const Value& value = ValueAt(graph_, operand);
      if (memory_.count(operand) != 0 || value.kind != ValueKind::kNode || value.node < 0) {
        continue;
      }
      const Node& producer = graph_.nodes.at(static_cast<size_t>(value.node));
      KernelPlan kernel = NewKernel(producer);
      std::string why;
      if (!Generates(kernel, memory_, &why)) {
        continue;
      }
      plan_.notes.push_back(fmt::format("{} stored for {} to read: {}", producer.name, node.name, problem));
      Push(std::move(kernel));
      stored = true;
    }
    return stored;
  }

  void AddResults(const KernelPlan& kernel) {
    for (const auto& [value, layout] : Layouts(kernel)) {
      memory_[value] = layout;
    }
  }

  // Whether the reductions of `kernel` can be split across programs (none reads another's result), reading
  // from `memory`; with `reductions_only` its elementwise roots are left out of the trial.
  bool Splittable(const KernelPlan& kernel, const std::map<int, TensorMeta>& memory, bool reductions_only) const {
    KernelPlan trial = kernel;
    if (reductions_only) {
      trial.roots.clear();
      for (const ReductionSpec& spec : kernel.reductions) {
        trial.roots.push_back(graph_.nodes.at(static_cast<size_t>(spec.node)).value);
      }
    }
    trial.design.algorithm = "split";
    trial.design.xblock = 1;
    trial.design.rblock = kMinSplitBlock;
    trial.design.split = 2;
    trial.stores = Results(trial);
    try {
      GenerateKernel(graph_, trial, memory, Layouts(trial));
      return true;
    } catch (const NotFusable&) {
      return false;
    }
  }

  // Which algorithms apply to a reduction kernel beyond persistent and looped.
  void MarkAlgorithms(KernelPlan* kernel, const std::map<int, TensorMeta>& memory) const {
    if (kernel->kind != KernelKind::kReduction) {
      return;
    }
    kernel->online_candidate = !OnlinePairs(graph_, *kernel).empty();
    kernel->splittable = Splittable(*kernel, memory, /*reductions_only=*/false);
  }

  // Stores only what a later kernel, an extern op, an output or a mutation reads; designs are defaults.
  void FinalizeStores() {
    std::set<int> needed;
    auto need_base = [&](int value) {
      int current = value;
      while (torch_views_.count(current) != 0) {
        current = ViewSource(*graph_.Producer(current));
      }
      needed.insert(current);
    };
    for (int index : externs_) {
      const Node& node = graph_.nodes.at(static_cast<size_t>(index));
      std::vector<const Arg*> pending;
      for (const Arg& arg : node.args) {
        pending.push_back(&arg);
      }
      for (const auto& [key, arg] : node.kwargs) {
        pending.push_back(&arg);
      }
      while (!pending.empty()) {
        const Arg* arg = pending.back();
        pending.pop_back();
        if (arg->kind == Arg::Kind::kValue && ValueAt(graph_, arg->value).meta) {
          need_base(arg->value);
        }
        for (const Arg& item : arg->list) {
          pending.push_back(&item);
        }
      }
    }
    for (const Arg& output : graph_.outputs) {
      need_base(output.value);
    }
    for (const auto& [target, arg] : graph_.mutations) {
      if (arg.kind == Arg::Kind::kValue) {
        need_base(arg.value);
      }
    }
    for (size_t k = 0; k < plan_.kernels.size(); ++k) {
      MarkAlgorithms(&plan_.kernels[k], kernel_memory_[k]);
    }
    for (size_t k = 0; k < plan_.kernels.size(); ++k) {
      KernelPlan& kernel = plan_.kernels[k];
      kernel.design = DefaultDesign(kernel, 0);
      kernel.stores = Results(kernel);
      const KernelSource source = GenerateKernel(graph_, kernel, kernel_memory_[k], Layouts(kernel));
      needed.insert(source.loaded.begin(), source.loaded.end());
    }
    for (KernelPlan& kernel : plan_.kernels) {
      std::vector<int> stores;
      for (int value : Results(kernel)) {
        if (needed.count(value) != 0) {
          stores.push_back(value);
        }
      }
      kernel.stores = stores;
    }
    // What each kernel may read: inputs, state, earlier extern results and earlier kernels' stores.
    std::map<int, TensorMeta> memory;
    for (const auto& [value, layout] : memory_) {
      const Value& v = ValueAt(graph_, value);
      if (v.kind != ValueKind::kNode || extern_results_.count(value) != 0) {
        memory[value] = layout;
      }
    }
    std::map<int, TensorMeta> available;
    for (const Step& step : plan_.steps) {
      if (step.kind == Step::Kind::kExtern) {
        continue;
      }
      const KernelPlan& kernel = plan_.kernels[static_cast<size_t>(step.index)];
      std::map<int, TensorMeta> before;
      for (const auto& [value, layout] : kernel_memory_[static_cast<size_t>(step.index)]) {
        if (memory.count(value) != 0 || available.count(value) != 0) {
          before[value] = layout;
        }
      }
      plan_.memory_before.push_back(before);
      for (int value : kernel.stores) {
        available[value] = DenseLayout(*ValueAt(graph_, value).meta);
      }
    }
    plan_.memory.clear();
    for (const auto& [value, layout] : memory_) {
      plan_.memory.insert(value);
    }
  }

  const Graph& graph_;
  std::set<int> forced_extern_;
  std::set<int> unfused_;  // attention anchors whose flash kernel did not generate: planned unfused
  Plan plan_;
  std::map<int, OpClass> classes_;
  std::map<int, ReductionSpec> reductions_;
  std::map<int, PoolSpec> pools_;
  std::map<int, ScanSpec> scans_;
  std::map<int, MatmulSpec> matmuls_;
  std::map<int, RecurrentSpec> recurrents_;
  std::map<int, AttentionSpec> attentions_;
  std::set<int> externs_;
  std::set<int> roots_;
  std::set<int> torch_views_;
  std::set<int> extern_results_;
  std::map<int, TensorMeta> memory_;
  std::vector<std::map<int, TensorMeta>> kernel_memory_;  // memory before each kernel
};

}  // namespace

Plan MakePlan(const Graph& graph, const PlanOptions& options) {
  std::set<int> forced;
  std::set<int> unfused;
  for (size_t attempt = 0; attempt <= 2 * graph.nodes.size(); ++attempt) {
    Planner planner(graph, options, forced, unfused);
    int failed = -1;
    if (planner.Run(&failed)) {
      Plan plan = planner.Take();
      for (int node : unfused) {
        plan.notes.push_back("attention " + graph.nodes.at(static_cast<size_t>(node)).name +
                             " planned unfused: its flash kernel does not generate");
      }
      for (int node : forced) {
        plan.notes.push_back(graph.nodes.at(static_cast<size_t>(node)).name + " runs in PyTorch");
      }
      return plan;
    }
    (planner.IsAttention(failed) ? unfused : forced).insert(failed);
  }
  throw std::logic_error("planner did not converge");
}

}  // namespace egg::expert
