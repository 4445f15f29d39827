#include "expert/design/legality.h"

#include <fmt/format.h>

#include <algorithm>

#include "expert/families/family.h"

namespace egg::expert {
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
  if (!mm.conv) {
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

bool KMajorCopyFits(const MatmulSpec& mm, Precision precision) {
  return !mm.conv && mm.n > 1 && mm.dtype == DType::kFloat32 &&
         (precision == Precision::kTf32 || precision == Precision::kTf32x3);
}

int64_t ColumnAxis(const MatmulSpec& mm, size_t rank) { return mm.conv ? 1 : static_cast<int64_t>(rank) - 1; }

bool ReducesColumns(const Graph& graph, const KernelPlan& kernel, const ReductionSpec& spec) {
  if (kernel.kind != KernelKind::kMatmul || !kernel.matmul) {
    return false;
  }
  const MatmulSpec& mm = *kernel.matmul;
  const bool kind = spec.kind == ReductionKind::kSum || spec.kind == ReductionKind::kMean ||
                    spec.kind == ReductionKind::kMax || spec.kind == ReductionKind::kMin ||
                    IsVariance(spec.kind);
  const std::vector<int64_t>& shape = kernel.shape;
  const int64_t axis = ColumnAxis(mm, shape.size());
  if (!kind || (mm.conv && mm.conv->groups != 1) || mm.n < 2 || mm.n > kMaxReducedColumns || axis < 0 ||
      shape.at(static_cast<size_t>(axis)) != mm.n) {
    return false;
  }
  const Value& input = graph.values.at(static_cast<size_t>(spec.input));
  if (!input.meta || input.meta->shape.empty()) {
    return false;
  }
  if (mm.conv) {
    return input.meta->shape == shape && spec.dims == std::vector<int64_t>{axis};
  }
  // a matrix product's rows may be viewed as more dims (a linear layer over [batch, tokens, features])
  const std::vector<int64_t>& viewed = input.meta->shape;
  const auto last = static_cast<int64_t>(viewed.size()) - 1;
  return viewed.back() == mm.n && Product(viewed) == Product(shape) &&
         spec.dims == std::vector<int64_t>{last};
}

int64_t SplitKFactor(const MatmulSpec& mm, const KernelDesign& design) {
  // Split K when the output tiles leave most of the GPU idle and K is deep enough that every slice still runs
  // several K steps: a power of two of slices bringing the programs near two waves of an H200's 132 SMs.
  constexpr int64_t kTargetPrograms = 264;
  constexpr int64_t kMinStepsPerSlice = 8;
  if (mm.conv || design.xblock <= 0 || design.yblock <= 0 || design.rblock <= 0) {
    return 1;
  }
  const int64_t tiles =
      ((mm.m + design.xblock - 1) / design.xblock) * ((mm.n + design.yblock - 1) / design.yblock) * mm.batch;
  int64_t split = 1;
  while (tiles * split * 2 <= kTargetPrograms && mm.k / (split * 2) >= kMinStepsPerSlice * design.rblock) {
    split *= 2;
  }
  return split;
}

bool DesignFits(const KernelPlan& kernel, const KernelDesign& design) {
  const bool warps_ok = design.num_warps >= 1 && design.num_warps <= 32 && IsPowerOfTwo(design.num_warps);
  if (!warps_ok || design.num_stages < 1 || !IsPowerOfTwo(design.xblock)) {
    return false;
  }
  return FamilyOf(kernel.kind).Fits(kernel, design);
}

std::string DesignRule(const KernelPlan& kernel) {
  return "num_warps a power of two in [1, 32], num_stages >= 1, xblock a power of two; " +
         FamilyOf(kernel.kind).Rule();
}

std::string UnwritableDesign(const KernelPlan& kernel, const KernelDesign& design) {
  return FamilyOf(kernel.kind).Unwritable(kernel, design);
}

void RequireLegalDesign(const KernelPlan& kernel) {
  const std::string problem = UnwritableDesign(kernel, kernel.design);
  if (problem.empty()) {
    return;
  }
  throw IllegalDesign(fmt::format("kernel {}: the design {} cannot be written: {} (DesignFits: {})",
                                  kernel.name, kernel.design.ToJson().dump(), problem, DesignRule(kernel)));
}

bool WorthMeasuring(const KernelPlan& kernel, const KernelDesign& design) {
  return DesignFits(kernel, design) && FamilyOf(kernel.kind).FitsResources(kernel, design);
}

int64_t StagedOperandBytes(const MatmulSpec& mm, const KernelDesign& design) {
  const bool copied = design.algorithm == Algorithm::kAligned || design.algorithm == Algorithm::kKMajor ||
                      IsChannelsLast(design.algorithm);
  return copied ? DTypeBytes(DType::kFloat32) : DTypeBytes(mm.dtype);
}

int FittingStages(const KernelDesign& design, int a_tile_loads, int b_tile_loads, int64_t element_bytes) {
  // The operand ring in bytes per stage (elements as loaded) against a budget below the 227 KB a block may use: Triton's
  // layout conversions and epilogue take about 0.4x the ring again (measured on sm_90: 4 A loads + 1 B load
  // of 128x32 and 32x64 tiles in 3 stages, a 216 KB ring, needed 296 KB).
  constexpr int64_t kStagedOperandBudget = 160 * 1024;
  const int64_t per_stage =
      (std::max(a_tile_loads, 1) * design.xblock + std::max(b_tile_loads, 1) * design.yblock) *
      design.rblock * element_bytes;
  const int64_t fitting = per_stage > 0 ? kStagedOperandBudget / per_stage : design.num_stages;
  return static_cast<int>(std::clamp<int64_t>(fitting, 1, design.num_stages));
}
}  // namespace egg::expert
