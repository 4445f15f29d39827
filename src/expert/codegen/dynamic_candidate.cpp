#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>
#include <string>
#include <vector>

#include "expert/codegen/dynamic_batch.h"
#include "expert/codegen/generate_at.h"
#include "expert/codegen/guard_code.h"

namespace egg::expert {
namespace {

// A reduction kernel whose length grows with the batch (a mean over every element) cannot keep a one-tile
// design: the record with each such kernel (its length at `other`'s batch not the top's) looped over tiles of
// the same size, or nullopt when there is none to change.
std::optional<CandidateDesign> LoopedOverTheBatch(const Candidate& top, const Candidate& other) {
  CandidateDesign design = top.design;
  bool changed = false;
  for (const KernelPlan& kernel : top.plan.kernels) {
    for (const KernelPlan& at : other.plan.kernels) {
      auto record = design.kernels.find(kernel.name);
      if (at.name != kernel.name || at.length == kernel.length || record == design.kernels.end() ||
          record->second.algorithm != Algorithm::kPersistent) {
        continue;
      }
      record->second.algorithm = Algorithm::kLooped;
      changed = true;
    }
  }
  return changed ? std::optional<CandidateDesign>(design) : std::nullopt;
}

// The file at each sample (SamplePoints) from `design`, merged (dynamic_batch.h); `mismatch` gets
// the sample whose design differed from the top's, if that is why there is no source, and `form_changed` is
// set when the samples' code differed in form.
Candidate MergeDynamic(const Graph& graph, const std::string& task_source, const std::string& task_name,
                       const CandidateDesign& design, std::optional<Candidate>* mismatch,
                       bool* form_changed = nullptr) {
  const DynamicBatch& dynamic = *graph.dynamic;
  Candidate top = GenerateAt(graph, task_source, task_name, design, &dynamic);
  if (!top.source) {
    return top;
  }
  const std::vector<int64_t> tops = dynamic.Tops();
  std::vector<BatchSample> samples = {{tops, *top.source}};
  for (const std::vector<int64_t>& point : SamplePoints(tops)) {
    if (point == tops) {
      continue;
    }
    const std::string batch =
        fmt::format("{} {}", point.size() == 1 ? "batch" : "sizes", fmt::join(point, "x"));
    ParsedGraph at = GraphAtSizes(dynamic, point);
    if (!at.graph) {
      top.source.reset();
      top.problem = "dynamic batch: " + at.problem;
      return top;
    }
    Candidate other = GenerateAt(*at.graph, task_source, task_name, top.design, &dynamic);
    if (!other.source || other.design.ToJson() != top.design.ToJson()) {
      top.source.reset();
      top.problem = fmt::format("dynamic batch: the design does not hold at {} ({})", batch,
                                other.source ? "its kernels change" : other.problem);
      if (other.source) {
        *mismatch = std::move(other);
      }
      return top;
    }
    samples.push_back({point, *other.source});
  }
  const MergedSource merged = MergeBatchSamples(samples, tops);
  top.source = merged.source;
  if (!merged.source) {
    top.problem = "dynamic batch: " + merged.problem;
  }
  if (form_changed != nullptr) {
    *form_changed = merged.form_changed;
  }
  return top;
}

// The samples' merge, and when it fails on a change of form, once more with every kernel indexing in int64
// (DynamicBatch::wide_indexing): the far sample may pass int32 offsets where the range's top does not, and
// int64 offsets hold at every batch.
Candidate MergeDynamicOrWide(const Graph& graph, const std::string& task_source, const std::string& task_name,
                             const CandidateDesign& design, std::optional<Candidate>* mismatch) {
  bool form_changed = false;
  Candidate merged = MergeDynamic(graph, task_source, task_name, design, mismatch, &form_changed);
  if (merged.source || !form_changed || graph.dynamic->wide_indexing) {
    return merged;
  }
  Graph wide = graph;
  wide.dynamic->wide_indexing = true;
  std::optional<Candidate> wide_mismatch;
  Candidate retried = MergeDynamic(wide, task_source, task_name, design, &wide_mismatch);
  return retried.source ? retried : merged;
}

}  // namespace

Candidate GenerateDynamic(const Graph& graph, const std::string& task_source, const std::string& task_name,
                          const CandidateDesign& design) {
  for (const DynamicDim& dim : graph.dynamic->dims) {
    if (BatchInput(graph, dim.axis).empty()) {
      Candidate none;
      none.problem = fmt::format("dynamic batch: no tensor input has a dim {}", dim.axis);
      return none;
    }
  }
  std::optional<Candidate> mismatch;
  Candidate first = MergeDynamicOrWide(graph, task_source, task_name, design, &mismatch);
  if (first.source || !mismatch) {
    return first;
  }
  const std::optional<CandidateDesign> looped = LoopedOverTheBatch(first, *mismatch);
  if (!looped) {
    return first;
  }
  mismatch.reset();
  return MergeDynamicOrWide(graph, task_source, task_name, *looped, &mismatch);
}

}  // namespace egg::expert
