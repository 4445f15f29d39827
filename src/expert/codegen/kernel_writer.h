// The writer of one kernel of kinds pointwise, reduction, pool, scan and matmul (codegen/ only): one class
// whose parts live by kind in kernel_writer.cpp (common), reduction_writer.cpp, split_reduction_writer.cpp,
// pool_writer.cpp, scan_writer.cpp, matmul_writer.cpp, conv_writer.cpp and transposed_conv_writer.cpp.
#pragma once

#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "expert/codegen/emitter.h"
#include "expert/codegen/kernel_codegen.h"
#include "expert/codegen/templates.h"
#include "expert/plan/plan.h"

namespace egg::expert::writer {

inline constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
// Whether offsets up to `extent` need int64 indexing: past int32, or always in a dynamic-batch module
// generated wide (DynamicBatch::wide_indexing).
inline bool NeedsInt64(const Graph& graph, int64_t extent) {
  return extent > kInt32Max || (graph.dynamic && graph.dynamic->wide_indexing);
}
inline constexpr int64_t kCombineTile = 4096;
inline constexpr int64_t kMatmulGroupRows = 8;  // matmul tile rows that sweep N together (L2 reuse of B)

const TensorMeta& MetaOf(const Graph& graph, int value);
bool Contains(const std::vector<int>& values, int value);
std::string Summary(const Graph& graph, const KernelPlan& kernel);
std::string Identity(ReductionKind kind, DType dtype);
DType AccumulatorType(ReductionKind kind, DType input);
// How a row of partial results of `kind` combines: summed (sum, mean, variance), multiplied (prod), the
// largest kept (max, any) or the smallest (min, all).
kir::Combine RowCombine(ReductionKind kind);
// `result = <combine>(operand, 1)[:, None]`: a row tile reduced to its column.
kir::Statement RowReduce(std::string result, std::string operand, ReductionKind kind);
// `redm<tag>, reds<tag>, redn<tag> = _egg_welford(mean, m2, count, 1)`: Welford's partial (mean, sum of
// squared deviations, count) tiles merged along the row.
kir::Statement WelfordReduce(const std::string& tag, std::vector<std::string> operands);
// The candidate file's function that reduces an argmax's (value, index) pairs (`_egg_argmax`), or an
// argmin's.
std::string ArgReducer(bool is_max);
// `redv<tag>, redi<tag> = _egg_argmax(values, indices, 1)`: an argmax's or argmin's pair of tiles reduced to
// the row's winner.
kir::Statement PairReduce(const std::string& tag, std::vector<std::string> operands, std::string reducer);
// What tl.dot's operands (computed in float32) are cast to for products of `operand` tensors: half types go
// to the tensor cores in their own type (EGG_BF16_DOT for bf16), float32 ones are taken as they are ("").
std::string DotOperandCast(DType operand);

class KernelWriter {
 public:
  KernelWriter(const Graph& graph, const KernelPlan& kernel, const std::map<int, TensorMeta>& memory,
               const std::map<int, TensorMeta>& layouts, MaskSet masks)
      : graph_(graph),
        kernel_(kernel),
        memory_(memory),
        layouts_(layouts),
        emitter_(graph, memory, std::move(masks)) {}

  // One kernel of each kind this writer covers (the families' lowerings, kernel_codegen.h; pointwise kernels
  // lower to the kernel IR instead, PointwiseProgram).
  kir::Kernel ReductionProgram();  // not split: SplitReductionProgram
  // Few long rows: function 1 reduces chunks of every row in parallel into partials in scratch, function 2
  // combines them and computes what the rows feed; a launch each.
  kir::Kernel SplitReductionProgram();
  // A pooling kernel in the kernel IR.
  kir::Kernel PoolProgram();
  kir::Kernel ScanProgram();
  // One program per BLOCK_M x BLOCK_N output tile (and batch), a loop over K in BLOCK_K steps with tl.dot on
  // tiles loaded through the emitter (so views such as transposes are plain index arithmetic, and pointwise
  // producers of the operands are computed on the fly), fp32 accumulation, then addmm's bias and the fused
  // elementwise consumers on the accumulator tile before a single store.
  kir::Kernel MatmulProgram();

 private:
  bool Stored(int value) const { return Contains(kernel_.stores, value); }

  void StoreIfNeeded(int value, const std::vector<Index>& index, const Operand& operand,
                     const std::string& mask);

  // The pointer parameters of a jitted function whose body `emitter` wrote: ptr0, ptr1, ...
  static std::string PointerParams(const KernelEmitter& emitter);

  // Lines at `depth` levels of four spaces, joined: a template slot's code.
  static std::string Indented(const std::vector<std::string>& lines, int depth);
  // Lines as text statements at `depth`.
  static std::vector<kir::Statement> TextLines(const std::vector<std::string>& lines, int depth);

  // A kernel of one function over a flat domain of `numel` lanes (xindex, xmask) in the kernel IR: the
  // emitter's statements as its body, one launch of XBLOCK lanes a program, `comment` saying what it
  // computes.
  kir::Kernel FinishFlat(const std::string& comment, int64_t numel);
  // The same over the kernel's rows (xindex a column, RBLOCK tiles along each row).
  kir::Kernel FinishRows(const std::string& comment);
  // The graph nodes this kernel computes: the emitter's and the kernel's reductions, pool, scan or product.
  std::set<int> ComputedNodes() const;

  // `function`: the jitted function's name when it is not the kernel's (the first of two launches).
  KernelSource Finish(const std::string& template_name, templates::Values values, const std::string& grid,
                      std::map<std::string, int64_t> constexprs, const std::string& function = "");

  // The input index of reduction `spec` at row x, reduced position r.
  std::vector<Index> ReductionInputIndex(const ReductionSpec& spec, const Index& x, const Index& r);

  // Emits the per-element contribution of `spec` at the current tile and the code combining it into the
  // accumulators; returns the final row values after the loop via `finish`.
  struct Accumulator {
    std::vector<kir::Statement> init;              // before the loop: register tiles (depth set when added)
    std::vector<kir::Statement> update;            // inside the loop (after the input is emitted; depth set
                                                   // when added)
    std::vector<kir::Statement> finish;            // after the loop: the tiles reduced to the row's values
    std::vector<std::pair<int, Operand>> results;  // output value -> row operand
  };

  Accumulator Accumulate(const ReductionSpec& spec, const Operand& input, bool looped, const std::string& tag,
                         const std::string& center);
  // Accumulate's argmax / argmin / max_with_index / min_with_index: (value, index) pairs of `value` (already
  // in the accumulator's type), ties to the first index.
  static void AccumulateIndexed(const ReductionSpec& spec, const std::string& value, DType acc_type,
                                DType out_type, bool looped, const std::string& tag, Accumulator* acc);

  void EmitReductionPass(const ReductionSpec& spec, size_t number, bool looped, const std::string& center,
                         const std::string& tag, Accumulator* out);

  // The looped row walk's iteration space: `roffset` over the row in RBLOCK steps.
  kir::LoopRange RowLoop() const;

  // The lane variables of a row tile (rindex, rmask, and mask: theirs and the rows'): at the function's top
  // level for a tile at 0, else inside the loop over row tiles.
  std::vector<kir::Statement> TileLines(bool looped) const;
  // The same at `depth`, the tile starting at `start` (code ending in " + ", "" for 0).
  std::vector<kir::Statement> TileLines(int depth, const std::string& start) const;

  void DefineResults(const ReductionSpec& spec, const Accumulator& acc);

  // var/std/var_mean in two passes: mean, then the centred sum of squares.
  void EmitVariance(const ReductionSpec& spec, size_t number, bool looped);

  // A partial result of a split reduction: the partial kernel stores `code` to scratch buffer `scratch`, one
  // value per row and split; the combine kernel loads them back (`identity` for splits past the last).
  struct SplitPart {
    size_t scratch;
    std::string code;
    DType dtype;
    std::string identity;
  };

  // The partial function (the emitter's) and its launch: one loop over a chunk of `chunk` elements of each
  // row accumulating every reduction, the partials stored to scratch buffers added to `program`. Returns them
  // per reduction.
  std::vector<std::vector<SplitPart>> SplitPartials(const Index& x, const Index& r, int64_t chunk,
                                                    int64_t splits, kir::Kernel& program);

  // The partials of reduction `spec` (the kernel's `number`th), their scratch buffers added to `scratch`.
  std::vector<SplitPart> AddSplitParts(const ReductionSpec& spec, size_t number, DType acc_type,
                                       int64_t splits, std::vector<Scratch>& scratch) const;

  // The combine function and its launch: per row block, each reduction's partials combined into its results,
  // then the kernel's other roots computed from them.
  void SplitCombine(const Index& x, int64_t splits, const std::vector<std::vector<SplitPart>>& parts,
                    kir::Kernel& program);

  // The partials of reduction `spec` loaded and combined in `combine`: its row results.
  Accumulator CombineSplitParts(const ReductionSpec& spec, size_t number, const std::vector<SplitPart>& parts,
                                int64_t splits, KernelEmitter& combine);

  // The kernel's roots other than its reductions, computed per row from their results (NotFusable for a
  // root that is not one value per row).
  void EmitSplitEpilogues(const Index& x, KernelEmitter& combine);

  // A reduction unit: a plain accumulator, a variance (Welford when streamed), or an online-softmax pair.
  struct Unit {
    enum class Kind { kPlain, kVariance, kOnline };
    Kind kind = Kind::kPlain;
    size_t spec = 0;
    size_t partner = 0;  // kOnline: the sum of exp(u - max)
  };

  const ReductionSpec* ReductionOf(int root) const;

  static bool IsVariance(const ReductionSpec& spec);

  std::vector<Unit> Units(bool online) const;

  std::vector<int> UnitOutputs(const Unit& unit) const;

  // Whether `value`, computed in this kernel, reads any of `targets` (directly or through inlined ops).
  bool Reads(int value, const std::set<int>& targets, std::set<int>* seen) const;

  // Consecutive units that do not read each other's results share one loop over the row.
  std::vector<std::vector<Unit>> Groups(const std::vector<Unit>& units) const;

  // Streamed mean and M2 per lane (Welford), combined across lanes with Chan's formula.
  Accumulator WelfordAccumulate(const ReductionSpec& spec, const Operand& input, const std::string& tag);

  void WelfordResults(const ReductionSpec& spec, const std::string& mean, const std::string& m2,
                      Accumulator* acc);

  Accumulator OnlineAccumulate(const ReductionSpec& max_spec, const ReductionSpec& sum_spec,
                               const Operand& input, const std::string& t);

  void EmitLoopGroup(const std::vector<Unit>& group);

  void EmitPersistentUnit(const Unit& unit, size_t number);

  std::string AvgDivisor(const PoolSpec& pool, const TensorMeta& in, const TensorMeta& out,
                         const std::vector<Index>& out_index, size_t first_spatial,
                         const std::vector<std::string>& starts, const std::vector<std::string>& ends);

  // Pointwise roots after a pooled or scanned value, computed where that value is (same flat position).
  void WriteEpilogues(const Index& flat, int producer);
  // A product's roots in its tile's epilogue, in root order: elementwise ones at the tile's elements, a
  // reduction of the product's columns (ReducesColumns; one tile spans them) across the tile's columns, the
  // consumers of its results at the tile's rows (stored under `mmask`).
  void WriteMatmulEpilogues(const Index& flat, int producer);
  // A reduction of the product's columns over the tile in registers (`input` its elements): its results.
  Accumulator ReduceColumns(const ReductionSpec& spec, const Operand& input, int number);
  // Where a value of `shape` with one element per row of the product's tile is read: the tile's row, `kept`
  // the product's index with its column axis at 0.
  std::vector<Index> RowIndexOf(const std::vector<int64_t>& shape, const std::vector<Index>& kept,
                                const std::vector<int64_t>& kept_shape, size_t axis, const Index& row) const;

  // A tl.dot operand of the product: Emit, with a half tensor read in place kept in its half type.
  Operand EmitDotOperand(int value, const std::vector<Index>& index);
  // The lines that skip the K loop of a tile whose every lane a where(index-only cond, product, ...) drops
  // (sets k_end); none when the product has no such reader.
  std::vector<kir::Statement> DroppedTilePrologue(int out, const std::vector<Index>& out_index);
  // Where the aligned and kmajor algorithms copy the operands: A as [batch * m, k] rows, B as [batch * k, n]
  // rows (aligned) or transposed as [batch * n, k] rows (kmajor), each row at a stride of whole 32-float
  // sectors. A dense K-major A whose rows already start on 32-float lines is read in place: its copy would be
  // the same bytes. The copies' launches and the product's loads both read it.
  struct OperandCopies {
    bool kmajor = false;
    bool a_copied = true;
    int b_scratch = 0;  // B's scratch buffer: ScratchId(1) after A's copy, else ScratchId(0)
    int64_t a_rows = 0;
    int64_t a_stride = 0;
    int64_t b_rows = 0;
    int64_t b_columns = 0;
    int64_t b_stride = 0;
  };
  OperandCopies CopiesOf(const MatmulSpec& mm) const;
  // The aligned and kmajor algorithms' loads of the operands from their copies, and those copies' kernels.
  void LoadAlignedOperands(const OperandCopies& copies, const Index& b, const Index& m, const Index& n,
                           const Index& ka, const Index& kb);
  void AddAlignedCopies(const OperandCopies& copies, kir::Kernel& program);

  // The row stride of an operand's aligned copy: `columns` rounded up to 32 floats, so that every row starts
  // on a 128-byte line and the tile loads vectorize.
  static int64_t AlignedStride(int64_t columns);

  struct IndexMask {
    int cond = -1;                  // the where's condition value
    bool product_when_true = true;  // where(cond, product, other), else where(cond, other, product)
  };

  // The where that is the only reader of matmul output `out`, when its condition is computed from indices
  // alone (iota, comparisons, arithmetic on scalars): the lanes it drops can be known before the K loop.
  std::optional<IndexMask> IndexMaskedReader(int out) const;

  // True when `value` is computed by pointwise and view ops from scalars and iotas alone (no tensor read).
  bool IndexOnly(int value) const;

  // A convolution as an implicit GEMM (no im2col buffer): per group (the batch axis), rows m = (image, output
  // position), columns n = the group's output channels, k = (input channel of the group, kernel offset). The
  // input tile is gathered at position * stride - padding + offset * dilation, masked to zero in the padding;
  // the weight tile is read as [k, n]; the bias and fused consumers apply to the accumulator before one
  // store. A convolution with few channels per group (depthwise: one) computed directly: one output element
  // per lane, its (input channel of the group, kernel offset) products unrolled and summed in fp32 FMAs. The
  // implicit GEMM would pad a one-column N tile to tl.dot's 16 and run a K of a few taps.
  kir::Kernel DirectConvolutionProgram();

  kir::Kernel ConvolutionProgram();

  // A convolution as a channels-last implicit GEMM. A first launch copies the input, computed through the
  // emitter at its NCHW index (so a fused producer still runs there, once per element), into a scratch buffer
  // laid out [images, *in_size, in_channels]. The GEMM then orders K as (kernel tap, channel of the group):
  // per tap, each row's input position and validity are [BLOCK_M, 1] vectors computed once, and the A tile of
  // BLOCK_K channels is one load contiguous along K at the row's base, not a gather delinearized per K step.
  // The weight is copied too, into [output channel, tap, channel of the group] rows: read in place at
  // [output channel, channel, tap] its K step strides by the tap count, and the H200 measured that
  // gather 1.3-6x slower than the NCHW form (bench/results/h200-nhwc-aligned); the copy is a small launch per
  // forward. A transposed convolution runs per output phase as TransposedConvolutionProgram does, a tap its
  // phase lacks running no channel step.
  kir::Kernel ChannelsLastConvolutionProgram();
  // Its rows and taps: the prologue (the rows' coordinates; transposed: the program's group and phase), the
  // lines each tap computes (positions, validity `tvalid`, the base `tbase` in the copy), the output's index,
  // the weight tap a loop tap reads and the channel loop's stop where a phase lacks the tap.
  struct ChannelsLastTaps {
    Index group;
    std::vector<std::string> prologue, tap_lines;
    std::vector<Index> out_index;
    Index weight_tap;
    int64_t taps = 0;
    std::string channels_stop;
  };
  ChannelsLastTaps ChannelsLastGeometry();
  // Its input's and weight's copies, as the launches before the GEMM (scratch buffers 0 and 1).
  void PrependChannelsLastCopies(kir::Kernel& program);

  // A first launch `<kernel>SUFFIX` that copies `value`, computed through an emitter of its own at `index`
  // (over the lane variables pindex < rows and cindex < columns), into scratch buffer `scratch` as rows of
  // `stride` elements: [BLOCK_P, BLOCK_C] tiles, so that a read running along either variable and the write
  // (along columns) both stay contiguous. A fused producer of `value` runs here, once per element.
  void PrependRepack(kir::Kernel& program, int value, const std::vector<Index>& index, int64_t rows,
                     int64_t columns, int64_t stride, int scratch, const std::string& suffix,
                     const std::string& what);

  struct ConvTiles {
    std::vector<Index> input, weight, out;  // the gathered input, the weight read as [k, n], the output
    std::string input_valid, weight_valid;  // conditions on the loaded tiles (empty: none)
    std::vector<std::string> prologue;      // lines before the K loop (values per row or per program)
    std::vector<std::string> loop;          // lines at the top of each K step
  };

  // `value` computed once into `name` by a line added to `lines` (a constant or a lone variable stays as it
  // is): the interpreter evaluates every operation of an expression each time it appears. Loads at the name
  // take the masks of the lane variables the value depends on.
  Index Named(const std::string& name, const Index& value, std::vector<std::string>& lines);

  // The (image, position...) coordinates of the rows, computed before the K loop.
  std::vector<Index> NamedRows(const std::vector<Index>& row, std::vector<std::string>& prologue);

  // The (input channel, kernel offset...) coordinates of a K step's input tile, computed once per step.
  std::vector<Index> NamedTaps(const std::vector<Index>& k, std::vector<std::string>& loop);

  static void And(std::string& conjunction, const std::string& condition);

  // The conditions that keep `position` inside [0, size), where its range can leave it.
  static void RequireInside(const Index& position, int64_t size, std::string& valid);

  // A transposed convolution, one dense convolution per output phase (sub-pixel form): the batch axis is
  // (group, phase), rows are (image, q) for output positions q * stride + phase, k = (input channel, the
  // phase's taps). Per-phase offsets, tap counts and input bases are computed once per program (the
  // prologue); taps past a phase's count, and rows past its output extent, are masked where phases differ.
  kir::Kernel TransposedConvolutionProgram();

  // One spatial dim of a transposed convolution's phase: the first kernel offset, the input position of q and
  // tap 0 (constants where every phase agrees, else values the prologue computes), the count of taps where it
  // differs between phases (code, else empty) and the output position.
  struct PhaseTerms {
    Index first, base, out;
    std::string count;
  };

  PhaseTerms TransposedTerms(const ConvShape& conv, size_t s, const Index& phase_code, const Index& q,
                             std::vector<std::string>& prologue);
  // A transposed convolution's program grid, shared by its NCHW and channels-last forms: the batch axis split
  // into the group (its line in `prologue` where there are several groups and phases) and each dim's phase,
  // and the rows' shape (image, q < ceil(out / stride) per dim).
  struct PhaseGrid {
    Index group;
    std::vector<Index> phase;
    std::vector<int64_t> rows_shape;
  };
  PhaseGrid TransposedGrid(std::vector<std::string>& prologue) const;
  std::string TileGrid(bool dynamic, bool batch_inner, int64_t grid_m, int64_t grid_n) const;
  // Rows past this phase's output extent (`rows_valid`, where a stride does not divide the output) masked off
  // in `prologue`.
  static void MaskPhaseRows(const std::string& rows_valid, std::vector<std::string>& prologue);

  // The loop body (input and weight tiles, zero where masked), the bias, and the accumulator's store with its
  // fused consumers at `tiles.out`.
  kir::Kernel FinishConvolution(const ConvTiles& tiles, const Index& channel);

  // `value` at `index`, its loads masked by `valid` (named `name` in the code) where that is not empty.
  Operand EmitUnder(int value, const std::vector<Index>& index, const std::string& valid,
                    const std::string& name);

  // A product's K loop before its function is assembled (FinishMatmul).
  struct DotLoop {
    std::vector<kir::Statement>
        prologue;                      // after the tile's lanes: rows' coordinates, a dropped tile's k_end
    std::vector<kir::Statement> step;  // one K step: the operand tiles a and b (their loads' sides marked)
    // channels-last convolutions: an outer loop over the kernel taps, K then the channels of one tap
    kir::LoopRange tap_range;  // empty for every other product
    std::vector<kir::Statement> tap_lines;
    int64_t taps = 0;
    int64_t channels = 0;
    // the channel loop's stop where it depends on the tap (a transposed convolution's phase takes fewer taps
    // than the loop runs: "kend", 0 for a tap it lacks); empty: `channels`
    std::string channels_stop;
    // nhwck: one K loop over (tap, channel step) pairs instead of the tap loop around the channel loop; the
    // tap lines run in it, and a tap a phase lacks masks its steps off (`kend`) instead of skipping them
    bool one_k_loop = false;
    // the depth of a K step's statements: inside the tap and channel loops, or the one K loop
    int StepDepth() const { return tap_range.empty() || one_k_loop ? 2 : 3; }
  };
  // Which function of the product FinishMatmul writes: the whole of it, or split-K's partial products over
  // one slice of K and the function that sums them.
  enum class DotPart { kWhole, kPartial, kCombine };
  struct DotSplit {
    int64_t chunk = 0;             // K columns a split covers
    int64_t splits = 0;            // slices of K
    std::string partials, offset;  // the partials' pointer and a tile's offset in them
  };

  // The product's function(s), with its epilogue (bias, fused consumers, stores) at `out_index` (`flat`).
  kir::Kernel FinishMatmul(DotLoop loop, int out, const std::vector<Index>& out_index, const Index& flat);
  // One function's body: the prologue, the K loop (or the split-K combine loop), the epilogue unless partial.
  std::vector<kir::Statement> DotBody(const DotLoop& loop, DotPart part, const DotSplit& split,
                                      const std::vector<kir::Statement>& epilogue) const;
  // The K loop's header lines and those of a K step's lanes (kaindex, kbindex and their masks) at `depth`.
  void KLoopLines(const DotLoop& loop, DotPart part, const DotSplit& split,
                  std::vector<kir::Statement>& body) const;
  // Marks the loads of a K step with the operand tile they span, from their masks.
  static void MarkStagedTiles(std::vector<kir::Statement>& step);
  // A load of `scratch` at `address` in a K step.
  kir::Statement ScratchTileLoad(const std::string& name, int scratch, const Index& address,
                                 const std::string& mask, kir::TileSide side);

  kir::Kernel SortProgram();

  // Closes the scope of a row's code and places it after the tile lines: inside the loop over row tiles where
  // `looped`, else after the one tile's lines.
  void PlaceRowBody(bool looped);

  // The scan template's kernel (scans and sorts) with the emitter's code as its body; `what`: the rows'
  // result in words ("cumulative sum", "top 5 (largest)").
  kir::Kernel FinishScanKernel(const std::string& what);

  const Graph& graph_;
  const KernelPlan& kernel_;
  const std::map<int, TensorMeta>& memory_;
  const std::map<int, TensorMeta>& layouts_;
  KernelEmitter emitter_;
  bool wide_scratch_ = false;  // a scratch buffer past int32 offsets (split-K partials)
  bool skip_dropped_tiles_ =
      false;  // the matmul prologue computes k_end: no K loop where a where drops the tile
};

}  // namespace egg::expert::writer
