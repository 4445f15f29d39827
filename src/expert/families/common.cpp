#include "expert/families/common.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "expert/design/legality.h"

namespace egg::expert {

int Log2Distance(int64_t a, int64_t b) {
  return static_cast<int>(std::abs(std::log2(static_cast<double>(std::max<int64_t>(a, 1))) -
                                   std::log2(static_cast<double>(std::max<int64_t>(b, 1)))));
}

std::vector<int64_t> Around(int64_t current, int64_t lo, int64_t hi) {
  std::vector<int64_t> values;
  for (int64_t v = lo; v <= hi; v *= 2) {
    if (v != current) {
      values.push_back(v);
    }
  }
  std::stable_sort(values.begin(), values.end(),
                   [&](int64_t a, int64_t b) { return Log2Distance(a, current) < Log2Distance(b, current); });
  return values;
}

bool TileFitsThreads(int64_t elements, const KernelDesign& design) {
  const int64_t threads = int64_t{kThreadsPerWarp} * design.num_warps;
  return elements <= threads * kMaxElementsPerThread && elements * 4 >= threads;
}

void WarpStageMoves(const KernelPlan& kernel, const std::vector<int>& warp_options, int min_stages,
                    int max_stages, MoveSink& sink) {
  const KernelDesign& base = kernel.design;
  std::vector<std::pair<int, int>> options;
  for (int warps : warp_options) {
    for (int stages = min_stages; stages <= max_stages; ++stages) {
      if (warps != base.num_warps || stages != base.num_stages) {
        options.emplace_back(warps, stages);
      }
    }
  }
  std::stable_sort(options.begin(), options.end(), [&](const auto& a, const auto& b) {
    return Log2Distance(a.first, base.num_warps) + std::abs(a.second - base.num_stages) <
           Log2Distance(b.first, base.num_warps) + std::abs(b.second - base.num_stages);
  });
  for (const auto& [warps, stages] : options) {
    KernelDesign design = base;
    design.num_warps = warps;
    design.num_stages = stages;
    sink.Add(kernel, design, fmt::format("memory {} warps {} stages {}", kernel.name, warps, stages),
             fmt::format("{} warps per program, {}-deep load pipeline", warps, stages));
  }
}

void ExactPrecisionMove(const KernelPlan& kernel, MoveSink& sink) {
  const KernelDesign& base = kernel.design;
  if (base.precision != Precision::kIeee && base.precision != Precision::kTf32x3) {
    return;
  }
  KernelDesign design = base;
  design.precision = base.precision == Precision::kIeee ? Precision::kTf32x3 : Precision::kIeee;
  sink.Add(kernel, design, fmt::format("precision {} {}", kernel.name, NameOf(design.precision)),
           design.precision == Precision::kTf32x3
               ? "three tf32 tensor-core products per element (float32 accuracy)"
               : "float32 FMA products");
}

std::vector<int> AllWarps() {
  std::vector<int> warps;
  for (int count = 1; count <= kMaxWarps; count *= 2) {
    warps.push_back(count);
  }
  return warps;
}

void FlatTileMoves(const KernelPlan& kernel, int64_t elements, MoveSink& sink) {
  const int64_t numel = NextPowerOfTwo(std::max<int64_t>(elements, 1));
  for (int64_t xblock :
       Around(kernel.design.xblock, kMinPointwiseBlock, std::min(numel, kMaxPointwiseBlock))) {
    KernelDesign design = kernel.design;
    design.xblock = xblock;
    sink.Add(kernel, design, fmt::format("tile {} xblock {}", kernel.name, xblock),
             fmt::format("{} elements per program", xblock));
  }
}

std::string GenericRule(std::string_view kind) {
  return fmt::format(
      "{}: an algorithm of its kind, rblock a power of two covering the row where the algorithm is "
      "persistent",
      kind);
}

bool FlatFamily::Fits(const KernelPlan& /*kernel*/, const KernelDesign& design) const {
  return design.xblock <= kMaxTile;
}

void FlatFamily::Moves(SearchStage stage, const KernelPlan& kernel, MoveSink& sink) const {
  if (stage == SearchStage::kTiling) {
    FlatTileMoves(kernel, kernel.rows, sink);
  } else if (stage == SearchStage::kMemory) {
    WarpStageMoves(kernel, AllWarps(), 1, 1, sink);
  }
}

}  // namespace egg::expert
