// Test helpers of the families room: a MoveSink that records every move a family adds, kernel and candidate
// alike, in order. Tests only.
#pragma once

#include <string>
#include <vector>

#include "expert/families/family.h"

namespace egg::expert::testing {

// Records every move in the order the family adds it; Incumbent() is `incumbent`.
class RecordingSink : public MoveSink {
 public:
  struct Recorded {
    std::string move;
    KernelDesign design;
  };

  void Add(const KernelPlan& /*kernel*/, const KernelDesign& design, const std::string& move,
           const std::string& /*description*/) override {
    moves.push_back({move, design});
    all_moves.push_back(move);
  }
  void AddCandidate(const CandidateDesign& design, const std::string& move,
                    const std::string& /*description*/) override {
    candidates.push_back(move);
    candidate_designs.push_back(design);
    all_moves.push_back(move);
  }
  const CandidateDesign& Incumbent() const override { return incumbent; }

  // The names of the kernel moves (Add), in order.
  std::vector<std::string> MoveNames() const {
    std::vector<std::string> names;
    for (const Recorded& recorded : moves) {
      names.push_back(recorded.move);
    }
    return names;
  }
  // The designs of the kernel moves (Add), in order.
  std::vector<KernelDesign> Designs() const {
    std::vector<KernelDesign> designs;
    for (const Recorded& recorded : moves) {
      designs.push_back(recorded.design);
    }
    return designs;
  }

  CandidateDesign incumbent;
  std::vector<Recorded> moves;                     // Add: kernel moves
  std::vector<std::string> candidates;             // AddCandidate: move names
  std::vector<CandidateDesign> candidate_designs;  // AddCandidate: the candidates, as candidates
  std::vector<std::string> all_moves;              // the names of both, interleaved in the order added
};

}  // namespace egg::expert::testing
