// Scan kernels: cumulative sums and products along a row, in one tile (single) or a loop of tiles carrying
// the running total (blocked); sorts and top-k hold the row in one tile (a bitonic sort).
#include <algorithm>

#include "expert/codegen/kernel_codegen.h"
#include "expert/families/rows.h"

namespace egg::expert {
namespace {

class ScanFamily : public RowFamily {
 public:
  std::string_view Name() const override { return "scan"; }

  // A sort holds its row in one tile; a scan's seeds alternate between one tile and a loop of tiles.
  KernelDesign DefaultDesign(const KernelPlan& kernel, int seed, Precision /*precision*/) const override {
    const int64_t length = NextPowerOfTwo(std::max<int64_t>(kernel.length, 1));
    const bool sort = kernel.scan && kernel.scan->kind == ScanKind::kSort;
    const bool single = sort || (length <= kTileElements) == (seed % 2 == 0);
    return RowDesign(kernel,
                     single && length <= kLargeTileElements ? Algorithm::kSingle : Algorithm::kBlocked);
  }

  kir::Kernel LowerProgram(const Graph& graph, const KernelPlan& kernel,
                           const std::map<int, TensorMeta>& memory,
                           const std::map<int, TensorMeta>& layouts) const override {
    return ScanProgram(graph, kernel, memory, layouts);
  }

 protected:
  std::set<Algorithm> Algorithms() const override { return {Algorithm::kSingle, Algorithm::kBlocked}; }
};

}  // namespace

std::unique_ptr<KernelFamily> MakeScanFamily() { return std::make_unique<ScanFamily>(); }

}  // namespace egg::expert
