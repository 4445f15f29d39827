// Which designs are legal for a planned kernel and worth measuring: tile rules, the algorithms a product
// shape admits, the register and shared-memory budgets.
#pragma once

#include <stdexcept>
#include <string>

#include "expert/plan/plan.h"

namespace egg::expert {

// The limits of legal designs: tile sides, threads, pipeline depth.
inline constexpr int64_t kMaxTile = int64_t{1} << 17;  // elements of one program's tile
inline constexpr int64_t kMinDotSide = 16;  // tl.dot's smallest tile side
inline constexpr int64_t kMinBlock = 16;
inline constexpr int64_t kMaxRowBlock = 256;
inline constexpr int64_t kMaxRBlock = 16384;
inline constexpr int64_t kMinPointwiseBlock = 64;
inline constexpr int64_t kMaxPointwiseBlock = 8192;
inline constexpr int64_t kMaxElementsPerThread = 64;
inline constexpr int kThreadsPerWarp = 32;
inline constexpr int kMaxWarps = 16;
inline constexpr int kMaxStages = 4;
// Matmul tiles: tl.dot sides, the accumulator's registers per thread and the operand ring in shared memory
// (float32 operands; the H200 allows 227 KB per block, a margin is kept for the epilogue's layout changes).
inline constexpr int64_t kMaxAccumulatorPerThread = 128;
inline constexpr int64_t kMaxMatmulSharedBytes = 192 * 1024;
inline constexpr int kMaxMatmulStages = 5;

inline bool IsPowerOfTwo(int64_t value) { return value > 0 && (value & (value - 1)) == 0; }

// Reductions and scans: kernels over rows, tiled xblock x rblock.
inline bool IsRowKernel(const KernelPlan& kernel) {
  return kernel.kind == KernelKind::kReduction || kernel.kind == KernelKind::kScan;
}

// A matrix-product kernel computed in tl.dot tiles under `design` (masks mindex/nindex, a K loop, staged
// operands); a direct convolution is not: it runs one output element per lane, as a pointwise kernel does.
inline bool DotTiles(const KernelPlan& kernel, const KernelDesign& design) {
  return kernel.kind == KernelKind::kMatmul && design.algorithm != Algorithm::kDirect;
}
inline bool DotTiles(const KernelPlan& kernel) { return DotTiles(kernel, kernel.design); }

// Whether a convolution is small per group (at most 4 output channels and 64 products per output, depthwise
// ones included) so that the `direct` algorithm applies: one output element per lane, its products unrolled.
bool DirectConvolutionFits(const MatmulSpec& mm);
// A matrix-vector product (one output column, no convolution): the `gemv` algorithm applies (rows of A
// times the vector, summed after the K loop; no tl.dot, whose narrowest N tile is 16).
bool MatVecFits(const MatmulSpec& mm);
// A convolution the `nhwc` algorithm computes: any but a pointwise one (its input repacked channels-last by a
// first launch, K ordered by kernel tap, then channel of the group; a transposed one per output phase).
bool ChannelsLastConvolutionFits(const MatmulSpec& mm);
// The widest useful K step of the `nhwc` algorithm: the group's input channels (a power of two, tl.dot's 16
// at least); a wider one only adds masked lanes.
int64_t ChannelsLastMaxStep(const MatmulSpec& mm);

// The widest product whose columns one tile spans (BLOCK_N), so that the tile can reduce over them.
inline constexpr int64_t kMaxReducedColumns = 256;
// The axis of a product's output that its columns run along: a convolution's output channels (1), a matrix
// product's last dimension.
int64_t ColumnAxis(const MatmulSpec& mm, size_t rank);
// Whether `spec` reduces the product of `kernel` (a matmul kernel) over its columns alone, so that the
// product's tile finishes it as an epilogue once one tile spans every column (BLOCK_N >= N): a sum, mean,
// max, min, variance or standard deviation over a matrix product's last dimension or over a convolution's
// output channels (one group, at most kMaxReducedColumns), of a value of the product's shape (the product or
// its elementwise consumers; a matrix product's rows may be viewed as more dims: a linear layer's tokens), in
// any of the product types (a half product's float32 accumulator is reduced before its one rounding). The
// product and its full-size consumers then need not be stored: what cuBLAS or cuDNN followed by a reduction
// kernel cannot avoid (KernelBench 2_25's min over 64 channels, 2_32's).
bool ReducesColumns(const Graph& graph, const KernelPlan& kernel, const ReductionSpec& spec);

// A matrix product (no convolution, more than one column) whose operand rows as stored are not all 16-byte
// aligned (k or n not a multiple of 4 floats): the `aligned` algorithm applies (A and B copied first into
// rows of a 32-float stride, so the tile loads vectorize; 1_8's 2949 and 5921).
bool AlignedCopyFits(const MatmulSpec& mm);

// A float32 matrix product (no convolution, more than one column) in tensor-core products (tf32, tf32x3):
// the `kmajor` algorithm applies (A copied as `aligned` does, B transposed into K-contiguous rows of an
// aligned stride). Hopper's tf32 warpgroup MMA reads B from shared memory K-major only: a 4096^3 product
// read B N-contiguous (torch.matmul's [K, N]) in 1.54 ms at tf32 and 2.46 ms at tf32x3, K-contiguous in
// 0.40 and 1.78 ms (H100; cuBLAS 0.35 ms with TF32, 2.66 ms without: bench/results/h100-fp32-precision).
bool KMajorCopyFits(const MatmulSpec& mm, Precision precision);

// Split-K slices worth running for a matrix product in `design`'s tiles (1: none): enough to bring few output
// tiles over a deep K near two waves of programs. Never for convolutions.
int64_t SplitKFactor(const MatmulSpec& mm, const KernelDesign& design);

// Whether a kernel design is valid for `kernel` (block sizes powers of two, persistent tiles covering the
// row).
bool DesignFits(const KernelPlan& kernel, const KernelDesign& design);

// The rule DesignFits holds a design of `kernel`'s kind to, in words a refusal can give (an LLM's design
// move, a design set by hand).
std::string DesignRule(const KernelPlan& kernel);

// A matrix-product design code generation cannot write, met where a kernel is generated: the writers divide
// by its tile sides and split-K slices (algorithm tiled forced by hand on a kernel planned direct, which has
// no yblock or rblock, was a SIGFPE in FinishMatmul).
struct IllegalDesign : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Why a matrix-product kernel's `design` cannot be written, or "" when it can: xblock a power of two; for
// tl.dot tiles (every algorithm but direct) yblock and rblock powers of two too; splitk split >= 2. Looser
// than DesignFits on purpose: the writers' tests force an algorithm onto a fixture whose shape DesignFits
// would not give it (direct on a GEMM-shaped convolution), which the writers handle. Other kinds: always "".
std::string UnwritableDesign(const KernelPlan& kernel, const KernelDesign& design);

// Throws IllegalDesign, naming the kernel, its design, the problem and DesignRule, when UnwritableDesign
// finds one in `kernel.design`. The planner's probes (partial designs of other kinds) pass untouched.
void RequireLegalDesign(const KernelPlan& kernel);

// Static pruning: a design is worth measuring only if its tiles are legal and fit the register file.
bool WorthMeasuring(const KernelPlan& kernel, const KernelDesign& design);

// The most pipeline stages (at least 1, at most `design.num_stages`) whose staged operand tiles fit the
// shared memory of an H100/H200 block, for a matmul kernel with `a_tile_loads` tile-shaped loads of the A
// side ([BLOCK_M, BLOCK_K]) and `b_tile_loads` of the B side ([BLOCK_K, BLOCK_N]) in one K step, each element
// `element_bytes` as loaded (a half operand is staged in its half type).
int FittingStages(const KernelDesign& design, int a_tile_loads, int b_tile_loads, int64_t element_bytes = 4);

// The bytes of one element of a product's operands as its K loop loads them: the half type's for bf16/fp16
// operands read in place, float32 for the aligned and channels-last copies (which are float32 scratch).
int64_t StagedOperandBytes(const MatmulSpec& mm, const KernelDesign& design);

}  // namespace egg::expert
