#include "expert/design/design_space.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "expert/design/defaults.h"
#include "expert/design/legality.h"
#include "expert/families/family.h"
#include "expert/families/lowering_probe.h"

namespace egg::expert {
namespace {

std::vector<size_t> KernelOrder(const Graph& captured, const Candidate& incumbent, const std::string& focus) {
  const Graph& graph = incumbent.graph ? *incumbent.graph : captured;
  std::vector<std::pair<int64_t, size_t>> scored;
  for (size_t k = 0; k < incumbent.plan.kernels.size(); ++k) {
    int64_t score = KernelTrafficBytes(graph, incumbent.plan, k);
    if (incumbent.plan.kernels[k].name == focus) {
      score = std::numeric_limits<int64_t>::max();
    }
    scored.emplace_back(score, k);
  }
  std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<size_t> order;
  for (const auto& [score, k] : scored) {
    order.push_back(k);
  }
  return order;
}

// The moves of one search step, in order, each at most once, at most `limit`.
class MoveList : public MoveSink {
 public:
  MoveList(const Candidate& incumbent, size_t limit) : incumbent_(incumbent), limit_(limit) {
    seen_.insert(incumbent.design.ToJson().dump());
  }

  bool Full() const { return moves_.size() >= limit_; }

  void Add(const KernelPlan& kernel, const KernelDesign& design, const std::string& move,
           const std::string& description) override {
    if (Full() || !WorthMeasuring(kernel, design)) {
      return;
    }
    CandidateDesign candidate = incumbent_.design;
    candidate.kernels[kernel.name] = design;
    AddCandidate(candidate, move, description);
  }

  void AddCandidate(const CandidateDesign& design, const std::string& move,
                    const std::string& description) override {
    if (Full() || !seen_.insert(design.ToJson().dump()).second) {
      return;
    }
    moves_.push_back({design, move, description});
  }

  const CandidateDesign& Incumbent() const override { return incumbent_.design; }

  std::vector<DesignMove> Take() { return std::move(moves_); }

 private:
  const Candidate& incumbent_;
  size_t limit_;
  std::set<std::string> seen_;
  std::vector<DesignMove> moves_;
};

// Every kernel's family moves of `stage`, in `order`.
void KernelMoves(SearchStage stage, const Candidate& incumbent, const std::vector<size_t>& order,
                 MoveList* list) {
  for (size_t k : order) {
    const KernelPlan& kernel = incumbent.plan.kernels[k];
    FamilyOf(kernel.kind).Moves(stage, kernel, *list);
  }
}

// The kernels' algorithm moves, then the plan's: flash attention back on, summed products folded or whole,
// epilogues and reductions fused or apart.
void AlgorithmMoves(const Candidate& incumbent, const std::vector<size_t>& order, MoveList* list) {
  KernelMoves(SearchStage::kAlgorithm, incumbent, order, list);
  if (incumbent.plan.unfused_attention > 0) {
    CandidateDesign flash = incumbent.design;
    flash.plan.fuse_attention = true;
    list->AddCandidate(
        flash, "algorithm attention flash",
        "attention as one flash kernel: scores, online softmax and the product with V per query block, "
        "nothing stored in between");
  }
  // A plan option flipped, every kernel's design back to its default: the move named and described for the
  // way it goes (the option on now: `off`, else `on`).
  const auto flip = [&incumbent, list](bool PlanOptions::* option,
                                       const std::pair<const char*, const char*>& off,
                                       const std::pair<const char*, const char*>& on) {
    CandidateDesign design = incumbent.design;
    design.kernels.clear();
    design.plan.*option = !(incumbent.design.plan.*option);
    const auto& [move, why] = incumbent.design.plan.*option ? off : on;
    list->AddCandidate(design, move, why);
  };
  if (incumbent.foldable) {
    flip(&PlanOptions::fold_summed_products,
         {"unfold summed products",
          "the matrix product computed whole, then its columns summed (the captured graph)"},
         {"fold summed products",
          "a sum over a product's columns from the weights' row sums: one pass over the product's input, no "
          "GEMM"});
  }
  const bool reduced_in_products =
      std::any_of(incumbent.plan.kernels.begin(), incumbent.plan.kernels.end(), [](const KernelPlan& kernel) {
        return kernel.kind == KernelKind::kMatmul && !kernel.reductions.empty();
      });
  if (reduced_in_products || incumbent.plan.products_reduced_apart) {
    flip(&PlanOptions::reduce_in_products,
         {"reduce products apart",
          "the product stored whole, its columns reduced by a kernel of their own (wider choice of tiles)"},
         {"reduce in products",
          "a reduction over a product's columns finished in the product's tile (one tile spans the "
          "columns): the product never stored"});
  }
  flip(&PlanOptions::fuse_epilogues,
       {"split epilogues", "elementwise consumers in their own kernels (fewer passes per kernel)"},
       {"fuse epilogues", "elementwise consumers fused into their producers' kernels (fewer round trips)"});
  flip(&PlanOptions::fuse_reductions, {"split reductions", "one kernel per reduction"},
       {"fuse reductions", "reductions over the same rows share a kernel"});
}

// Launches per forward from which stage2.memory first tries the whole forward as one CUDA graph: a launch
// costs the host tens of microseconds in Python, so a forward of many small kernels is bound by them.
constexpr size_t kMinGraphLaunches = 4;

// The whole forward as one CUDA graph where it launches many kernels, then every kernel's memory moves.
void MemoryMoves(const Candidate& incumbent, const std::vector<size_t>& order, MoveList* list) {
  const size_t launches = incumbent.launches;
  if (!incumbent.design.plan.cuda_graph && incumbent.pytorch_ops.empty() && launches >= kMinGraphLaunches) {
    CandidateDesign graphed = incumbent.design;
    graphed.plan.cuda_graph = true;
    list->AddCandidate(
        graphed, "cuda graph",
        fmt::format("the forward's {} launches captured once in a CUDA graph and replayed (inputs "
                    "copied into static buffers, outputs cloned out)",
                    launches));
  }
  KernelMoves(SearchStage::kMemory, incumbent, order, list);
}

}  // namespace

std::string SeedFamilyName(int seed) {
  switch (seed) {
    case 0:
      return "registers: fused kernels, a reduction row held in registers where it fits, streamed otherwise; "
             "matmuls with the tolerance's fastest products (tf32, or tf32x3 below 1e-3) in their fastest "
             "tiles, "
             "large products over copies of their operands (B transposed K-major for tf32 and tf32x3 "
             "products, rows aligned where misaligned)";
    case 1:
      return "streaming: fused kernels, the other reduction algorithm (rows streamed in tiles where seed 0 "
             "holds them, held where seed 0 streams); matmuls with ieee FMA products in one program per output tile "
             "(convolutions in 128x128 tiles of 8 warps)";
    default:
      return "one-pass: fused kernels with online statistics (running max with rescaled sums for "
             "softmax-like "
             "rows) and split reductions across programs for few long rows; matmuls in 128x64 tiles with a K "
             "step "
             "of 64 (matrix products in their precision's other tile), convolutions of 16 channels a group "
             "or more "
             "channels-last (nhwc, the K step at most the group's channels)";
  }
}

PlanOptions SeedPlan(int index) {
  PlanOptions plan;
  plan.fuse_attention = index != 1;
  plan.fold_summed_products = index != 1;
  plan.reduce_in_products = index != 1;
  return plan;
}

DesignMove SeedDesign(int index, double tol) {
  DesignMove move;
  move.design.seed = index;
  const Precision precision = index == 1 ? Precision::kIeee : MatmulPrecisionFor(tol);
  move.design.precision = precision == Precision::kIeee ? Precision::kUnset : precision;
  move.design.plan = SeedPlan(index);
  move.move = fmt::format("seed {}", index);
  move.description = SeedFamilyName(index);
  return move;
}

std::optional<DesignMove> GraphedSeed(const DesignMove& seed, const Candidate& plain) {
  if (seed.design.seed != 0 || seed.design.plan.cuda_graph || !plain.source || !plain.pytorch_ops.empty() ||
      plain.launches < kSeedGraphLaunches) {
    return std::nullopt;
  }
  DesignMove graphed = seed;
  graphed.design.plan.cuda_graph = true;
  graphed.move = seed.move + " graphed";
  graphed.description =
      fmt::format("{}, the forward's {} launches in one CUDA graph", seed.description, plain.launches);
  return graphed;
}

int64_t KernelTrafficBytes(const Graph& graph, const Plan& plan, size_t kernel) {
  const KernelPlan& k = plan.kernels.at(kernel);
  std::map<int, TensorMeta> layouts;
  int64_t bytes = 0;
  for (int value : k.stores) {
    const TensorMeta& meta = *graph.values.at(static_cast<size_t>(value)).meta;
    layouts[value] = StoreLayout(graph, plan, value);
    bytes += meta.Numel() * DTypeBytes(meta.dtype);
  }
  try {
    const LoweringProbe probe = ProbeLowering(graph, k, plan.memory_before.at(kernel), layouts);
    for (int value : probe.loaded) {
      const TensorMeta& meta = *graph.values.at(static_cast<size_t>(value)).meta;
      bytes += meta.Numel() * DTypeBytes(meta.dtype);
    }
  } catch (const std::exception&) {
    return bytes;
  }
  return bytes;
}

std::vector<DesignMove> SeedRefinements(const Graph& graph, const Candidate& seed) {
  MoveList list(seed, 2);
  const auto order = KernelOrder(graph, seed, "");
  if (order.empty()) {
    return {};
  }
  const KernelPlan& kernel = seed.plan.kernels[order.front()];
  for (const int64_t factor : {2, 0}) {
    KernelDesign design = kernel.design;
    const bool looped = design.algorithm == Algorithm::kLooped || design.algorithm == Algorithm::kBlocked;
    int64_t& block = looped ? design.rblock : design.xblock;
    block = factor == 0 ? std::max<int64_t>(block / 2, 1) : block * factor;
    list.Add(kernel, design, fmt::format("refine {} {} {}", kernel.name, looped ? "rblock" : "xblock", block),
             "the seed's hottest kernel with its tile resized");
  }
  return list.Take();
}

std::vector<DesignMove> StageMoves(const Graph& graph, const std::string& stage, const Candidate& incumbent,
                                   const std::string& focus, size_t limit) {
  MoveList list(incumbent, limit);
  const auto order = KernelOrder(graph, incumbent, focus);
  if (stage == "stage1.algorithm") {
    AlgorithmMoves(incumbent, order, &list);
  } else if (stage == "stage2.mapping") {
    KernelMoves(SearchStage::kMapping, incumbent, order, &list);
  } else if (stage == "stage2.tiling") {
    KernelMoves(SearchStage::kTiling, incumbent, order, &list);
  } else if (stage == "stage2.memory") {
    MemoryMoves(incumbent, order, &list);
  }
  return list.Take();
}

std::vector<DesignMove> RepairMoves(const Candidate& failing, const std::string& status, const std::string& reason) {
  MoveList list(failing, failing.design.plan.cuda_graph ? 5 : 4);
  if (failing.design.plan.cuda_graph) {  // the same kernels launched one by one: a capture may be what failed
    CandidateDesign eager = failing.design;
    eager.plan.cuda_graph = false;
    list.AddCandidate(eager, "no cuda graph",
                      "the forward launched kernel by kernel, not captured and replayed as a CUDA graph");
  }
  if (status == "mismatch" && failing.graph != nullptr) {  // the folded sums round differently
    CandidateDesign whole = failing.design;
    whole.kernels.clear();
    whole.plan.fold_summed_products = false;
    list.AddCandidate(
        whole, "unfold summed products",
        "a mismatch with folded sums: the matrix product computed whole, then its columns summed");
  }
  if (status == "mismatch") {
    CandidateDesign exact = failing.design;
    exact.precision = Precision::kUnset;
    for (auto& [name, design] : exact.kernels) {
      if (design.precision == Precision::kTf32) {
        design.precision = Precision::kIeee;
      }
    }
    list.AddCandidate(exact, "ieee products",
                      "a mismatch with tf32 products: float32 products (ieee) in every matmul");
  }
  const bool resources = reason.find("out of resource") != std::string::npos ||
                         reason.find("OutOfResources") != std::string::npos ||
                         reason.find("shared memory") != std::string::npos ||
                         reason.find("registers") != std::string::npos || status == "timeout";
  if (resources) {
    CandidateDesign smaller = failing.design;
    for (auto& [name, design] : smaller.kernels) {
      design.xblock = std::max<int64_t>(design.xblock / 2, 1);
      if (IsSingleTile(design.algorithm)) {
        design.algorithm = design.algorithm == Algorithm::kSingle
                               ? Algorithm::kBlocked
                               : Algorithm::kLooped;  // a row no longer in registers
      }
      if (design.rblock > 0) {
        design.rblock = std::max<int64_t>(design.rblock / 2, kMinBlock);
      }
      if (design.algorithm == Algorithm::kFlash) {  // fewer keys a step: smaller scores, K and V tiles
        design.xblock = std::max<int64_t>(design.xblock, kMinBlock);
        design.yblock = std::max<int64_t>(design.yblock / 2, kMinBlock);
      }
      design.num_stages = 1;
    }
    list.AddCandidate(smaller, "halve tiles", "out of resources: smaller tiles and no load pipelining");
  }
  CandidateDesign other;
  other.seed = failing.design.seed == 1 ? 0 : 1;
  other.plan = failing.design.plan;
  list.AddCandidate(other, fmt::format("seed {} algorithms", other.seed),
                    "the other reduction algorithm for every kernel");
  CandidateDesign safest;
  safest.seed = 1;
  safest.plan.fuse_epilogues = false;
  safest.plan.fuse_reductions = false;
  list.AddCandidate(safest, "unfused streaming",
                    "one kernel per reduction, streamed rows: the simplest correct form");
  return list.Take();
}

}  // namespace egg::expert
