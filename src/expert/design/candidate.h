// A compiled candidate as data: its complete design record, its plan, what each kernel computes and the ops
// left to PyTorch, beside its source (codegen/candidate_file.h writes it). The search reads these, not the
// source.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "expert/design/design_record.h"
#include "expert/plan/plan.h"

namespace egg::expert {

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
  // The graph the plan is of where the design's rewrite changed the captured one (FoldSummedProducts, with
  // PlanOptions::fold_summed_products), else null: the plan's values index the captured graph.
  std::shared_ptr<const Graph> graph;
  bool foldable = false;  // the captured graph has a sum FoldSummedProducts folds, folded here or not
  std::vector<KernelReport> kernels;
  std::vector<std::string> pytorch_ops;  // ops left to PyTorch
  size_t launches = 0;                   // Triton launches per forward (a recurrent layer stack: two a layer)
  Json ReportJson() const;
};
}  // namespace egg::expert
