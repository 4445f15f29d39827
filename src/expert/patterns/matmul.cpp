#include "expert/patterns/matmul.h"

#include <algorithm>
#include <numeric>

#include "expert/patterns/node_args.h"

namespace egg::expert {

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

// Operands and result of one type, float32 or a half type (products of half operands on the tensor cores,
// accumulated in float32); anything else (float64, mixed types) runs in PyTorch.
bool ProductTypes(DType a, DType b, DType out) {
  return a == b && b == out && (a == DType::kFloat32 || IsHalf(a));
}

// The convolution's windows (stride, padding and dilation: one value for every spatial dim, or one each) and
// spatial sizes into *conv; false where they do not give the output's size.
bool ParseWindows(const Node& node, const TensorMeta& in, const TensorMeta& weight, const TensorMeta& out,
                  ConvShape* conv) {
  const bool transposed = conv->transposed;
  const auto spatial = static_cast<size_t>(conv->spatial);
  auto ints = [&](size_t position) {
    auto values = node.args[position].AsInts().value_or(std::vector<int64_t>{});
    return values.size() == 1 ? std::vector<int64_t>(spatial, values[0]) : values;
  };
  conv->stride = ints(3);
  conv->padding = ints(4);
  conv->dilation = ints(5);
  const std::vector<int64_t> output_padding = transposed ? ints(7) : std::vector<int64_t>(spatial, 0);
  if (conv->stride.size() != spatial || conv->padding.size() != spatial || conv->dilation.size() != spatial ||
      output_padding.size() != spatial) {
    return false;
  }
  for (size_t s = 0; s < spatial; ++s) {
    conv->in_size.push_back(in.shape[s + 2]);
    conv->out_size.push_back(out.shape[s + 2]);
    conv->kernel.push_back(weight.shape[s + 2]);
    const int64_t span = conv->dilation[s] * (conv->kernel[s] - 1);
    const int64_t expected =
        transposed
            ? (conv->in_size[s] - 1) * conv->stride[s] - 2 * conv->padding[s] + span + output_padding[s] + 1
            : (conv->in_size[s] + 2 * conv->padding[s] - span - 1) / conv->stride[s] + 1;
    if (conv->stride[s] < 1 || conv->dilation[s] < 1 || conv->padding[s] < 0 ||
        expected != conv->out_size[s]) {
      return false;
    }
  }
  return true;
}

// The input, weight and output shapes' agreement (channels, groups) as a ConvShape, its windows included.
std::optional<ConvShape> ParseConvShape(const Graph& graph, const Node& node) {
  if (node.args.size() < 9 || node.args[0].kind != Arg::Kind::kValue ||
      node.args[1].kind != Arg::Kind::kValue ||
      (node.args[2].kind != Arg::Kind::kValue && node.args[2].kind != Arg::Kind::kNone) ||
      node.args[8].kind != Arg::Kind::kInt) {
    return std::nullopt;
  }
  const bool transposed = BoolArg(node, 6, "transposed", false);
  const auto& in = ValueAt(graph, node.args[0].value).meta;
  const auto& weight = ValueAt(graph, node.args[1].value).meta;
  const auto& out = ValueAt(graph, node.value).meta;
  if (!in || !weight || !out || !ProductTypes(in->dtype, weight->dtype, out->dtype) || in->shape.size() < 3 ||
      in->shape.size() > 5 || weight->shape.size() != in->shape.size() ||
      out->shape.size() != in->shape.size()) {
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
  if (!ParseWindows(node, *in, *weight, *out, &conv)) {
    return std::nullopt;
  }
  return conv;
}

// The convolution as a batch of GEMMs: one per group (transposed: per group and output phase), rows (image,
// output position), columns the group's output channels, k (input channel of the group, kernel offset).
std::optional<MatmulSpec> ConvolutionAsGemm(const Graph& graph, const Node& node, ConvShape conv) {
  const bool transposed = conv.transposed;
  const auto spatial = static_cast<size_t>(conv.spatial);
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
  spec.dtype = ValueAt(graph, node.value).meta->dtype;  // ParseConvShape checked it is there
  spec.conv = std::move(conv);
  return spec;
}

// aten.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups), fp32,
// bf16 or fp16.
// The weight is [out, in / groups, kernel...], transposed [in, out / groups, kernel...].
std::optional<MatmulSpec> ParseConvolution(const Graph& graph, const Node& node) {
  auto conv = ParseConvShape(graph, node);
  if (!conv) {
    return std::nullopt;
  }
  return ConvolutionAsGemm(graph, node, std::move(*conv));
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
  if (!a || !b || !out || !ProductTypes(a->dtype, b->dtype, out->dtype)) {
    return std::nullopt;
  }
  spec.a_k_major = graph.Producer(spec.a) == nullptr && a->IsContiguous();
  spec.b_n_major = graph.Producer(spec.b) == nullptr && b->IsContiguous();
  spec.dtype = out->dtype;
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
  spec.b_k_major = !spec.b_n_major && b->stride.size() == rank && b->stride[o] == 1 &&
                   b->stride[o + 1] == spec.k && (!spec.batched || b->stride[0] == spec.n * spec.k);
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
}  // namespace egg::expert
