#include "expert/design/legality.h"

#include <fmt/format.h>

#include <algorithm>

namespace egg::expert {
namespace {

bool IsPow2(int64_t value) { return value > 0 && (value & (value - 1)) == 0; }

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
  const int64_t tiles =
      ((mm.m + design.xblock - 1) / design.xblock) * ((mm.n + design.yblock - 1) / design.yblock) * mm.batch;
  int64_t split = 1;
  while (tiles * split * 2 <= kTargetPrograms && mm.k / (split * 2) >= kMinStepsPerSlice * design.rblock) {
    split *= 2;
  }
  return split;
}

bool DesignFits(const KernelPlan& kernel, const KernelDesign& design) {
  constexpr int64_t kMaxTile = 1 << 17;
  const bool warps_ok = design.num_warps >= 1 && design.num_warps <= 32 && IsPow2(design.num_warps);
  if (!warps_ok || design.num_stages < 1 || !IsPow2(design.xblock)) {
    return false;
  }
  if (kernel.kind == KernelKind::kMatmul && design.algorithm == Algorithm::kDirect) {
    return kernel.matmul && DirectConvolutionFits(*kernel.matmul) && design.xblock <= kMaxTile &&
           design.precision == Precision::kIeee;
  }
  if (kernel.kind == KernelKind::kAttention) {  // tl.dot tiles of query rows x keys, never ieee products
    constexpr int64_t kMinDot = 16;
    constexpr int64_t kMaxAttentionTile = 128;
    const auto fits = [&](int64_t side) {
      return IsPow2(side) && side >= kMinDot && side <= kMaxAttentionTile;
    };
    const bool tiles = fits(design.xblock) && fits(design.yblock);
    return kernel.attention && design.algorithm == Algorithm::kFlash && tiles &&
           (design.precision == Precision::kTf32 || design.precision == Precision::kTf32x3);
  }
  if (kernel.kind == KernelKind::kMatmul &&
      design.algorithm == Algorithm::kGemv) {  // fp32 FMAs: no precision to pick
    constexpr int64_t kMaxRows = 256;
    constexpr int64_t kMaxStep = 4096;
    const bool fits = kernel.matmul && MatVecFits(*kernel.matmul) && design.yblock == 1 &&
                      design.xblock <= kMaxRows && IsPow2(design.rblock) && design.rblock >= 16 &&
                      design.rblock <= kMaxStep && design.precision == Precision::kIeee;
    const bool split_ok =
        design.split == 0 || (design.split >= 2 && kernel.matmul->k >= design.split * design.rblock);
    return fits && split_ok;
  }
  const bool matmul = kernel.kind == KernelKind::kMatmul;
  if (matmul || kernel.kind == KernelKind::kRecurrent) {
    constexpr int64_t kMinDot = 16;  // tl.dot's smallest tile side
    constexpr int64_t kMaxMatmulTile = 256;
    constexpr int64_t kMaxStepTile = 128;  // a recurrent step tile: one accumulator per gate
    for (int64_t side : {design.xblock, design.yblock, design.rblock}) {
      if (!IsPow2(side) || side < kMinDot || side > (matmul ? kMaxMatmulTile : kMaxStepTile)) {
        return false;
      }
    }
    if (!matmul) {
      return design.algorithm == Algorithm::kSequential && IsDotPrecision(design.precision);
    }
    const bool splitk = design.algorithm == Algorithm::kSplitK && design.split >= 2 && kernel.matmul &&
                        !kernel.matmul->conv && kernel.matmul->k >= design.split * design.rblock;
    const bool nhwc = design.algorithm == Algorithm::kNhwc && kernel.matmul &&
                      ChannelsLastConvolutionFits(*kernel.matmul) &&
                      design.rblock <= ChannelsLastMaxStep(*kernel.matmul);
    const bool aligned =
        design.algorithm == Algorithm::kAligned && kernel.matmul && AlignedCopyFits(*kernel.matmul);
    return (design.algorithm == Algorithm::kTiled || splitk || nhwc || aligned) &&
           IsDotPrecision(design.precision);
  }
  if (kernel.kind == KernelKind::kReduction || kernel.kind == KernelKind::kScan) {
    if (!IsPow2(design.rblock) || design.xblock * design.rblock > kMaxTile) {
      return false;
    }
    const bool single = IsSingleTile(design.algorithm);
    if (kernel.scan && kernel.scan->kind == ScanKind::kSort && !single) {
      return false;  // a bitonic sort of the whole row in one tile
    }
    if (single && design.rblock < kernel.length) {
      return false;
    }
    if (design.algorithm == Algorithm::kSplit && (!kernel.splittable || design.split < 1)) {
      return false;
    }
    const std::set<Algorithm> algorithms =
        kernel.kind == KernelKind::kScan ? std::set<Algorithm>{Algorithm::kSingle, Algorithm::kBlocked}
                                         : std::set<Algorithm>{Algorithm::kPersistent, Algorithm::kLooped,
                                                               Algorithm::kOnline, Algorithm::kSplit};
    return algorithms.count(design.algorithm) != 0;
  }
  return design.xblock <= kMaxTile;
}

std::string DesignRule(const KernelPlan& kernel) {
  const std::string common = "num_warps a power of two in [1, 32], num_stages >= 1, xblock a power of two";
  switch (kernel.kind) {
    case KernelKind::kMatmul:
      return common +
             "; matmul: algorithm tiled, splitk (split >= 2 and K >= split * rblock), nhwc, aligned, gemv or "
             "direct where the product allows it, xblock/yblock/rblock powers of two in [16, 256], precision "
             "ieee, tf32 or tf32x3";
    case KernelKind::kAttention:
      return common +
             "; attention: algorithm flash, xblock and yblock powers of two in [16, 128], precision tf32 "
             "or tf32x3";
    case KernelKind::kRecurrent:
      return common + "; recurrent: algorithm sequential, xblock/yblock/rblock powers of two in [16, 128]";
    default:
      return common + "; " + KernelKindName(kernel.kind) +
             ": an algorithm of its kind, rblock a power of two covering the row where the algorithm is "
             "persistent";
  }
}

std::string UnwritableDesign(const KernelPlan& kernel, const KernelDesign& design) {
  if (kernel.kind != KernelKind::kMatmul) {
    return "";
  }
  if (!IsPow2(design.xblock)) {
    return fmt::format("xblock {} is not a power of two", design.xblock);
  }
  if (DotTiles(kernel, design) && (!IsPow2(design.yblock) || !IsPow2(design.rblock))) {
    return fmt::format(
        "algorithm {} takes tl.dot tiles, but yblock {} and rblock {} are not both powers of two",
        NameOf(design.algorithm), design.yblock, design.rblock);
  }
  if (design.algorithm == Algorithm::kSplitK && design.split < 2) {
    return fmt::format("algorithm splitk needs split >= 2, not {}", design.split);
  }
  return "";
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
  if (!DesignFits(kernel, design)) {
    return false;
  }
  if (DotTiles(kernel, design)) {
    const int64_t threads = int64_t{kThreadsPerWarp} * design.num_warps;
    const int64_t ring = design.num_stages * (design.xblock + design.yblock) * design.rblock *
                         StagedOperandBytes(*kernel.matmul, design);
    // a mat-vec program holds its rows' products elementwise: rows x K step
    const int64_t accumulator =
        design.xblock * (design.algorithm == Algorithm::kGemv ? design.rblock : design.yblock);
    return accumulator <= threads * kMaxAccumulatorPerThread && ring <= kMaxMatmulSharedBytes;
  }
  if (kernel.kind == KernelKind::kAttention) {  // scores and output tiles in registers, K and V tiles staged
    const int64_t threads = int64_t{kThreadsPerWarp} * design.num_warps;
    const int64_t d = std::max(kMinBlock, NextPowerOfTwo(kernel.attention->d));
    const int64_t dv = std::max(kMinBlock, NextPowerOfTwo(kernel.attention->dv));
    const int64_t shared = (design.xblock * d + design.num_stages * design.yblock * (d + dv)) * 4;
    return design.xblock * (design.yblock + dv) <= threads * kMaxAccumulatorPerThread &&
           shared <= kMaxMatmulSharedBytes;
  }
  if (kernel.kind == KernelKind::kRecurrent) {  // one accumulator tile per gate
    const int64_t threads = int64_t{kThreadsPerWarp} * design.num_warps;
    return kernel.recurrent->Gates() * design.xblock * design.yblock <= threads * kMaxAccumulatorPerThread;
  }
  const int64_t tile = design.xblock * (IsRowKernel(kernel) ? design.rblock : 1);
  const int64_t threads = int64_t{kThreadsPerWarp} * design.num_warps;
  return tile <= threads * kMaxElementsPerThread && tile * 4 >= threads;
}

int64_t StagedOperandBytes(const MatmulSpec& mm, const KernelDesign& design) {
  const bool copied = design.algorithm == Algorithm::kAligned || design.algorithm == Algorithm::kNhwc;
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
