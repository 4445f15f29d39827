// What several kernel families share: the ranges their moves sweep, the warps-and-stages moves, the flat
// tile's register rule and its xblock moves.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "expert/families/family.h"

namespace egg::expert {

// The distance between two sizes in powers of two (rounded down).
int Log2Distance(int64_t a, int64_t b);

// Powers of two in [lo, hi] other than `current`, nearest first.
std::vector<int64_t> Around(int64_t current, int64_t lo, int64_t hi);

// Whether a tile of `elements` (one per lane) suits `design`'s threads: at least a quarter of an element per
// thread, at most kMaxElementsPerThread.
bool TileFitsThreads(int64_t elements, const KernelDesign& design);

// Every (warps, stages) pair of the given ranges but the kernel's own, nearest first.
void WarpStageMoves(const KernelPlan& kernel, const std::vector<int>& warp_options, int min_stages,
                    int max_stages, MoveSink& sink);

// The other exact product precision for a kernel with ieee or tf32x3 products (ieee FMA products against
// three tf32 products on the tensor cores); nothing for tf32.
void ExactPrecisionMove(const KernelPlan& kernel, MoveSink& sink);

// Every warp count from 1 to kMaxWarps.
std::vector<int> AllWarps();

// A flat kernel (one element per lane) over `elements`: xblock from kMinPointwiseBlock up to the elements or
// kMaxPointwiseBlock.
void FlatTileMoves(const KernelPlan& kernel, int64_t elements, MoveSink& sink);

// The rule of a kind without rules of its own, in words (DesignRule).
std::string GenericRule(std::string_view kind);

// A family of flat kernels (one element per lane): any xblock up to kMaxTile, the flat tile's xblock moves
// and the warp moves (nothing to pipeline).
class FlatFamily : public KernelFamily {
 public:
  bool Fits(const KernelPlan& kernel, const KernelDesign& design) const override;
  std::string Rule() const override { return GenericRule(Name()); }
  void Moves(SearchStage stage, const KernelPlan& kernel, MoveSink& sink) const override;
};

}  // namespace egg::expert
