// Recurrent layer stacks (RNN, LSTM, GRU): per layer and direction an input projection GEMM of every step,
// then one sequential time loop computing h @ W_hh^T on tl.dot tiles with the gates fused.
#include <fmt/format.h>

#include <algorithm>

#include "expert/codegen/kernel_codegen.h"
#include "expert/design/legality.h"
#include "expert/families/common.h"

namespace egg::expert {
namespace {

constexpr int64_t kRecurrentMinBlock = kMinDotSide;
constexpr int64_t kRecurrentMaxBatchBlock = 64;
constexpr int64_t kRecurrentMaxHiddenBlock = 64;
constexpr int64_t kMaxStepTile = 128;  // a step tile: one accumulator per gate

class RecurrentFamily : public KernelFamily {
 public:
  std::string_view Name() const override { return "recurrent"; }
  KernelDesign DefaultDesign(const KernelPlan& kernel, int seed, Precision precision) const override;

  bool Fits(const KernelPlan& /*kernel*/, const KernelDesign& design) const override {
    for (int64_t side : {design.xblock, design.yblock, design.rblock}) {
      if (!IsPowerOfTwo(side) || side < kMinDotSide || side > kMaxStepTile) {
        return false;
      }
    }
    return design.algorithm == Algorithm::kSequential && IsDotPrecision(design.precision);
  }

  std::string Rule() const override {
    return "recurrent: algorithm sequential, xblock/yblock/rblock powers of two in [16, 128]";
  }

  // One accumulator tile per gate.
  bool FitsResources(const KernelPlan& kernel, const KernelDesign& design) const override {
    const int64_t threads = int64_t{kThreadsPerWarp} * design.num_warps;
    return kernel.recurrent->Gates() * design.xblock * design.yblock <= threads * kMaxAccumulatorPerThread;
  }

  void Moves(SearchStage stage, const KernelPlan& kernel, MoveSink& sink) const override {
    if (stage == SearchStage::kMapping) {
      MappingMoves(kernel, sink);
    } else if (stage == SearchStage::kTiling) {
      TilingMoves(kernel, sink);
    } else if (stage == SearchStage::kMemory) {
      WarpStageMoves(kernel, {2, 4, 8}, 1, 1,
                     sink);  // the time loop carries a dependence: nothing to pipeline
      ExactPrecisionMove(kernel, sink);
    }
  }

  kir::Kernel LowerProgram(const Graph& graph, const KernelPlan& kernel,
                           const std::map<int, TensorMeta>& memory,
                           const std::map<int, TensorMeta>& layouts) const override {
    return RecurrentProgram(graph, kernel, memory, layouts);
  }

 private:
  static void MappingMoves(const KernelPlan& kernel, MoveSink& sink);
  static void TilingMoves(const KernelPlan& kernel, MoveSink& sink);
};

// A recurrent layer stack: one sequential kernel.
KernelDesign RecurrentFamily::DefaultDesign(const KernelPlan& kernel, int /*seed*/,
                                            Precision precision) const {
  const RecurrentSpec& rnn = *kernel.recurrent;
  KernelDesign design;
  // Programs per batch block share its hidden units, 16 each (a step's work spread over many SMs, with a
  // barrier between steps); the K step of h @ W_hh^T up to 64. Products in ieee unless the candidate's
  // precision says otherwise.
  design.algorithm = Algorithm::kSequential;
  design.xblock = std::clamp<int64_t>(NextPowerOfTwo(rnn.batch), kRecurrentMinBlock, kRecurrentMaxBatchBlock);
  design.yblock = kRecurrentMinBlock;  // hidden units per program: many programs share a step
  design.rblock =
      std::clamp<int64_t>(NextPowerOfTwo(rnn.hidden), kRecurrentMinBlock, kRecurrentMaxHiddenBlock);
  // tf32x3 is unmeasured in the time loop
  design.precision = precision == Precision::kTf32 ? Precision::kTf32 : Precision::kIeee;
  return design;
}

// Recurrent time loops: batch rows per program (fewer rows, more programs streaming W_hh each step).
void RecurrentFamily::MappingMoves(const KernelPlan& kernel, MoveSink& sink) {
  const RecurrentSpec& rnn = *kernel.recurrent;
  for (int64_t xblock :
       Around(kernel.design.xblock, kMinBlock, std::max(kMinBlock, NextPowerOfTwo(rnn.batch)))) {
    KernelDesign design = kernel.design;
    design.xblock = xblock;
    sink.Add(
        kernel, design, fmt::format("batch rows per program {} {}", kernel.name, xblock),
        fmt::format("{} batch rows per program ({} programs)", xblock, (rnn.batch + xblock - 1) / xblock));
  }
}

// Hidden units per step tile, then the K step of h @ W_hh^T.
void RecurrentFamily::TilingMoves(const KernelPlan& kernel, MoveSink& sink) {
  const KernelDesign& base = kernel.design;
  const int64_t hidden = std::max(kMinBlock, NextPowerOfTwo(kernel.recurrent->hidden));
  for (int64_t yblock : Around(base.yblock, kMinBlock, std::min<int64_t>(hidden, kMaxStepTile))) {
    KernelDesign design = base;
    design.yblock = yblock;
    sink.Add(kernel, design, fmt::format("tile {} hidden block {}", kernel.name, yblock),
             fmt::format("{} hidden units per step tile", yblock));
  }
  for (int64_t rblock : Around(base.rblock, kMinBlock, kMaxStepTile)) {
    KernelDesign design = base;
    design.rblock = rblock;
    sink.Add(kernel, design, fmt::format("tile {} block_k {}", kernel.name, rblock),
             fmt::format("a K step of {} per loop iteration", rblock));
  }
}

}  // namespace

std::unique_ptr<KernelFamily> MakeRecurrentFamily() { return std::make_unique<RecurrentFamily>(); }

}  // namespace egg::expert
