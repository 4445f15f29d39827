#include "expert/design/defaults.h"

#include <algorithm>

#include "expert/design/legality.h"

namespace egg::expert {

namespace {

constexpr int64_t kPointwiseBlock = 1024;
constexpr int64_t kTileElements = 4096;
constexpr int64_t kLargeTileElements = 16384;
constexpr int64_t kLoopBlock = 2048;
constexpr int64_t kOuterXBlock = 64;
constexpr int64_t kOuterRBlock = 16;
constexpr int64_t kOuterPersistentLength = 256;
constexpr int64_t kPoolBlock = 256;
constexpr int64_t kSplitTargetPrograms = 1024;
constexpr int64_t kSplitBlock = 1024;
constexpr int kWideWarps = 8;

// The reduced (scanned) dimensions are the innermost of the anchor, so r walks contiguous memory.
bool InnerReduction(const KernelPlan& kernel) {
  for (size_t d = kernel.shape.size(); d-- > 0;) {
    if (kernel.shape[d] == 1) {
      continue;
    }
    return std::find(kernel.reduced.begin(), kernel.reduced.end(), static_cast<int64_t>(d)) !=
           kernel.reduced.end();
  }
  return true;
}

constexpr int64_t kConvMaxRows = 256;  // BLOCK_M of a convolution with a narrow N tile
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

KernelDesign RowDesign(const KernelPlan& kernel, Algorithm algorithm) {
  const int64_t rows = NextPowerOfTwo(std::max<int64_t>(kernel.rows, 1));
  const int64_t length = NextPowerOfTwo(std::max<int64_t>(kernel.length, 1));
  const bool inner = InnerReduction(kernel);
  KernelDesign design;
  design.algorithm = algorithm;
  if (IsSingleTile(algorithm)) {
    design.rblock = length;
    design.xblock = std::min(rows, std::max<int64_t>(1, kTileElements / length));
  } else if (algorithm == Algorithm::kSplit) {
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

// A matrix product or convolution: direct, gemv, tiled, nhwc, splitk or aligned by seed and shape.
KernelDesign MatmulDesign(const MatmulSpec& mm, int seed, Precision precision) {
  KernelDesign design;
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
  // Half products (bf16/fp16 operands straight into tl.dot) on the H100, 4096^3 bf16 (bench/results/
  // h100-bf16-sample): 128x256x64 of 8 warps 755 TFLOP/s (cuBLAS 807), 256x128x64 701, 128x128x64 of 4 warps 620;
  // the float32 tiles' 128x128x32 538. Staged in the half type, three stages of the widest fit.
  static const int64_t kHalfTiles[3][5] = {{128, 256, 64, 8, 3}, {128, 128, 64, 4, 3}, {256, 128, 64, 8, 3}};
  const Precision products = DotPrecision(precision);
  const auto& tiles = mm.conv                          ? kConvTiles
                      : IsHalf(mm.dtype)               ? kHalfTiles
                      : products == Precision::kTf32   ? kTf32Tiles
                      : products == Precision::kTf32x3 ? kTf32x3Tiles
                                                       : kIeeeTiles;
  const int64_t* tile = tiles[seed % 3];
  if (seed == 0 && DirectConvolutionFits(mm)) {  // seeds 1 and 2 keep the implicit GEMM to measure against
    design.algorithm = Algorithm::kDirect;
    design.xblock = std::min(kPointwiseBlock, NextPowerOfTwo(std::max<int64_t>(mm.m * mm.n * mm.batch, 1)));
    design.precision = Precision::kIeee;
    return design;
  }
  if (seed == 0 && MatVecFits(mm)) {  // seeds 1 and 2 keep tl.dot tiles to measure against
    design.algorithm = Algorithm::kGemv;
    design.xblock = std::min(kMatVecRows, NextPowerOfTwo(mm.m));
    design.yblock = 1;
    design.rblock = std::clamp<int64_t>(NextPowerOfTwo(mm.k), 16, kMatVecStep);
    design.num_warps = 4;
    design.num_stages = 3;
    design.precision = Precision::kIeee;
    const int64_t split = SplitKFactor(mm, design);
    design.split = split > 1 ? split : 0;
    return design;
  }
  design.algorithm = Algorithm::kTiled;
  design.yblock = std::min(tile[1], std::max<int64_t>(16, NextPowerOfTwo(mm.n)));
  // A convolution's few output channels per group leave the N tile narrow: its rows take the tile area
  // back (fewer programs and K steps, which is also what the interpreter pays for).
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
    design.algorithm = Algorithm::kNhwc;
    design.rblock = std::min(design.rblock, ChannelsLastMaxStep(mm));
    return design;
  }
  if (seed != 1) {  // seed 1 keeps one program per output tile: the structural alternative
    const int64_t split = SplitKFactor(mm, design);
    design.algorithm = split > 1 ? Algorithm::kSplitK : Algorithm::kTiled;
    design.split = split > 1 ? split : 0;
    // Misaligned operand rows and enough work that two copies of the operands (one read and one write of
    // each) cost little beside the product: seed 0 copies them aligned; seed 1 keeps them in place.
    constexpr int64_t kAlignedCopyMinWork = int64_t{1} << 30;  // multiply-adds
    if (seed == 0 && split == 1 && AlignedCopyFits(mm) &&
        mm.batch * mm.m * mm.n * mm.k >= kAlignedCopyMinWork) {
      design.algorithm = Algorithm::kAligned;
    }
  }
  return design;
}

// A recurrent layer stack: one sequential kernel.
KernelDesign RecurrentDesign(const RecurrentSpec& rnn, Precision precision) {
  KernelDesign design;
  // Programs per batch block share its hidden units, 16 each (a step's work spread over many SMs, with a
  // barrier between steps); the K step of h @ W_hh^T up to 64. Products in ieee unless the candidate's
  // precision says otherwise.
  design.algorithm = Algorithm::kSequential;
  design.xblock = std::clamp<int64_t>(NextPowerOfTwo(rnn.batch), kRecurrentMinBlock, kRecurrentMaxBatchBlock);
  design.yblock = kRecurrentMinBlock;  // hidden units per program: many programs share a step
  design.rblock =
      std::clamp<int64_t>(NextPowerOfTwo(rnn.hidden), kRecurrentMinBlock, kRecurrentMaxHiddenBlock);
  // tf32x3 is unmeasured in the time loop
  design.precision = precision == Precision::kTf32 ? Precision::kTf32 : Precision::kIeee;
  return design;
}

// Flash attention: 64 query rows x 64 keys a step (seed 2: 128 rows, 8 warps).
KernelDesign AttentionDesign(const AttentionSpec& at, int seed) {
  KernelDesign design;
  const int64_t rows = seed == 2 ? 2 * kAttentionRows : kAttentionRows;
  design.algorithm = Algorithm::kFlash;
  design.xblock = std::clamp<int64_t>(NextPowerOfTwo(at.lq), kRecurrentMinBlock, rows);
  // a head dim over 128 (K and V tiles of 256 columns): half the keys a step, no second stage in flight
  const bool wide = std::max(at.d, at.dv) > 2 * kAttentionKeys;
  design.yblock = std::clamp<int64_t>(NextPowerOfTwo(at.lk), kRecurrentMinBlock,
                                      wide ? kAttentionKeys / 2 : kAttentionKeys);
  design.num_warps = seed == 2 ? 8 : 4;
  design.num_stages = wide ? 1 : 2;
  design.precision = Precision::kTf32x3;  // never ieee: a flash loop of FMA products is register-bound
  return design;
}

// A reduction kernel: split, persistent, looped or online by seed and row shape.
KernelDesign ReductionDesign(const KernelPlan& kernel, int seed) {
  const int64_t length = NextPowerOfTwo(std::max<int64_t>(kernel.length, 1));
  // Inner rows fit a tile up to kTileElements; outer ones (the row strided, neighbouring rows contiguous) fit
  // while a tile still holds enough rows side by side for coalesced loads.
  const bool fits = InnerReduction(kernel) ? length <= kTileElements : length <= kOuterPersistentLength;
  const bool split_worthy =
      kernel.splittable && kernel.rows < kSplitRowLimit && kernel.length >= kSplitMinLength;
  const Algorithm streamed = kernel.online_candidate ? Algorithm::kOnline : Algorithm::kLooped;
  Algorithm algorithm = Algorithm::kLooped;
  if (seed == 0) {
    algorithm = split_worthy ? Algorithm::kSplit : (fits ? Algorithm::kPersistent : streamed);
  } else if (seed == 1) {
    if (split_worthy || fits) {
      algorithm = Algorithm::kLooped;
    } else {
      algorithm = length <= kLargeTileElements && InnerReduction(kernel) ? Algorithm::kPersistent
                                                                         : Algorithm::kLooped;
    }
  } else {
    algorithm = kernel.online_candidate ? Algorithm::kOnline
                                        : (kernel.splittable ? Algorithm::kSplit : Algorithm::kLooped);
  }
  KernelDesign design = RowDesign(kernel, algorithm);
  if (seed == 2 && algorithm == Algorithm::kLooped) {
    design.rblock = std::max<int64_t>(design.rblock / 4, 1);
  }
  return design;
}

}  // namespace

KernelDesign DefaultDesign(const KernelPlan& kernel, int seed, Precision precision) {
  KernelDesign design;
  switch (kernel.kind) {
    case KernelKind::kPointwise:
      design.algorithm = Algorithm::kFlat;
      design.xblock = std::min(kPointwiseBlock, NextPowerOfTwo(std::max<int64_t>(Product(kernel.shape), 1)));
      return design;
    case KernelKind::kPool:
      design.algorithm = Algorithm::kDirect;
      design.xblock = std::min(kPoolBlock, NextPowerOfTwo(std::max<int64_t>(Product(kernel.shape), 1)));
      return design;
    case KernelKind::kScan: {
      const int64_t length = NextPowerOfTwo(std::max<int64_t>(kernel.length, 1));
      // A sort holds its row in one tile; a scan's seeds alternate between one tile and a loop of tiles.
      const bool sort = kernel.scan && kernel.scan->kind == ScanKind::kSort;
      const bool single = sort || (length <= kTileElements) == (seed % 2 == 0);
      return RowDesign(kernel,
                       single && length <= kLargeTileElements ? Algorithm::kSingle : Algorithm::kBlocked);
    }
    case KernelKind::kMatmul:
      return MatmulDesign(*kernel.matmul, seed, precision);
    case KernelKind::kRecurrent:
      return RecurrentDesign(*kernel.recurrent, precision);
    case KernelKind::kAttention:
      return AttentionDesign(*kernel.attention, seed);
    case KernelKind::kReduction:
      break;
  }
  return ReductionDesign(kernel, seed);
}

Precision MatmulPrecisionFor(double tol) {
  constexpr double kTf32Tolerance = 1e-3;
  // Below it, three tf32 products per element (float32 accuracy on the tensor cores: 3e-7 relative error on
  // a 4096-deep product, against ieee's 8e-7) where seed 1 keeps ieee FMA products to measure against.
  return tol >= kTf32Tolerance ? Precision::kTf32 : Precision::kTf32x3;
}
}  // namespace egg::expert
