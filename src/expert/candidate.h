// A complete candidate file from a captured graph and a design record: the task's own source (so ModelNew
// inherits Model's parameters and their names), the Triton kernels of the plan, and ModelNew.forward calling
// them (and PyTorch for the ops no kernel covers), guarded to the shapes it was specialized for.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "expert/graph.h"
#include "expert/plan.h"

namespace egg::expert {

// The design record of a whole candidate: the seed family, the fusion options, the product precision of matmul
// kernels it does not list, and each kernel's design.
struct CandidateDesign {
  int seed = 0;
  PlanOptions plan;
  std::string precision;  // tl.dot input_precision for unlisted matmul kernels: ieee (empty), tf32, tf32x3
  std::map<std::string, KernelDesign> kernels;  // by kernel name; missing kernels take DefaultDesign(seed)

  Json ToJson() const;
  static CandidateDesign FromJson(const Json& json);
};

// The comment line egg writes into every candidate it generates, for people: no code reads it back (the
// design record travels as data, in the agents' messages and the store).
inline constexpr const char* kDesignMarker = "# egg-design: ";

struct KernelReport {
  std::string name;
  std::string kind;
  std::vector<std::string> ops;  // the graph ops this kernel computes
  KernelDesign design;
  std::vector<std::string> reasons;
};

struct Candidate {
  std::optional<std::string> source;
  std::string problem;     // when there is no source
  CandidateDesign design;  // complete: every kernel's design filled in
  Plan plan;
  std::vector<KernelReport> kernels;
  std::vector<std::string> pytorch_ops;  // ops left to PyTorch
  size_t launches = 0;                   // Triton launches per forward (a recurrent layer stack: two a layer)
  Json ReportJson() const;
};

Candidate GenerateCandidate(const Graph& graph, const std::string& task_source, const std::string& task_name,
                            const CandidateDesign& design);

// The fastest tl.dot input precision whose error fits tolerance `tol` on float32 products: tf32 (10-bit
// mantissas, ~1e-3 relative on deep products) at 1e-3 and looser, ieee below (docs/expert.md).
std::string MatmulPrecisionFor(double tol);

// Whether a kernel design is valid for `kernel` (block sizes powers of two, persistent tiles covering the row).
bool DesignFits(const KernelPlan& kernel, const KernelDesign& design);

}  // namespace egg::expert
