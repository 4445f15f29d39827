// The Code agent's candidates of one round (or of the seeds), by index. With a concurrency of 1 each is
// asked for when taken, seeing the round so far; above 1 all are asked for at once on the first Get, up to
// `concurrency` in flight, and handed out in index order (same results, whatever order they arrive in).
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "agents/agents.h"

namespace egg::pipeline {

class Proposals {
 public:
  using Result = agents::AgentResult<agents::CodeProposal>;

  // `context` is called for each proposal asked for alone, or once for a batch. `report` may be null and,
  // like `code`, must outlive this object.
  Proposals(agents::CodeAgent& code, int count, int concurrency,
            std::function<agents::StageContext()> context, const agents::ProfileReport* report)
      : code_(code),
        count_(count),
        concurrency_(concurrency),
        context_(std::move(context)),
        report_(report) {}

  int Count() const { return count_; }
  // Candidate `index` (0 <= index < Count()); each index once. Rethrows what an agent threw.
  Result Get(int index);

 private:
  void AskAll();

  agents::CodeAgent& code_;
  const int count_;
  const int concurrency_;
  const std::function<agents::StageContext()> context_;
  const agents::ProfileReport* report_;
  std::optional<std::vector<Result>> batch_;
};

}  // namespace egg::pipeline
