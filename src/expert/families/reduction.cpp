// Reduction kernels: rows reduced in registers (persistent), streamed in tiles (looped), with an online
// softmax pair (online), or split across programs with a combine launch (split); their elementwise
// producers and consumers fused in.
#include <algorithm>

#include "expert/codegen/kernel_codegen.h"
#include "expert/design/defaults.h"
#include "expert/families/rows.h"

namespace egg::expert {
namespace {

constexpr int64_t kOuterPersistentLength = 256;

class ReductionFamily : public RowFamily {
 public:
  std::string_view Name() const override { return "reduction"; }

  // Split, persistent, looped or online by seed and row shape.
  KernelDesign DefaultDesign(const KernelPlan& kernel, int seed, Precision /*precision*/) const override {
    const int64_t length = NextPowerOfTwo(std::max<int64_t>(kernel.length, 1));
    // Inner rows fit a tile up to kTileElements; outer ones (the row strided, neighbouring rows contiguous)
    // fit while a tile still holds enough rows side by side for coalesced loads.
    const bool fits = InnerReduction(kernel) ? length <= kTileElements : length <= kOuterPersistentLength;
    const bool split_worthy =
        kernel.splittable && kernel.rows < kSplitRowLimit && kernel.length >= kSplitMinLength;
    const Algorithm streamed = kernel.online_candidate ? Algorithm::kOnline : Algorithm::kLooped;
    Algorithm algorithm = Algorithm::kLooped;
    if (seed == 0) {
      algorithm = split_worthy ? Algorithm::kSplit : (fits ? Algorithm::kPersistent : streamed);
    } else if (seed == 1) {
      if (split_worthy || fits) {
        algorithm = Algorithm::kLooped;
      } else {
        algorithm = length <= kLargeTileElements && InnerReduction(kernel) ? Algorithm::kPersistent
                                                                           : Algorithm::kLooped;
      }
    } else {
      algorithm = kernel.online_candidate ? Algorithm::kOnline
                                          : (kernel.splittable ? Algorithm::kSplit : Algorithm::kLooped);
    }
    KernelDesign design = RowDesign(kernel, algorithm);
    if (seed == 2 && algorithm == Algorithm::kLooped) {
      design.rblock = std::max<int64_t>(design.rblock / 4, 1);
    }
    return design;
  }

  // The kernel IR: one function, or a split design's partial and combine functions over scratch.
  kir::Kernel LowerProgram(const Graph& graph, const KernelPlan& kernel,
                           const std::map<int, TensorMeta>& memory,
                           const std::map<int, TensorMeta>& layouts) const override {
    return ReductionProgram(graph, kernel, memory, layouts);
  }

 protected:
  std::set<Algorithm> Algorithms() const override {
    return {Algorithm::kPersistent, Algorithm::kLooped, Algorithm::kOnline, Algorithm::kSplit};
  }
};

}  // namespace

std::unique_ptr<KernelFamily> MakeReductionFamily() { return std::make_unique<ReductionFamily>(); }

}  // namespace egg::expert
