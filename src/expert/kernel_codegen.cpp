#include "expert/kernel_codegen.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <set>
#include <sstream>

#include "expert/templates.h"

namespace egg::expert {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kCombineTile = 4096;
constexpr int64_t kMatmulGroupRows = 8;  // matmul tile rows that sweep N together (L2 reuse of B)

const Value& ValueAt(const Graph& graph, int value) { return graph.values.at(static_cast<size_t>(value)); }
const TensorMeta& MetaOf(const Graph& graph, int value) {
  const Value& v = ValueAt(graph, value);
  if (!v.meta) {
    throw NotFusable(v.name + " has no tensor type");
  }
  return *v.meta;
}

bool Contains(const std::vector<int>& values, int value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

std::string Summary(const Graph& graph, const KernelPlan& kernel) {
  std::vector<std::string> names;
  for (int root : kernel.roots) {
    names.push_back(ValueAt(graph, root).name);
  }
  std::string text;
  for (const std::string& name : names) {
    text += (text.empty() ? "" : ", ") + name;
  }
  return text;
}

// Identity element of a reduction's accumulator, as code for its dtype.
std::string Identity(const std::string& kind, DType dtype) {
  const bool floating = IsFloating(dtype);
  if (kind == "max" || kind == "argmax" || kind == "max_with_index") {
    return floating ? "float('-inf')" : "-9223372036854775807";
  }
  if (kind == "min" || kind == "argmin" || kind == "min_with_index") {
    return floating ? "float('inf')" : "9223372036854775807";
  }
  if (kind == "prod" || kind == "all") {
    return "1";
  }
  return "0";
}

DType AccumulatorType(const std::string& kind, DType input) {
  if (kind == "any" || kind == "all") {
    return DType::kInt32;
  }
  if (IsFloating(input)) {
    return input == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  }
  if (kind == "sum" || kind == "prod" || kind == "mean") {
    return DType::kInt64;
  }
  return input;
}

class KernelWriter {
 public:
  KernelWriter(const Graph& graph, const KernelPlan& kernel, const std::map<int, TensorMeta>& memory,
               const std::map<int, TensorMeta>& layouts, MaskSet masks)
      : graph_(graph), kernel_(kernel), memory_(memory), layouts_(layouts), emitter_(graph, memory, std::move(masks)) {}

  KernelSource Write() {
    switch (kernel_.kind) {
      case KernelKind::kPointwise:
        return WritePointwise();
      case KernelKind::kReduction:
        return WriteReduction();
      case KernelKind::kPool:
        return WritePool();
      case KernelKind::kScan:
        return WriteScan();
      case KernelKind::kMatmul:
        return WriteMatmul();
      case KernelKind::kRecurrent:
      case KernelKind::kAttention:
        break;
    }
    throw NotFusable("unknown kernel kind");
  }

 private:
  bool Stored(int value) const { return Contains(kernel_.stores, value); }

  void StoreIfNeeded(int value, const std::vector<Index>& index, const Operand& operand, const std::string& mask) {
    if (Stored(value)) {
      emitter_.Store(value, index, operand, layouts_.at(value), mask);
    }
  }

  // The pointer parameters of a jitted function whose body `emitter` wrote: ptr0, ptr1, ...
  static std::string PointerParams(const KernelEmitter& emitter) {
    std::string params;
    for (size_t i = 0; i < emitter.PointerValues().size(); ++i) {
      params += "ptr" + std::to_string(i) + ", ";
    }
    return params;
  }

  // Lines at `depth` levels of four spaces, joined: a template slot's code.
  static std::string Indented(const std::vector<std::string>& lines, int depth) {
    std::string code;
    for (const std::string& line : lines) {
      code += (code.empty() ? "" : "\n") + std::string(static_cast<size_t>(4 * depth), ' ') + line;
    }
    return code;
  }

  // `function`: the jitted function's name when it is not the kernel's (the first of two launches).
  KernelSource Finish(const std::string& template_name, templates::Values values, const std::string& grid,
                      std::map<std::string, int64_t> constexprs, const std::string& function = "") {
    KernelSource source;
    source.name = kernel_.name;
    source.int64_indexing =
        emitter_.MaxAddress() > kInt32Max || kernel_.rows * kernel_.length > kInt32Max || wide_scratch_;
    values.text["name"] = function.empty() ? kernel_.name : function;
    values.text["params"] = PointerParams(emitter_);
    values.text["summary"] = Summary(graph_, kernel_);
    values.flags["int64"] = source.int64_indexing;
    source.code = templates::Render(template_name, values);
    source.launches.push_back(
        {function.empty() ? kernel_.name : function, emitter_.PointerValues(), grid, std::move(constexprs), {}});
    source.helpers = emitter_.Helpers();
    source.loaded = emitter_.Loaded();
    source.computed = emitter_.Computed();
    for (const ReductionSpec& spec : kernel_.reductions) {
      source.computed.insert(spec.node);
    }
    if (kernel_.pool) {
      source.computed.insert(kernel_.pool->node);
    }
    if (kernel_.scan) {
      source.computed.insert(kernel_.scan->node);
    }
    if (kernel_.matmul) {
      source.computed.insert(kernel_.matmul->node);
    }
    return source;
  }

  // ---- pointwise ------------------------------------------------------------------------------------------
  KernelSource WritePointwise() {
    const int64_t numel = Product(kernel_.shape);
    const Index x = Index::Var("xindex", numel);
    for (int root : kernel_.roots) {
      const TensorMeta& meta = MetaOf(graph_, root);
      const auto index = Delinearize(x, meta.shape);
      const Operand value = emitter_.Emit(root, index);
      StoreIfNeeded(root, index, value, "xmask");
    }
    templates::Values values;
    values.text["numel"] = std::to_string(numel);
    values.text["body"] = Join(emitter_.CloseScope());
    const int64_t xblock = kernel_.design.xblock;
    return Finish("triton/pointwise.py.mustache", values, fmt::format("(triton.cdiv({}, {}),)", numel, xblock),
                  {{"XBLOCK", xblock}});
  }

  // ---- reductions -----------------------------------------------------------------------------------------
  // The input index of reduction `spec` at row x, reduced position r.
  std::vector<Index> ReductionInputIndex(const ReductionSpec& spec, const Index& x, const Index& r) {
    const TensorMeta& in = MetaOf(graph_, spec.input);
    return AnchorIndex(in.shape, spec.dims, x, r);
  }

  // Emits the per-element contribution of `spec` at the current tile and the code combining it into the
  // accumulators; returns the final row values after the loop via `finish`.
  struct Accumulator {
    std::vector<std::string> init;     // before the loop
    std::vector<std::string> update;   // inside the loop (after the input is emitted)
    std::vector<std::string> finish;   // after the loop
    std::vector<std::pair<int, Operand>> results;  // output value -> row operand
  };

  Accumulator Accumulate(const ReductionSpec& spec, const Operand& input, bool looped, const std::string& tag,
                         const std::string& center) {
    Accumulator acc;
    const DType in_type = input.dtype;
    const DType acc_type = AccumulatorType(spec.kind, in_type);
    const std::string tl_acc = TritonDType(acc_type);
    std::string value = input.code;
    if (acc_type != in_type) {
      value = "(" + value + ").to(" + tl_acc + ")";
    }
    if (!center.empty()) {
      value = "(" + value + " - " + center + ")";
    }
    const std::string a = "acc" + tag;
    const std::string kind = spec.kind;
    const DType out_type = MetaOf(graph_, spec.outputs.at(0)).dtype;
    auto result = [&](int value_id, const std::string& code, DType dtype) {
      acc.results.emplace_back(value_id, Operand{code, dtype, false});
    };
    const std::string count = std::to_string(spec.Length());
    if (kind == "sum" || kind == "mean" || kind == "var" || kind == "std" || kind == "var_mean" ||
        kind == "any" || kind == "prod" || kind == "all") {
      std::string element = value;
      if (kind == "var" || kind == "std" || kind == "var_mean") {
        element = "(" + value + " * " + value + ")";
      } else if (kind == "any" || kind == "all") {
        element = "(" + value + " != 0).to(tl.int32)";
      }
      const bool multiply = kind == "prod";
      const std::string identity = Identity(kind, acc_type);
      const std::string combine_fn = multiply ? "_egg_prod" : (kind == "all" ? "tl.min" : (kind == "any" ? "tl.max" : "tl.sum"));
      if (looped) {
        acc.init.push_back(fmt::format("{} = tl.full([XBLOCK, RBLOCK], {}, {})", a, identity, tl_acc));
        if (multiply) {
          acc.update.push_back(fmt::format("{0} = {0} * tl.where(mask, {1}, {2})", a, element, identity));
        } else if (kind == "any" || kind == "all") {
          acc.update.push_back(fmt::format("{0} = tl.where(mask, {3}({0}, {1}), {0})", a, element, identity,
                                           kind == "any" ? "tl.maximum" : "tl.minimum"));
        } else {
          acc.update.push_back(fmt::format("{0} = {0} + tl.where(mask, {1}, {2})", a, element, identity));
        }
        acc.finish.push_back(multiply ? fmt::format("red{0} = tl.reduce({1}, 1, _egg_prod)[:, None]", tag, a)
                                      : fmt::format("red{0} = {1}({2}, 1)[:, None]", tag, combine_fn, a));
      } else {
        acc.update.push_back(multiply ? fmt::format("red{0} = tl.reduce(tl.where(mask, {1}, {2}), 1, _egg_prod)[:, None]",
                                                    tag, element, identity)
                                      : fmt::format("red{0} = {1}(tl.where(mask, {2}, {3}), 1)[:, None]", tag, combine_fn,
                                                    element, identity));
      }
      const std::string red = "red" + tag;
      if (kind == "sum" || kind == "prod") {
        result(spec.outputs[0], red, out_type);
      } else if (kind == "mean") {
        result(spec.outputs[0], fmt::format("({} / {})", red, count), out_type);
      } else if (kind == "any" || kind == "all") {
        result(spec.outputs[0], "(" + red + " != 0)", out_type);
      }
      // var, std, var_mean are finished by the caller (two passes).
      acc.results.emplace_back(-1, Operand{red, acc_type, false});
      return acc;
    }
    if (kind == "max" || kind == "min") {
      const std::string fn = kind == "max" ? "maximum" : "minimum";
      const std::string identity = Identity(kind, acc_type);
      if (looped) {
        acc.init.push_back(fmt::format("{} = tl.full([XBLOCK, RBLOCK], {}, {})", a, identity, tl_acc));
        acc.update.push_back(fmt::format("{0} = tl.where(mask, tl.{1}({0}, {2}), {0})", a, fn, value));
        acc.finish.push_back(fmt::format("red{} = tl.{}({}, 1)[:, None]", tag, kind, a));
      } else {
        acc.update.push_back(fmt::format("red{} = tl.{}(tl.where(mask, {}, {}), 1)[:, None]", tag, kind, value, identity));
      }
      result(spec.outputs[0], "red" + tag, out_type);
      return acc;
    }
    // argmax / argmin / max_with_index / min_with_index: (value, index) pairs, ties to the first index.
    const bool is_max = kind == "argmax" || kind == "max_with_index";
    const std::string identity = Identity(is_max ? "max" : "min", acc_type);
    const std::string combine = is_max ? "_egg_argmax_combine" : "_egg_argmin_combine";
    const std::string better = is_max ? ">" : "<";
    if (looped) {
      acc.init.push_back(fmt::format("{}v = tl.full([XBLOCK, RBLOCK], {}, {})", a, identity, tl_acc));
      acc.init.push_back(fmt::format("{}i = tl.zeros([XBLOCK, RBLOCK], tl.int64)", a));
      // The value in the accumulator's shape: a scalar one (read at no lane) would meet block-shaped booleans
      // in `&`, which Triton's interpreter refuses.
      acc.update.push_back(fmt::format("val{0} = tl.where(mask, {1}, {2})", tag, value, identity));
      acc.update.push_back(fmt::format(
          "take{0} = mask & ((val{0} {1} {2}v) | ((val{0} != val{0}) & ({2}v == {2}v)))", tag, better, a));
      acc.update.push_back(fmt::format("{0}v = tl.where(take{1}, val{1}, {0}v)", a, tag));
      acc.update.push_back(fmt::format("{0}i = tl.where(take{1}, rindex.to(tl.int64) + tl.zeros_like({0}i), {0}i)", a, tag));
      acc.finish.push_back(fmt::format("redv{0}, redi{0} = tl.reduce(({1}v, {1}i), 1, {2})", tag, a, combine));
    } else {
      acc.update.push_back(fmt::format(
          "redv{0}, redi{0} = tl.reduce((tl.where(mask, {1}, {2}), rindex.to(tl.int64) + tl.zeros([XBLOCK, RBLOCK], tl.int64)), 1, {3})",
          tag, value, identity, combine));
    }
    const std::string v = "redv" + tag + "[:, None]";
    const std::string i = "redi" + tag + "[:, None]";
    if (kind == "argmax" || kind == "argmin") {
      result(spec.outputs[0], i, DType::kInt64);
    } else {
      if (spec.outputs.size() > 0 && spec.outputs[0] >= 0) {
        result(spec.outputs[0], v, out_type);
      }
      if (spec.outputs.size() > 1 && spec.outputs[1] >= 0) {
        result(spec.outputs[1], i, DType::kInt64);
      }
    }
    return acc;
  }

  void EmitReductionPass(const ReductionSpec& spec, size_t number, bool looped, const std::string& center,
                         const std::string& tag, Accumulator* out) {
    const Index x = Index::Var("xindex", kernel_.rows);
    const Index r = Index::Var("rindex", kernel_.length);
    if (looped) {
      emitter_.OpenScope(2);
    }
    const Operand input = emitter_.Emit(spec.input, ReductionInputIndex(spec, x, r));
    *out = Accumulate(spec, input, looped, tag, center);
    (void)number;
    if (looped) {
      for (const std::string& line : out->update) {
        emitter_.Line(line);
      }
      const std::vector<std::string> body = emitter_.CloseScope();
      for (const std::string& line : out->init) {
        emitter_.Line(line);
      }
      emitter_.Line(LoopHeader());
      emitter_.Line(TileLines(true));
      emitter_.Append(body);
      for (const std::string& line : out->finish) {
        emitter_.Line(line);
      }
    } else {
      for (const std::string& line : out->update) {
        emitter_.Line(line);
      }
    }
  }

  std::string LoopHeader() const {
    return fmt::format("for roffset in range(0, {}, RBLOCK):", kernel_.length);
  }

  std::string TileLines(bool looped) const {
    templates::Values values;
    values.text["indent"] = looped ? "    " : "";
    values.text["length"] = std::to_string(kernel_.length);
    values.flags["looped"] = looped;
    std::string text = templates::Render("triton/reduction_tile.py.mustache", values);
    while (!text.empty() && text.back() == '\n') {
      text.pop_back();
    }
    // The emitter indents the first line; the others carry their own indent relative to it.
    std::string out;
    size_t start = 0;
    bool first = true;
    while (start <= text.size()) {
      const size_t end = text.find('\n', start);
      const std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
      out += first ? line : "\n    " + line;
      first = false;
      if (end == std::string::npos) {
        break;
      }
      start = end + 1;
    }
    return out;
  }

  void DefineResults(const ReductionSpec& spec, const Accumulator& acc) {
    const Index x = Index::Var("xindex", kernel_.rows);
    for (const auto& [value, operand] : acc.results) {
      if (value < 0) {
        continue;
      }
      emitter_.DefineRow(value, operand, x);
      StoreIfNeeded(value, Delinearize(x, MetaOf(graph_, value).shape), operand, "xmask");
    }
    (void)spec;
  }

  // var/std/var_mean in two passes: mean, then the centred sum of squares.
  void EmitVariance(const ReductionSpec& spec, size_t number, bool looped) {
    ReductionSpec mean_spec = spec;
    mean_spec.kind = "sum";
    Accumulator first;
    const std::string tag = std::to_string(number);
    EmitReductionPass(mean_spec, number, looped, "", tag + "m", &first);
    const std::string mean = "mean" + tag;
    emitter_.Line(fmt::format("{} = {} / {}", mean, first.results.back().second.code, spec.Length()));
    Accumulator second;
    EmitReductionPass(spec, number, looped, mean, tag, &second);
    const std::string squares = second.results.back().second.code;
    const double denominator = static_cast<double>(spec.Length()) - spec.correction;
    const std::string variance = "var" + tag;
    emitter_.Line(fmt::format("{} = {} / {}", variance, squares, FloatLiteral(std::max(denominator, 0.0))));
    Accumulator results;
    const DType out_type = MetaOf(graph_, spec.outputs.at(0)).dtype;
    if (spec.kind == "var") {
      results.results.emplace_back(spec.outputs[0], Operand{variance, out_type, false});
    } else if (spec.kind == "std") {
      results.results.emplace_back(spec.outputs[0], Operand{"tl.sqrt(" + variance + ")", out_type, false});
    } else {
      if (spec.outputs[0] >= 0) {
        results.results.emplace_back(spec.outputs[0], Operand{variance, out_type, false});
      }
      if (spec.outputs.size() > 1 && spec.outputs[1] >= 0) {
        results.results.emplace_back(spec.outputs[1], Operand{mean, out_type, false});
      }
    }
    DefineResults(spec, results);
  }

  // Few long rows: kernel 1 reduces chunks of every row in parallel into partials, kernel 2 combines them and
  // computes what the rows feed.
  KernelSource WriteSplitReduction() {
    const KernelDesign& design = kernel_.design;
    const int64_t rblock = design.rblock;
    int64_t chunk = (kernel_.length + design.split - 1) / design.split;
    chunk = (chunk + rblock - 1) / rblock * rblock;
    const int64_t splits = (kernel_.length + chunk - 1) / chunk;
    const Index x = Index::Var("xindex", kernel_.rows);
    const Index r = Index::Var("rindex", kernel_.length);
    KernelSource source;
    source.name = kernel_.name;
    // Partial kernel: one loop, every reduction of the kernel accumulated together.
    KernelEmitter& partial = emitter_;
    std::vector<std::string> init;
    std::vector<std::string> finish;
    struct Part {
      size_t scratch;
      std::string code;
      DType dtype;
      std::string identity;
    };
    std::vector<std::vector<Part>> parts(kernel_.reductions.size());
    partial.OpenScope(2);
    for (size_t i = 0; i < kernel_.reductions.size(); ++i) {
      const ReductionSpec& spec = kernel_.reductions[i];
      const Operand input = partial.Emit(spec.input, ReductionInputIndex(spec, x, r));
      Accumulator acc = IsVariance(spec) ? WelfordAccumulate(spec, input, std::to_string(i))
                                         : Accumulate(spec, input, true, std::to_string(i), "");
      for (const std::string& line : acc.update) {
        partial.Line(line);
      }
      init.insert(init.end(), acc.init.begin(), acc.init.end());
      finish.insert(finish.end(), acc.finish.begin(), acc.finish.end());
      const DType acc_type = AccumulatorType(spec.kind, input.dtype);
      const bool indexed = spec.kind == "argmax" || spec.kind == "argmin" || spec.kind == "max_with_index" ||
                           spec.kind == "min_with_index";
      const std::string tag = std::to_string(i);
      if (indexed) {
        const bool is_max = spec.kind == "argmax" || spec.kind == "max_with_index";
        parts[i].push_back({source.scratch.size(), "redv" + tag + "[:, None]", acc_type, Identity(is_max ? "max" : "min", acc_type)});
        source.scratch.push_back({kernel_.rows * splits, acc_type});
        parts[i].push_back({source.scratch.size(), "redi" + tag + "[:, None]", DType::kInt64, "0"});
        source.scratch.push_back({kernel_.rows * splits, DType::kInt64});
      } else if (IsVariance(spec)) {
        for (const char* name : {"redm", "reds", "redn"}) {
          parts[i].push_back({source.scratch.size(), name + tag + "[:, None]", DType::kFloat32, "0.0"});
          source.scratch.push_back({kernel_.rows * splits, DType::kFloat32});
        }
      } else {
        const std::string identity = Identity(spec.kind, acc_type);
        parts[i].push_back({source.scratch.size(), "red" + tag, acc_type, identity});
        source.scratch.push_back({kernel_.rows * splits, acc_type});
      }
    }
    const std::vector<std::string> body = partial.CloseScope();
    partial.Line("split = tl.program_id(1)");
    for (const std::string& line : init) {
      partial.Line(line);
    }
    partial.Line(fmt::format("for roffset in range(0, {}, RBLOCK):", chunk));
    partial.Line(fmt::format("    rindex = split * {} + roffset + rbase", chunk));
    partial.Line(fmt::format("    rmask = rindex < {}", kernel_.length));
    partial.Line("    mask = xmask & rmask");
    partial.Append(body);
    for (const std::string& line : finish) {
      partial.Line(line);
    }
    for (const auto& list : parts) {
      for (const Part& part : list) {
        const std::string pointer = partial.PointerName(ScratchId(part.scratch));
        partial.Line(fmt::format("tl.store({} + (xindex * {} + split), {}, xmask)", pointer, splits, part.code));
      }
    }
    templates::Values values;
    values.text["name"] = kernel_.name + "_partial";
    values.text["rows"] = std::to_string(kernel_.rows);
    values.text["length"] = std::to_string(kernel_.length);
    values.text["algorithm"] = fmt::format("split ({} programs per row, partials)", splits);
    values.text["summary"] = Summary(graph_, kernel_);
    values.text["body"] = Join(partial.CloseScope());
    values.flags["int64"] = partial.MaxAddress() > kInt32Max || kernel_.rows * kernel_.length > kInt32Max;
    values.text["params"] = PointerParams(partial);
    source.code = templates::Render("triton/reduction.py.mustache", values);
    source.launches.push_back({kernel_.name + "_partial", partial.PointerValues(),
                               fmt::format("(triton.cdiv({}, {}), {})", kernel_.rows, design.xblock, splits),
                               {{"XBLOCK", design.xblock}, {"RBLOCK", rblock}},
                               {}});
    // Combine kernel: a row block per program, the partials of its rows in one tile.
    MaskSet masks{{{"xindex", "xmask"}}, {}, "xindex"};
    KernelEmitter combine(graph_, memory_, masks);
    const int64_t sblock = NextPowerOfTwo(splits);
    const int64_t xblock = std::max<int64_t>(1, std::min<int64_t>(kCombineTile / sblock, NextPowerOfTwo(kernel_.rows)));
    combine.Line(fmt::format("sindex = tl.arange(0, SBLOCK)[None, :]"));
    combine.Line(fmt::format("smask = sindex < {}", splits));
    combine.Line("mask = xmask & smask");
    for (size_t i = 0; i < kernel_.reductions.size(); ++i) {
      const ReductionSpec& spec = kernel_.reductions[i];
      const std::string tag = std::to_string(i);
      std::vector<std::string> loaded;
      for (const Part& part : parts[i]) {
        const std::string pointer = combine.PointerName(ScratchId(part.scratch));
        loaded.push_back("p" + tag + "_" + std::to_string(loaded.size()));
        combine.Line(fmt::format("{} = tl.load({} + (xindex * {} + sindex), mask, other={})", loaded.back(), pointer,
                                 splits, part.identity));
      }
      const DType out_type = MetaOf(graph_, spec.outputs.at(0) >= 0 ? spec.outputs[0] : spec.outputs.at(1)).dtype;
      Accumulator results;
      const std::string red = "red" + tag;
      if (loaded.size() == 3) {
        combine.Line(fmt::format("redm{0}, reds{0}, redn{0} = tl.reduce(({1}, {2}, {3}), 1, _egg_welford_combine)", tag,
                                 loaded[0], loaded[1], loaded[2]));
        WelfordResults(spec, "redm" + tag + "[:, None]", "reds" + tag + "[:, None]", &results);
      } else if (loaded.size() == 2) {
        const bool is_max = spec.kind == "argmax" || spec.kind == "max_with_index";
        combine.Line(fmt::format("redv{0}, redi{0} = tl.reduce(({1}, {2}), 1, {3})", tag, loaded[0], loaded[1],
                                 is_max ? "_egg_argmax_combine" : "_egg_argmin_combine"));
        if (spec.kind == "argmax" || spec.kind == "argmin") {
          results.results.emplace_back(spec.outputs[0], Operand{"redi" + tag + "[:, None]", DType::kInt64, false});
        } else {
          if (spec.outputs[0] >= 0) {
            results.results.emplace_back(spec.outputs[0], Operand{"redv" + tag + "[:, None]", out_type, false});
          }
          if (spec.outputs.size() > 1 && spec.outputs[1] >= 0) {
            results.results.emplace_back(spec.outputs[1], Operand{"redi" + tag + "[:, None]", DType::kInt64, false});
          }
        }
      } else {
        const std::string& k = spec.kind;
        const std::string fn = k == "max" || k == "any" ? "tl.max" : (k == "min" || k == "all" ? "tl.min" : "tl.sum");
        combine.Line(k == "prod" ? fmt::format("{} = tl.reduce({}, 1, _egg_prod)[:, None]", red, loaded[0])
                                 : fmt::format("{} = {}({}, 1)[:, None]", red, fn, loaded[0]));
        std::string value = red;
        if (k == "mean") {
          value = fmt::format("({} / {})", red, spec.Length());
        } else if (k == "any" || k == "all") {
          value = "(" + red + " != 0)";
        }
        results.results.emplace_back(spec.outputs[0], Operand{value, out_type, false});
      }
      for (const auto& [value, operand] : results.results) {
        combine.DefineRow(value, operand, x);
        if (Stored(value)) {
          combine.Store(value, Delinearize(x, MetaOf(graph_, value).shape), operand, layouts_.at(value), "xmask");
        }
      }
    }
    for (int root : kernel_.roots) {
      const bool reduction = std::any_of(kernel_.reductions.begin(), kernel_.reductions.end(), [&](const ReductionSpec& spec) {
        return graph_.nodes.at(static_cast<size_t>(spec.node)).value == root;
      });
      if (reduction) {
        continue;
      }
      if (MetaOf(graph_, root).Numel() != kernel_.rows) {
        throw NotFusable("a split reduction kernel computes only per-row results");
      }
      const auto index = Delinearize(x, MetaOf(graph_, root).shape);
      const Operand value = combine.Emit(root, index);
      if (Stored(root)) {
        combine.Store(root, index, value, layouts_.at(root), "xmask");
      }
    }
    templates::Values final_values;
    final_values.text["name"] = kernel_.name;
    final_values.text["rows"] = std::to_string(kernel_.rows);
    final_values.text["splits"] = std::to_string(splits);
    final_values.text["summary"] = Summary(graph_, kernel_);
    final_values.text["body"] = Join(combine.CloseScope());
    final_values.text["params"] = PointerParams(combine);
    final_values.flags["int64"] = false;
    source.code += "\n\n" + templates::Render("triton/combine.py.mustache", final_values);
    source.launches.push_back({kernel_.name, combine.PointerValues(),
                               fmt::format("(triton.cdiv({}, {}),)", kernel_.rows, xblock),
                               {{"XBLOCK", xblock}, {"SBLOCK", sblock}},
                               {}});
    source.int64_indexing = values.flags["int64"];
    source.loaded = partial.Loaded();
    source.loaded.insert(combine.Loaded().begin(), combine.Loaded().end());
    source.computed = partial.Computed();
    source.computed.insert(combine.Computed().begin(), combine.Computed().end());
    for (const ReductionSpec& spec : kernel_.reductions) {
      source.computed.insert(spec.node);
    }
    return source;
  }

  // A reduction unit: a plain accumulator, a variance (Welford when streamed), or an online-softmax pair.
  struct Unit {
    enum class Kind { kPlain, kVariance, kOnline };
    Kind kind = Kind::kPlain;
    size_t spec = 0;
    size_t partner = 0;  // kOnline: the sum of exp(u - max)
  };

  const ReductionSpec* ReductionOf(int root) const {
    for (const ReductionSpec& spec : kernel_.reductions) {
      if (graph_.nodes.at(static_cast<size_t>(spec.node)).value == root) {
        return &spec;
      }
    }
    return nullptr;
  }

  static bool IsVariance(const ReductionSpec& spec) {
    return spec.kind == "var" || spec.kind == "std" || spec.kind == "var_mean";
  }

  std::vector<Unit> Units(bool online) const {
    const auto pairs = online ? OnlinePairs(graph_, kernel_) : std::vector<std::pair<size_t, size_t>>{};
    std::set<size_t> partners;
    for (const auto& [first, second] : pairs) {
      partners.insert(second);
    }
    std::vector<Unit> units;
    for (int root : kernel_.roots) {
      const ReductionSpec* spec = ReductionOf(root);
      if (spec == nullptr) {
        continue;
      }
      const auto index = static_cast<size_t>(spec - kernel_.reductions.data());
      if (partners.count(index) != 0) {
        continue;
      }
      Unit unit;
      unit.spec = index;
      const auto pair = std::find_if(pairs.begin(), pairs.end(), [&](const auto& p) { return p.first == index; });
      if (pair != pairs.end()) {
        unit.kind = Unit::Kind::kOnline;
        unit.partner = pair->second;
      } else if (IsVariance(*spec)) {
        unit.kind = Unit::Kind::kVariance;
      }
      units.push_back(unit);
    }
    return units;
  }

  std::vector<int> UnitOutputs(const Unit& unit) const {
    std::vector<int> outputs = kernel_.reductions[unit.spec].outputs;
    if (unit.kind == Unit::Kind::kOnline) {
      for (int output : kernel_.reductions[unit.partner].outputs) {
        outputs.push_back(output);
      }
    }
    return outputs;
  }

  // Whether `value`, computed in this kernel, reads any of `targets` (directly or through inlined ops).
  bool Reads(int value, const std::set<int>& targets, std::set<int>* seen) const {
    if (targets.count(value) != 0) {
      return true;
    }
    if (memory_.count(value) != 0 || !seen->insert(value).second) {
      return false;
    }
    const Node* node = graph_.Producer(value);
    if (node == nullptr) {
      return false;
    }
    std::vector<const Arg*> pending;
    for (const Arg& arg : node->args) {
      pending.push_back(&arg);
    }
    while (!pending.empty()) {
      const Arg* arg = pending.back();
      pending.pop_back();
      if (arg->kind == Arg::Kind::kValue && Reads(arg->value, targets, seen)) {
        return true;
      }
      for (const Arg& item : arg->list) {
        pending.push_back(&item);
      }
    }
    return false;
  }

  // Consecutive units that do not read each other's results share one loop over the row.
  std::vector<std::vector<Unit>> Groups(const std::vector<Unit>& units) const {
    std::vector<std::vector<Unit>> groups;
    std::set<int> outputs;
    for (const Unit& unit : units) {
      std::set<int> seen;
      if (groups.empty() || Reads(kernel_.reductions[unit.spec].input, outputs, &seen)) {
        groups.emplace_back();
        outputs.clear();
      }
      groups.back().push_back(unit);
      for (int output : UnitOutputs(unit)) {
        outputs.insert(output);
      }
    }
    return groups;
  }

  // Streamed mean and M2 per lane (Welford), combined across lanes with Chan's formula.
  Accumulator WelfordAccumulate(const ReductionSpec& spec, const Operand& input, const std::string& tag) {
    Accumulator acc;
    for (const char* name : {"wm", "ws", "wn"}) {
      acc.init.push_back(fmt::format("{}{} = tl.zeros([XBLOCK, RBLOCK], tl.float32)", name, tag));
    }
    acc.update.push_back(fmt::format("wv{} = ({}).to(tl.float32)", tag, input.code));
    acc.update.push_back(fmt::format("wn{0} = wn{0} + tl.where(mask, 1.0, 0.0)", tag));
    acc.update.push_back(fmt::format("wd{0} = wv{0} - wm{0}", tag));
    acc.update.push_back(fmt::format("wm{0} = tl.where(mask, wm{0} + wd{0} / tl.maximum(wn{0}, 1.0), wm{0})", tag));
    acc.update.push_back(fmt::format("ws{0} = tl.where(mask, ws{0} + wd{0} * (wv{0} - wm{0}), ws{0})", tag));
    acc.finish.push_back(fmt::format("redm{0}, reds{0}, redn{0} = tl.reduce((wm{0}, ws{0}, wn{0}), 1, _egg_welford_combine)", tag));
    WelfordResults(spec, "redm" + tag + "[:, None]", "reds" + tag + "[:, None]", &acc);
    return acc;
  }

  void WelfordResults(const ReductionSpec& spec, const std::string& mean, const std::string& m2, Accumulator* acc) {
    const double denominator = std::max(static_cast<double>(spec.Length()) - spec.correction, 0.0);
    const std::string variance = fmt::format("({} / {})", m2, FloatLiteral(denominator));
    const DType out_type = MetaOf(graph_, spec.outputs[0] >= 0 ? spec.outputs[0] : spec.outputs.at(1)).dtype;
    if (spec.kind == "var") {
      acc->results.emplace_back(spec.outputs[0], Operand{variance, out_type, false});
    } else if (spec.kind == "std") {
      acc->results.emplace_back(spec.outputs[0], Operand{"tl.sqrt(" + variance + ")", out_type, false});
    } else {
      if (spec.outputs[0] >= 0) {
        acc->results.emplace_back(spec.outputs[0], Operand{variance, out_type, false});
      }
      if (spec.outputs.size() > 1 && spec.outputs[1] >= 0) {
        acc->results.emplace_back(spec.outputs[1], Operand{mean, out_type, false});
      }
    }
  }

  Accumulator OnlineAccumulate(const ReductionSpec& max_spec, const ReductionSpec& sum_spec, const Operand& input,
                               const std::string& t) {
    Accumulator acc;
    acc.init.push_back(fmt::format("m{} = tl.full([XBLOCK, RBLOCK], float('-inf'), tl.float32)", t));
    acc.init.push_back(fmt::format("s{} = tl.zeros([XBLOCK, RBLOCK], tl.float32)", t));
    acc.update.push_back(fmt::format("t{0} = tl.where(mask, ({1}).to(tl.float32), float('-inf'))", t, input.code));
    acc.update.push_back(fmt::format("mn{0} = tl.maximum(m{0}, t{0})", t));
    acc.update.push_back(fmt::format("s{0} = s{0} * tl.where(mn{0} == float('-inf'), 0.0, tl.exp(m{0} - mn{0})) + "
                                     "tl.where(mask, tl.exp(t{0} - mn{0}), 0.0)", t));
    acc.update.push_back(fmt::format("m{0} = mn{0}", t));
    acc.finish.push_back(fmt::format("redm{0} = tl.max(m{0}, 1)[:, None]", t));
    acc.finish.push_back(fmt::format(
        "reds{0} = tl.sum(s{0} * tl.where(m{0} == float('-inf'), 0.0, tl.exp(m{0} - redm{0})), 1)[:, None]", t));
    acc.results.emplace_back(max_spec.outputs[0], Operand{"redm" + t, MetaOf(graph_, max_spec.outputs[0]).dtype, false});
    acc.results.emplace_back(sum_spec.outputs[0], Operand{"reds" + t, MetaOf(graph_, sum_spec.outputs[0]).dtype, false});
    return acc;
  }

  void EmitLoopGroup(const std::vector<Unit>& group) {
    const Index x = Index::Var("xindex", kernel_.rows);
    const Index r = Index::Var("rindex", kernel_.length);
    emitter_.OpenScope(2);
    std::vector<Accumulator> accumulators;
    for (const Unit& unit : group) {
      const ReductionSpec& spec = kernel_.reductions[unit.spec];
      const Operand input = emitter_.Emit(spec.input, ReductionInputIndex(spec, x, r));
      const std::string tag = std::to_string(unit.spec);
      if (unit.kind == Unit::Kind::kOnline) {
        accumulators.push_back(OnlineAccumulate(spec, kernel_.reductions[unit.partner], input, tag));
      } else if (unit.kind == Unit::Kind::kVariance) {
        accumulators.push_back(WelfordAccumulate(spec, input, tag));
      } else {
        accumulators.push_back(Accumulate(spec, input, true, tag, ""));
      }
      for (const std::string& line : accumulators.back().update) {
        emitter_.Line(line);
      }
    }
    const std::vector<std::string> body = emitter_.CloseScope();
    for (const Accumulator& acc : accumulators) {
      for (const std::string& line : acc.init) {
        emitter_.Line(line);
      }
    }
    emitter_.Line(LoopHeader());
    emitter_.Line(TileLines(true));
    emitter_.Append(body);
    for (size_t i = 0; i < group.size(); ++i) {
      for (const std::string& line : accumulators[i].finish) {
        emitter_.Line(line);
      }
      DefineResults(kernel_.reductions[group[i].spec], accumulators[i]);
    }
  }

  void EmitPersistentUnit(const Unit& unit, size_t number) {
    const ReductionSpec& spec = kernel_.reductions[unit.spec];
    if (unit.kind == Unit::Kind::kVariance) {
      EmitVariance(spec, number, false);
      return;
    }
    Accumulator acc;
    EmitReductionPass(spec, number, false, "", std::to_string(unit.spec), &acc);
    DefineResults(spec, acc);
  }

  KernelSource WriteReduction() {
    if (kernel_.design.algorithm == "split") {
      return WriteSplitReduction();
    }
    const bool looped = kernel_.design.algorithm != "persistent";
    const Index x = Index::Var("xindex", kernel_.rows);
    const Index r = Index::Var("rindex", kernel_.length);
    if (!looped) {
      emitter_.Line(TileLines(false));
    }
    std::vector<int> full_roots;
    std::vector<int> row_roots;
    for (int root : kernel_.roots) {
      if (ReductionOf(root) != nullptr) {
        continue;
      }
      const int64_t numel = MetaOf(graph_, root).Numel();
      (numel == kernel_.rows && kernel_.length != 1 ? row_roots : full_roots).push_back(root);
    }
    const std::vector<Unit> units = Units(kernel_.design.algorithm == "online");
    if (looped) {
      for (const std::vector<Unit>& group : Groups(units)) {
        EmitLoopGroup(group);
      }
    } else {
      for (size_t u = 0; u < units.size(); ++u) {
        EmitPersistentUnit(units[u], u);
      }
    }
    if (!full_roots.empty()) {
      if (looped) {
        emitter_.OpenScope(2);
      }
      const auto anchor = AnchorIndex(kernel_.shape, kernel_.reduced, x, r);
      const Index flat = Linearize(anchor, kernel_.shape);
      for (int root : full_roots) {
        const auto index = Delinearize(flat, MetaOf(graph_, root).shape);
        const Operand value = emitter_.Emit(root, index);
        StoreIfNeeded(root, index, value, "mask");
      }
      if (looped) {
        const std::vector<std::string> body = emitter_.CloseScope();
        emitter_.Line(LoopHeader());
        emitter_.Line(TileLines(true));
        emitter_.Append(body);
      }
    }
    for (int root : row_roots) {
      const auto index = Delinearize(x, MetaOf(graph_, root).shape);
      const Operand value = emitter_.Emit(root, index);
      StoreIfNeeded(root, index, value, "xmask");
    }
    templates::Values values;
    values.text["rows"] = std::to_string(kernel_.rows);
    values.text["length"] = std::to_string(kernel_.length);
    values.text["algorithm"] = kernel_.design.algorithm;
    values.text["body"] = Join(emitter_.CloseScope());
    const int64_t xblock = kernel_.design.xblock;
    return Finish("triton/reduction.py.mustache", values, fmt::format("(triton.cdiv({}, {}),)", kernel_.rows, xblock),
                  {{"XBLOCK", xblock}, {"RBLOCK", kernel_.design.rblock}});
  }

  // ---- pooling --------------------------------------------------------------------------------------------
  KernelSource WritePool() {
    const PoolSpec& pool = *kernel_.pool;
    const TensorMeta& in = MetaOf(graph_, pool.input);
    const TensorMeta& out = MetaOf(graph_, pool.output);
    const int64_t numel = out.Numel();
    const Index x = Index::Var("xindex", numel);
    const auto out_index = Delinearize(x, out.shape);
    const size_t rank = out.shape.size();
    const size_t first_spatial = rank - static_cast<size_t>(pool.spatial);
    const bool is_max = pool.kind == "max";
    emitter_.Line(fmt::format("acc = tl.full([XBLOCK], {}, tl.float32)", is_max ? "float('-inf')" : "0.0"));
    std::vector<std::string> starts;
    std::vector<std::string> ends;
    std::vector<Index> window_index(out_index.begin(), out_index.begin() + static_cast<std::ptrdiff_t>(first_spatial));
    std::string window_text;
    int depth = 1;
    std::vector<std::string> conditions;
    for (int s = 0; s < pool.spatial; ++s) {
      const auto sd = static_cast<size_t>(s);
      const size_t d = first_spatial + sd;
      const int64_t in_size = in.shape[d];
      const int64_t out_size = out.shape[d];
      const std::string k = "k" + std::to_string(s);
      Index position;
      if (pool.adaptive) {
        const Index start = (out_index[d] * in_size).FloorDiv(out_size);
        const Index end = ((out_index[d] + Index(1)) * in_size + Index(out_size - 1)).FloorDiv(out_size);
        position = start + Index::Var(k, pool.kernel[sd]);
        conditions.push_back(fmt::format("({}) < ({})", position.Code(), end.Code()));
        starts.push_back(start.Code());
        ends.push_back(end.Code());
      } else {
        position = out_index[d] * pool.stride[sd] - Index(pool.padding[sd]) + Index::Var(k, pool.kernel[sd]) * pool.dilation[sd];
        if (pool.padding[sd] > 0 || pool.ceil_mode) {
          conditions.push_back(fmt::format("(({0}) >= 0) & (({0}) < {1})", position.Code(), in_size));
        }
        const Index start = out_index[d] * pool.stride[sd] - Index(pool.padding[sd]);
        starts.push_back(start.Code());
        ends.push_back(fmt::format("tl.minimum({} + {}, {})", start.Code(), pool.kernel[sd], in_size + pool.padding[sd]));
      }
      window_index.push_back(position);
      window_text += (window_text.empty() ? "" : "x") + std::to_string(pool.kernel[sd]);
      emitter_.Line(fmt::format("for {} in tl.static_range({}):", k, pool.kernel[sd]));
      emitter_.OpenScope(++depth);
    }
    std::string valid;
    for (const std::string& c : conditions) {
      valid = valid.empty() ? c : "(" + valid + ") & (" + c + ")";
    }
    if (!valid.empty()) {
      emitter_.Line("valid = " + valid);
      emitter_.PushCondition("valid");
    }
    const Operand value = emitter_.Emit(pool.input, window_index);
    std::string element = "(" + value.code + ").to(tl.float32)";
    if (!valid.empty()) {
      element = fmt::format("tl.where(valid, {}, {})", element, is_max ? "float('-inf')" : "0.0");
      emitter_.PopCondition();
    }
    emitter_.Line(is_max ? fmt::format("acc = tl.maximum(acc, {})", element) : fmt::format("acc = acc + {}", element));
    for (int s = pool.spatial; s-- > 0;) {
      emitter_.Append(emitter_.CloseScope());
    }
    std::string result = "acc";
    if (!is_max) {
      result = "acc / " + AvgDivisor(pool, in, out, out_index, first_spatial, starts, ends);
    }
    const Operand pooled{"pooled", out.dtype, false};
    emitter_.Line("pooled = (" + result + ").to(" + TritonDType(out.dtype) + ")");
    emitter_.DefineRow(pool.output, pooled, x);
    StoreIfNeeded(pool.output, out_index, pooled, "xmask");
    WriteEpilogues(x, pool.output);
    templates::Values values;
    values.text["numel"] = std::to_string(numel);
    values.text["kind"] = pool.kind + " pooling";
    values.text["window"] = window_text;
    values.text["body"] = Join(emitter_.CloseScope());
    const int64_t xblock = kernel_.design.xblock;
    return Finish("triton/pool.py.mustache", values, fmt::format("(triton.cdiv({}, {}),)", numel, xblock),
                  {{"XBLOCK", xblock}});
  }

  std::string AvgDivisor(const PoolSpec& pool, const TensorMeta& in, const TensorMeta& out,
                         const std::vector<Index>& out_index, size_t first_spatial,
                         const std::vector<std::string>& starts, const std::vector<std::string>& ends) {
    if (pool.divisor_override) {
      return FloatLiteral(static_cast<double>(*pool.divisor_override));
    }
    bool uniform = !pool.adaptive;
    for (int s = 0; s < pool.spatial && uniform; ++s) {
      const auto sd = static_cast<size_t>(s);
      const size_t d = first_spatial + sd;
      const bool no_edge = pool.padding[sd] == 0 && !pool.ceil_mode;
      uniform = no_edge || (pool.count_include_pad && (out.shape[d] - 1) * pool.stride[sd] + pool.kernel[sd] <=
                                                          in.shape[d] + 2 * pool.padding[sd]);
    }
    if (uniform) {
      int64_t size = 1;
      for (int64_t k : pool.kernel) {
        size *= k;
      }
      return FloatLiteral(static_cast<double>(size));
    }
    std::string divisor;
    for (int s = 0; s < pool.spatial; ++s) {
      const auto sd = static_cast<size_t>(s);
      const size_t d = first_spatial + sd;
      std::string extent;
      if (pool.adaptive) {
        extent = fmt::format("(({}) - ({}))", ends[sd], starts[sd]);
      } else if (pool.count_include_pad) {
        extent = fmt::format("({} - ({}))", ends[sd], starts[sd]);
      } else {
        extent = fmt::format("(tl.minimum({}, {}) - tl.maximum({}, 0))", ends[sd], in.shape[d], starts[sd]);
      }
      divisor += (divisor.empty() ? "" : " * ") + extent;
    }
    (void)out_index;
    return "(" + divisor + ").to(tl.float32)";
  }

  // Pointwise roots after a pooled or scanned value, computed where that value is (same flat position).
  void WriteEpilogues(const Index& flat, int producer) {
    for (int root : kernel_.roots) {
      if (root == producer) {
        continue;
      }
      const auto index = Delinearize(flat, MetaOf(graph_, root).shape);
      const Operand value = emitter_.Emit(root, index);
      const char* mask = kernel_.kind == KernelKind::kScan ? "mask" : (DotTiles(kernel_) ? "omask" : "xmask");
      StoreIfNeeded(root, index, value, mask);
    }
  }

  // ---- matrix products ------------------------------------------------------------------------------------
  // One program per BLOCK_M x BLOCK_N output tile (and batch), a loop over K in BLOCK_K steps with tl.dot on
  // tiles loaded through the emitter (so views such as transposes are plain index arithmetic, and pointwise
  // producers of the operands are computed on the fly), fp32 accumulation, then addmm's bias and the fused
  // elementwise consumers on the accumulator tile before a single store.
  KernelSource WriteMatmul() {
    const MatmulSpec& mm = *kernel_.matmul;
    if (mm.conv) {
      return WriteConvolution();
    }
    const int out = graph_.nodes.at(static_cast<size_t>(mm.node)).value;
    const Index b = mm.batched ? Index::Var("bindex", mm.batch) : Index(0);
    const Index m = Index::Var("mindex", mm.m);
    const Index n = Index::Var("nindex", mm.n);
    const Index ka = Index::Var("kaindex", mm.k);
    const Index kb = Index::Var("kbindex", mm.k);
    auto operand_index = [&](const Index& row, const Index& column) {
      return mm.batched ? std::vector<Index>{b, row, column} : std::vector<Index>{row, column};
    };
    // A product whose only reader is where(cond, product, other) with cond computed from indices alone
    // (torch.triu / tril of a product: 1_14, 1_15) needs no K loop in a tile where cond holds nowhere.
    std::string prologue;
    const bool aligned = kernel_.design.algorithm == "aligned";
    if (kernel_.design.algorithm == "tiled" || aligned) {
      if (const auto masked = IndexMaskedReader(out)) {
        const auto out_index = operand_index(m, n);
        emitter_.OpenScope(1);
        const Operand cond =
            emitter_.Emit(masked->cond, BroadcastIndex(out_index, MetaOf(graph_, out).shape, MetaOf(graph_, masked->cond).shape));
        const std::string taken = masked->product_when_true ? cond.code : "~(" + cond.code + ")";
        emitter_.Line("# no K loop for a tile whose every product lane the where drops");
        emitter_.Line(fmt::format("k_end = tl.where(tl.max(tl.where(omask & ({}), 1, 0)) > 0, {}, 0)", taken, mm.k));
        prologue = Join(emitter_.CloseScope());
        skip_dropped_tiles_ = true;
      }
    }
    emitter_.OpenScope(2);
    const int64_t a_stride = AlignedStride(mm.k);
    const int64_t b_stride = AlignedStride(mm.n);
    if (aligned) {  // both operands from their aligned copies (scratch 0 and 1, written by the first
                    // launches)
      // A copy past int32 offsets: the rows' K index in int64 too (mindex and bindex are by the template)
      wide_scratch_ = mm.batch * mm.m * a_stride > kInt32Max || mm.batch * mm.k * b_stride > kInt32Max;
      if (wide_scratch_) {
        emitter_.Line("kbwide = kbindex.to(tl.int64)");
      }
      const Index k_rows = wide_scratch_ ? Index::Var("kbwide", mm.k) : kb;
      emitter_.Line(fmt::format("a = tl.load({} + ({}), mmask & kamask, other=0.0)",
                                emitter_.PointerName(ScratchId(0)), ((b * mm.m + m) * a_stride + ka).Code()));
      emitter_.Line(fmt::format("b = tl.load({} + ({}), kbmask & nmask, other=0.0)",
                                emitter_.PointerName(ScratchId(1)),
                                ((b * mm.k + k_rows) * b_stride + n).Code()));
    }
    const Operand a =
        aligned ? Operand{"a", DType::kFloat32, false} : emitter_.Emit(mm.a, operand_index(m, ka));
    const Operand bt =
        aligned ? Operand{"b", DType::kFloat32, false} : emitter_.Emit(mm.b, operand_index(kb, n));
    if (a.scalar || bt.scalar) {
      throw NotFusable("a constant matrix operand");
    }
    // Masked lanes must contribute zeros whatever the operand's producer computes there. When both operands are
    // float32 loads under those masks (their masked lanes read zeros) they go to tl.dot as loaded, so Triton
    // pipelines both into shared memory: 4096^3 at tol 1e-4 went from 3.28 to 2.47 ms on the H200. With one
    // operand computed in registers, the other is selected too: a loaded V beside a computed P in 1_97's second
    // product measured 18.9 ms against 15.5 ms with both selected (bench/results/h200-expert-tol1e-4).
    const bool loaded = aligned || (emitter_.ZeroWhereMasked(a, {"mmask", "kamask"}) &&
                                    emitter_.ZeroWhereMasked(bt, {"kbmask", "nmask"}));
    if (!aligned) {
      emitter_.Line(loaded ? "a = " + a.code
                           : fmt::format("a = tl.where(mmask & kamask, ({}).to(tl.float32), 0.0)", a.code));
      emitter_.Line(loaded ? "b = " + bt.code
                           : fmt::format("b = tl.where(kbmask & nmask, ({}).to(tl.float32), 0.0)", bt.code));
    }
    const std::string loop = Join(emitter_.CloseScope());
    const Index flat = (b * mm.m + m) * mm.n + n;
    std::string result = "acc";
    if (mm.alpha != 1.0) {
      result = fmt::format("({} * {})", result, FloatLiteral(mm.alpha));
    }
    if (mm.bias >= 0) {
      const auto bias_index = BroadcastIndex({m, n}, {mm.m, mm.n}, MetaOf(graph_, mm.bias).shape);
      const Operand bias = emitter_.Emit(mm.bias, bias_index);
      std::string term = "(" + bias.code + ").to(tl.float32)";
      if (mm.beta != 1.0) {
        term = fmt::format("({} * {})", term, FloatLiteral(mm.beta));
      }
      result = mm.beta == 0.0 ? result : result + " + " + term;
    }
    emitter_.Line("product = " + result);
    const auto out_index = mm.batched ? std::vector<Index>{b, m, n} : std::vector<Index>{m, n};
    KernelSource source = FinishMatmul(loop, out, out_index, flat, prologue);
    if (aligned) {
      // The copies, A as [batch * m, k] and B as [batch * k, n] rows at the aligned strides: read through the
      // emitter, so a transposed view or a computed operand is copied in the product's own orientation.
      auto rows_of = [&](int64_t rows) {
        return mm.batched ? Delinearize(Index::Var("pindex", mm.batch * rows), {mm.batch, rows})
                          : std::vector<Index>{Index::Var("pindex", rows)};
      };
      std::vector<Index> a_index = rows_of(mm.m);
      a_index.push_back(Index::Var("cindex", mm.k));
      std::vector<Index> b_index = rows_of(mm.k);
      b_index.push_back(Index::Var("cindex", mm.n));
      source.scratch.push_back({mm.batch * mm.m * a_stride, DType::kFloat32});
      source.scratch.push_back({mm.batch * mm.k * b_stride, DType::kFloat32});
      PrependRepack(source, mm.b, b_index, mm.batch * mm.k, mm.n, b_stride, ScratchId(1), "_aligned_b",
                    "B copied into rows of a 32-float stride");
      PrependRepack(source, mm.a, a_index, mm.batch * mm.m, mm.k, a_stride, ScratchId(0), "_aligned_a",
                    "A copied into rows of a 32-float stride");
    }
    return source;
  }

  // The row stride of an operand's aligned copy: `columns` rounded up to 32 floats, so that every row starts
  // on a 128-byte line and the tile loads vectorize.
  static int64_t AlignedStride(int64_t columns) {
    constexpr int64_t kAlignFloats = 32;
    return (columns + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  }

  struct IndexMask {
    int cond = -1;                   // the where's condition value
    bool product_when_true = true;  // where(cond, product, other), else where(cond, other, product)
  };

  // The where that is the only reader of matmul output `out`, when its condition is computed from indices alone
  // (iota, comparisons, arithmetic on scalars): the lanes it drops can be known before the K loop.
  std::optional<IndexMask> IndexMaskedReader(int out) const {
    const Value& product = graph_.values.at(static_cast<size_t>(out));
    for (const Arg& output : graph_.outputs) {
      if (output.kind == Arg::Kind::kValue && output.value == out) {
        return std::nullopt;
      }
    }
    if (product.users.size() != 1) {
      return std::nullopt;
    }
    const Node& where = graph_.nodes.at(static_cast<size_t>(product.users[0]));
    if (where.op != "aten.where.self" || where.args.size() != 3 || where.args[0].kind != Arg::Kind::kValue) {
      return std::nullopt;
    }
    const bool when_true = where.args[1].kind == Arg::Kind::kValue && where.args[1].value == out;
    const bool when_false = where.args[2].kind == Arg::Kind::kValue && where.args[2].value == out;
    const int cond = where.args[0].value;
    const Value& where_value = graph_.values.at(static_cast<size_t>(where.value));
    if (when_true == when_false || !where_value.meta || where_value.meta->shape != MetaOf(graph_, out).shape ||
        !IndexOnly(cond)) {
      return std::nullopt;
    }
    return IndexMask{cond, when_true};
  }

  // True when `value` is computed by pointwise and view ops from scalars and iotas alone (no tensor read).
  bool IndexOnly(int value) const {
    const Value& v = graph_.values.at(static_cast<size_t>(value));
    if (v.kind != ValueKind::kNode) {
      return !v.meta;
    }
    const Node& node = graph_.nodes.at(static_cast<size_t>(v.node));
    const OpClass op_class = ClassifyOp(node.op);
    if (op_class != OpClass::kPointwise && op_class != OpClass::kView) {
      return false;
    }
    return std::all_of(node.args.begin(), node.args.end(),
                       [&](const Arg& arg) { return arg.kind != Arg::Kind::kValue || IndexOnly(arg.value); });
  }

  // A convolution as an implicit GEMM (no im2col buffer): per group (the batch axis), rows m = (image, output
  // position), columns n = the group's output channels, k = (input channel of the group, kernel offset). The
  // input tile is gathered at position * stride - padding + offset * dilation, masked to zero in the padding;
  // the weight tile is read as [k, n]; the bias and fused consumers apply to the accumulator before one store.
  // A convolution with few channels per group (depthwise: one) computed directly: one output element per lane,
  // its (input channel of the group, kernel offset) products unrolled and summed in fp32 FMAs. The implicit GEMM
  // would pad a one-column N tile to tl.dot's 16 and run a K of a few taps.
  KernelSource WriteDirectConvolution() {
    const MatmulSpec& mm = *kernel_.matmul;
    const ConvShape& conv = *mm.conv;
    const int out = graph_.nodes.at(static_cast<size_t>(mm.node)).value;
    const TensorMeta& out_meta = MetaOf(graph_, out);
    const int64_t numel = out_meta.Numel();
    const Index x = Index::Var("xindex", numel);
    std::vector<std::string> lines;
    const auto flat = Delinearize(x, out_meta.shape);
    std::vector<Index> out_index;
    for (size_t d = 0; d < flat.size(); ++d) {
      out_index.push_back(
          Named(d == 0 ? "image" : (d == 1 ? "channel" : "opos" + std::to_string(d - 2)), flat[d], lines));
    }
    const Index channel = out_index[1];
    const Index group = Named("group", channel.FloorDiv(mm.n), lines);
    for (const std::string& line : lines) {
      emitter_.Line(line);
    }
    const int64_t in_per_group = conv.in_channels / conv.groups;
    emitter_.Line("acc = tl.zeros([XBLOCK], dtype=tl.float32)");
    emitter_.Line(fmt::format("for ci in tl.static_range({}):", in_per_group));
    int depth = 1;
    emitter_.OpenScope(++depth);
    const Index ci = Index::Var("ci", in_per_group);
    std::vector<Index> input = {out_index[0], group * in_per_group + ci};
    std::vector<Index> weight = {channel, ci};
    std::string valid;
    for (size_t s = 0; s < conv.kernel.size(); ++s) {
      const std::string tap = "t" + std::to_string(s);
      emitter_.Line(fmt::format("for {} in tl.static_range({}):", tap, conv.kernel[s]));
      emitter_.OpenScope(++depth);
      const Index offset = Index::Var(tap, conv.kernel[s]);
      const Index position = out_index[s + 2] * conv.stride[s] - Index(conv.padding[s]) + offset * conv.dilation[s];
      RequireInside(position, conv.in_size[s], valid);
      input.push_back(position);
      weight.push_back(offset);
    }
    const Operand a = EmitUnder(mm.a, input, valid, "valid");
    const Operand w = emitter_.Emit(mm.b, weight);
    const std::string term = fmt::format("({}).to(tl.float32) * ({}).to(tl.float32)", a.code, w.code);
    emitter_.Line(valid.empty() ? "acc += " + term : fmt::format("acc += tl.where(valid, {}, 0.0)", term));
    for (int level = depth; level > 1; --level) {
      emitter_.Append(emitter_.CloseScope());
    }
    std::string result = "acc";
    if (mm.bias >= 0) {
      result += " + (" + emitter_.Emit(mm.bias, {channel}).code + ").to(tl.float32)";
    }
    emitter_.Line("product = " + result);
    const Operand product{"product", DType::kFloat32, false};
    emitter_.DefineRow(out, product, x);
    StoreIfNeeded(out, flat, product, "xmask");
    WriteEpilogues(x, out);
    std::string window;
    for (int64_t k : conv.kernel) {
      window += (window.empty() ? "" : "x") + std::to_string(k);
    }
    templates::Values values;
    values.text["numel"] = std::to_string(numel);
    values.text["kind"] = "convolution (direct)";
    values.text["window"] = fmt::format("{} input channel(s) x {}", in_per_group, window);
    values.text["body"] = Join(emitter_.CloseScope());
    const int64_t xblock = kernel_.design.xblock;
    return Finish("triton/pool.py.mustache", values, fmt::format("(triton.cdiv({}, {}),)", numel, xblock),
                  {{"XBLOCK", xblock}});
  }

  KernelSource WriteConvolution() {
    const MatmulSpec& mm = *kernel_.matmul;
    const ConvShape& conv = *mm.conv;
    if (conv.transposed) {
      return WriteTransposedConvolution();
    }
    if (kernel_.design.algorithm == "direct") {
      return WriteDirectConvolution();
    }
    if (kernel_.design.algorithm == "nhwc") {
      return WriteChannelsLastConvolution();
    }
    const Index g = mm.batched ? Index::Var("bindex", mm.batch) : Index(0);
    const Index m = Index::Var("mindex", mm.m);
    const Index n = Index::Var("nindex", mm.n);
    const int64_t in_per_group = conv.in_channels / conv.groups;
    std::vector<int64_t> rows_shape = {conv.images};
    rows_shape.insert(rows_shape.end(), conv.out_size.begin(), conv.out_size.end());
    std::vector<int64_t> k_shape = {in_per_group};
    k_shape.insert(k_shape.end(), conv.kernel.begin(), conv.kernel.end());
    const auto row = Delinearize(m, rows_shape);
    const auto kb = Delinearize(Index::Var("kbindex", mm.k), k_shape);
    ConvTiles tiles;
    const auto rows = NamedRows(row, tiles.prologue);
    const auto ka = NamedTaps(Delinearize(Index::Var("kaindex", mm.k), k_shape), tiles.loop);
    tiles.input = {rows[0], g * in_per_group + ka[0]};
    for (size_t s = 0; s < conv.kernel.size(); ++s) {
      const Index position = Named("pos" + std::to_string(s),
                                   rows[s + 1] * conv.stride[s] - Index(conv.padding[s]) + ka[s + 1] * conv.dilation[s],
                                   tiles.loop);
      RequireInside(position, conv.in_size[s], tiles.input_valid);
      tiles.input.push_back(position);
    }
    // weight [out, in / groups, kernel...] read as [k, n]
    tiles.weight = {g * mm.n + n, kb[0]};
    tiles.weight.insert(tiles.weight.end(), kb.begin() + 1, kb.end());
    tiles.out = {row[0], g * mm.n + n};
    tiles.out.insert(tiles.out.end(), row.begin() + 1, row.end());
    return FinishConvolution(tiles, g * mm.n + n);
  }

  // A convolution as a channels-last implicit GEMM. A first launch copies the input, computed through the
  // emitter at its NCHW index (so a fused producer still runs there, once per element), into a scratch buffer
  // laid out [images, *in_size, in_channels]. The GEMM then orders K as (kernel tap, channel of the group):
  // per tap, each row's input position and validity are [BLOCK_M, 1] vectors computed once, and the A tile of
  // BLOCK_K channels is one load contiguous along K at the row's base, not a gather delinearized per K step.
  // The weight is copied too, into [output channel, tap, channel of the group] rows: read in place at
  // [output channel, channel, tap] its K step strides by the tap count, and the H200 measured that
  // gather 1.3-6x slower than the NCHW form (bench/results/h200-nhwc-aligned); the copy is a small launch per
  // forward.
  KernelSource WriteChannelsLastConvolution() {
    const MatmulSpec& mm = *kernel_.matmul;
    const ConvShape& conv = *mm.conv;
    const int64_t in_per_group = conv.in_channels / conv.groups;
    const int64_t taps = Product(conv.kernel);
    const int64_t positions = conv.images * Product(conv.in_size);
    const int scratch = ScratchId(0);
    const Index g = mm.batched ? Index::Var("bindex", mm.batch) : Index(0);
    const Index n = Index::Var("nindex", mm.n);
    std::vector<int64_t> rows_shape = {conv.images};
    rows_shape.insert(rows_shape.end(), conv.out_size.begin(), conv.out_size.end());
    const auto row = Delinearize(Index::Var("mindex", mm.m), rows_shape);
    std::vector<std::string> prologue;
    const auto rows = NamedRows(row, prologue);
    // per tap: its offsets, the rows' input positions, their validity and their base in the NHWC copy
    std::vector<std::string> tap_lines;
    const auto offsets = Delinearize(Index::Var("tap", taps), conv.kernel);
    Index base = rows[0];
    std::string valid;
    for (size_t s = 0; s < conv.kernel.size(); ++s) {
      const Index offset = Named("ktap" + std::to_string(s), offsets[s], tap_lines);
      const Index position =
          Named("pos" + std::to_string(s),
                rows[s + 1] * conv.stride[s] - Index(conv.padding[s]) + offset * conv.dilation[s], tap_lines);
      RequireInside(position, conv.in_size[s], valid);
      base = base * conv.in_size[s] + position;
    }
    tap_lines.push_back("tvalid = mmask" + (valid.empty() ? "" : " & " + valid));
    tap_lines.push_back("tbase = " + (base * conv.in_channels + g * in_per_group).Code());
    emitter_.OpenScope(3);
    emitter_.Line(fmt::format("a = tl.load({} + (tbase + kaindex), tvalid & kamask, other=0.0)",
                              emitter_.PointerName(scratch)));
    const int64_t weight_row = taps * in_per_group;
    const Index weight_at = (g * mm.n + n) * weight_row + Index::Var("tap", taps) * in_per_group +
                            Index::Var("kbindex", in_per_group);
    emitter_.Line(fmt::format("b = tl.load({} + ({}), kbmask & nmask, other=0.0)",
                              emitter_.PointerName(ScratchId(1)), weight_at.Code()));
    const std::string loop = Join(emitter_.CloseScope());
    std::string result = "acc";
    if (mm.bias >= 0) {
      result += " + (" + emitter_.Emit(mm.bias, {g * mm.n + n}).code + ").to(tl.float32)";
    }
    emitter_.Line("product = " + result);
    std::vector<Index> out_index = {row[0], g * mm.n + n};
    out_index.insert(out_index.end(), row.begin() + 1, row.end());
    // A 3x3 window unrolled, a 7x7x7 one a loop; ieee products never unrolled: their tl.dot is FMA code as
    // large as the tile, nine copies of a 128x64x64 one took ptxas over five minutes for sm_90.
    constexpr int64_t kUnrolledTaps = 9;
    const bool unrolled =
        taps <= kUnrolledTaps && kernel_.design.precision != "ieee" && !kernel_.design.precision.empty();
    templates::Values values;
    values.flags["channels_last"] = true;
    values.text["tap_range"] = fmt::format("{}({})", unrolled ? "tl.static_range" : "range", taps);
    values.text["tap_lines"] = Indented(tap_lines, 2);
    values.text["channels"] = std::to_string(in_per_group);
    wide_scratch_ = positions * conv.in_channels > kInt32Max;
    const int out = graph_.nodes.at(static_cast<size_t>(mm.node)).value;
    KernelSource source = FinishMatmul(loop, out, out_index, Linearize(out_index, MetaOf(graph_, out).shape),
                                       Indented(prologue, 1), std::move(values));
    source.a_tile_loads = 1;  // the NHWC tile (its mask is the tap's row validity, not mmask by name)
    std::vector<int64_t> image_shape = {conv.images};
    image_shape.insert(image_shape.end(), conv.in_size.begin(), conv.in_size.end());
    const auto at = Delinearize(Index::Var("pindex", positions), image_shape);
    std::vector<Index> input = {at[0], Index::Var("cindex", conv.in_channels)};
    input.insert(input.end(), at.begin() + 1, at.end());
    source.scratch.push_back({positions * conv.in_channels, DType::kFloat32});
    // (image, position) x channel tiles: the NCHW read runs along positions, the NHWC write along channels
    PrependRepack(
        source, mm.a, input, positions, conv.in_channels, conv.in_channels, scratch, "_nhwc",
        "channels-last repack of a convolution input, read along positions, written along channels");
    // the weight [out, in / groups, kernel...] as rows [out, (tap, channel)]
    const Index column = Index::Var("cindex", weight_row);
    std::vector<Index> weight_index = {Index::Var("pindex", conv.out_channels), column.Mod(in_per_group)};
    const auto tap_offsets = Delinearize(column.FloorDiv(in_per_group), conv.kernel);
    weight_index.insert(weight_index.end(), tap_offsets.begin(), tap_offsets.end());
    source.scratch.push_back({conv.out_channels * weight_row, DType::kFloat32});
    PrependRepack(source, mm.b, weight_index, conv.out_channels, weight_row, weight_row, ScratchId(1),
                  "_weight", "convolution weight as rows of (kernel tap, input channel)");
    return source;
  }

  // A first launch `<kernel>SUFFIX` that copies `value`, computed through an emitter of its own at `index`
  // (over the lane variables pindex < rows and cindex < columns), into scratch buffer `scratch` as rows of
  // `stride` elements: [BLOCK_P, BLOCK_C] tiles, so that a read running along either variable and the write
  // (along columns) both stay contiguous. A fused producer of `value` runs here, once per element.
  void PrependRepack(KernelSource& source, int value, const std::vector<Index>& index, int64_t rows,
                     int64_t columns, int64_t stride, int scratch, const std::string& suffix,
                     const std::string& what) {
    KernelEmitter repack(
        graph_, memory_,
        MaskSet{{{"pindex", "pmask"}, {"cindex", "cmask"}}, {{"pmask & cmask", "mask"}}, "mask"});
    repack.OpenScope(1);
    const Operand copied = repack.Emit(value, index);
    if (copied.scalar) {
      throw NotFusable("a constant matrix operand");
    }
    repack.Line(fmt::format("tl.store({} + (pindex * {} + cindex), ({}).to(tl.float32), mask)",
                            repack.PointerName(scratch), stride, copied.code));
    constexpr int64_t kRepackColumns = 32;
    constexpr int64_t kRepackTile = 2048;
    const int64_t block_c = std::min(kRepackColumns, NextPowerOfTwo(columns));
    const int64_t block_p = std::min(kRepackTile / block_c, NextPowerOfTwo(rows));
    templates::Values values;
    const std::string function = kernel_.name + suffix;
    values.text["name"] = function;
    values.text["what"] = what;
    values.text["rows"] = std::to_string(rows);
    values.text["columns"] = std::to_string(columns);
    values.text["summary"] = Summary(graph_, kernel_);
    values.text["params"] = PointerParams(repack);
    values.text["body"] = Join(repack.CloseScope());
    values.flags["int64"] = repack.MaxAddress() > kInt32Max || wide_scratch_;
    source.code = templates::Render("triton/repack.py.mustache", values) + "\n\n" + source.code;
    source.launches.insert(source.launches.begin(), {function,
                                                     repack.PointerValues(),
                                                     fmt::format("(triton.cdiv({}, {}), triton.cdiv({}, {}))",
                                                                 rows, block_p, columns, block_c),
                                                     {{"BLOCK_P", block_p}, {"BLOCK_C", block_c}},
                                                     {}});
    source.loaded.insert(repack.Loaded().begin(), repack.Loaded().end());
    source.computed.insert(repack.Computed().begin(), repack.Computed().end());
    source.int64_indexing = source.int64_indexing || values.flags["int64"];
  }

  struct ConvTiles {
    std::vector<Index> input, weight, out;  // the gathered input, the weight read as [k, n], the output
    std::string input_valid, weight_valid;  // conditions on the loaded tiles (empty: none)
    std::vector<std::string> prologue;      // lines before the K loop (values per row or per program)
    std::vector<std::string> loop;          // lines at the top of each K step
  };

  // `value` computed once into `name` by a line added to `lines` (a constant or a lone variable stays as it is):
  // the interpreter evaluates every operation of an expression each time it appears. Loads at the name take the
  // masks of the lane variables the value depends on.
  Index Named(const std::string& name, const Index& value, std::vector<std::string>& lines) {
    const auto& terms = value.Terms();
    if (value.IsConstant() || (terms.size() == 1 && terms[0].first == 1 && value.Constant() == 0 &&
                               (terms[0].second->kind == IndexAtom::Kind::kVar ||
                                terms[0].second->kind == IndexAtom::Kind::kRuntime))) {
      return value;
    }
    lines.push_back(name + " = " + value.Code());
    emitter_.BindRuntime(name, emitter_.LanesOf(value));
    return Index::Runtime(name, value.Lo(), value.Hi());
  }

  // The (image, position...) coordinates of the rows, computed before the K loop.
  std::vector<Index> NamedRows(const std::vector<Index>& row, std::vector<std::string>& prologue) {
    std::vector<Index> named;
    for (size_t d = 0; d < row.size(); ++d) {
      named.push_back(Named(d == 0 ? "image" : "row" + std::to_string(d - 1), row[d], prologue));
    }
    return named;
  }

  // The (input channel, kernel offset...) coordinates of a K step's input tile, computed once per step.
  std::vector<Index> NamedTaps(const std::vector<Index>& k, std::vector<std::string>& loop) {
    std::vector<Index> named;
    for (size_t d = 0; d < k.size(); ++d) {
      named.push_back(Named(d == 0 ? "kchannel" : "ktap" + std::to_string(d - 1), k[d], loop));
    }
    return named;
  }

  static void And(std::string& conjunction, const std::string& condition) {
    conjunction = conjunction.empty() ? "(" + condition + ")" : conjunction + " & (" + condition + ")";
  }

  // The conditions that keep `position` inside [0, size), where its range can leave it.
  static void RequireInside(const Index& position, int64_t size, std::string& valid) {
    if (position.Lo() < 0) {
      And(valid, position.Code() + " >= 0");
    }
    if (position.Hi() >= size) {
      And(valid, fmt::format("{} < {}", position.Code(), size));
    }
  }

  // A transposed convolution, one dense convolution per output phase (sub-pixel form): the batch axis is
  // (group, phase), rows are (image, q) for output positions q * stride + phase, k = (input channel, the phase's
  // taps). Per-phase offsets, tap counts and input bases are computed once per program (the prologue); taps past
  // a phase's count, and rows past its output extent, are masked where phases differ.
  KernelSource WriteTransposedConvolution() {
    const MatmulSpec& mm = *kernel_.matmul;
    const ConvShape& conv = *mm.conv;
    const int64_t in_per_group = conv.in_channels / conv.groups;
    const int64_t phases = Product(conv.stride);
    std::vector<std::string> prologue;
    const Index block = mm.batched ? Index::Var("bindex", mm.batch) : Index(0);
    Index g = phases > 1 ? Index(0) : block;
    if (phases > 1 && conv.groups > 1) {
      prologue.push_back("gindex = " + block.FloorDiv(phases).Code());
      g = Index::Var("gindex", conv.groups);
    }
    const auto phase = Delinearize(block.Mod(phases), conv.stride);
    std::vector<int64_t> rows_shape = {conv.images};
    std::vector<int64_t> k_shape = {in_per_group};
    for (size_t s = 0; s < conv.kernel.size(); ++s) {
      rows_shape.push_back((conv.out_size[s] + conv.stride[s] - 1) / conv.stride[s]);
      k_shape.push_back(TransposedMaxTaps(conv, s));
    }
    const Index n = Index::Var("nindex", mm.n);
    const auto row = Delinearize(Index::Var("mindex", mm.m), rows_shape);
    const auto kb = Delinearize(Index::Var("kbindex", mm.k), k_shape);
    ConvTiles tiles;
    tiles.prologue = std::move(prologue);
    const auto rows = NamedRows(row, tiles.prologue);
    const auto ka = NamedTaps(Delinearize(Index::Var("kaindex", mm.k), k_shape), tiles.loop);
    tiles.input = {rows[0], g * in_per_group + ka[0]};
    tiles.weight = {g * in_per_group + kb[0], n};  // weight [in, out / groups, kernel...] read as [k, n]
    tiles.out = {row[0], g * mm.n + n};
    std::string rows_valid;
    for (size_t s = 0; s < conv.kernel.size(); ++s) {
      const PhaseTerms terms = TransposedTerms(conv, s, phase[s], row[s + 1], tiles.prologue);
      if (!terms.count.empty()) {
        And(tiles.input_valid, fmt::format("{} < {}", ka[s + 1].Code(), terms.count));
        And(tiles.weight_valid, fmt::format("{} < {}", kb[s + 1].Code(), terms.count));
      }
      const Index position = Named("pos" + std::to_string(s),
                                   rows[s + 1] + terms.base - ka[s + 1] * TransposedInputStep(conv, s),
                                   tiles.loop);
      RequireInside(position, conv.in_size[s], tiles.input_valid);
      tiles.input.push_back(position);
      tiles.weight.push_back(terms.first + kb[s + 1] * TransposedTapStep(conv, s));
      tiles.out.push_back(terms.out);
      if (conv.out_size[s] % conv.stride[s] != 0) {
        And(rows_valid, fmt::format("{} < {}", terms.out.Code(), conv.out_size[s]));
      }
    }
    if (!rows_valid.empty()) {  // rows past this phase's output extent
      tiles.prologue.push_back("mmask = mmask & " + rows_valid);
      tiles.prologue.push_back("omask = mmask & nmask");
    }
    return FinishConvolution(tiles, g * mm.n + n);
  }

  // One spatial dim of a transposed convolution's phase: the first kernel offset, the input position of q and
  // tap 0 (constants where every phase agrees, else values the prologue computes), the count of taps where it
  // differs between phases (code, else empty) and the output position.
  struct PhaseTerms {
    Index first, base, out;
    std::string count;
  };

  PhaseTerms TransposedTerms(const ConvShape& conv, size_t s, const Index& phase_code, const Index& q,
                             std::vector<std::string>& prologue) {
    const std::vector<TransposedPhase> phases = TransposedPhases(conv, s);
    const int64_t stride = conv.stride[s];
    if (stride == 1) {
      return PhaseTerms{Index(phases[0].first), Index(phases[0].base), q, ""};
    }
    const std::string suffix = std::to_string(s);
    auto define = [&prologue](const std::string& name, const Index& value) {
      prologue.push_back(fmt::format("{} = {}", name, value.Code()));
    };
    define("phase" + suffix, phase_code);
    const Index r = Index::Var("phase" + suffix, stride);
    const int64_t step = TransposedTapStep(conv, s);
    const int64_t divisor = stride / step;  // gcd(stride, dilation): phases it does not divide take no tap
    const int64_t padding = conv.padding[s];
    std::set<int64_t> firsts, counts, bases;
    int64_t base_lo = std::numeric_limits<int64_t>::max();
    int64_t base_hi = std::numeric_limits<int64_t>::min();
    for (int64_t p = 0; p < stride; ++p) {
      const TransposedPhase& taps = phases[static_cast<size_t>(p)];
      counts.insert(taps.count);
      if ((p + padding) % divisor == 0) {
        firsts.insert(taps.first);
      }
      if (taps.count > 0) {
        bases.insert(taps.base);
        base_lo = std::min(base_lo, taps.base);
        base_hi = std::max(base_hi, taps.base);
      }
    }
    PhaseTerms terms;
    terms.first = Index(*firsts.begin());
    if (firsts.size() > 1) {
      // first * input_step == (phase + padding) / gcd (mod step), through the inverse of input_step mod step
      const int64_t in_step = TransposedInputStep(conv, s);
      int64_t inverse = 0;
      while ((inverse * in_step) % step != 1) {
        ++inverse;
      }
      define("tap" + suffix, ((r + Index(padding)).FloorDiv(divisor) * inverse).Mod(step));
      terms.first = Index::Runtime("tap" + suffix, 0, step - 1);
    }
    if (counts.size() > 1) {
      std::string count = (Index(conv.kernel[s] + step - 1) - terms.first).FloorDiv(step).Code();
      if (divisor > 1) {
        count = fmt::format("tl.where({} == 0, {}, 0)", (r + Index(padding)).Mod(divisor).Code(), count);
      }
      prologue.push_back(fmt::format("taps{} = {}", suffix, count));
      terms.count = "taps" + suffix;
    }
    terms.base = Index(*bases.begin());
    if (bases.size() > 1) {
      const int64_t shift = ((step - 1) * conv.dilation[s] + stride - 1) / stride;  // keeps the numerator >= 0
      define("base" + suffix,
             (r + Index(padding + shift * stride) - terms.first * conv.dilation[s]).FloorDiv(stride) - Index(shift));
      terms.base = Index::Runtime("base" + suffix, base_lo, base_hi);
    }
    // every row's own position, a tile even where all rows share one q
    prologue.push_back(fmt::format("opos{} = {}{}", suffix, (q * stride + r).Code(),
                                   q.Uses("mindex") ? "" : " + tl.zeros_like(mindex)"));
    emitter_.BindRuntime("opos" + suffix, {"mindex"});
    terms.out = Index::Runtime("opos" + suffix, 0, conv.out_size[s] - 1);
    return terms;
  }

  // The loop body (input and weight tiles, zero where masked), the bias, and the accumulator's store with its
  // fused consumers at `tiles.out`.
  KernelSource FinishConvolution(const ConvTiles& tiles, const Index& channel) {
    const MatmulSpec& mm = *kernel_.matmul;
    const int out = graph_.nodes.at(static_cast<size_t>(mm.node)).value;
    emitter_.OpenScope(2);
    for (const std::string& line : tiles.loop) {
      emitter_.Line(line);
    }
    const Operand a = EmitUnder(mm.a, tiles.input, tiles.input_valid, "valid");
    const Operand bt = EmitUnder(mm.b, tiles.weight, tiles.weight_valid, "wvalid");
    if (a.scalar || bt.scalar) {
      throw NotFusable("a constant convolution operand");
    }
    // A tile loaded straight from memory is already zero where masked (its lanes use every tile variable).
    auto direct = [&](int value, const std::vector<Index>& index, const char* row_mask, const char* column_mask) {
      Index lanes;
      for (const Index& i : index) {
        lanes = lanes + i;
      }
      const std::string mask = emitter_.MaskFor(lanes);
      return memory_.count(value) != 0 && MetaOf(graph_, value).dtype == DType::kFloat32 &&
             mask.find(row_mask) != std::string::npos && mask.find(column_mask) != std::string::npos;
    };
    auto extra = [](const std::string& valid, const std::string& name) { return valid.empty() ? "" : " & " + name; };
    if (direct(mm.a, tiles.input, "mmask", "kamask")) {
      emitter_.Line("a = " + a.code);
    } else {
      emitter_.Line(fmt::format("a = tl.where(mmask & kamask{}, ({}).to(tl.float32), 0.0)",
                                extra(tiles.input_valid, "valid"), a.code));
    }
    if (direct(mm.b, tiles.weight, "kbmask", "nmask")) {
      emitter_.Line("b = " + bt.code);
    } else {
      emitter_.Line(fmt::format("b = tl.where(kbmask & nmask{}, ({}).to(tl.float32), 0.0)",
                                extra(tiles.weight_valid, "wvalid"), bt.code));
    }
    const std::string loop = Join(emitter_.CloseScope());
    std::string result = "acc";
    if (mm.bias >= 0) {
      const Operand bias = emitter_.Emit(mm.bias, {channel});
      result += " + (" + bias.code + ").to(tl.float32)";
    }
    emitter_.Line("product = " + result);
    return FinishMatmul(loop, out, tiles.out, Linearize(tiles.out, MetaOf(graph_, out).shape),
                        Indented(tiles.prologue, 1));
  }

  // `value` at `index`, its loads masked by `valid` (named `name` in the code) where that is not empty.
  Operand EmitUnder(int value, const std::vector<Index>& index, const std::string& valid, const std::string& name) {
    if (valid.empty()) {
      return emitter_.Emit(value, index);
    }
    emitter_.Line(name + " = " + valid);
    emitter_.PushCondition(name);
    const Operand operand = emitter_.Emit(value, index);
    emitter_.PopCondition();
    return operand;
  }

  // `values`: what a variant's template sections take besides the common ones (the channels-last loop's).
  KernelSource FinishMatmul(const std::string& loop, int out, const std::vector<Index>& out_index,
                            const Index& flat, const std::string& prologue = "",
                            templates::Values values = {}) {
    const MatmulSpec& mm = *kernel_.matmul;
    const KernelDesign& design = kernel_.design;
    const Operand product{"product", DType::kFloat32, false};
    emitter_.DefineRow(out, product, flat);
    StoreIfNeeded(out, out_index, product, "omask");
    WriteEpilogues(flat, out);
    const int64_t grid_n = (mm.n + design.yblock - 1) / design.yblock;
    const int64_t grid_m = (mm.m + design.xblock - 1) / design.xblock;
    values.text["m"] = std::to_string(mm.m);
    values.text["n"] = std::to_string(mm.n);
    values.text["k"] = std::to_string(mm.k);
    values.text["k_end"] = skip_dropped_tiles_ ? "k_end" : std::to_string(mm.k);
    values.text["batch"] = std::to_string(mm.batch);
    values.text["grid_n"] = std::to_string(grid_n);
    values.text["grid_m"] = std::to_string(grid_m);
    const int64_t group_m = std::min<int64_t>(kMatmulGroupRows, grid_m);
    values.text["group_m"] = std::to_string(group_m);
    values.text["group_size"] = std::to_string(group_m * grid_n);
    values.text["precision"] = design.precision.empty() ? "ieee" : design.precision;
    values.flags["batched"] = mm.batched;
    values.flags["gemv"] = design.algorithm == "gemv";
    values.text["loop"] = loop;
    values.flags["has_prologue"] = !prologue.empty();
    values.text["prologue"] = prologue;
    values.text["body"] = Join(emitter_.CloseScope());
    const std::map<std::string, int64_t> blocks = {
        {"BLOCK_M", design.xblock}, {"BLOCK_N", design.yblock}, {"BLOCK_K", design.rblock}};
    const std::string grid = fmt::format("({}, {}", grid_m * grid_n, mm.batch);
    KernelSource source;
    if (design.algorithm == "splitk" || (design.algorithm == "gemv" && design.split >= 2)) {
      // Split-K: programs (tile, batch, split) write partial products into a scratch buffer; a second kernel per
      // (tile, batch) sums them in order and runs the epilogue. For few output tiles over a deep K.
      int64_t chunk = (mm.k + design.split - 1) / design.split;
      chunk = (chunk + design.rblock - 1) / design.rblock * design.rblock;
      const int64_t splits = (mm.k + chunk - 1) / chunk;
      const int64_t partials = splits * mm.batch * mm.m * mm.n;
      values.text["chunk"] = std::to_string(chunk);
      values.text["splits"] = std::to_string(splits);
      values.text["partials"] = emitter_.PointerName(ScratchId(0));
      const std::string slice = mm.batched ? fmt::format("(split * {} + bindex)", mm.batch) : "split";
      values.text["partial_offset"] = fmt::format("(mindex + {} * {}) * {} + nindex", slice, mm.m, mm.n);
      wide_scratch_ = partials > kInt32Max;
      values.flags["partial"] = true;
      KernelSource partial = Finish("triton/matmul.py.mustache", values, fmt::format("{}, {})", grid, splits), blocks,
                                    kernel_.name + "_partial");
      values.flags["partial"] = false;
      values.flags["combine"] = true;
      source = Finish("triton/matmul.py.mustache", values, grid + ")", blocks);
      source.code = partial.code + "\n\n" + source.code;
      source.launches.insert(source.launches.begin(), partial.launches.front());
      source.scratch.push_back({partials, DType::kFloat32});
    } else {
      source = Finish("triton/matmul.py.mustache", values, grid + ")", blocks);
    }
    std::istringstream lines(loop);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("tl.load(") != std::string::npos) {
        source.a_tile_loads += line.find("mmask") != std::string::npos ? 1 : 0;
        source.b_tile_loads += line.find("nmask") != std::string::npos ? 1 : 0;
      }
    }
    return source;
  }

  // ---- scans ----------------------------------------------------------------------------------------------
  KernelSource WriteScan() {
    const ScanSpec& scan = *kernel_.scan;
    const TensorMeta& meta = MetaOf(graph_, scan.input);
    const int output = graph_.nodes.at(static_cast<size_t>(scan.node)).value;
    const DType out_type = MetaOf(graph_, output).dtype;
    const Index x = Index::Var("xindex", kernel_.rows);
    const Index r = Index::Var("rindex", kernel_.length);
    const auto index = AnchorIndex(meta.shape, {scan.dim}, x, r);
    const bool looped = kernel_.design.algorithm != "single";
    const bool sum = scan.kind == "sum";
    const std::string tl_acc = TritonDType(IsFloating(out_type) ? DType::kFloat32 : DType::kInt64);
    emitter_.Line(fmt::format("carry = tl.full([XBLOCK, 1], {}, {})", sum ? "0" : "1", tl_acc));
    if (looped) {
      emitter_.OpenScope(2);
    }
    const Operand input = emitter_.Emit(scan.input, index);
    emitter_.Line(fmt::format("element = tl.where(mask, ({}).to({}), {})", input.code, tl_acc, sum ? "0" : "1"));
    if (sum) {
      emitter_.Line("scanned = tl.cumsum(element, 1) + carry");
      emitter_.Line("carry = carry + tl.sum(element, 1)[:, None]");
    } else {
      emitter_.Line("scanned = tl.cumprod(element, 1) * carry");
      emitter_.Line("carry = carry * tl.reduce(element, 1, _egg_prod)[:, None]");
    }
    const Operand scanned{"scanned", out_type, false};
    emitter_.DefineRow(output, scanned, Linearize(index, meta.shape));
    StoreIfNeeded(output, index, scanned, "mask");
    WriteEpilogues(Linearize(index, meta.shape), output);
    if (looped) {
      const std::vector<std::string> body = emitter_.CloseScope();
      emitter_.Line(LoopHeader());
      emitter_.Line(TileLines(true));
      emitter_.Append(body);
    } else {
      // single tile: the tile lines go first
      std::vector<std::string> body = emitter_.CloseScope();
      emitter_.Line(TileLines(false));
      emitter_.Append(body);
    }
    templates::Values values;
    values.text["rows"] = std::to_string(kernel_.rows);
    values.text["length"] = std::to_string(kernel_.length);
    values.text["kind"] = scan.kind;
    values.text["algorithm"] = kernel_.design.algorithm;
    values.text["body"] = Join(emitter_.CloseScope());
    const int64_t xblock = kernel_.design.xblock;
    return Finish("triton/scan.py.mustache", values, fmt::format("(triton.cdiv({}, {}),)", kernel_.rows, xblock),
                  {{"XBLOCK", xblock}, {"RBLOCK", kernel_.design.rblock}});
  }

  const Graph& graph_;
  const KernelPlan& kernel_;
  const std::map<int, TensorMeta>& memory_;
  const std::map<int, TensorMeta>& layouts_;
  KernelEmitter emitter_;
  bool wide_scratch_ = false;  // a scratch buffer past int32 offsets (split-K partials)
  bool skip_dropped_tiles_ = false;  // the matmul prologue computes k_end: no K loop where a where drops the tile
};

}  // namespace

std::string Join(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) {
    out += line + "\n";
  }
  if (!out.empty()) {
    out.pop_back();
  }
  return out;
}

namespace {

// The value under any chain of views.
int StripViews(const Graph& graph, int value) {
  while (true) {
    const Node* node = graph.Producer(value);
    if (node == nullptr || ClassifyOp(node->op) != OpClass::kView || node->op == "aten.flip.default") {
      return value;
    }
    value = ViewSource(*node);
  }
}

}  // namespace

std::vector<std::pair<size_t, size_t>> OnlinePairs(const Graph& graph, const KernelPlan& kernel) {
  std::vector<std::pair<size_t, size_t>> pairs;
  const auto& specs = kernel.reductions;
  for (size_t k = 0; k < specs.size(); ++k) {
    if (specs[k].kind != "sum") {
      continue;
    }
    const Node* exp = graph.Producer(specs[k].input);
    if (exp == nullptr || exp->op != "aten.exp.default" || exp->args.empty() || exp->args[0].kind != Arg::Kind::kValue) {
      continue;
    }
    const Node* sub = graph.Producer(exp->args[0].value);
    if (sub == nullptr || sub->op != "aten.sub.Tensor" || sub->args.size() != 2 || sub->Kwarg("alpha") != nullptr ||
        sub->args[0].kind != Arg::Kind::kValue || sub->args[1].kind != Arg::Kind::kValue) {
      continue;
    }
    const int u = sub->args[0].value;
    const int m = StripViews(graph, sub->args[1].value);
    const auto* u_meta = &graph.values.at(static_cast<size_t>(u)).meta;
    const auto* sub_meta = &graph.values.at(static_cast<size_t>(sub->value)).meta;
    if (!*u_meta || !*sub_meta || (*u_meta)->shape != (*sub_meta)->shape) {
      continue;
    }
    for (size_t j = 0; j < k; ++j) {
      if (specs[j].kind == "max" && specs[j].outputs[0] == m && specs[j].input == u && specs[j].dims == specs[k].dims) {
        pairs.emplace_back(j, k);
        break;
      }
    }
  }
  return pairs;
}

TensorMeta DenseLayout(const TensorMeta& meta) {
  TensorMeta layout = meta;
  layout.stride = ContiguousStrides(meta.shape);
  layout.offset = 0;
  return layout;
}

std::vector<Index> AnchorIndex(const std::vector<int64_t>& shape, const std::vector<int64_t>& reduced,
                               const Index& x, const Index& r) {
  std::vector<int64_t> kept_shape;
  std::vector<int64_t> reduced_shape;
  std::vector<bool> is_reduced(shape.size(), false);
  for (int64_t d : reduced) {
    is_reduced[static_cast<size_t>(d)] = true;
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    (is_reduced[d] ? reduced_shape : kept_shape).push_back(shape[d]);
  }
  const auto kept_index = Delinearize(x, kept_shape);
  const auto reduced_index = Delinearize(r, reduced_shape);
  std::vector<Index> index(shape.size());
  size_t k = 0;
  size_t j = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    index[d] = is_reduced[d] ? reduced_index[j++] : kept_index[k++];
  }
  return index;
}

int FittingStages(const KernelDesign& design, const KernelSource& source) {
  // The operand ring in bytes per stage, fp32, against a budget below the 227 KB a block may use: Triton's
  // layout conversions and epilogue take about 0.4x the ring again (measured on sm_90: 4 A loads + 1 B load of
  // 128x32 and 32x64 tiles in 3 stages, a 216 KB ring, needed 296 KB).
  constexpr int64_t kStagedOperandBudget = 160 * 1024;
  const int64_t per_stage = (std::max(source.a_tile_loads, 1) * design.xblock +
                             std::max(source.b_tile_loads, 1) * design.yblock) * design.rblock * 4;
  const int64_t fitting = per_stage > 0 ? kStagedOperandBudget / per_stage : design.num_stages;
  return static_cast<int>(std::clamp<int64_t>(fitting, 1, design.num_stages));
}

KernelSource GenerateKernel(const Graph& graph, const KernelPlan& kernel, const std::map<int, TensorMeta>& memory,
                            const std::map<int, TensorMeta>& layouts) {
  if (kernel.kind == KernelKind::kRecurrent) {
    return GenerateRecurrentKernel(graph, kernel, memory, layouts);
  }
  if (kernel.kind == KernelKind::kAttention) {
    return GenerateAttentionKernel(graph, kernel, memory, layouts);
  }
  const bool rows = kernel.kind == KernelKind::kReduction || kernel.kind == KernelKind::kScan;
  const MaskSet masks = DotTiles(kernel) ? MaskSet::Tiles() : (rows ? MaskSet::Rows() : MaskSet::Flat());
  KernelWriter writer(graph, kernel, memory, layouts, masks);
  return writer.Write();
}

}  // namespace egg::expert
