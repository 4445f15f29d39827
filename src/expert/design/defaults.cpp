#include "expert/design/defaults.h"

#include "expert/families/family.h"

namespace egg::expert {

KernelDesign DefaultDesign(const KernelPlan& kernel, int seed, Precision precision) {
  return FamilyOf(kernel.kind).DefaultDesign(kernel, seed, precision);
}

Precision MatmulPrecisionFor(double tol) {
  constexpr double kTf32Tolerance = 1e-3;
  // Below it, three tf32 products per element (float32 accuracy on the tensor cores: 3e-7 relative error on
  // a 4096-deep product, against ieee's 8e-7) where seed 1 keeps ieee FMA products to measure against.
  return tol >= kTf32Tolerance ? Precision::kTf32 : Precision::kTf32x3;
}
}  // namespace egg::expert
