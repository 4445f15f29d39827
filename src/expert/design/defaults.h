// The default design of a planned kernel (the first seed and its alternatives) and the product precision a
// tolerance allows.
#pragma once

#include <string>

#include "expert/plan/plan.h"

namespace egg::expert {

// Split reductions: few long rows (under kSplitRowLimit rows of kSplitMinLength+ elements) are split across
// programs in tiles of at least kMinSplitBlock.
inline constexpr int64_t kSplitRowLimit = 256;
inline constexpr int64_t kSplitMinLength = 16384;
inline constexpr int64_t kMinSplitBlock = 16;
// A flat kernel's elements per program (pointwise kernels, direct convolutions).
inline constexpr int64_t kPointwiseBlock = 1024;

// The default design of a kernel (first seed); `seed` picks an alternative algorithm family (0, 1, 2).
// `precision` is the tl.dot input precision the candidate asks of its products (unset for ieee): a matrix
// product's tile follows it (the tiles measured fastest for ieee FMA products, tf32 and tf32x3 tensor-core
// products differ); kernels without tl.dot products ignore it, a recurrent time loop takes only tf32 from it.
KernelDesign DefaultDesign(const KernelPlan& kernel, int seed, Precision precision = Precision::kUnset);

// The fastest tl.dot input precision whose error fits tolerance `tol` on float32 products: tf32 (10-bit
// mantissas, ~1e-3 relative on deep products) at 1e-3 and looser, ieee below (docs/expert.md).
Precision MatmulPrecisionFor(double tol);

}  // namespace egg::expert
