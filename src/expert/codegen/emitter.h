// Writes the body of one Triton kernel: the value of any graph node at a symbolic index, computed from what is
// in memory (loads), from reductions already finished in this kernel (registers), through views (index
// arithmetic) and pointwise ops (expressions), with common subexpressions shared within a scope.
// Throws NotFusable when a value cannot be computed here (the planner then splits the kernel).
#pragma once

#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "expert/codegen/view_index.h"
#include "expert/ir/graph.h"
#include "expert/ir/index_expr.h"
#include "expert/ir/ops.h"
#include "expert/kir/statement.h"

namespace egg::expert {

inline constexpr size_t kMaxConcatPiecesInTiles = 4;

// The loop variables of a kernel and the masks guarding them: a load is masked by the masks of the variables
// its address uses (and of those the runtime values in it were loaded at).
struct MaskSet {
  std::vector<std::pair<std::string, std::string>> vars;  // loop variable -> its mask variable
  std::map<std::string, std::string> combined;            // "xmask & rmask" -> a precomputed "mask"
  std::string tile_var;  // a variable spanning the kernel's rows, to give constants a tile shape
  // Most pieces a concatenation read in this kernel may select between (one masked load each); more throw
  // NotFusable, so the concatenation is stored by a kernel of its own.
  size_t max_concat_pieces = std::numeric_limits<size_t>::max();
  // An index-only constant (an arange of one element) as a 0-d tensor, not in the tile variable's shape: a
  // matrix product's operand tiles ([BLOCK_M, BLOCK_K], [BLOCK_K, BLOCK_N]) differ from its output tile's.
  bool scalar_constants = false;

  static MaskSet Flat();  // pointwise and pooling kernels: xindex / xmask
  static MaskSet Rows();  // reductions and scans: xindex, rindex, and their conjunction "mask"
  // Matrix products: output tile mindex/nindex ("omask"), K steps kaindex/kbindex. Their operands are staged
  // in shared memory per pipeline stage, one buffer per load: few concatenation pieces (DenseNet's 3x3
  // convolutions over a 26-way cat needed 500 KB of an H200's 227 KB).
  static MaskSet Tiles();
};

class KernelEmitter {
 public:
  // `memory`: values readable from memory with their layouts (inputs, parameters, earlier kernels' outputs).
  KernelEmitter(const Graph& graph, const std::map<int, TensorMeta>& memory, MaskSet masks);

  Operand Emit(int value, const std::vector<Index>& index);
  // Registers a reduction result finished in this kernel, read by rows: its row-major flat index must equal
  // `row` wherever it is read (else NotFusable).
  void DefineRow(int value, const Operand& operand, const Index& row);
  bool IsRow(int value) const { return rows_.count(value) != 0; }
  // Names a value the kernel computes from lane variables `vars` (used as an Index::Runtime atom): a load at it
  // takes their masks.
  void BindRuntime(const std::string& name, const std::set<std::string>& vars) {
    runtime_vars_[name].insert(vars.begin(), vars.end());
  }
  // The lane variables `index` depends on, directly or through bound runtime values.
  std::set<std::string> LanesOf(const Index& index) const;
  // tl.store of `operand` at `index` of `value` laid out as `layout`, under `mask` (a tile variable's name).
  void Store(int value, const std::vector<Index>& index, const Operand& operand, const TensorMeta& layout,
             const std::string& mask);

  // Extra condition (code) and-ed into every load mask while set, e.g. a window's padding test.
  void PushCondition(const std::string& condition);
  void PopCondition();

  // Lines are written to the current block; a scope also starts a fresh CSE table (a loop body).
  void Line(const std::string& text);
  // `for variable in <range>:` (a typed loop statement); its body is what follows one level deeper.
  void Loop(const std::string& variable, kir::LoopRange range);
  // A typed statement (a register tile's init) at the current scope's depth.
  void Add(kir::Statement statement);
  // Appends already-indented lines (a closed scope's) to the current block.
  void Append(const std::vector<std::string>& lines);
  void Append(std::vector<kir::Statement> statements);
  void OpenScope(int indent);
  // The current scope's indent (levels of four spaces).
  int Depth() const { return scopes_.back().indent; }
  // The scope's statements (kernel IR: typed loads and stores, other lines as text), closing it.
  std::vector<kir::Statement> CloseStatements();
  // The same, printed.
  std::vector<std::string> CloseScope();
  std::string Temp(const std::string& prefix = "tmp");

  // The pointer parameters this kernel reads or writes, in first-use order.
  const std::vector<int>& PointerValues() const { return pointer_values_; }
  std::string PointerName(int value);
  const std::vector<Helper>& Helpers() const { return helpers_; }
  const std::set<int>& Loaded() const { return loaded_; }
  // Nodes whose values this kernel computed (pointwise, views, concatenations, gathers).
  const std::set<int>& Computed() const { return computed_; }
  int64_t MaxAddress() const { return max_address_; }
  const Graph& GraphRef() const { return graph_; }
  const MaskSet& Masks() const { return masks_; }
  // The load mask of `address`: the masks of the lane variables it uses, and the lane conditions unless
  // `conditions` is false (an address inside its tensor for every lane).
  std::string MaskFor(const Index& address, bool conditions = true) const;
  // True when `operand` is a float32 load (or a half one, upcast) whose mask includes each of `masks`: its
  // masked lanes already read 0.0, so a matmul may take it as it is (no tl.where between the load and
  // tl.dot).
  bool ZeroWhereMasked(const Operand& operand, const std::vector<std::string>& masks) const;
  // While set, a half tensor read in place stays in its half type, `tl.load(p, mask, other=0.0)`, instead of
  // being widened: a tl.dot operand that Triton stages in half and hands to the tensor cores as it is (widening
  // and narrowing again halved a bf16 GEMM's speed on the H100: bench/results/h100-bf16-sample).
  void KeepHalfLoads(bool keep) { keep_half_loads_ = keep; }
  // Whether `value` is read from memory through views alone (index arithmetic, nothing computed on its
  // elements), so that KeepHalfLoads gives its operand in the half type.
  bool ReadThroughViews(int value) const;

 private:
  struct Scope {
    int indent = 0;
    std::vector<kir::Statement> statements;
    std::map<std::string, Operand> cse;
  };
  struct Row {
    Operand operand;
    Index row;
  };

  Operand Compute(int value, const std::vector<Index>& index);
  Operand Load(int value, const std::vector<Index>& index);
  Operand Pointwise(const Node& node, const Value& out, const std::vector<Index>& index);
  Operand Concat(const Node& node, const Value& out, const std::vector<Index>& index);
  Operand Pad(const Node& node, const Value& out, const std::vector<Index>& index);
  Operand Arange(const Node& node, const Value& out, const std::vector<Index>& index);
  Operand Gather(const Node& node, const Value& out, const std::vector<Index>& index);
  Operand IndexSelect(const Node& node, const std::vector<Index>& index);
  Operand IndexTensor(const Node& node, const std::vector<Index>& index);
  Operand Embedding(const Node& node, const std::vector<Index>& index);
  Operand Interpolate(const Node& node, const Value& out, const std::vector<Index>& index);
  Index NearestSource(const Index& at, float scale, int64_t in, int64_t out);
  struct LinearTap {  // a linear interpolation's two neighbours along one dim and their weights
    Index lo, hi;
    std::string lo_weight, hi_weight;
  };
  LinearTap Tap(const Index& at, float scale, bool align_corners, int64_t in);
  // `at` as float32 code (a constant one widened to the kernel's tile: a Python literal has no .to()).
  std::string FloatPosition(const Index& at) const;
  Operand Blend(int source, std::vector<Index> at, const std::vector<LinearTap>& taps, size_t dim,
                DType dtype);
  Index Positions(int index_value, const std::vector<Index>& position_index, int64_t size, bool wrap);
  Operand Bind(const std::string& expression, DType dtype);
  // Records that float32 temp `temp` is zero wherever `mask` is false (ZeroWhereMasked).
  void NoteZeroMasked(const std::string& temp, const std::string& mask);
  std::string Condition() const;

  const Graph& graph_;
  const std::map<int, TensorMeta>& memory_;
  bool keep_half_loads_ = false;
  MaskSet masks_;
  std::vector<Scope> scopes_;
  std::map<int, Row> rows_;
  std::vector<std::string> conditions_;
  std::map<std::string, std::set<std::string>> runtime_vars_;  // runtime value -> variables it was read at
  std::vector<int> pointer_values_;
  std::map<int, std::string> pointer_names_;
  std::vector<Helper> helpers_;
  std::set<int> loaded_;
  std::map<std::string, std::set<std::string>> float_load_masks_;  // float32 load temp -> its mask's terms
  std::set<int> computed_;
  int64_t max_address_ = 0;
  int next_temp_ = 0;
};

std::string JoinIndexKeys(const std::vector<Index>& index);

}  // namespace egg::expert
