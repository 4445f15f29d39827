// The fusion plan of a captured graph: which values are realized in memory, which Triton kernels compute them
// (each a fusion group with its iteration domain and the reasons it was formed), which ops run in PyTorch,
// and the design record that fixes each kernel's algorithm and tiling. MakePlan never throws for graph
// content: what it cannot put in a kernel runs in PyTorch.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "expert/design/design_record.h"
#include "expert/ir/graph.h"
#include "expert/ir/ops.h"
#include "expert/patterns/attention.h"
#include "expert/patterns/matmul.h"
#include "expert/patterns/pool.h"
#include "expert/patterns/recurrent.h"
#include "expert/patterns/reduction.h"
#include "expert/patterns/scan.h"

namespace egg::expert {

// A node a registered family claimed for a kernel of its own (KernelFamily::Claim): the node's value is
// realized and computed by that family's kernel alone, from `operands`.
struct FamilyClaim {
  KernelKind kind;
  int node = -1;
  std::vector<int> operands;
  std::string reason;  // the kernel's reason, in words
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
  std::optional<FamilyClaim> claim;
  KernelDesign design;
  std::vector<std::string> reasons;
  bool splittable = false;  // its reductions can be split across programs (no elementwise roots)
  bool online_candidate =
      false;  // a max and a sum of exp(x - max) over the same rows: online softmax applies
};

// A value stored straight into its piece of a concatenation's buffer (Inductor's ConcatKernel does the same):
// `cat` is never copied, its inputs' kernels write their slices of it. The value is the view
// cat.narrow(dim, offset, its size along dim): its layout has the cat's strides.
struct ConcatSlot {
  int cat = -1;  // the concatenation's value
  int dim = 0;
  int64_t offset = 0;
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
  std::set<int> memory;  // values in memory by the end (inputs, state, stored, extern results)
  std::vector<std::map<int, TensorMeta>> memory_before;  // per kernel: what it may read, with layouts
  std::vector<std::string> notes;                        // planner decisions worth reporting
  std::vector<std::string> extern_ops;                   // ops left to PyTorch
  int unfused_attention = 0;  // attention patterns found but planned unfused (fuse_attention false)
  std::map<int, ConcatSlot> slots;  // by value: stored into a slice of a concatenation (none copies it)
  // A reduction over a product's columns that its tile could finish was left to a kernel of its own
  // (PlanOptions::reduce_in_products false).
  bool products_reduced_apart = false;
};

// The layout `value` is stored in: dense, or for a value in a concatenation's slot the cat's strides (the
// view the candidate file makes of the cat's buffer, its offset in the view's pointer).
TensorMeta StoreLayout(const Graph& graph, const Plan& plan, int value);

Plan MakePlan(const Graph& graph, const PlanOptions& options);
}  // namespace egg::expert
