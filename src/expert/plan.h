// The fusion plan of a captured graph: which values are realized in memory, which Triton kernels compute them
// (each a fusion group with its iteration domain and the reasons it was formed), which ops run in PyTorch, and
// the design record that fixes each kernel's algorithm and tiling. MakePlan never throws for graph content:
// what it cannot put in a kernel runs in PyTorch.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/json.h"
#include "expert/graph.h"
#include "expert/ops.h"

namespace egg::expert {

enum class KernelKind { kPointwise, kReduction, kPool, kScan, kMatmul, kRecurrent, kAttention };
std::string KernelKindName(KernelKind kind);

// A reduction node, parsed: what it combines, over which dimensions of which input.
struct ReductionSpec {
  std::string kind;  // sum mean max min prod argmax argmin var std any all max_with_index min_with_index var_mean
  int node = -1;
  int input = -1;
  std::vector<int64_t> dims;  // reduced dimensions of the input, sorted
  double correction = 1;
  std::vector<int> outputs;  // values holding the results (getitem values for tuple-producing nodes)
  std::vector<int64_t> kept_shape;
  std::vector<int64_t> reduced_shape;
  int64_t Rows() const { return Product(kept_shape); }
  int64_t Length() const { return Product(reduced_shape); }
};
std::optional<ReductionSpec> ParseReduction(const Graph& graph, const Node& node);

struct PoolSpec {
  std::string kind;  // max | avg
  int node = -1;
  int input = -1;
  int output = -1;                    // the value of pooled results
  int spatial = 2;                    // 1, 2 or 3 spatial dimensions
  std::vector<int64_t> kernel, stride, padding, dilation;
  bool ceil_mode = false;
  bool count_include_pad = true;
  std::optional<int64_t> divisor_override;
  bool adaptive = false;
};
std::optional<PoolSpec> ParsePool(const Graph& graph, const Node& node);

struct ScanSpec {
  std::string kind;  // sum | prod
  int node = -1;
  int input = -1;
  int64_t dim = 0;
};
std::optional<ScanSpec> ParseScan(const Graph& graph, const Node& node);

// A convolution computed as an implicit GEMM, one product per group: rows are (image, output position), columns
// the group's output channels, the reduction runs over (input channel of the group, kernel position); the input
// operand is gathered at `position * stride - padding + offset * dilation` (zero outside the input).
struct ConvShape {
  int spatial = 2;  // 1, 2 or 3
  int64_t images = 1, in_channels = 1, out_channels = 1, groups = 1;
  std::vector<int64_t> in_size, out_size, kernel;  // spatial extents
  std::vector<int64_t> stride, padding, dilation;
  bool transposed = false;  // out = (in - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1
};

// A transposed convolution along spatial dim `s`, split by output phase: the output positions q * stride + phase
// take kernel offsets first + j * step (j < count; count 0 where none fits) from input positions
// q + base - j * input_step, with step = stride / gcd(stride, dilation), input_step = dilation / gcd. Each phase
// is a dense convolution; one entry per phase in [0, stride).
struct TransposedPhase {
  int64_t first = 0, count = 0, base = 0;
};
std::vector<TransposedPhase> TransposedPhases(const ConvShape& conv, size_t s);
int64_t TransposedTapStep(const ConvShape& conv, size_t s);    // stride / gcd(stride, dilation)
int64_t TransposedInputStep(const ConvShape& conv, size_t s);  // dilation / gcd(stride, dilation)
int64_t TransposedMaxTaps(const ConvShape& conv, size_t s);    // the largest count over the phases

// A matrix product: out[b] = beta * bias + alpha * (a[b] @ b[b]) (mm, bmm, addmm; b = 1 without a batch), or a
// convolution (`conv` set: a is the input, b the weight, bias the per-channel bias, batch the groups; transposed:
// batch (group, phase) with phases the product of the strides, m (image, q), k (input channel, taps of a phase)).
struct MatmulSpec {
  int node = -1;
  int a = -1;
  int b = -1;
  int bias = -1;  // addmm's input, or -1
  double alpha = 1;
  double beta = 1;
  bool batched = false;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  std::optional<ConvShape> conv;
};
std::optional<MatmulSpec> ParseMatmul(const Graph& graph, const Node& node);

// A whole recurrent layer stack, aten.lstm/gru/rnn_tanh/rnn_relu.input(input, hx, params, has_biases,
// num_layers, dropout, train, bidirectional, batch_first) in fp32 (lstm's hx is [h0, c0], no projections):
// params hold per layer and direction w_ih [gates * hidden, in], w_hh [gates * hidden, hidden][, b_ih, b_hh].
struct RecurrentSpec {
  std::string cell;  // lstm | gru | rnn_tanh | rnn_relu
  int node = -1;
  int input = -1;
  int h0 = -1;
  int c0 = -1;  // lstm only
  std::vector<int> params;
  bool has_biases = true;
  bool bidirectional = false;
  bool batch_first = false;
  int64_t layers = 1, seq = 0, batch = 0, input_size = 0, hidden = 0;
  std::vector<int> outputs;  // output, h_n[, c_n]: the getitem values, -1 where unused
  int64_t Directions() const { return bidirectional ? 2 : 1; }
  int64_t Gates() const { return cell == "lstm" ? 4 : (cell == "gru" ? 3 : 1); }
  // The params of one layer and direction: w_ih, w_hh, b_ih, b_hh (-1 without biases).
  std::vector<int> LayerParams(int64_t layer, int64_t direction) const;
};
std::optional<RecurrentSpec> ParseRecurrent(const Graph& graph, const Node& node);

// Attention as one flash-style kernel: out = bmm(P, V) with P = softmax over the last axis of X, X an
// elementwise function of S = bmm(Q, K^T) (a scale, a where(mask, -inf, .) of a broadcast mask tensor:
// whatever the graph computes, read through the emitter), with SDPA's _safe_softmax guard (0 for a row of -inf)
// when `safe`.
// `absorbed`: the nodes the kernel computes (S, the softmax, the guard); none is read outside the pattern.
struct AttentionSpec {
  int node = -1;     // bmm(P, V)
  int scores = -1;   // the S = bmm(Q, K^T) node
  int q = -1;        // S's operands: Q [batch, lq, d], K^T [batch, d, lk]
  int kt = -1;
  int v = -1;        // [batch, lk, dv]
  int s_value = -1;  // S's value
  int x = -1;        // the softmax's input X, [.., lq, lk]
  bool safe = false;
  // X = where(mask, -inf, .) (masked_when true) or where(mask, ., -inf) with the mask independent of S: a key
  // block whose tile is masked everywhere contributes nothing and is skipped at run time (-1: no such mask)
  int mask = -1;
  bool masked_when = true;
  int64_t batch = 1, lq = 0, lk = 0, d = 0, dv = 0;
  std::set<int> absorbed;
};
// The attention pattern ending at `node` (a bmm), or nullopt: fp32, head dims at most 256, S and P read by
// nothing else.
std::optional<AttentionSpec> ParseAttention(const Graph& graph, const Node& node);

// The algorithm and launch shape of one kernel: the design record's entry for it.
struct KernelDesign {
  // pointwise: flat | reduction: persistent, looped, online, split | pool: direct | scan: single, blocked |
  // matmul: tiled, splitk, direct (small-group convolutions), nhwc (convolutions: channels-last implicit
  // GEMM), aligned (matrix products over operand copies with 16-byte-aligned rows) | attention: flash (xblock
  // BLOCK_M query rows, yblock BLOCK_N keys per step) | recurrent: sequential (xblock batch rows per program,
  // yblock hidden units per step tile, rblock the K step of h @ W_hh^T)
  std::string algorithm;
  int64_t xblock = 0;
  int64_t rblock = 0;
  int64_t split = 0;  // split reductions: programs per row; splitk: slices of K (partials summed by a 2nd kernel)
  int64_t yblock = 0;     // matmul: BLOCK_N (xblock is BLOCK_M, rblock BLOCK_K)
  std::string precision;  // matmul: tl.dot's input_precision (ieee, tf32, tf32x3)
  int num_warps = 4;
  int num_stages = 1;

  Json ToJson() const;
  static KernelDesign FromJson(const Json& json);
  bool operator==(const KernelDesign& other) const { return ToJson() == other.ToJson(); }
};

struct KernelPlan {
  std::string name;
  KernelKind kind = KernelKind::kPointwise;
  std::vector<int> roots;   // realized values computed here, in order (reductions first where they lead)
  std::vector<int> stores;  // roots (or reduction outputs) written to memory
  // The iteration domain. Pointwise: `shape` iterated flat. Reduction: the anchor input `shape` with
  // `reduced` dims, rows = product of the kept dims, length = product of the reduced. Pool/scan: see spec.
  std::vector<int64_t> shape;
  std::vector<int64_t> reduced;
  int64_t rows = 0;
  int64_t length = 1;
  std::vector<ReductionSpec> reductions;
  std::optional<PoolSpec> pool;
  std::optional<ScanSpec> scan;
  std::optional<MatmulSpec> matmul;
  std::optional<RecurrentSpec> recurrent;
  std::optional<AttentionSpec> attention;
  KernelDesign design;
  std::vector<std::string> reasons;
  bool splittable = false;        // its reductions can be split across programs (no elementwise roots)
  bool online_candidate = false;  // a max and a sum of exp(x - max) over the same rows: online softmax applies
};

// A matrix-product kernel computed in tl.dot tiles under `design` (masks mindex/nindex, a K loop, staged
// operands); a direct convolution is not: it runs one output element per lane, as a pointwise kernel does.
inline bool DotTiles(const KernelPlan& kernel, const KernelDesign& design) {
  return kernel.kind == KernelKind::kMatmul && design.algorithm != "direct";
}
inline bool DotTiles(const KernelPlan& kernel) { return DotTiles(kernel, kernel.design); }

struct PlanOptions {
  bool fuse_reductions = true;  // same-domain reductions share a kernel (multi-pass or registers)
  bool fuse_epilogues = true;   // pointwise consumers join the kernel that produces their inputs
  // The forward captured once in a CUDA graph over static copies of its inputs, then replayed (one launch for
  // every kernel): stage2.memory's launch-overhead move, for plans with no op left to PyTorch.
  bool cuda_graph = false;
  // Attention patterns (ParseAttention) as one flash kernel each; false keeps the products and the softmax in
  // kernels of their own (seed 1, the unfused path measured against it). Recorded only when false.
  bool fuse_attention = true;
  Json ToJson() const;
  static PlanOptions FromJson(const Json& json);
};

struct Step {
  enum class Kind { kKernel, kExtern };
  Kind kind = Kind::kKernel;
  int index = -1;  // kernel index or node index
};

struct Plan {
  PlanOptions options;
  std::vector<KernelPlan> kernels;
  std::vector<Step> steps;
  std::set<int> memory;                // values in memory by the end (inputs, state, stored, extern results)
  std::vector<std::map<int, TensorMeta>> memory_before;  // per kernel: what it may read, with layouts
  std::vector<std::string> notes;      // planner decisions worth reporting
  std::vector<std::string> extern_ops; // ops left to PyTorch
  int unfused_attention = 0;           // attention patterns found but planned unfused (fuse_attention false)
};

Plan MakePlan(const Graph& graph, const PlanOptions& options);

// Whether a convolution is small per group (at most 4 output channels and 64 products per output, depthwise
// ones included) so that the `direct` algorithm applies: one output element per lane, its products unrolled.
bool DirectConvolutionFits(const MatmulSpec& mm);
// A matrix-vector product (one output column, no convolution): the `gemv` algorithm applies (rows of A
// times the vector, summed after the K loop; no tl.dot, whose narrowest N tile is 16).
bool MatVecFits(const MatmulSpec& mm);
// A convolution the `nhwc` algorithm computes: any non-transposed one (its input repacked channels-last by a
// first launch, K ordered by kernel tap, then channel of the group).
bool ChannelsLastConvolutionFits(const MatmulSpec& mm);
// The widest useful K step of the `nhwc` algorithm: the group's input channels (a power of two, tl.dot's 16
// at least); a wider one only adds masked lanes.
int64_t ChannelsLastMaxStep(const MatmulSpec& mm);

// A matrix product (no convolution, more than one column) whose operand rows as stored are not all 16-byte
// aligned (k or n not a multiple of 4 floats): the `aligned` algorithm applies (A and B copied first into
// rows of a 32-float stride, so the tile loads vectorize; 1_8's 2949 and 5921).
bool AlignedCopyFits(const MatmulSpec& mm);

// Split-K slices worth running for a matrix product in `design`'s tiles (1: none): enough to bring few output
// tiles over a deep K near two waves of programs. Never for convolutions.
int64_t SplitKFactor(const MatmulSpec& mm, const KernelDesign& design);

// The default design of a kernel (first seed); `seed` picks an alternative algorithm family (0, 1, 2).
// `precision` is the tl.dot input precision the candidate asks of its products ("" for ieee): a matrix
// product's tile follows it (the tiles measured fastest for ieee FMA products, tf32 and tf32x3 tensor-core
// products differ); kernels without tl.dot products ignore it, a recurrent time loop takes only tf32 from it.
KernelDesign DefaultDesign(const KernelPlan& kernel, int seed, const std::string& precision = "");

}  // namespace egg::expert
