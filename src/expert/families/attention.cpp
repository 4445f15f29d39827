// Attention: softmax(Q K^T) V as one flash kernel per query block, an online softmax over key blocks, the
// scores never stored.
#include <fmt/format.h>

#include <algorithm>

#include "expert/codegen/kernel_codegen.h"
#include "expert/design/legality.h"
#include "expert/families/common.h"

namespace egg::expert {
namespace {

constexpr int64_t kAttentionRows = 64;
constexpr int64_t kAttentionKeys = 64;
constexpr int64_t kMaxAttentionTile = 128;

class AttentionFamily : public KernelFamily {
 public:
  std::string_view Name() const override { return "attention"; }
  KernelDesign DefaultDesign(const KernelPlan& kernel, int seed, Precision precision) const override;

  // ieee maps to tf32x3: float32 accuracy on the tensor cores.
  KernelDesign FallbackDesign(const KernelPlan& kernel, int seed, Precision candidate) const override {
    KernelDesign design = DefaultDesign(kernel, seed, candidate);
    design.precision = FlashPrecision(candidate);
    return design;
  }

  // tl.dot tiles of query rows x keys, never ieee products.
  bool Fits(const KernelPlan& kernel, const KernelDesign& design) const override {
    const auto fits = [&](int64_t side) {
      return IsPowerOfTwo(side) && side >= kMinDotSide && side <= kMaxAttentionTile;
    };
    const bool tiles = fits(design.xblock) && fits(design.yblock);
    return kernel.attention && design.algorithm == Algorithm::kFlash && tiles &&
           (design.precision == Precision::kTf32 || design.precision == Precision::kTf32x3);
  }

  std::string Rule() const override {
    return "attention: algorithm flash, xblock and yblock powers of two in [16, 128], precision tf32 or "
           "tf32x3";
  }

  // Scores and output tiles in registers, K and V tiles staged.
  bool FitsResources(const KernelPlan& kernel, const KernelDesign& design) const override {
    const int64_t threads = int64_t{kThreadsPerWarp} * design.num_warps;
    const int64_t d = std::max(kMinBlock, NextPowerOfTwo(kernel.attention->d));
    const int64_t dv = std::max(kMinBlock, NextPowerOfTwo(kernel.attention->dv));
    const int64_t shared = (design.xblock * d + design.num_stages * design.yblock * (d + dv)) * 4;
    return design.xblock * (design.yblock + dv) <= threads * kMaxAccumulatorPerThread &&
           shared <= kMaxMatmulSharedBytes;
  }

  void Moves(SearchStage stage, const KernelPlan& kernel, MoveSink& sink) const override {
    switch (stage) {
      case SearchStage::kAlgorithm:
        UnfusedMove(kernel, sink);
        return;
      case SearchStage::kMapping:
        BlockMoves(kernel, /*rows=*/true, sink);
        return;
      case SearchStage::kTiling:
        BlockMoves(kernel, /*rows=*/false, sink);
        return;
      case SearchStage::kMemory:  // the precision follows the tolerance: tf32 or tf32x3
        WarpStageMoves(kernel, {4, 8}, 1, 3, sink);
        return;
    }
  }

  kir::Kernel LowerProgram(const Graph& graph, const KernelPlan& kernel,
                           const std::map<int, TensorMeta>& memory,
                           const std::map<int, TensorMeta>& layouts) const override {
    return AttentionProgram(graph, kernel, memory, layouts);
  }

 private:
  static void BlockMoves(const KernelPlan& kernel, bool rows, MoveSink& sink);

  // Back to the products and the softmax in kernels apart.
  static void UnfusedMove(const KernelPlan& kernel, MoveSink& sink) {
    CandidateDesign unfused = sink.Incumbent();
    unfused.kernels.erase(kernel.name);
    unfused.plan.fuse_attention = false;
    sink.AddCandidate(unfused, fmt::format("algorithm {} unfused", kernel.name),
                      "attention unfused: the scores stored by a bmm kernel, the softmax's max and sum by a "
                      "reduction kernel, P recomputed in the second product's prologue");
  }
};

// Flash attention: 64 query rows x 64 keys a step (seed 2: 128 rows, 8 warps).
KernelDesign AttentionFamily::DefaultDesign(const KernelPlan& kernel, int seed,
                                            Precision /*precision*/) const {
  const AttentionSpec& at = *kernel.attention;
  KernelDesign design;
  const int64_t rows = seed == 2 ? 2 * kAttentionRows : kAttentionRows;
  design.algorithm = Algorithm::kFlash;
  design.xblock = std::clamp<int64_t>(NextPowerOfTwo(at.lq), kMinDotSide, rows);
  // a head dim over 128 (K and V tiles of 256 columns): half the keys a step, no second stage in flight
  const bool wide = std::max(at.d, at.dv) > 2 * kAttentionKeys;
  design.yblock =
      std::clamp<int64_t>(NextPowerOfTwo(at.lk), kMinDotSide, wide ? kAttentionKeys / 2 : kAttentionKeys);
  design.num_warps = seed == 2 ? 8 : 4;
  design.num_stages = wide ? 1 : 2;
  design.precision = Precision::kTf32x3;  // never ieee: a flash loop of FMA products is register-bound
  return design;
}

// Flash attention: query rows per program (`rows`, stage2.mapping) or keys per loop step (stage2.tiling),
// 32 to 128.
void AttentionFamily::BlockMoves(const KernelPlan& kernel, bool rows, MoveSink& sink) {
  const AttentionSpec& at = *kernel.attention;
  const int64_t current = rows ? kernel.design.xblock : kernel.design.yblock;
  const int64_t most =
      std::clamp<int64_t>(NextPowerOfTwo(rows ? at.lq : at.lk), kMinBlock, kMaxAttentionTile);
  for (int64_t block : Around(current, std::min<int64_t>(32, most), most)) {
    KernelDesign design = kernel.design;
    (rows ? design.xblock : design.yblock) = block;
    const std::string move =
        fmt::format("{} {} {}", rows ? "rows per program" : "keys per step", kernel.name, block);
    sink.Add(kernel, design, move,
             rows ? fmt::format("{} query rows per program ({} programs)", block,
                                (at.lq + block - 1) / block * at.batch)
                  : fmt::format("{} keys per loop step (scores tile {}x{})", block, design.xblock, block));
  }
}

}  // namespace

std::unique_ptr<KernelFamily> MakeAttentionFamily() { return std::make_unique<AttentionFamily>(); }

}  // namespace egg::expert
