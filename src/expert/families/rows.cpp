#include "expert/families/rows.h"

#include <fmt/format.h>

#include <algorithm>

#include "expert/design/defaults.h"
#include "expert/design/design_space.h"
#include "expert/design/legality.h"
#include "expert/families/common.h"

namespace egg::expert {
namespace {

constexpr int64_t kLoopBlock = 2048;
constexpr int64_t kOuterXBlock = 64;
constexpr int64_t kOuterRBlock = 16;
constexpr int64_t kSplitTargetPrograms = 1024;
constexpr int64_t kSplitBlock = 1024;
constexpr int kWideWarps = 8;

}  // namespace

bool InnerReduction(const KernelPlan& kernel) {
  for (size_t d = kernel.shape.size(); d-- > 0;) {
    if (kernel.shape[d] == 1) {
      continue;
    }
    return std::find(kernel.reduced.begin(), kernel.reduced.end(), static_cast<int64_t>(d)) !=
           kernel.reduced.end();
  }
  return true;
}

KernelDesign RowDesign(const KernelPlan& kernel, Algorithm algorithm) {
  const int64_t rows = NextPowerOfTwo(std::max<int64_t>(kernel.rows, 1));
  const int64_t length = NextPowerOfTwo(std::max<int64_t>(kernel.length, 1));
  const bool inner = InnerReduction(kernel);
  KernelDesign design;
  design.algorithm = algorithm;
  if (IsSingleTile(algorithm)) {
    design.rblock = length;
    design.xblock = std::min(rows, std::max<int64_t>(1, kTileElements / length));
  } else if (algorithm == Algorithm::kSplit) {
    design.rblock = std::min(length, kSplitBlock);
    design.xblock = 1;
    const int64_t chunks = (kernel.length + design.rblock - 1) / design.rblock;
    // at least two programs a row, at most one a chunk (a row of one chunk: one program)
    const int64_t target = std::max<int64_t>(kSplitTargetPrograms / std::max<int64_t>(kernel.rows, 1), 2);
    design.split = std::min(target, chunks);
  } else if (inner) {
    design.rblock = std::min(length, kLoopBlock);
    design.xblock = 1;
  } else {
    design.rblock = std::min(length, kOuterRBlock);
    design.xblock = std::min(rows, kOuterXBlock);
  }
  design.num_warps = design.xblock * design.rblock >= kLoopBlock ? kWideWarps : 4;
  return design;
}

bool RowFamily::Fits(const KernelPlan& kernel, const KernelDesign& design) const {
  if (!IsPowerOfTwo(design.rblock) || design.xblock * design.rblock > kMaxTile) {
    return false;
  }
  const bool single = IsSingleTile(design.algorithm);
  if (kernel.scan && kernel.scan->kind == ScanKind::kSort && !single) {
    return false;  // a bitonic sort of the whole row in one tile
  }
  if (single && design.rblock < kernel.length) {
    return false;
  }
  if (design.algorithm == Algorithm::kSplit && (!kernel.splittable || design.split < 1)) {
    return false;
  }
  return Algorithms().count(design.algorithm) != 0;
}

std::string RowFamily::Rule() const { return GenericRule(Name()); }

bool RowFamily::FitsResources(const KernelPlan& /*kernel*/, const KernelDesign& design) const {
  return TileFitsThreads(design.xblock * design.rblock, design);
}

void RowFamily::Moves(SearchStage stage, const KernelPlan& kernel, MoveSink& sink) const {
  switch (stage) {
    case SearchStage::kAlgorithm:
      AlgorithmMoves(kernel, sink);
      return;
    case SearchStage::kMapping:
      MappingMoves(kernel, sink);
      return;
    case SearchStage::kTiling:
      TilingMoves(kernel, sink);
      return;
    case SearchStage::kMemory:  // software pipelining needs a loop
      WarpStageMoves(kernel, AllWarps(), 1, IsSingleTile(kernel.design.algorithm) ? 1 : kMaxStages, sink);
      return;
  }
}

void RowFamily::AlgorithmMoves(const KernelPlan& kernel, MoveSink& sink) const {
  for (int seed = 0; seed < kSeedFamilies; ++seed) {
    const KernelDesign other = DefaultDesign(kernel, seed, Precision::kUnset);
    if (other.algorithm != kernel.design.algorithm) {
      sink.Add(kernel, other, fmt::format("algorithm {} {}", kernel.name, NameOf(other.algorithm)),
               fmt::format("{} from {} to {} ({})", kernel.name, NameOf(kernel.design.algorithm),
                           NameOf(other.algorithm),
                           IsSingleTile(other.algorithm)
                               ? "one row per tile kept in registers: one read of the input"
                               : "stream the row in tiles: bounded registers, one pass per statistic"));
    }
  }
}

void RowFamily::MappingMoves(const KernelPlan& kernel, MoveSink& sink) {
  const int64_t rows = NextPowerOfTwo(std::max<int64_t>(kernel.rows, 1));
  for (int64_t xblock : Around(kernel.design.xblock, 1, std::min(rows, kMaxRowBlock))) {
    KernelDesign design = kernel.design;
    design.xblock = xblock;
    sink.Add(kernel, design, fmt::format("rows per program {} {}", kernel.name, xblock),
             fmt::format("{} rows per program ({} programs)", xblock, (kernel.rows + xblock - 1) / xblock));
  }
}

void RowFamily::TilingMoves(const KernelPlan& kernel, MoveSink& sink) {
  const KernelDesign& base = kernel.design;
  const int64_t length = NextPowerOfTwo(std::max<int64_t>(kernel.length, 1));
  const bool single = IsSingleTile(base.algorithm);
  const int64_t lo = single ? length : kMinBlock;
  const int64_t hi = single ? std::max(length, kMaxRBlock) : std::min(length, kMaxRBlock);
  for (int64_t rblock : Around(base.rblock, lo, hi)) {
    KernelDesign design = base;
    design.rblock = rblock;
    sink.Add(kernel, design, fmt::format("tile {} rblock {}", kernel.name, rblock),
             fmt::format("reduction tile of {} elements per row", rblock));
  }
}

}  // namespace egg::expert
