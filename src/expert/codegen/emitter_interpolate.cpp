// The emitter's interpolation: upsample_nearest{1,2,3}d and upsample_{linear1d,bilinear2d,trilinear3d} read
// their input at source positions computed from the output's, with PyTorch's scales (ATen's UpSample.h).
#include <fmt/format.h>

#include <cmath>

#include "expert/codegen/emitter.h"
#include "expert/patterns/node_args.h"

namespace egg::expert {
namespace {

constexpr size_t kMaxSpatialDims = 3;

struct Interpolation {
  bool linear = false;
  bool align_corners = false;
  std::vector<std::optional<double>> scales;  // per spatial dim: the scale factor the caller gave, if any
};

std::optional<double> ScaleArg(const Arg* arg) {
  if (arg == nullptr || !arg->IsNumber()) {
    return std::nullopt;
  }
  return arg->AsDouble();
}

// The op's arguments: .vec overloads (input, output_size, [align_corners,] scale_factors), .default ones
// (input, output_size, [align_corners,] scales_d...).
Interpolation ParseInterpolation(const Node& node, size_t dims) {
  Interpolation spec;
  spec.linear = node.op.find("linear") != std::string::npos;
  size_t next = 2;
  if (spec.linear) {
    const Arg* align = node.ArgAt(next++, "align_corners");
    spec.align_corners = align != nullptr && align->kind == Arg::Kind::kBool && align->b;
  }
  spec.scales.assign(dims, std::nullopt);
  const bool vec = node.op.size() > 4 && node.op.compare(node.op.size() - 4, 4, ".vec") == 0;
  const Arg* factors = vec ? node.ArgAt(next, "scale_factors") : nullptr;
  for (size_t d = 0; d < dims; ++d) {
    if (vec && factors != nullptr && factors->kind == Arg::Kind::kList && d < factors->list.size()) {
      spec.scales[d] = ScaleArg(&factors->list[d]);
    } else if (!vec) {
      spec.scales[d] = ScaleArg(node.ArgAt(next + d));
    }
  }
  return spec;
}

// ATen's compute_scales_value / area_pixel_compute_scale, rounded to float32 as its float kernels use it.
float SourceScale(const Interpolation& spec, std::optional<double> scale, int64_t in, int64_t out) {
  if (spec.linear && spec.align_corners) {
    return out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0F;
  }
  if (scale && *scale > 0) {
    return static_cast<float>(1.0 / *scale);
  }
  return static_cast<float>(in) / static_cast<float>(out);
}

std::string Float32Literal(float value) { return FloatLiteral(std::stod(fmt::format("{:.9g}", value))); }

}  // namespace

// PyTorch's nearest source index: the output index itself, half of it at twice the size, else
// min(floor(index * scale), in - 1) in float32; symbolic where that is exact (an integer scale, or the
// inverse of a power of two), computed at run time otherwise.
Index KernelEmitter::NearestSource(const Index& at, float scale, int64_t in, int64_t out) {
  if (out == in) {
    return at;
  }
  if (out == 2 * in) {
    return at.FloorDiv(2);
  }
  const float inverse = 1.0F / scale;
  const bool integer = std::floor(scale) == scale && at.Hi() * static_cast<int64_t>(scale) <= in - 1;
  const bool power_of_two =
      std::floor(inverse) == inverse && std::exp2(std::round(std::log2(inverse))) == inverse;
  if (integer) {
    return at * static_cast<int64_t>(scale);
  }
  if (power_of_two && at.Hi() / static_cast<int64_t>(inverse) <= in - 1) {
    return at.FloorDiv(static_cast<int64_t>(inverse));
  }
  const Operand source = Bind(fmt::format("tl.minimum(tl.floor({} * {}).to(tl.int32), {})", FloatPosition(at),
                                          Float32Literal(scale), in - 1),
                              DType::kInt32);
  BindRuntime(source.code, LanesOf(at));
  return Index::Runtime(source.code, 0, in - 1);
}

std::string KernelEmitter::FloatPosition(const Index& at) const {
  if (at.IsConstant() && !masks_.tile_var.empty()) {  // a size-1 dim: a literal has no .to(), give it a tile
    return fmt::format("(({}) + tl.zeros_like({})).to(tl.float32)", at.Code(), masks_.tile_var);
  }
  return fmt::format("({}).to(tl.float32)", at.Code());
}

Operand KernelEmitter::Interpolate(const Node& node, const Value& out, const std::vector<Index>& index) {
  const int source = ViewSource(node);
  const auto& in_shape = ShapeOf(graph_, source);
  const auto& out_shape = out.meta->shape;
  if (in_shape.size() != out_shape.size() || in_shape.size() < 3 || in_shape.size() > 2 + kMaxSpatialDims) {
    throw NotFusable(node.name + ": unsupported interpolation");
  }
  const size_t dims = in_shape.size() - 2;
  const Interpolation spec = ParseInterpolation(node, dims);
  if (spec.linear && !IsFloating(out.meta->dtype)) {
    throw NotFusable(node.name + ": linear interpolation of integers");
  }
  std::vector<Index> at = index;
  if (!spec.linear) {
    for (size_t d = 0; d < dims; ++d) {
      const size_t k = d + 2;
      at[k] = NearestSource(index[k], SourceScale(spec, spec.scales[d], in_shape[k], out_shape[k]),
                            in_shape[k], out_shape[k]);
    }
    return Emit(source, at);
  }
  if (in_shape == out_shape) {  // ATen copies when every size is kept, whatever scale factor was given
    return Emit(source, at);
  }
  std::vector<LinearTap> taps;
  for (size_t d = 0; d < dims; ++d) {
    const size_t k = d + 2;
    taps.push_back(Tap(index[k], SourceScale(spec, spec.scales[d], in_shape[k], out_shape[k]),
                       spec.align_corners, in_shape[k]));
  }
  return Blend(source, at, taps, 0, out.meta->dtype);
}

// ATen's linear source position along one dim: scale * index (align_corners) or scale * (index + 0.5) - 0.5
// clamped at 0, in float32; its two neighbours (the upper one clamped to the last element) and their weights.
KernelEmitter::LinearTap KernelEmitter::Tap(const Index& at, float scale, bool align_corners, int64_t in) {
  const std::string position = FloatPosition(at);
  const std::string literal = Float32Literal(scale);
  const Operand real =
      Bind(align_corners ? fmt::format("{} * {}", position, literal)
                         : fmt::format("tl.maximum(({} + 0.5) * {} - 0.5, 0.0)", position, literal),
           DType::kFloat32);
  const Operand lo = Bind(fmt::format("tl.minimum({}.to(tl.int32), {})", real.code, in - 1), DType::kInt32);
  const Operand hi = Bind(fmt::format("tl.minimum({} + 1, {})", lo.code, in - 1), DType::kInt32);
  const Operand hi_weight = Bind(fmt::format("{} - {}.to(tl.float32)", real.code, lo.code), DType::kFloat32);
  const Operand lo_weight = Bind(fmt::format("1.0 - {}", hi_weight.code), DType::kFloat32);
  const std::set<std::string> lanes = LanesOf(at);
  BindRuntime(lo.code, lanes);
  BindRuntime(hi.code, lanes);
  return LinearTap{Index::Runtime(lo.code, 0, in - 1), Index::Runtime(hi.code, 0, in - 1), lo_weight.code,
                   hi_weight.code};
}

// The weighted sum over the 2^dims corners, one dim at a time (ATen's order: the outer dim's weights last).
Operand KernelEmitter::Blend(int source, std::vector<Index> at, const std::vector<LinearTap>& taps,
                             size_t dim, DType dtype) {
  if (dim == taps.size()) {
    return Emit(source, at);
  }
  const LinearTap& tap = taps[dim];
  at[dim + 2] = tap.lo;
  const Operand lo = Blend(source, at, taps, dim + 1, dtype);
  at[dim + 2] = tap.hi;
  const Operand hi = Blend(source, at, taps, dim + 1, dtype);
  return Bind(fmt::format("({} * {} + {} * {})", tap.lo_weight, lo.code, tap.hi_weight, hi.code), dtype);
}

}  // namespace egg::expert
