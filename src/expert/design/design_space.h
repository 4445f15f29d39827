// The expert backend's design spaces: structurally different seeds (stage1.seeds), and for every later stage
// the designs one move away from the incumbent, pruned by static checks (legal tiles, registers per thread)
// before anything is compiled or measured.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "expert/design/candidate.h"
#include "expert/ir/graph.h"

namespace egg::expert {

inline constexpr int kSeedFamilies = 3;

struct DesignMove {
  CandidateDesign design;
  std::string move;         // short name of the move ("tile egg_k0_amax rblock 2048")
  std::string description;  // why
};

// Seed `index` (0..kSeedFamilies-1): a different algorithm family for every reduction-like kernel and a different
// tile for every matmul. Matmul products take the fastest precision tolerance `tol` allows
// (MatmulPrecisionFor), except in seed 1, which keeps ieee products so that a task whose data defeats tf32 at
// that tolerance still has an exact seed.
DesignMove SeedDesign(int index, double tol);
// The plan options of seed `index`: seed 1 keeps attention unfused (measured against flash attention) and a
// product whose columns are summed whole (the exact form beside the folded one, ir/fold.h).
PlanOptions SeedPlan(int index);
std::string SeedFamilyName(int seed);
// Seed 0 as generated (`plain`, its record the seed's) with its forward in one CUDA graph, where it has no op
// left to PyTorch and launches kSeedGraphLaunches kernels or more; nullopt otherwise. On an H100 the graph
// made ResNet18 and MobileNetV1 1.8x faster and five other level-3 networks 3-12% slower
// (bench/results/h100-ab-graph), so the seeds' screen measures the plain seed 0 beside it.
inline constexpr size_t kSeedGraphLaunches = 8;
std::optional<DesignMove> GraphedSeed(const DesignMove& seed, const Candidate& plain);

// One quick improvement of a seed: the same algorithms, the hottest kernel's tile doubled or halved.
std::vector<DesignMove> SeedRefinements(const Graph& graph, const Candidate& seed);

// The designs one move of `stage` away from `incumbent` (a complete design whose plan is `plan`),
// for kernel `focus` first (empty: the kernel moving the most bytes). At most `limit` moves.
std::vector<DesignMove> StageMoves(const Graph& graph, const std::string& stage, const Candidate& incumbent,
                                   const std::string& focus, size_t limit);

// Designs that fix a failing candidate, most conservative last: ieee products for a mismatch with tf32
// products, smaller tiles, fewer stages, then the two-pass/looped algorithms without fusion.
std::vector<DesignMove> RepairMoves(const Candidate& failing, const std::string& status, const std::string& reason);

// Bytes a kernel reads and writes (static estimate, for picking the focus).
int64_t KernelTrafficBytes(const Graph& graph, const Plan& plan, size_t kernel);

}  // namespace egg::expert
