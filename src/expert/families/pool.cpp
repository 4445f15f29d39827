// Pooling kernels: one output element per lane, its window read directly (max, average, their variants).
#include <algorithm>

#include "expert/codegen/kernel_codegen.h"
#include "expert/families/common.h"

namespace egg::expert {
namespace {

constexpr int64_t kPoolBlock = 256;

class PoolFamily : public FlatFamily {
 public:
  std::string_view Name() const override { return "pool"; }

  KernelDesign DefaultDesign(const KernelPlan& kernel, int /*seed*/, Precision /*precision*/) const override {
    KernelDesign design;
    design.algorithm = Algorithm::kDirect;
    design.xblock = std::min(kPoolBlock, NextPowerOfTwo(std::max<int64_t>(Product(kernel.shape), 1)));
    return design;
  }

  kir::Kernel LowerProgram(const Graph& graph, const KernelPlan& kernel,
                           const std::map<int, TensorMeta>& memory,
                           const std::map<int, TensorMeta>& layouts) const override {
    return PoolProgram(graph, kernel, memory, layouts);
  }
};

}  // namespace

std::unique_ptr<KernelFamily> MakePoolFamily() { return std::make_unique<PoolFamily>(); }

}  // namespace egg::expert
