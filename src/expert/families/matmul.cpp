// Matrix products and convolutions: tl.dot tiles over a K loop (tiled), split K (splitk), over aligned copies
// of the operands (aligned), channels-last implicit GEMM (nhwc), rows times a vector (gemv), or one output
// element per lane for small-group convolutions (direct); bias and elementwise consumers on the accumulator.
#include <fmt/format.h>

#include <algorithm>

#include "expert/codegen/kernel_codegen.h"
#include "expert/design/defaults.h"
#include "expert/design/legality.h"
#include "expert/families/common.h"

namespace egg::expert {
namespace {

constexpr int64_t kConvMaxRows = 256;  // BLOCK_M of a convolution with a narrow N tile
// Output tiles a wide (128x256) tile must still make to be the in-place product's seed: about a wave of an
// H100's or H200's 132 SMs.
constexpr int64_t kMinWideTiles = 128;
// A mat-vec program: 16 rows x a K step of 512 products held elementwise (64 fp32 registers a thread at 4
// warps), summed once after the K loop.
constexpr int64_t kMatVecRows = 16;
constexpr int64_t kMatVecStep = 512;
// The longest K step of a mat-vec program (its products held elementwise: rows x step registers).
constexpr int64_t kMaxMatVecStep = 2048;

// Sets a seed's tile {BLOCK_M, BLOCK_N, BLOCK_K, warps, stages}, no side wider than the problem's (16 at
// least).
void ApplyTile(const MatmulSpec& mm, const int64_t* tile, KernelDesign& design) {
  design.yblock = std::min(tile[1], std::max<int64_t>(16, NextPowerOfTwo(mm.n)));
  // A convolution's few output channels per group leave the N tile narrow: its rows take the tile area
  // back (fewer programs and K steps, which is also what the interpreter pays for).
  const int64_t rows = mm.conv ? std::min(kConvMaxRows, tile[0] * tile[1] / design.yblock) : tile[0];
  design.xblock = std::min(rows, std::max<int64_t>(16, NextPowerOfTwo(mm.m)));
  design.rblock = std::min(tile[2], std::max<int64_t>(16, NextPowerOfTwo(mm.k)));
  design.num_warps = static_cast<int>(tile[3]);
  design.num_stages = static_cast<int>(tile[4]);
}

// The output tiles of a product in `tile`'s {BLOCK_M, BLOCK_N}.
int64_t WideTiles(const MatmulSpec& mm, const int64_t* tile) {
  return mm.batch * ((mm.m + tile[0] - 1) / tile[0]) * ((mm.n + tile[1] - 1) / tile[1]);
}

// The forms whose epilogue holds a whole output tile of one program, so that it can reduce the tile's
// columns: not split K (its combine launch sums slices per tile), a mat-vec product or a direct convolution
// (one output element per lane).
bool ReducingForm(Algorithm algorithm) {
  return algorithm != Algorithm::kSplitK && algorithm != Algorithm::kGemv && algorithm != Algorithm::kDirect;
}

// Whether `design` finishes the kernel's reductions of the product's columns (ReducesColumns), if it has any:
// one tile spans the columns (BLOCK_N >= N) in a reducing form.
bool SpansColumns(const KernelPlan& kernel, const KernelDesign& design) {
  return kernel.reductions.empty() || (design.yblock >= kernel.matmul->n && ReducingForm(design.algorithm));
}

// Whether a design's tiles fit a program: its accumulator in the warps' registers, its staged operand ring in
// shared memory.
bool MatmulFits(const KernelPlan& kernel, const KernelDesign& design) {
  if (!DotTiles(kernel, design)) {
    return TileFitsThreads(design.xblock, design);
  }
  const int64_t threads = int64_t{kThreadsPerWarp} * design.num_warps;
  const int64_t ring = design.num_stages * (design.xblock + design.yblock) * design.rblock *
                       StagedOperandBytes(*kernel.matmul, design);
  // a mat-vec program holds its rows' products elementwise: rows x K step
  const int64_t accumulator =
      design.xblock * (design.algorithm == Algorithm::kGemv ? design.rblock : design.yblock);
  return accumulator <= threads * kMaxAccumulatorPerThread && ring <= kMaxMatmulSharedBytes;
}

// Seed 0's operands for a product of one program per tile: with enough work that two copies of the operands
// (one read and one write of each) cost little beside the product, B transposed K-major for tensor-core
// float32 products (tf32, tf32x3) where it is known N-contiguous (not an nn.Linear weight, K-major already),
// else aligned where the rows are misaligned; seed 1 keeps them in place.
void SeedOperandLayout(const MatmulSpec& mm, Precision products, KernelDesign& design) {
  constexpr int64_t kCopyMinWork = int64_t{1} << 30;  // multiply-adds
  if (mm.batch * mm.m * mm.n * mm.k < kCopyMinWork) {
    return;
  }
  // tf32 over K-contiguous operands: 128x256x32 of 8 warps, 3 stages, the fastest of five tiles at 4096^3
  // on the H100 (0.398 ms, cuBLAS TF32 0.354); end to end on 1_1, 0.48 ms against 0.57 ms for the 128x128
  // tile of 4 warps the search kept from seed 1 (bench/results/h100-fp32-precision, h100-gemm-search).
  static const int64_t kKMajorTf32Tile[5] = {128, 256, 32, 8, 3};
  if (KMajorCopyFits(mm, products) && mm.b_n_major) {
    design.algorithm = Algorithm::kKMajor;
    if (products == Precision::kTf32) {
      ApplyTile(mm, kKMajorTf32Tile, design);
    }
  } else if (AlignedCopyFits(mm)) {
    design.algorithm = Algorithm::kAligned;
  } else if (products == Precision::kTf32 && mm.a_k_major && mm.b_k_major &&
             WideTiles(mm, kKMajorTf32Tile) >= kMinWideTiles) {
    // Both read in place along K, as kmajor reads its copy (1_17, nn.Linear's weight): the same tile where it
    // still makes most of a wave of programs (an MLP's 128-row batch keeps the table's smaller tiles).
    ApplyTile(mm, kKMajorTf32Tile, design);
  }
}

class MatmulFamily : public KernelFamily {
 public:
  std::string_view Name() const override { return "matmul"; }
  KernelDesign DefaultDesign(const KernelPlan& kernel, int seed, Precision precision) const override;
  bool Fits(const KernelPlan& kernel, const KernelDesign& design) const override;
  std::string Rule() const override;
  bool FitsResources(const KernelPlan& kernel, const KernelDesign& design) const override;
  std::string Unwritable(const KernelPlan& kernel, const KernelDesign& design) const override;
  void Moves(SearchStage stage, const KernelPlan& kernel, MoveSink& sink) const override;

  kir::Kernel LowerProgram(const Graph& graph, const KernelPlan& kernel,
                           const std::map<int, TensorMeta>& memory,
                           const std::map<int, TensorMeta>& layouts) const override {
    return MatmulProgram(graph, kernel, memory, layouts);
  }

 private:
  // The seed's design for the product alone, before a reduction of its columns widens the tile.
  static KernelDesign SeedDesign(const KernelPlan& kernel, int seed, Precision precision);
  void AlgorithmMoves(const KernelPlan& kernel, MoveSink& sink) const;
  static void CopyMoves(const KernelPlan& kernel, MoveSink& sink);
  void ConvolutionMoves(const KernelPlan& kernel, MoveSink& sink) const;
  static void ChannelsLastLoopMove(const KernelPlan& kernel, MoveSink& sink);
  static void MappingMoves(const KernelPlan& kernel, MoveSink& sink);
  static void TilingMoves(const KernelPlan& kernel, MoveSink& sink);
  static void MemoryMoves(const KernelPlan& kernel, MoveSink& sink);
};

// A matrix product or convolution: direct, gemv, tiled, nhwc, splitk or aligned by seed and shape.
KernelDesign MatmulFamily::DefaultDesign(const KernelPlan& kernel, int seed, Precision precision) const {
  KernelDesign design = SeedDesign(kernel, seed, precision);
  if (kernel.reductions.empty()) {
    return design;
  }
  // Its tile reduces the product's columns (ReducesColumns): one tile spans them, in the seed's tiles
  // otherwise, its rows halved while the accumulator does not fit the warps.
  const MatmulSpec& mm = *kernel.matmul;
  if (!ReducingForm(design.algorithm)) {
    design = SeedDesign(kernel, 1, precision);
  }
  design.yblock = std::max<int64_t>(kMinDotSide, NextPowerOfTwo(mm.n));
  while (!MatmulFits(kernel, design) && design.xblock > kMinDotSide) {
    design.xblock /= 2;
  }
  return design;
}

KernelDesign MatmulFamily::SeedDesign(const KernelPlan& kernel, int seed, Precision precision) {
  const MatmulSpec& mm = *kernel.matmul;
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
  // h100-bf16-sample): 128x256x64 of 8 warps 755 TFLOP/s (cuBLAS 807), 256x128x64 701, 128x128x64 of 4 warps
  // 620; the float32 tiles' 128x128x32 538. Staged in the half type, three stages of the widest fit.
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
  ApplyTile(mm, tile, design);
  design.precision = products;
  const bool channels_last = ChannelsLastConvolutionFits(mm) && !DirectConvolutionFits(mm) &&
                             mm.conv->in_channels / mm.conv->groups >= kMinDotSide;
  if (channels_last && seed != 1) {
    // Convolutions of 16 channels a group or more, transposed ones too, are channels-last in seeds 0 and 2
    // (input and weight copied, K by tap then channel); seed 1 keeps the NCHW gather to measure against. On
    // the H200 the nested form was 1.04-1.6x faster than the gather in the same tiles on four of six level-1
    // convolutions, a tie on the 1-D one (bench/results/h200-nhwc-aligned), and the level-3 CNNs whose seed 0
    // kept the gather ran at 0.37-0.66x torch.compile (bench/results/h200-fair-l1-3). On the H100 at tf32
    // (bench/results/h100-ab-kloop) one K loop over (tap, channel step) beat the nested loops in the same
    // tiles on all nine convolutions measured, and in 128-row tiles of 8 warps on eight of them: 1.31-2.47x
    // faster than the NCHW gather on the five measured beside it, 1.09-2.10x than the nested form; at tf32x3
    // 1.04-1.13x over 64x64 tiles on all three): seed 0 takes the one loop, in those tiles at tf32 and tf32x3
    // (ieee products keep 64x64), seed 2 the nested loops. Transposed ones, per output phase: 1.08-2.31x
    // faster than the NCHW phase form on all six measured (H100, tf32, bench/results/h100-ab-transposed-cat).
    // With fewer channels a tap's K step would be mostly padding (a depthwise one: 1 of 16).
    design.algorithm = seed == 0 ? Algorithm::kNhwcK : Algorithm::kNhwc;
    if (seed == 0 && (products == Precision::kTf32 || products == Precision::kTf32x3)) {
      design.xblock = std::min<int64_t>(128, std::max<int64_t>(16, NextPowerOfTwo(mm.m)));
      design.yblock = std::clamp<int64_t>(NextPowerOfTwo(mm.n), 16, 128);
      design.num_warps = 8;
      design.num_stages = 3;
    }
    design.rblock = std::min(design.rblock, ChannelsLastMaxStep(mm));
    return design;
  }
  if (seed != 1) {  // seed 1 keeps one program per output tile: the structural alternative
    const int64_t split = SplitKFactor(mm, design);
    design.algorithm = split > 1 ? Algorithm::kSplitK : Algorithm::kTiled;
    design.split = split > 1 ? split : 0;
    if (seed == 0 && split == 1) {
      SeedOperandLayout(mm, products, design);
    }
  }
  return design;
}

// A product read in place: its operands copied first, rows aligned, or B transposed K-major for tensor-core
// products, in the same tiles.
void MatmulFamily::CopyMoves(const KernelPlan& kernel, MoveSink& sink) {
  const KernelDesign& base = kernel.design;
  if (AlignedCopyFits(*kernel.matmul)) {
    KernelDesign aligned = base;
    aligned.algorithm = Algorithm::kAligned;
    sink.Add(
        kernel, aligned, fmt::format("algorithm {} aligned", kernel.name),
        "A and B copied first into rows of a 32-float stride (128-byte lines), so the tile loads vectorize");
  }
  if (KMajorCopyFits(*kernel.matmul, base.precision)) {
    KernelDesign kmajor = base;
    kmajor.algorithm = Algorithm::kKMajor;
    sink.Add(
        kernel, kmajor, fmt::format("algorithm {} kmajor", kernel.name),
        "B transposed first into K-contiguous rows (A copied aligned): the tensor cores' tf32 MMA reads B "
        "K-major from shared memory");
  }
}

// A convolution from the NCHW gather: the direct form where it fits, and channels-last in the same tiles.
void MatmulFamily::ConvolutionMoves(const KernelPlan& kernel, MoveSink& sink) const {
  const KernelDesign& base = kernel.design;
  if (DirectConvolutionFits(*kernel.matmul)) {
    const KernelDesign direct = DefaultDesign(kernel, 0, Precision::kUnset);
    sink.Add(kernel, direct, fmt::format("algorithm {} direct", kernel.name),
             "one output element per lane, the group's few products unrolled (no tl.dot padding)");
  }
  if (base.algorithm == Algorithm::kTiled && ChannelsLastConvolutionFits(*kernel.matmul)) {
    // same tiles, the K step at most the group's channels (it no longer spans taps)
    KernelDesign nhwc = base;
    nhwc.algorithm = Algorithm::kNhwc;
    nhwc.rblock = std::min(base.rblock, ChannelsLastMaxStep(*kernel.matmul));
    sink.Add(kernel, nhwc, fmt::format("algorithm {} nhwc", kernel.name),
             "channels-last implicit GEMM, input repacked once, K ordered by tap then channel");
    if (base.precision == Precision::kIeee && !IsHalf(kernel.matmul->dtype)) {
      // An exact incumbent in FMA products: its contiguous K loads pay most on the tensor cores. At tol 1e-4
      // the H200's level-1 2-D convolutions that ended channels-last in tf32x3 products ran 38-74 TFLOP/s,
      // those left to the NCHW gather in ieee products 12-21 (bench/results/h200-fair-l1-3/tol1e-4/
      // scoreboard.md), and stage 2's precision move comes after the time budget has often ended a search.
      nhwc.precision = Precision::kTf32x3;
      sink.Add(kernel, nhwc, fmt::format("algorithm {} nhwc tf32x3", kernel.name),
               "channels-last implicit GEMM in three tf32 tensor-core products (float32 accuracy)");
    }
  }
}

// A channels-last convolution between its two K loops, same tiles: the taps around the channels (nhwc), or
// one loop over (tap, channel step) pairs (nhwck), which Triton's pipeliner runs as one ring of loads: a
// tap's loop of one or two channel steps (64 channels or fewer) leaves the nested form nothing to overlap.
void MatmulFamily::ChannelsLastLoopMove(const KernelPlan& kernel, MoveSink& sink) {
  KernelDesign other = kernel.design;
  const bool flat = other.algorithm == Algorithm::kNhwcK;
  other.algorithm = flat ? Algorithm::kNhwc : Algorithm::kNhwcK;
  sink.Add(kernel, other, fmt::format("algorithm {} {}", kernel.name, NameOf(other.algorithm)),
           flat
               ? "channels-last, a loop over the kernel taps around the channel steps of each"
               : "channels-last in one K loop over (tap, channel step): the next tap's loads in flight while "
                 "this one's products run");
}

// Matmul: split K into slices (half or twice the incumbent's, or the default factor), or one program per
// tile; a mat-vec product between tl.dot tiles and the gemv rows (whose K slices split the same way); a
// convolution between the NCHW gather and the channels-last GEMM in the same tiles (and the direct form).
void MatmulFamily::AlgorithmMoves(const KernelPlan& kernel, MoveSink& sink) const {
  const KernelDesign& base = kernel.design;
  if (base.algorithm == Algorithm::kGemv) {
    sink.Add(kernel, DefaultDesign(kernel, 1, Precision::kUnset),
             fmt::format("algorithm {} tiled", kernel.name),
             "the product in tl.dot tiles (the vector padded to a 16-wide N tile)");
    for (int64_t split : {int64_t{0}, base.split / 2, std::max<int64_t>(2, base.split * 2)}) {
      KernelDesign design = base;
      design.split = split > 1 ? split : 0;
      sink.Add(kernel, design, fmt::format("algorithm {} gemv split {}", kernel.name, design.split),
               design.split > 1
                   ? fmt::format("K in {} slices, partials summed by a second kernel", design.split)
                   : "one program per row block over the whole K");
    }
    return;
  }
  if (MatVecFits(*kernel.matmul)) {
    sink.Add(kernel, DefaultDesign(kernel, 0, Precision::kUnset),
             fmt::format("algorithm {} gemv", kernel.name),
             "rows of A times the vector, products summed after the K loop (no tl.dot padding)");
  }
  if (base.algorithm == Algorithm::kDirect) {  // back to the implicit GEMM of the exact seed
    const KernelDesign tiled = DefaultDesign(kernel, 1, Precision::kUnset);
    sink.Add(kernel, tiled, fmt::format("algorithm {} tiled", kernel.name),
             "the convolution as an implicit GEMM on the tensor cores");
    return;
  }
  if (base.algorithm == Algorithm::kAligned || base.algorithm == Algorithm::kKMajor ||
      IsChannelsLast(base.algorithm)) {  // back to the operands read in place, same tiles
    KernelDesign tiled = base;
    tiled.algorithm = Algorithm::kTiled;
    sink.Add(kernel, tiled, fmt::format("algorithm {} tiled", kernel.name),
             IsChannelsLast(base.algorithm)
                 ? "implicit GEMM gathering the NCHW input, K ordered by channel then tap"
                 : "the operands read in place (no copies)");
    if (IsChannelsLast(base.algorithm)) {
      ChannelsLastLoopMove(kernel, sink);
    }
    if (base.algorithm == Algorithm::kKMajor && AlignedCopyFits(*kernel.matmul)) {
      KernelDesign aligned = base;
      aligned.algorithm = Algorithm::kAligned;
      sink.Add(kernel, aligned, fmt::format("algorithm {} aligned", kernel.name),
               "B copied in its own orientation (N-contiguous rows)");
    }
    return;
  }
  if (base.algorithm == Algorithm::kTiled) {
    CopyMoves(kernel, sink);
  }
  ConvolutionMoves(kernel, sink);
  std::vector<int64_t> splits;
  if (base.algorithm == Algorithm::kSplitK) {
    splits = {1, base.split / 2, base.split * 2};
  } else {
    splits = {SplitKFactor(*kernel.matmul, base)};
  }
  for (int64_t split : splits) {
    KernelDesign design = base;
    design.algorithm = split > 1 ? Algorithm::kSplitK : Algorithm::kTiled;
    design.split = split > 1 ? split : 0;
    const std::string name = split > 1 ? fmt::format("split-K {}", split) : "tiled";
    const std::string description =
        split > 1
            ? fmt::format("K in {} slices: {} programs per output tile, partials summed by a second kernel",
                          split, split)
            : "one program per output tile over the whole K";
    sink.Add(kernel, design, fmt::format("algorithm {} {}", kernel.name, name), description);
  }
}

// Matmul output tiles (BLOCK_M x BLOCK_N), the usual shapes of tuned Hopper GEMMs, smallest grid last.
// A mat-vec kernel: rows per program (fewer rows, more programs streaming A).
void MatmulFamily::MappingMoves(const KernelPlan& kernel, MoveSink& sink) {
  static const int64_t kTiles[][2] = {{128, 128}, {128, 64},  {64, 128}, {64, 64},
                                      {128, 256}, {256, 128}, {32, 64}};
  const MatmulSpec& mm = *kernel.matmul;
  if (kernel.design.algorithm == Algorithm::kGemv) {
    for (int64_t rows : Around(kernel.design.xblock, 1, std::min<int64_t>(64, NextPowerOfTwo(mm.m)))) {
      KernelDesign design = kernel.design;
      design.xblock = rows;
      sink.Add(kernel, design, fmt::format("rows per program {} {}", kernel.name, rows),
               fmt::format("{} rows of A per program ({} programs a K slice)", rows,
                           (mm.m + rows - 1) / rows * mm.batch));
    }
    return;
  }
  for (const auto& tile : kTiles) {
    if (tile[0] > std::max<int64_t>(kMinBlock, NextPowerOfTwo(mm.m)) ||
        tile[1] > std::max<int64_t>(kMinBlock, NextPowerOfTwo(mm.n))) {
      continue;  // a tile wider than the problem only masks lanes off
    }
    KernelDesign design = kernel.design;
    design.xblock = tile[0];
    design.yblock = tile[1];
    // A tile whose accumulator the incumbent's warps cannot hold takes the warps it needs (up to 8), and a
    // staged ring past shared memory drops stages (down to 2): 128x256 comes with 8 warps, as tuned Hopper
    // GEMMs run it (bench/results/h100-fp32-precision: tf32's fastest tile), instead of being pruned.
    while (!MatmulFits(kernel, design) && design.num_warps < 8) {
      design.num_warps *= 2;
    }
    while (!MatmulFits(kernel, design) && design.num_stages > 2) {
      --design.num_stages;
    }
    const bool refit =
        design.num_warps != kernel.design.num_warps || design.num_stages != kernel.design.num_stages;
    const int64_t programs = ((mm.m + tile[0] - 1) / tile[0]) * ((mm.n + tile[1] - 1) / tile[1]) * mm.batch;
    sink.Add(kernel, design,
             refit ? fmt::format("tile {} {}x{} {}w {}s", kernel.name, tile[0], tile[1], design.num_warps,
                                 design.num_stages)
                   : fmt::format("tile {} {}x{}", kernel.name, tile[0], tile[1]),
             fmt::format("output tiles of {}x{} ({} programs, {} warps, {} stages)", tile[0], tile[1],
                         programs, design.num_warps, design.num_stages));
  }
}

bool MatmulFamily::Fits(const KernelPlan& kernel, const KernelDesign& design) const {
  if (!kernel.matmul) {
    return false;
  }
  const MatmulSpec& mm = *kernel.matmul;
  if (!SpansColumns(kernel, design)) {
    return false;
  }
  if (design.algorithm == Algorithm::kDirect) {
    return DirectConvolutionFits(mm) && design.xblock <= kMaxTile && design.precision == Precision::kIeee;
  }
  if (design.algorithm == Algorithm::kGemv) {  // fp32 FMAs: no precision to pick
    constexpr int64_t kMaxRows = 256;
    constexpr int64_t kMaxStep = 4096;
    const bool fits = MatVecFits(mm) && design.yblock == 1 && design.xblock <= kMaxRows &&
                      IsPowerOfTwo(design.rblock) && design.rblock >= 16 && design.rblock <= kMaxStep &&
                      design.precision == Precision::kIeee;
    const bool split_ok = design.split == 0 || (design.split >= 2 && mm.k >= design.split * design.rblock);
    return fits && split_ok;
  }
  constexpr int64_t kMaxMatmulTile = 256;
  for (int64_t side : {design.xblock, design.yblock, design.rblock}) {
    if (!IsPowerOfTwo(side) || side < kMinDotSide || side > kMaxMatmulTile) {
      return false;
    }
  }
  const bool splitk = design.algorithm == Algorithm::kSplitK && design.split >= 2 && !mm.conv &&
                      mm.k >= design.split * design.rblock;
  const bool nhwc = IsChannelsLast(design.algorithm) && ChannelsLastConvolutionFits(mm) &&
                    design.rblock <= ChannelsLastMaxStep(mm);
  const bool aligned = design.algorithm == Algorithm::kAligned && AlignedCopyFits(mm);
  const bool kmajor = design.algorithm == Algorithm::kKMajor && KMajorCopyFits(mm, design.precision);
  return (design.algorithm == Algorithm::kTiled || splitk || nhwc || aligned || kmajor) &&
         IsDotPrecision(design.precision);
}

std::string MatmulFamily::Rule() const {
  return "matmul: where the tile reduces the product's columns, yblock >= N and no splitk, gemv or direct; "
         "algorithm tiled, splitk (split >= 2 and K >= split * rblock), nhwc, nhwck, aligned, kmajor "
         "(float32, "
         "tf32 or tf32x3 products), gemv or direct where the product allows it, xblock/yblock/rblock powers "
         "of "
         "two in [16, 256], precision ieee, tf32 or tf32x3";
}

bool MatmulFamily::FitsResources(const KernelPlan& kernel, const KernelDesign& design) const {
  return MatmulFits(kernel, design);
}

std::string MatmulFamily::Unwritable(const KernelPlan& kernel, const KernelDesign& design) const {
  if (!IsPowerOfTwo(design.xblock)) {
    return fmt::format("xblock {} is not a power of two", design.xblock);
  }
  if (DotTiles(kernel, design) && (!IsPowerOfTwo(design.yblock) || !IsPowerOfTwo(design.rblock))) {
    return fmt::format(
        "algorithm {} takes tl.dot tiles, but yblock {} and rblock {} are not both powers of two",
        NameOf(design.algorithm), design.yblock, design.rblock);
  }
  if (design.algorithm == Algorithm::kSplitK && design.split < 2) {
    return fmt::format("algorithm splitk needs split >= 2, not {}", design.split);
  }
  if (!SpansColumns(kernel, design)) {
    return fmt::format(
        "the tile reduces the product's {} columns: one tl.dot tile must span them (yblock >= "
        "{}, algorithm tiled, nhwc, nhwck, aligned or kmajor), not {} with yblock {}",
        kernel.matmul->n, kernel.matmul->n, NameOf(design.algorithm), design.yblock);
  }
  return "";
}

void MatmulFamily::Moves(SearchStage stage, const KernelPlan& kernel, MoveSink& sink) const {
  switch (stage) {
    case SearchStage::kAlgorithm:
      AlgorithmMoves(kernel, sink);
      return;
    case SearchStage::kMapping:
      if (DotTiles(kernel)) {
        MappingMoves(kernel, sink);
      }
      return;
    case SearchStage::kTiling:
      TilingMoves(kernel, sink);
      return;
    case SearchStage::kMemory:
      MemoryMoves(kernel, sink);
      return;
  }
}

// tl.dot tiles: the K step; a direct convolution: its flat tile over the outputs.
void MatmulFamily::TilingMoves(const KernelPlan& kernel, MoveSink& sink) {
  const KernelDesign& base = kernel.design;
  if (!DotTiles(kernel)) {
    const MatmulSpec& mm = *kernel.matmul;
    FlatTileMoves(kernel, mm.m * mm.n * mm.batch, sink);
    return;
  }
  const int64_t most = base.algorithm == Algorithm::kGemv ? kMaxMatVecStep : 128;
  for (int64_t rblock : Around(base.rblock, kMinBlock, most)) {
    KernelDesign design = base;
    design.rblock = rblock;
    sink.Add(kernel, design, fmt::format("tile {} block_k {}", kernel.name, rblock),
             fmt::format("a K step of {} per loop iteration", rblock));
  }
}

// tl.dot tiles: 4 or 8 warps per tile and 2-5 operand tiles in flight, then the other exact precision (tf32x3
// for ieee and back: three tf32 products on the tensor cores against ieee FMA products); half products have
// no precision to choose (bf16/fp16 operands on the tensor cores). A direct convolution: warps alone.
void MatmulFamily::MemoryMoves(const KernelPlan& kernel, MoveSink& sink) {
  if (!DotTiles(kernel)) {
    WarpStageMoves(kernel, AllWarps(), 1, 1, sink);
    return;
  }
  WarpStageMoves(kernel, {4, 8}, 2, kMaxMatmulStages, sink);
  if (!IsHalf(kernel.matmul->dtype)) {
    ExactPrecisionMove(kernel, sink);
  }
}

}  // namespace

std::unique_ptr<KernelFamily> MakeMatmulFamily() { return std::make_unique<MatmulFamily>(); }

}  // namespace egg::expert
