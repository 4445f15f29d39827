#include "pipeline/pipeline.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "common/fs.h"
#include "common/hash.h"

namespace egg::pipeline {
namespace {

constexpr size_t kIdHashChars = 12;

std::string CandidateId(const std::string& source) { return "c" + Sha256Hex(source).substr(0, kIdHashChars); }

std::string SummaryJson(const CandidateRecord& candidate) {
  const auto& time = candidate.eval.time_ms.candidate;
  Json summary = {{"id", candidate.id},
                  {"status", harness::StatusName(candidate.eval.status)},
                  {"median_ms", candidate.MedianMs()},
                  {"timer", time ? time->timer : "none"},
                  {"triton_launches", candidate.eval.triton_launches},
                  {"max_abs_err", candidate.eval.max_abs_err}};
  if (candidate.eval.speedup_vs_eager) {
    summary["speedup_vs_eager"] = *candidate.eval.speedup_vs_eager;
  }
  return summary.dump();
}

double Noise(const harness::Stats& a, const harness::Stats& b) {
  return std::max({a.p80 - a.p20, b.p80 - b.p20, kMinNoiseFraction * b.median});
}

// A design record as the store keeps it: its JSON text, or none.
std::optional<std::string> DesignJson(const std::optional<agents::Design>& design) {
  return design ? std::optional<std::string>(design->record.dump()) : std::nullopt;
}

Json DecisionJson(const DecisionRecord& decision) {
  return Json{{"stage", decision.stage},
              {"round", decision.round},
              {"candidate_id", decision.candidate_id},
              {"move", decision.move},
              {"accepted", decision.accepted},
              {"reason", decision.reason},
              {"incumbent_ms", decision.incumbent_ms},
              {"candidate_ms", decision.candidate_ms}};
}

}  // namespace

std::optional<double> CandidateRecord::MedianMs() const {
  if (!eval.correct || !eval.time_ms.candidate) {
    return std::nullopt;
  }
  return eval.time_ms.candidate->median;
}

// A dynamic candidate's time at one size of its by_batch (the candidate's own stats: before the baselines are
// beside it, time_ms is those stats; after, its "candidate" entry), or nullopt.
std::optional<harness::Stats> SizeStats(const Json& entry) {
  const Json time = entry.value("time_ms", Json());
  const Json stats = time.is_object() && time.contains("candidate") ? time.at("candidate") : time;
  if (!stats.is_object() || stats.value("median", 0.0) <= 0) {
    return std::nullopt;
  }
  return stats.get<harness::Stats>();
}

// Two dynamic candidates compared at every size both were timed at: the task's own and each of by_batch's.
// The geometric mean of the candidate's median over the incumbent's, and the largest noise of one size
// relative to the incumbent's median there; nullopt when they share no size beyond the task's own.
struct SizesComparison {
  double ratio = 1;
  double noise = 0;
  std::vector<std::string> sizes;  // the points beyond the task's own, as text
};

std::optional<SizesComparison> CompareAcrossSizes(const harness::EvalResult& mine,
                                                  const harness::EvalResult& theirs) {
  if (!mine.by_batch.is_array() || !theirs.by_batch.is_array()) {
    return std::nullopt;
  }
  SizesComparison out;
  double log_sum = std::log(mine.time_ms.candidate->median / theirs.time_ms.candidate->median);
  out.noise = Noise(*mine.time_ms.candidate, *theirs.time_ms.candidate) / theirs.time_ms.candidate->median;
  int count = 1;
  for (const Json& entry : mine.by_batch) {
    const Json point = harness::RowPoint(entry);
    for (const Json& other : theirs.by_batch) {
      const std::optional<harness::Stats> a = SizeStats(entry);
      const std::optional<harness::Stats> b = SizeStats(other);
      if (point.is_null() || harness::RowPoint(other) != point || !a || !b) {
        continue;
      }
      log_sum += std::log(a->median / b->median);
      out.noise = std::max(out.noise, Noise(*a, *b) / b->median);
      out.sizes.push_back(harness::PointText(point));
      ++count;
    }
  }
  if (out.sizes.empty()) {
    return std::nullopt;
  }
  out.ratio = std::exp(log_sum / count);
  return out;
}

// A dynamic candidate against the incumbent at every size both were timed at: accepted when the geometric
// mean of its time ratios is below 1 by more than the largest relative noise of one size.
bool AcceptAcrossSizes(const SizesComparison& sizes, std::string* reason) {
  const std::string where =
      fmt::format("the task's own size and {} more ({})", sizes.sizes.size(), fmt::join(sizes.sizes, ", "));
  if (sizes.ratio < 1 - sizes.noise) {
    *reason =
        fmt::format("faster across sizes: geometric mean of the time ratios {:.3f} at {} (noise {:.3f})",
                    sizes.ratio, where, sizes.noise);
    return true;
  }
  *reason = fmt::format(
      "not faster across sizes by more than the noise: geometric mean of the time ratios {:.3f} at {} (noise "
      "{:.3f})",
      sizes.ratio, where, sizes.noise);
  return false;
}

bool Accept(const CandidateRecord& candidate, const CandidateRecord* incumbent, std::string* reason) {
  if (!candidate.eval.correct) {
    *reason = "not correct: " + harness::StatusName(candidate.eval.status);
    return false;
  }
  if (incumbent == nullptr) {
    *reason = "first correct kernel";
    return true;
  }
  const auto& mine = candidate.eval.time_ms.candidate;
  const auto& theirs = incumbent->eval.time_ms.candidate;
  if (!mine || !theirs) {
    *reason = "not measured: no timing on this device, the incumbent stays";
    return false;
  }
  if (const std::optional<SizesComparison> sizes = CompareAcrossSizes(candidate.eval, incumbent->eval)) {
    return AcceptAcrossSizes(*sizes, reason);
  }
  const double noise = Noise(*mine, *theirs);
  if (mine->median < theirs->median - noise) {
    *reason = "faster: median " + std::to_string(mine->median) + " ms vs " + std::to_string(theirs->median) +
              " ms (noise " + std::to_string(noise) + " ms)";
    return true;
  }
  *reason = "not faster than the incumbent by more than the noise (" + std::to_string(mine->median) +
            " ms vs " + std::to_string(theirs->median) + " ms, noise " + std::to_string(noise) + " ms)";
  return false;
}

agents::StageContext Pipeline::Context(const StageSpec& spec, const StageRecord& record, int round) const {
  agents::StageContext context;
  context.stage = spec.name;
  context.objective = spec.objective;
  context.moves = spec.moves;
  context.task_source = options_.task_source;
  context.tol = options_.tol;
  context.precision = options_.precision;
  context.sm_count = sm_count_;
  context.round = round;
  if (incumbent_) {
    context.incumbent_source = incumbent_->source;
    context.incumbent_design = incumbent_->design;
    context.incumbent_summary = SummaryJson(*incumbent_);
  }
  const size_t first =
      record.candidates.size() > kHistoryLength ? record.candidates.size() - kHistoryLength : 0;
  for (size_t i = first; i < record.candidates.size(); ++i) {
    const CandidateRecord& attempt = record.candidates[i];
    const bool accepted = std::any_of(record.decisions.begin(), record.decisions.end(), [&](const auto& d) {
      return d.candidate_id == attempt.id && d.accepted;
    });
    context.history.push_back(
        {attempt.id, attempt.move, harness::StatusName(attempt.eval.status), attempt.MedianMs(), accepted});
  }
  Json accepted = Json::array();
  for (const DecisionRecord& decision : accepted_) {
    accepted.push_back(DecisionJson(decision));
  }
  context.accepted_decisions = accepted.empty() ? "" : accepted.dump();
  return context;
}

Proposals Pipeline::Batch(const StageRecord& record, int round, const agents::ProfileReport* report,
                          int count) const {
  return Proposals(
      *backend_.code, count, options_.agent_concurrency,
      [this, &record, round] { return Context(record.spec, record, round); }, report);
}

CandidateRecord Pipeline::Measure(const std::string& stage, const std::string& origin,
                                  const std::string& parent_id, const agents::CodeProposal& proposal) {
  CandidateRecord candidate;
  candidate.id = CandidateId(proposal.source);
  tried_ids_.insert(candidate.id);
  candidate.stage = stage;
  candidate.origin = origin;
  candidate.author = proposal.author;
  candidate.untrusted = proposal.untrusted;
  candidate.parent_id = parent_id;
  candidate.source = proposal.source;
  candidate.design = proposal.design;
  candidate.description = proposal.description;
  candidate.move = proposal.move;
  candidate.path = options_.run_dir + "/" + candidate.id + ".py";
  WriteFileAtomic(candidate.path, candidate.source);
  Emit({.kind = ProgressKind::kEvaluate, .stage = stage, .candidate_id = candidate.id, .detail = origin});
  candidate.eval = evaluator_.Evaluate({candidate.path, candidate.author, candidate.untrusted});
  Emit({.kind = ProgressKind::kEvaluated,
        .stage = stage,
        .candidate_id = candidate.id,
        .detail = harness::StatusName(candidate.eval.status),
        .median_ms = candidate.MedianMs()});
  if (store_ != nullptr) {
    store_->PutCandidate({options_.run_id + "/" + candidate.id, options_.run_id, stage, origin,
                          parent_id.empty() ? "" : options_.run_id + "/" + parent_id, candidate.source,
                          candidate.description, candidate.move, candidate.eval.key,
                          harness::StatusName(candidate.eval.status), candidate.MedianMs(),
                          DesignJson(candidate.design)});
  }
  return candidate;
}

void Pipeline::Emit(ProgressEvent event) const {
  if (options_.progress == nullptr) {
    return;
  }
  if (incumbent_) {
    event.best =
        ProgressBest{incumbent_->id, incumbent_->MedianMs(), incumbent_->eval.speedup_median_vs_eager,
                     incumbent_->eval.speedup_median_vs_compile};
  }
  event.search_elapsed_s = Now() - started_s_;
  event.budget_s = options_.time_budget_s;
  options_.progress->OnProgress(event);
}

void Pipeline::EmitScreened(const std::string& stage, int round,
                            const std::vector<harness::ScreenResult>& screened) const {
  ProgressEvent event{.kind = ProgressKind::kScreened, .stage = stage, .round = round};
  event.total = static_cast<int>(screened.size());
  for (const harness::ScreenResult& result : screened) {
    if (result.status != harness::EvalStatus::kOk) {
      continue;
    }
    ++event.done;
    if (result.time && (!event.median_ms || result.time->median < *event.median_ms)) {
      event.median_ms = result.time->median;
    }
  }
  Emit(event);
}

double Pipeline::Now() const {
  if (options_.clock) {
    return options_.clock();
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool Pipeline::Stopped() {
  if (stop_ == agents::StopReason::kNone && options_.time_budget_s > 0 && incumbent_ &&
      Now() - started_s_ >= options_.time_budget_s) {
    NoteStop(agents::StopReason::kTimeBudgetUsed,
             fmt::format("the time budget of {:g} s was spent; the run ends with its incumbent",
                         options_.time_budget_s));
  }
  return stop_ != agents::StopReason::kNone;
}

void Pipeline::NoteStop(agents::StopReason stop, const std::string& failure) {
  if (stop != agents::StopReason::kNone && stop_ == agents::StopReason::kNone) {
    stop_ = stop;
    stop_failure_ = failure;
  }
}

std::optional<CandidateRecord> Pipeline::Attempt(const agents::StageContext& context,
                                                 const agents::CodeProposal& proposal, StageRecord* record) {
  CandidateRecord candidate = Measure(context.stage, "code", "", proposal);
  record->candidates.push_back(candidate);
  for (int attempt = 0; !candidate.eval.correct && attempt < options_.debug_attempts && !Stopped();
       ++attempt) {
    auto repair = backend_.debug->Repair(context,
                                         {candidate.source, candidate.design,
                                          harness::StatusName(candidate.eval.status), candidate.eval.reason},
                                         attempt);
    NoteStop(repair.stop, repair.failure);
    if (!repair.value) {
      break;
    }
    // A repair stays its proposal's (author); its source is the repairer's (trust).
    agents::CodeProposal repaired{repair.value->source, "repair: " + repair.value->diagnosis, proposal.move,
                                  proposal.author, repair.value->untrusted};
    repaired.design = repair.value->design;  // the repaired file's record, if the repairer generated it
    candidate = Measure(context.stage, "debug", candidate.id, repaired);
    record->candidates.push_back(candidate);
  }
  if (!candidate.eval.correct) {
    return std::nullopt;
  }
  return candidate;
}

void Pipeline::Decide(StageRecord* record, int round, const CandidateRecord& candidate, bool keep_if_first) {
  DecisionRecord decision;
  decision.stage = record->spec.name;
  decision.round = round;
  decision.candidate_id = candidate.id;
  decision.move = candidate.move.empty() ? candidate.description : candidate.move;
  decision.author = candidate.author;
  decision.candidate_ms = candidate.MedianMs();
  decision.incumbent_ms = incumbent_ ? incumbent_->MedianMs() : std::nullopt;
  const bool first = !incumbent_.has_value();
  decision.accepted =
      Accept(candidate, incumbent_ ? &*incumbent_ : nullptr, &decision.reason) && (keep_if_first || !first);
  if (decision.accepted) {
    incumbent_ = candidate;
  }
  Record(record, std::move(decision));
}

void Pipeline::Record(StageRecord* record, DecisionRecord decision, bool quiet) {
  if (!quiet) {
    Emit({.kind = ProgressKind::kDecided,
          .stage = decision.stage,
          .round = decision.round,
          .candidate_id = decision.candidate_id,
          .accepted = decision.accepted,
          .detail = decision.reason});
  }
  if (store_ != nullptr) {
    store_->PutDecision({options_.run_id, decision.stage, decision.round,
                         options_.run_id + "/" + decision.candidate_id, decision.move, decision.accepted,
                         decision.reason, decision.incumbent_ms, decision.candidate_ms});
  }
  record->decisions.push_back(std::move(decision));
}

void Pipeline::NoteUnwritten(StageRecord* record, int index,
                             const agents::AgentResult<agents::CodeProposal>& proposal) {
  if (proposal.value || proposal.stop != agents::StopReason::kNone || proposal.failure.empty()) {
    return;
  }
  Record(record, {record->spec.name, 0, fmt::format("unwritten-{}", index + 1),
                  fmt::format("proposal {}", index + 1), false, "not written: " + proposal.failure,
                  incumbent_ ? incumbent_->MedianMs() : std::nullopt, std::nullopt, ""});
}

bool Pipeline::IsDuplicate(StageRecord* record, int round, const agents::CodeProposal& proposal) {
  const std::string id = CandidateId(proposal.source);
  if (tried_ids_.count(id) == 0) {
    return false;
  }
  Record(record,
         {record->spec.name, round, id, proposal.move, false,
          "duplicate: this run already evaluated the same source",
          incumbent_ ? incumbent_->MedianMs() : std::nullopt, std::nullopt, proposal.author},
         /*quiet=*/true);
  return true;
}

void Pipeline::RunSeeds(StageRecord* record) {
  record->rounds_run = 1;
  Emit({.kind = ProgressKind::kPlan, .stage = record->spec.name, .total = options_.seeds});
  // Screening picks among seeds; a single one goes straight to its full evaluation (on the CPU the screen
  // would only run it once more in the interpreter).
  if (options_.screen_seeds && options_.seeds > 1) {
    RunScreenedSeeds(record);
    return;
  }
  Proposals proposals = Batch(*record, 0, nullptr, options_.seeds);
  for (int index = 0; index < options_.seeds && !Stopped(); ++index) {
    const agents::StageContext context = Context(record->spec, *record, 0);
    auto proposal = proposals.Get(index);
    NoteStop(proposal.stop, proposal.failure);
    NoteUnwritten(record, index, proposal);
    if (!proposal.value || IsDuplicate(record, 0, *proposal.value)) {
      continue;
    }
    if (auto seed = Attempt(context, *proposal.value, record)) {
      Decide(record, 0, *seed, /*keep_if_first=*/true);
      RefineSeed(record, *seed, index);
    }
  }
}

// All seeds screened together (built in parallel); the fastest that passes is fully evaluated. Only when no
// seed passes the screen are they attempted one by one with Debug repairs.
void Pipeline::RunScreenedSeeds(StageRecord* record) {
  const agents::StageContext context = Context(record->spec, *record, 0);
  std::vector<agents::CodeProposal> proposals;
  Proposals asked = Batch(*record, 0, nullptr, options_.seeds);
  for (int index = 0; index < options_.seeds && !Stopped(); ++index) {
    auto proposal = asked.Get(index);
    NoteStop(proposal.stop, proposal.failure);
    if (proposal.value) {
      proposals.push_back(*proposal.value);
    }
    NoteUnwritten(record, index, proposal);
  }
  // The backend's companions of its seeds, screened with them (the expert's: seed 0 without the CUDA graph it
  // takes by rule), so that a choice a rule made is measured; not where nothing is tuned (the CPU, whose
  // interpreter times decide nothing).
  if (options_.tune) {
    for (agents::CodeProposal& companion : backend_.code->ProposeSpace(context, nullptr)) {
      proposals.push_back(std::move(companion));
    }
  }
  const std::vector<size_t> order = Screen(record, 0, &proposals);
  for (size_t index : order) {
    if (auto seed = Attempt(context, proposals[index], record)) {
      Decide(record, 0, *seed, /*keep_if_first=*/true);
      RefineSeed(record, *seed, static_cast<int>(index));
      return;
    }
  }
  for (size_t index = 0; index < proposals.size() && !Stopped(); ++index) {
    if (std::find(order.begin(), order.end(), index) != order.end()) {
      continue;  // already attempted above
    }
    if (auto seed = Attempt(context, proposals[index], record)) {
      Decide(record, 0, *seed, /*keep_if_first=*/true);
      return;
    }
  }
}

void Pipeline::RefineSeed(StageRecord* record, const CandidateRecord& seed, int index) {
  if (Stopped() || !options_.refine_seeds) {
    return;
  }
  agents::StageContext context = Context(record->spec, *record, 0);
  context.refining_seed = true;
  context.incumbent_source = seed.source;
  context.incumbent_design = seed.design;
  context.incumbent_summary = SummaryJson(seed);
  auto proposal = backend_.code->Propose(context, nullptr, index, options_.seeds);
  NoteStop(proposal.stop, proposal.failure);
  if (!proposal.value || IsDuplicate(record, 0, *proposal.value)) {
    return;
  }
  if (auto refined = Attempt(context, *proposal.value, record)) {
    Decide(record, 0, *refined, /*keep_if_first=*/true);
  }
}

bool Pipeline::RunRound(StageRecord* record, int round) {
  agents::StageContext context = Context(record->spec, *record, round);
  if (options_.profile) {
    Emit({.kind = ProgressKind::kProfile,
          .stage = record->spec.name,
          .round = round,
          .candidate_id = incumbent_->id});
  }
  const std::string profile = WithTracedKernels(
      options_.profile ? evaluator_.Profile(incumbent_->path) : std::string("{}"), incumbent_->eval);
  Emit({.kind = ProgressKind::kPlan, .stage = record->spec.name, .round = round});
  auto report = backend_.profile->Analyze(context, profile);
  NoteStop(report.stop, report.failure);
  if (report.value && report.value->near_roofline) {
    record->stopped_because = "near the roofline: " + report.value->move;
    return false;
  }
  const agents::ProfileReport* proposal = report.value ? &*report.value : nullptr;
  std::vector<agents::CodeProposal> space = backend_.code->ProposeSpace(context, proposal);
  bool accepted = false;
  if (!space.empty()) {
    accepted = ScreenRound(record, round, context, std::move(space));
    if (!backend_.code->ProposesBesideSpace()) {
      return accepted;
    }
  }
  // Beside a screened space (hybrid), one-at-a-time proposals compete with the incumbent it left.
  return ProposalRound(record, round, proposal) || accepted;
}

bool Pipeline::ProposalRound(StageRecord* record, int round, const agents::ProfileReport* report) {
  bool accepted = false;
  Proposals proposals = Batch(*record, round, report, options_.candidates_per_round);
  for (int index = 0; index < options_.candidates_per_round && !Stopped(); ++index) {
    const agents::StageContext context = Context(record->spec, *record, round);
    auto proposal = proposals.Get(index);
    NoteStop(proposal.stop, proposal.failure);
    if (!proposal.value || IsDuplicate(record, round, *proposal.value)) {
      continue;
    }
    auto candidate = Attempt(context, *proposal.value, record);
    if (candidate) {
      const size_t before = record->decisions.size();
      Decide(record, round, *candidate, /*keep_if_first=*/false);
      accepted = accepted || record->decisions[before].accepted;
    } else {
      const CandidateRecord& failed = record->candidates.back();
      Record(record, {record->spec.name, round, failed.id, proposal.value->move, false,
                      "not correct after repairs: " + harness::StatusName(failed.eval.status),
                      incumbent_->MedianMs(), std::nullopt, failed.author});
    }
  }
  return accepted;
}

std::vector<size_t> Pipeline::Screen(StageRecord* record, int round, std::vector<agents::CodeProposal>* proposals) {
  std::vector<agents::CodeProposal> fresh;
  std::vector<CandidateFile> files;
  for (agents::CodeProposal& proposal : *proposals) {
    if (IsDuplicate(record, round, proposal)) {
      continue;
    }
    const std::string id = CandidateId(proposal.source);
    tried_ids_.insert(id);
    files.push_back({options_.run_dir + "/" + id + ".py", proposal.author, proposal.untrusted});
    WriteFileAtomic(files.back().path, proposal.source);
    fresh.push_back(std::move(proposal));
  }
  *proposals = std::move(fresh);
  if (proposals->empty()) {
    return {};
  }
  Emit({.kind = ProgressKind::kScreen,
        .stage = record->spec.name,
        .round = round,
        .total = static_cast<int>(files.size())});
  const std::vector<harness::ScreenResult> screened = evaluator_.Screen(files);
  EmitScreened(record->spec.name, round, screened);
  std::vector<std::pair<double, size_t>> ranked;
  for (size_t i = 0; i < screened.size() && i < proposals->size(); ++i) {
    const harness::ScreenResult& result = screened[i];
    const agents::CodeProposal& proposal = (*proposals)[i];
    const std::optional<double> median = result.time ? std::optional<double>(result.time->median) : std::nullopt;
    if (store_ != nullptr) {
      store_->PutCandidate({options_.run_id + "/" + CandidateId(proposal.source), options_.run_id,
                            record->spec.name, "screen", "", proposal.source, proposal.description,
                            proposal.move, "", harness::StatusName(result.status), median,
                            DesignJson(proposal.design)});
    }
    screened_.push_back(Json{{"stage", record->spec.name},
                             {"round", round},
                             {"id", CandidateId(proposal.source)},
                             {"move", proposal.move},
                             {"author", proposal.author},
                             {"status", harness::StatusName(result.status)},
                             {"median_ms", median},
                             {"reason", result.reason}});
    if (result.status == harness::EvalStatus::kOk) {
      // Untimed (CPU) results keep their proposal order.
      ranked.emplace_back(median.value_or(static_cast<double>(i)), i);
    }
  }
  std::stable_sort(ranked.begin(), ranked.end());
  std::vector<size_t> order;
  for (const auto& [median, index] : ranked) {
    order.push_back(index);
  }
  return order;
}

bool Pipeline::ScreenRound(StageRecord* record, int round, const agents::StageContext& context,
                           std::vector<agents::CodeProposal> proposals) {
  const std::vector<size_t> order = Screen(record, round, &proposals);
  if (proposals.empty()) {
    record->stopped_because = "design space exhausted";
    return false;
  }
  if (order.empty()) {
    Record(record,
           {record->spec.name, round, "screened", "screened " + std::to_string(proposals.size()) + " designs",
            false, "no screened design was correct", incumbent_->MedianMs(), std::nullopt,
            proposals.front().author});
    return false;
  }
  auto candidate = Attempt(context, proposals[order.front()], record);
  if (!candidate) {
    return false;
  }
  const size_t before = record->decisions.size();
  Decide(record, round, *candidate, /*keep_if_first=*/false);
  return record->decisions[before].accepted;
}

void Pipeline::RunRefinement(StageRecord* record) {
  int unpaid_rounds = 0;
  for (int round = 0; round < record->spec.rounds && !Stopped(); ++round) {
    record->rounds_run = round + 1;
    const bool paid = RunRound(record, round);
    if (!record->stopped_because.empty()) {
      return;
    }
    unpaid_rounds = paid ? 0 : unpaid_rounds + 1;
    if (unpaid_rounds >= kUnpaidRoundsToStop) {
      record->stopped_because = "rounds stopped paying";
      return;
    }
  }
}

void Pipeline::Finalize(StageRecord* record) {
  if (record->stopped_because.empty()) {
    record->stopped_because = Stopped() ? agents::StopReasonName(stop_) : "round budget used";
  }
  if (incumbent_) {
    record->incumbent_id = incumbent_->id;
    record->incumbent_ms = incumbent_->MedianMs();
    record->incumbent_speedup_vs_eager = incumbent_->eval.speedup_vs_eager;
  }
  for (const DecisionRecord& decision : record->decisions) {
    if (decision.accepted) {
      accepted_.push_back(decision);
    }
  }
}

RunResult Pipeline::Run() {
  CreateDirectories(options_.run_dir);
  started_s_ = Now();
  sm_count_ = evaluator_.SmCount();
  RunResult result;
  int seq = 0;
  for (const StageSpec& spec : DefaultStages(options_.rounds)) {
    StageRecord record;
    record.spec = spec;
    if (options_.on_stage) {
      options_.on_stage(spec.name, incumbent_ ? incumbent_->eval.speedup_vs_eager : std::nullopt);
    }
    Emit({.kind = ProgressKind::kStage, .stage = spec.name});
    if (Stopped()) {
      record.stopped_because = agents::StopReasonName(stop_);
    } else if (spec.is_seed_stage) {
      RunSeeds(&record);
    } else if (!incumbent_) {
      record.stopped_because = "no correct kernel to refine";
    } else if (!options_.tune) {
      record.stopped_because = options_.tuning_note.empty() ? "tuning disabled" : options_.tuning_note;
    } else {
      RunRefinement(&record);
    }
    Finalize(&record);
    Emit({.kind = ProgressKind::kStageDone, .stage = spec.name, .detail = record.stopped_because});
    if (store_ != nullptr) {
      Json outcome = {{"incumbent", record.incumbent_id},
                      {"incumbent_ms", record.incumbent_ms},
                      {"stopped_because", record.stopped_because},
                      {"accepted", Json::array()}};
      for (const auto& decision : record.decisions) {
        if (decision.accepted) {
          outcome["accepted"].push_back(DecisionJson(decision));
        }
      }
      store_->PutStageOutcome(options_.run_id, spec.name, seq, outcome.dump());
    }
    ++seq;
    result.stages.push_back(std::move(record));
  }
  result.stopped_because = agents::StopReasonName(stop_);
  result.reason = stop_failure_;
  result.final = incumbent_;
  result.screened = screened_;
  result.correct = incumbent_.has_value() && incumbent_->eval.correct;
  if (!result.correct && result.reason.empty()) {
    result.reason = "no candidate passed the harness";
  }
  return result;
}

}  // namespace egg::pipeline
