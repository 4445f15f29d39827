// Pointwise kernels: the realized values of a fusion group over one flat domain, one element per lane.
#include <algorithm>

#include "expert/codegen/kernel_codegen.h"
#include "expert/design/defaults.h"
#include "expert/families/common.h"

namespace egg::expert {
namespace {

class PointwiseFamily : public FlatFamily {
 public:
  std::string_view Name() const override { return "pointwise"; }

  KernelDesign DefaultDesign(const KernelPlan& kernel, int /*seed*/, Precision /*precision*/) const override {
    KernelDesign design;
    design.algorithm = Algorithm::kFlat;
    design.xblock = std::min(kPointwiseBlock, NextPowerOfTwo(std::max<int64_t>(Product(kernel.shape), 1)));
    return design;
  }

  kir::Kernel LowerProgram(const Graph& graph, const KernelPlan& kernel,
                           const std::map<int, TensorMeta>& memory,
                           const std::map<int, TensorMeta>& layouts) const override {
    return PointwiseProgram(graph, kernel, memory, layouts);
  }
};

}  // namespace

std::unique_ptr<KernelFamily> MakePointwiseFamily() { return std::make_unique<PointwiseFamily>(); }

}  // namespace egg::expert
