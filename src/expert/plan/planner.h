// The planner's state while it forms the kernels of one graph (plan/ only; MakePlan in plan.h is its door):
// planner.cpp classifies nodes and runs the passes, realize.cpp decides which values live in memory,
// fusion.cpp forms kernels from realized roots, stores.cpp decides what each kernel writes.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "expert/families/lowering_probe.h"
#include "expert/plan/plan.h"

namespace egg::expert {

class Planner {
 public:
  Planner(const Graph& graph, const PlanOptions& options, std::set<int> forced_extern, std::set<int> unfused)
      : graph_(graph), forced_extern_(std::move(forced_extern)), unfused_(std::move(unfused)) {
    plan_.options = options;
  }

  // False (with *failed_node set) when a root cannot be put in any kernel: the caller forces it to PyTorch.
  bool Run(int* failed_node);

  Plan Take() { return std::move(plan_); }
  bool IsAttention(int node) const { return attentions_.count(node) != 0; }

 private:
  void Classify();
  // The pointwise nodes a registered family claims for a kernel of its own (KernelFamily::Claim): the first
  // enabled family to claim a node takes it.
  void FindClaims();
  // A planner note for a product or recurrent layer left to PyTorch whose tensors have a floating type other
  // than float32 (`lowered`: what its kernel family does lower).
  void NoteUnloweredTypes(const Node& node, const std::string& lowered);

  // Attention patterns become one flash kernel each, anchored at bmm(P, V): the scores' product and the
  // softmax's reductions are no longer kernels of their own.
  void FindAttention();

  bool IsZeroCopyView(const Node& node) const;

  // `value` must exist in memory or as a PyTorch view of memory (for an extern op or an output); with
  // `allow_view` false, in memory with its own layout (a recurrent kernel's operand): a view is realized.
  void NeedMemory(int value, bool allow_view = true);

  void MarkRealizations();

  // Concatenations each of whose pieces a kernel can store into its slice of the cat's buffer: the pieces
  // become roots with a slot (Plan::slots), the cat is no kernel's root and is in memory once they are.
  void PlaceConcatenations();
  // Whether `value`, a piece of a concatenation, can be stored into a slot of it: computed by a kernel that
  // stores through a layout, read only by kernels (which take any strides), not an output.
  bool Slottable(int value, int cat) const;

  void NeedArg(const Arg& arg, bool allow_view = true);

  void AddExternResults(const Node& node);

  // The values a kernel's roots leave in memory.
  std::vector<int> Results(const KernelPlan& kernel) const;

  std::map<int, TensorMeta> Layouts(const KernelPlan& kernel) const;

  // Whether `kernel` generates (all its results stored, as the trial's worst case).
  bool Generates(KernelPlan kernel, const std::map<int, TensorMeta>& memory, std::string* problem) const;

  // `kernel` lowered, storing its `stores`, in each form its seeds start from: seed 0's design and, where
  // seed 1's algorithm differs (a convolution seed 0 runs channels-last), seed 1's too, so that every seed of
  // the plan generates. A channels-last convolution reads its input through a flat copy that takes any
  // concatenation; the NCHW gather's tiles read at most four pieces. The values read are those of both.
  LoweringProbe ProbeSeeds(KernelPlan kernel, const std::map<int, TensorMeta>& memory) const;

  KernelPlan NewKernel(const Node& node) const;

  std::string RealizeWhy(int value) const;

  // The kernel `kernel` extended by the root of `node`, or nullopt when the domains cannot be shared;
  // `*reduced_apart` set when a reduction the product's tile could finish was left apart by the plan options.
  std::optional<KernelPlan> Extend(const KernelPlan& kernel, const Node& node, bool* reduced_apart) const;

  bool Place(const Node& node);

  void Push(KernelPlan kernel);

  // A matrix product whose operands cannot be computed inside its K loop (a concatenation of too many
  // pieces): each operand computed elementwise is stored by a kernel of its own first, the product then reads
  // it. True when one was stored.
  bool StoreMatmulOperands(const Node& node, const std::string& problem);

  void AddResults(const KernelPlan& kernel);

  // Whether the reductions of `kernel` can be split across programs (none reads another's result), reading
  // from `memory`; with `reductions_only` its elementwise roots are left out of the trial.
  bool Splittable(const KernelPlan& kernel, const std::map<int, TensorMeta>& memory,
                  bool reductions_only) const;

  // Which algorithms apply to a reduction kernel beyond persistent and looped.
  void MarkAlgorithms(KernelPlan* kernel, const std::map<int, TensorMeta>& memory) const;

  // Stores only what a later kernel, an extern op, an output or a mutation reads; designs are defaults.
  void FinalizeStores();
  // Once the stores are final: what each kernel may read (Plan::memory_before) and what is in memory by the
  // end (Plan::memory).
  void RecordMemory();

  const Graph& graph_;
  std::set<int> forced_extern_;
  std::set<int> unfused_;  // attention anchors whose flash kernel did not generate: planned unfused
  Plan plan_;
  std::map<int, OpClass> classes_;
  std::map<int, ReductionSpec> reductions_;
  std::map<int, PoolSpec> pools_;
  std::map<int, ScanSpec> scans_;
  std::map<int, MatmulSpec> matmuls_;
  std::map<int, RecurrentSpec> recurrents_;
  std::map<int, AttentionSpec> attentions_;
  std::map<int, FamilyClaim> claims_;  // nodes a pattern family claimed (kernels of their own)
  std::set<int> externs_;
  std::set<int> roots_;
  std::set<int> torch_views_;
  std::set<int> extern_results_;
  std::map<int, TensorMeta> memory_;
  std::vector<std::map<int, TensorMeta>> kernel_memory_;  // memory before each kernel
};

}  // namespace egg::expert
