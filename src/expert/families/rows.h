// What the row families (reductions and scans: kernels over rows tiled xblock x rblock) share: the row tile
// of an algorithm, the legality of row designs, and their moves.
#pragma once

#include <set>

#include "expert/families/family.h"

namespace egg::expert {

// The reduced (scanned) dimensions are the innermost of the anchor, so r walks contiguous memory.
bool InnerReduction(const KernelPlan& kernel);

// The row tile of `algorithm` for `kernel`: a whole row in one tile, split chunks, or a loop of tiles (inner
// rows one per program, outer ones several side by side).
KernelDesign RowDesign(const KernelPlan& kernel, Algorithm algorithm);

// A tile holds up to kTileElements of a row in registers (kLargeTileElements where a seed asks for more).
inline constexpr int64_t kTileElements = 4096;
inline constexpr int64_t kLargeTileElements = 16384;

class RowFamily : public KernelFamily {
 public:
  bool Fits(const KernelPlan& kernel, const KernelDesign& design) const override;
  std::string Rule() const override;
  bool FitsResources(const KernelPlan& kernel, const KernelDesign& design) const override;
  void Moves(SearchStage stage, const KernelPlan& kernel, MoveSink& sink) const override;

 protected:
  // The algorithms of this family.
  virtual std::set<Algorithm> Algorithms() const = 0;

 private:
  void AlgorithmMoves(const KernelPlan& kernel, MoveSink& sink) const;
  static void MappingMoves(const KernelPlan& kernel, MoveSink& sink);
  static void TilingMoves(const KernelPlan& kernel, MoveSink& sink);
};

}  // namespace egg::expert
