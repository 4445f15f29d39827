// A kernel family as one unit: what it claims in a graph, its default design, the designs legal for it and
// worth measuring, the moves the search tries from an incumbent, and its lowering into Triton. Each family is
// one file of this folder and one line of families.def; everything else asks the registry (FamilyOf), never
// a kind's name.
//
//   plan/    MakePlan ── Claim (pattern families) ──▶ KernelPlan{kind}
//   design/  DefaultDesign, DesignFits, WorthMeasuring, StageMoves ──▶ FamilyOf(kind).…
//   codegen/ GenerateKernel ──▶ FamilyOf(kind).LowerProgram: the kernel IR, printed by kir/
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "expert/kir/kernel.h"
#include "expert/plan/plan.h"

namespace egg::expert {

struct KernelSource;  // codegen/kernel_codegen.h: what Lower returns

// The search stages that move one kernel's design (design_space.h).
enum class SearchStage { kAlgorithm, kMapping, kTiling, kMemory };

// Where a family's moves go, in the order tried. Add: a design of the kernel one move from its own (pruned by
// WorthMeasuring and duplicates there); AddCandidate: a move of the whole candidate (its plan options).
class MoveSink {
 public:
  virtual ~MoveSink() = default;
  virtual void Add(const KernelPlan& kernel, const KernelDesign& design, const std::string& move,
                   const std::string& description) = 0;
  virtual void AddCandidate(const CandidateDesign& design, const std::string& move,
                            const std::string& description) = 0;
  // The candidate the moves start from.
  virtual const CandidateDesign& Incumbent() const = 0;
};

class KernelFamily {
 public:
  virtual ~KernelFamily() = default;
  KernelKind Kind() const { return kind_; }
  virtual std::string_view Name() const = 0;
  // An experimental family runs only where a candidate's plan names it (PlanOptions::families).
  virtual bool Experimental() const { return false; }

  // Pattern families: `node` claimed for a kernel of this family alone, or nullopt. The built-in families are
  // formed by the planner's fusion instead (plan/fusion.cpp) and claim nothing.
  virtual std::optional<FamilyClaim> Claim(const Graph& graph, const Node& node) const;

  // The first seed's design (`seed` 0..2 picks an alternative), products in `precision` where it has tl.dot.
  virtual KernelDesign DefaultDesign(const KernelPlan& kernel, int seed, Precision precision) const = 0;
  // The design a candidate gets for a kernel its record does not list (an attention kernel maps the
  // candidate's ieee to tf32x3); DefaultDesign unless overridden.
  virtual KernelDesign FallbackDesign(const KernelPlan& kernel, int seed, Precision candidate) const;
  // Whether `design` is legal beyond the checks every kind shares (DesignFits: warps, stages, xblock a power
  // of two), and that rule in words.
  virtual bool Fits(const KernelPlan& kernel, const KernelDesign& design) const = 0;
  virtual std::string Rule() const = 0;
  // Whether a legal design fits one program's registers and shared memory (WorthMeasuring).
  virtual bool FitsResources(const KernelPlan& kernel, const KernelDesign& design) const;
  // Why the code generator cannot write `design` at all, or "" (legality.h, UnwritableDesign).
  virtual std::string Unwritable(const KernelPlan& kernel, const KernelDesign& design) const;
  // The designs one move of `stage` from the kernel's own, into `sink`.
  virtual void Moves(SearchStage stage, const KernelPlan& kernel, MoveSink& sink) const = 0;

  // The kernel in the kernel IR (kir/kernel.h): what the planner's probe and the design rules ask (its
  // analyses) and what codegen prints. Throws NotFusable when its group cannot be one kernel. `memory`:
  // values in memory before it runs, with layouts; `layouts`: those of the values it stores.
  virtual kir::Kernel LowerProgram(const Graph& graph, const KernelPlan& kernel,
                                   const std::map<int, TensorMeta>& memory,
                                   const std::map<int, TensorMeta>& layouts) const = 0;
  // The kernel's Triton source: LowerProgram's, printed.
  KernelSource Lower(const Graph& graph, const KernelPlan& kernel, const std::map<int, TensorMeta>& memory,
                     const std::map<int, TensorMeta>& layouts) const;

 private:
  friend class FamilyRegistry;
  KernelKind kind_;
};

// The family of a planned kernel's kind (every kind is registered: an unknown one is a programmer error).
const KernelFamily& FamilyOf(KernelKind kind);
// Every registered family, in registration order (the built-in ones first, at their KernelKind constants).
const std::vector<const KernelFamily*>& Families();
// The family named `name`, or UnknownName listing them.
const KernelFamily& FamilyNamed(std::string_view name);
// Whether `family` takes part in a plan with `options`: every family that is not experimental, and the
// experimental ones the options name.
bool FamilyEnabled(const KernelFamily& family, const PlanOptions& options);

// A family's maker, one per line of families.def.
#define EGG_FAMILY(maker) std::unique_ptr<KernelFamily> maker();
#include "expert/families/families.def"
#undef EGG_FAMILY

}  // namespace egg::expert
