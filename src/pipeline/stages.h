// The five stages of the EGG workflow, in order, each with its objective, allowed moves and round budget.
#pragma once

#include <string>
#include <vector>

namespace egg::pipeline {

struct StageSpec {
  std::string name;  // stage1.seeds ... stage2.memory (stable: used in reports and the store)
  std::string objective;
  std::string moves;
  int rounds = 1;
  bool is_seed_stage = false;
};

// All stages in execution order; `rounds` sets every refinement stage's round budget.
std::vector<StageSpec> DefaultStages(int rounds);

}  // namespace egg::pipeline
