#include "expert/design/design_space.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "expert/codegen/lowering_probe.h"
#include "expert/design/defaults.h"
#include "expert/design/legality.h"

namespace egg::expert {
namespace {

std::vector<size_t> KernelOrder(const Graph& graph, const Candidate& incumbent, const std::string& focus) {
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

int Log2Distance(int64_t a, int64_t b) {
  return static_cast<int>(std::abs(std::log2(static_cast<double>(std::max<int64_t>(a, 1))) -
                                   std::log2(static_cast<double>(std::max<int64_t>(b, 1)))));
}

class MoveList {
 public:
  MoveList(const Candidate& incumbent, size_t limit) : incumbent_(incumbent), limit_(limit) {
    seen_.insert(incumbent.design.ToJson().dump());
  }

  bool Full() const { return moves_.size() >= limit_; }

  void AddKernel(const KernelPlan& kernel, const KernelDesign& design, const std::string& move,
                 const std::string& description) {
    if (Full() || !WorthMeasuring(kernel, design)) {
      return;
    }
    CandidateDesign candidate = incumbent_.design;
    candidate.kernels[kernel.name] = design;
    Add(candidate, move, description);
  }

  void Add(const CandidateDesign& design, const std::string& move, const std::string& description) {
    if (Full() || !seen_.insert(design.ToJson().dump()).second) {
      return;
    }
    moves_.push_back({design, move, description});
  }

  std::vector<DesignMove> Take() { return std::move(moves_); }

 private:
  const Candidate& incumbent_;
  size_t limit_;
  std::set<std::string> seen_;
  std::vector<DesignMove> moves_;
};

// Powers of two in [lo, hi] other than `current`, nearest first.
std::vector<int64_t> Around(int64_t current, int64_t lo, int64_t hi) {
  std::vector<int64_t> values;
  for (int64_t v = lo; v <= hi; v *= 2) {
    if (v != current) {
      values.push_back(v);
    }
  }
  std::stable_sort(values.begin(), values.end(),
                   [&](int64_t a, int64_t b) { return Log2Distance(a, current) < Log2Distance(b, current); });
  return values;
}

// Matmul: split K into slices (half or twice the incumbent's, or the default factor), or one program per
// tile; a mat-vec product between tl.dot tiles and the gemv rows (whose K slices split the same way); a
// convolution between the NCHW gather and the channels-last GEMM in the same tiles (and the direct form).
void MatmulAlgorithmMoves(const KernelPlan& kernel, MoveList* list) {
  const KernelDesign& base = kernel.design;
  if (base.algorithm == Algorithm::kGemv) {
    list->AddKernel(kernel, DefaultDesign(kernel, 1), fmt::format("algorithm {} tiled", kernel.name),
                    "the product in tl.dot tiles (the vector padded to a 16-wide N tile)");
    for (int64_t split : {int64_t{0}, base.split / 2, std::max<int64_t>(2, base.split * 2)}) {
      KernelDesign design = base;
      design.split = split > 1 ? split : 0;
      list->AddKernel(kernel, design, fmt::format("algorithm {} gemv split {}", kernel.name, design.split),
                      design.split > 1
                          ? fmt::format("K in {} slices, partials summed by a second kernel", design.split)
                          : "one program per row block over the whole K");
    }
    return;
  }
  if (MatVecFits(*kernel.matmul)) {
    list->AddKernel(kernel, DefaultDesign(kernel, 0), fmt::format("algorithm {} gemv", kernel.name),
                    "rows of A times the vector, products summed after the K loop (no tl.dot padding)");
  }
  if (base.algorithm == Algorithm::kDirect) {  // back to the implicit GEMM of the exact seed
    const KernelDesign tiled = DefaultDesign(kernel, 1);
    list->AddKernel(kernel, tiled, fmt::format("algorithm {} tiled", kernel.name),
                    "the convolution as an implicit GEMM on the tensor cores");
    return;
  }
  if (base.algorithm == Algorithm::kAligned ||
      base.algorithm == Algorithm::kNhwc) {  // back to the operands read in place, same tiles
    KernelDesign tiled = base;
    tiled.algorithm = Algorithm::kTiled;
    list->AddKernel(kernel, tiled, fmt::format("algorithm {} tiled", kernel.name),
                    base.algorithm == Algorithm::kAligned
                        ? "the operands read in place (no aligned copies)"
                        : "implicit GEMM gathering the NCHW input, K ordered by channel then tap");
    return;
  }
  if (base.algorithm == Algorithm::kTiled && AlignedCopyFits(*kernel.matmul)) {
    KernelDesign aligned = base;
    aligned.algorithm = Algorithm::kAligned;
    list->AddKernel(
        kernel, aligned, fmt::format("algorithm {} aligned", kernel.name),
        "A and B copied first into rows of a 32-float stride (128-byte lines), so the tile loads vectorize");
  }
  if (DirectConvolutionFits(*kernel.matmul)) {
    const KernelDesign direct = DefaultDesign(kernel, 0);
    list->AddKernel(kernel, direct, fmt::format("algorithm {} direct", kernel.name),
                    "one output element per lane, the group's few products unrolled (no tl.dot padding)");
  }
  if (base.algorithm == Algorithm::kTiled && ChannelsLastConvolutionFits(*kernel.matmul)) {
    // same tiles, the K step at most the group's channels (it no longer spans taps)
    KernelDesign nhwc = base;
    nhwc.algorithm = Algorithm::kNhwc;
    nhwc.rblock = std::min(base.rblock, ChannelsLastMaxStep(*kernel.matmul));
    list->AddKernel(kernel, nhwc, fmt::format("algorithm {} nhwc", kernel.name),
                    "channels-last implicit GEMM, input repacked once, K ordered by tap then channel");
  }
  std::vector<int64_t> splits;
  if (base.algorithm == Algorithm::kSplitK) {
    splits = {1, base.split / 2, base.split * 2};
  } else {
    splits = {SplitKFactor(*kernel.matmul, base)};
  }
  for (int64_t split : splits) {
    KernelDesign design = base;
    design.algorithm = split > 1 ? Algorithm::kSplitK : Algorithm::kTiled;
    design.split = split > 1 ? split : 0;
    const std::string name = split > 1 ? fmt::format("split-K {}", split) : "tiled";
    const std::string description =
        split > 1 ? fmt::format("K in {} slices: {} programs per output tile, partials summed by a second kernel",
                                split, split)
                  : "one program per output tile over the whole K";
    list->AddKernel(kernel, design, fmt::format("algorithm {} {}", kernel.name, name), description);
  }
}

void AlgorithmMoves(const Graph& graph, const Candidate& incumbent, const std::vector<size_t>& order,
                    MoveList* list) {
  (void)graph;
  for (size_t k : order) {
    const KernelPlan& kernel = incumbent.plan.kernels[k];
    if (kernel.kind == KernelKind::kAttention) {  // back to the products and the softmax in kernels apart
      CandidateDesign unfused = incumbent.design;
      unfused.kernels.erase(kernel.name);
      unfused.plan.fuse_attention = false;
      list->Add(unfused, fmt::format("algorithm {} unfused", kernel.name),
                "attention unfused: the scores stored by a bmm kernel, the softmax's max and sum by a "
                "reduction kernel, P recomputed in the second product's prologue");
      continue;
    }
    if (kernel.kind == KernelKind::kMatmul) {
      MatmulAlgorithmMoves(kernel, list);
      continue;
    }
    if (!IsRowKernel(kernel)) {
      continue;
    }
    for (int seed = 0; seed < kSeedFamilies; ++seed) {
      const KernelDesign other = DefaultDesign(kernel, seed);
      if (other.algorithm != kernel.design.algorithm) {
        list->AddKernel(
            kernel, other, fmt::format("algorithm {} {}", kernel.name, NameOf(other.algorithm)),
            fmt::format("{} from {} to {} ({})", kernel.name, NameOf(kernel.design.algorithm),
                        NameOf(other.algorithm),
                        IsSingleTile(other.algorithm)
                            ? "one row per tile kept in registers: one read of the input"
                            : "stream the row in tiles: bounded registers, one pass per statistic"));
      }
    }
  }
  const PlanOptions& plan = incumbent.design.plan;
  if (incumbent.plan.unfused_attention > 0) {
    CandidateDesign flash = incumbent.design;
    flash.plan.fuse_attention = true;
    list->Add(flash, "algorithm attention flash",
              "attention as one flash kernel: scores, online softmax and the product with V per query block, "
              "nothing stored in between");
  }
  CandidateDesign unfused = incumbent.design;
  unfused.kernels.clear();
  unfused.plan.fuse_epilogues = !plan.fuse_epilogues;
  list->Add(unfused, plan.fuse_epilogues ? "split epilogues" : "fuse epilogues",
            plan.fuse_epilogues ? "elementwise consumers in their own kernels (fewer passes per kernel)"
                                : "elementwise consumers fused into their producers' kernels (fewer round trips)");
  CandidateDesign reductions = incumbent.design;
  reductions.kernels.clear();
  reductions.plan.fuse_reductions = !plan.fuse_reductions;
  list->Add(reductions, plan.fuse_reductions ? "split reductions" : "fuse reductions",
            plan.fuse_reductions ? "one kernel per reduction" : "reductions over the same rows share a kernel");
}

// Matmul output tiles (BLOCK_M x BLOCK_N), the usual shapes of tuned Hopper GEMMs, smallest grid last.
// A mat-vec kernel: rows per program (fewer rows, more programs streaming A).
void MatmulMappingMoves(const KernelPlan& kernel, MoveList* list) {
  static const int64_t kTiles[][2] = {{128, 128}, {128, 64}, {64, 128}, {64, 64}, {128, 256}, {256, 128}, {32, 64}};
  const MatmulSpec& mm = *kernel.matmul;
  if (kernel.design.algorithm == Algorithm::kGemv) {
    for (int64_t rows : Around(kernel.design.xblock, 1, std::min<int64_t>(64, NextPowerOfTwo(mm.m)))) {
      KernelDesign design = kernel.design;
      design.xblock = rows;
      list->AddKernel(kernel, design, fmt::format("rows per program {} {}", kernel.name, rows),
                      fmt::format("{} rows of A per program ({} programs a K slice)", rows,
                                  (mm.m + rows - 1) / rows * mm.batch));
    }
    return;
  }
  for (const auto& tile : kTiles) {
    if (tile[0] > std::max<int64_t>(kMinBlock, NextPowerOfTwo(mm.m)) ||
        tile[1] > std::max<int64_t>(kMinBlock, NextPowerOfTwo(mm.n))) {
      continue;  // a tile wider than the problem only masks lanes off
    }
    KernelDesign design = kernel.design;
    design.xblock = tile[0];
    design.yblock = tile[1];
    const int64_t programs = ((mm.m + tile[0] - 1) / tile[0]) * ((mm.n + tile[1] - 1) / tile[1]) * mm.batch;
    list->AddKernel(kernel, design, fmt::format("tile {} {}x{}", kernel.name, tile[0], tile[1]),
                    fmt::format("output tiles of {}x{} ({} programs)", tile[0], tile[1], programs));
  }
}

// Recurrent time loops: batch rows per program (fewer rows, more programs streaming W_hh each step).
void RecurrentMappingMoves(const KernelPlan& kernel, MoveList* list) {
  const RecurrentSpec& rnn = *kernel.recurrent;
  for (int64_t xblock : Around(kernel.design.xblock, kMinBlock, std::max(kMinBlock, NextPowerOfTwo(rnn.batch)))) {
    KernelDesign design = kernel.design;
    design.xblock = xblock;
    list->AddKernel(kernel, design, fmt::format("batch rows per program {} {}", kernel.name, xblock),
                    fmt::format("{} batch rows per program ({} programs)", xblock,
                                (rnn.batch + xblock - 1) / xblock));
  }
}

// Flash attention: query rows per program (`rows`, stage2.mapping) or keys per loop step (stage2.tiling),
// 32 to 128.
void AttentionBlockMoves(const KernelPlan& kernel, bool rows, MoveList* list) {
  const AttentionSpec& at = *kernel.attention;
  const int64_t current = rows ? kernel.design.xblock : kernel.design.yblock;
  const int64_t most = std::clamp<int64_t>(NextPowerOfTwo(rows ? at.lq : at.lk), kMinBlock, 128);
  for (int64_t block : Around(current, std::min<int64_t>(32, most), most)) {
    KernelDesign design = kernel.design;
    (rows ? design.xblock : design.yblock) = block;
    const std::string move =
        fmt::format("{} {} {}", rows ? "rows per program" : "keys per step", kernel.name, block);
    list->AddKernel(kernel, design, move,
                    rows ? fmt::format("{} query rows per program ({} programs)", block,
                                       (at.lq + block - 1) / block * at.batch)
                         : fmt::format("{} keys per loop step (scores tile {}x{})", block, design.xblock,
                                       block));
  }
}

void MappingMoves(const Candidate& incumbent, const std::vector<size_t>& order, MoveList* list) {
  for (size_t k : order) {
    const KernelPlan& kernel = incumbent.plan.kernels[k];
    if (kernel.kind == KernelKind::kAttention) {
      AttentionBlockMoves(kernel, /*rows=*/true, list);
      continue;
    }
    if (DotTiles(kernel)) {
      MatmulMappingMoves(kernel, list);
      continue;
    }
    if (kernel.kind == KernelKind::kRecurrent) {
      RecurrentMappingMoves(kernel, list);
      continue;
    }
    if (!IsRowKernel(kernel)) {
      continue;
    }
    const int64_t rows = NextPowerOfTwo(std::max<int64_t>(kernel.rows, 1));
    for (int64_t xblock : Around(kernel.design.xblock, 1, std::min(rows, kMaxRowBlock))) {
      KernelDesign design = kernel.design;
      design.xblock = xblock;
      list->AddKernel(kernel, design, fmt::format("rows per program {} {}", kernel.name, xblock),
                      fmt::format("{} rows per program ({} programs)", xblock, (kernel.rows + xblock - 1) / xblock));
    }
  }
}

// The longest K step of a mat-vec program (its products held elementwise: rows x step registers).
constexpr int64_t kMaxMatVecStep = 2048;

void TilingMoves(const Candidate& incumbent, const std::vector<size_t>& order, MoveList* list) {
  for (size_t k : order) {
    const KernelPlan& kernel = incumbent.plan.kernels[k];
    KernelDesign base = kernel.design;
    if (kernel.kind == KernelKind::kAttention) {
      AttentionBlockMoves(kernel, /*rows=*/false, list);
      continue;
    }
    if (kernel.kind == KernelKind::kRecurrent) {
      const int64_t hidden = std::max(kMinBlock, NextPowerOfTwo(kernel.recurrent->hidden));
      for (int64_t yblock : Around(base.yblock, kMinBlock, std::min<int64_t>(hidden, 128))) {
        KernelDesign design = base;
        design.yblock = yblock;
        list->AddKernel(kernel, design, fmt::format("tile {} hidden block {}", kernel.name, yblock),
                        fmt::format("{} hidden units per step tile", yblock));
      }
    }
    if (DotTiles(kernel) || kernel.kind == KernelKind::kRecurrent) {
      const int64_t most = base.algorithm == Algorithm::kGemv ? kMaxMatVecStep : 128;
      for (int64_t rblock : Around(base.rblock, kMinBlock, most)) {
        KernelDesign design = base;
        design.rblock = rblock;
        list->AddKernel(kernel, design, fmt::format("tile {} block_k {}", kernel.name, rblock),
                        fmt::format("a K step of {} per loop iteration", rblock));
      }
    } else if (IsRowKernel(kernel)) {
      const int64_t length = NextPowerOfTwo(std::max<int64_t>(kernel.length, 1));
      const bool single = IsSingleTile(base.algorithm);
      const int64_t lo = single ? length : kMinBlock;
      const int64_t hi = single ? std::max(length, kMaxRBlock) : std::min(length, kMaxRBlock);
      for (int64_t rblock : Around(base.rblock, lo, hi)) {
        KernelDesign design = base;
        design.rblock = rblock;
        list->AddKernel(kernel, design, fmt::format("tile {} rblock {}", kernel.name, rblock),
                        fmt::format("reduction tile of {} elements per row", rblock));
      }
    } else {
      const int64_t elements = kernel.matmul ? kernel.matmul->m * kernel.matmul->n * kernel.matmul->batch : kernel.rows;
      const int64_t numel = NextPowerOfTwo(std::max<int64_t>(elements, 1));
      for (int64_t xblock : Around(base.xblock, kMinPointwiseBlock, std::min(numel, kMaxPointwiseBlock))) {
        KernelDesign design = base;
        design.xblock = xblock;
        list->AddKernel(kernel, design, fmt::format("tile {} xblock {}", kernel.name, xblock),
                        fmt::format("{} elements per program", xblock));
      }
    }
  }
}

// Launches per forward from which stage2.memory first tries the whole forward as one CUDA graph: a launch
// costs the host tens of microseconds in Python, so a forward of many small kernels is bound by them.
constexpr size_t kMinGraphLaunches = 4;

// Every (warps, stages) pair of the given ranges but the kernel's own, nearest first.
void WarpStageMoves(const KernelPlan& kernel, const std::vector<int>& warp_options, int min_stages, int max_stages,
                    MoveList* list) {
  const KernelDesign& base = kernel.design;
  std::vector<std::pair<int, int>> options;
  for (int warps : warp_options) {
    for (int stages = min_stages; stages <= max_stages; ++stages) {
      if (warps != base.num_warps || stages != base.num_stages) {
        options.emplace_back(warps, stages);
      }
    }
  }
  std::stable_sort(options.begin(), options.end(), [&](const auto& a, const auto& b) {
    return Log2Distance(a.first, base.num_warps) + std::abs(a.second - base.num_stages) <
           Log2Distance(b.first, base.num_warps) + std::abs(b.second - base.num_stages);
  });
  for (const auto& [warps, stages] : options) {
    KernelDesign design = base;
    design.num_warps = warps;
    design.num_stages = stages;
    list->AddKernel(kernel, design, fmt::format("memory {} warps {} stages {}", kernel.name, warps, stages),
                    fmt::format("{} warps per program, {}-deep load pipeline", warps, stages));
  }
}

// Matmul: 4 or 8 warps per tile and 2-5 operand tiles in flight (a recurrent time loop: 2-8 warps, no pipeline),
// then the other exact precision (tf32x3 for ieee and back: three tf32 products on the tensor cores against ieee
// FMA products); half products have no precision to choose (bf16/fp16 operands on the tensor cores).
void MatmulMemoryMoves(const KernelPlan& kernel, MoveList* list) {
  if (kernel.kind == KernelKind::kRecurrent) {
    WarpStageMoves(kernel, {2, 4, 8}, 1, 1, list);  // the time loop carries a dependence: nothing to pipeline
  } else {
    WarpStageMoves(kernel, {4, 8}, 2, kMaxMatmulStages, list);
  }
  const KernelDesign& base = kernel.design;
  const bool half = kernel.matmul && IsHalf(kernel.matmul->dtype);
  if (!half && (base.precision == Precision::kIeee || base.precision == Precision::kTf32x3)) {
    KernelDesign design = base;
    design.precision = base.precision == Precision::kIeee ? Precision::kTf32x3 : Precision::kIeee;
    list->AddKernel(kernel, design, fmt::format("precision {} {}", kernel.name, NameOf(design.precision)),
                    design.precision == Precision::kTf32x3
                        ? "three tf32 tensor-core products per element (float32 accuracy)"
                        : "float32 FMA products");
  }
}

void MemoryMoves(const Candidate& incumbent, const std::vector<size_t>& order, MoveList* list) {
  const size_t launches = incumbent.launches;
  if (!incumbent.design.plan.cuda_graph && incumbent.pytorch_ops.empty() && launches >= kMinGraphLaunches) {
    CandidateDesign graphed = incumbent.design;
    graphed.plan.cuda_graph = true;
    list->Add(graphed, "cuda graph",
              fmt::format("the forward's {} launches captured once in a CUDA graph and replayed (inputs "
                          "copied into static buffers, outputs cloned out)",
                          launches));
  }
  std::vector<int> warp_options;
  for (int warps = 1; warps <= kMaxWarps; warps *= 2) {
    warp_options.push_back(warps);
  }
  for (size_t k : order) {
    const KernelPlan& kernel = incumbent.plan.kernels[k];
    if (kernel.kind == KernelKind::kAttention) {  // the precision follows the tolerance: tf32 or tf32x3
      WarpStageMoves(kernel, {4, 8}, 1, 3, list);
      continue;
    }
    if (DotTiles(kernel) || kernel.kind == KernelKind::kRecurrent) {
      MatmulMemoryMoves(kernel, list);
      continue;
    }
    // software pipelining needs a loop
    const bool loop = IsRowKernel(kernel) && !IsSingleTile(kernel.design.algorithm);
    WarpStageMoves(kernel, warp_options, 1, loop ? kMaxStages : 1, list);
  }
}

}  // namespace

std::string SeedFamilyName(int seed) {
  switch (seed) {
    case 0:
      return "registers: fused kernels, a reduction row held in registers where it fits, streamed otherwise; "
             "matmuls with the tolerance's fastest products (tf32, or tf32x3 below 1e-3) in their fastest "
             "tiles, "
             "large products of misaligned rows over aligned copies of their operands";
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

bool SeedFusesAttention(int index) { return index != 1; }

DesignMove SeedDesign(int index, double tol) {
  DesignMove move;
  move.design.seed = index;
  const Precision precision = index == 1 ? Precision::kIeee : MatmulPrecisionFor(tol);
  move.design.precision = precision == Precision::kIeee ? Precision::kUnset : precision;
  move.design.plan.fuse_attention = SeedFusesAttention(index);
  move.move = fmt::format("seed {}", index);
  move.description = SeedFamilyName(index);
  return move;
}

int64_t KernelTrafficBytes(const Graph& graph, const Plan& plan, size_t kernel) {
  const KernelPlan& k = plan.kernels.at(kernel);
  std::map<int, TensorMeta> layouts;
  int64_t bytes = 0;
  for (int value : k.stores) {
    const TensorMeta& meta = *graph.values.at(static_cast<size_t>(value)).meta;
    layouts[value] = DenseLayout(meta);
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
    list.AddKernel(kernel, design, fmt::format("refine {} {} {}", kernel.name, looped ? "rblock" : "xblock", block),
                   "the seed's hottest kernel with its tile resized");
  }
  return list.Take();
}

std::vector<DesignMove> StageMoves(const Graph& graph, const std::string& stage, const Candidate& incumbent,
                                   const std::string& focus, size_t limit) {
  MoveList list(incumbent, limit);
  const auto order = KernelOrder(graph, incumbent, focus);
  if (stage == "stage1.algorithm") {
    AlgorithmMoves(graph, incumbent, order, &list);
  } else if (stage == "stage2.mapping") {
    MappingMoves(incumbent, order, &list);
  } else if (stage == "stage2.tiling") {
    TilingMoves(incumbent, order, &list);
  } else if (stage == "stage2.memory") {
    MemoryMoves(incumbent, order, &list);
  }
  return list.Take();
}

std::vector<DesignMove> RepairMoves(const Candidate& failing, const std::string& status, const std::string& reason) {
  MoveList list(failing, 4);
  if (status == "mismatch") {
    CandidateDesign exact = failing.design;
    exact.precision = Precision::kUnset;
    for (auto& [name, design] : exact.kernels) {
      if (design.precision == Precision::kTf32) {
        design.precision = Precision::kIeee;
      }
    }
    list.Add(exact, "ieee products", "a mismatch with tf32 products: float32 products (ieee) in every matmul");
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
    list.Add(smaller, "halve tiles", "out of resources: smaller tiles and no load pipelining");
  }
  CandidateDesign other;
  other.seed = failing.design.seed == 1 ? 0 : 1;
  other.plan = failing.design.plan;
  list.Add(other, fmt::format("seed {} algorithms", other.seed), "the other reduction algorithm for every kernel");
  CandidateDesign safest;
  safest.seed = 1;
  safest.plan.fuse_epilogues = false;
  safest.plan.fuse_reductions = false;
  list.Add(safest, "unfused streaming", "one kernel per reduction, streamed rows: the simplest correct form");
  return list.Take();
}

}  // namespace egg::expert
