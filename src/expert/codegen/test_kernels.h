// Test helpers of the codegen room: a planned kernel generated the way GenerateCandidate lays out what it
// stores, and a search in generated text. Tests only.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "expert/codegen/kernel_codegen.h"
#include "expert/families/family.h"

namespace egg::expert::testing {

// Every value `kernel` stores laid out dense, as GenerateCandidate lays them out.
inline std::map<int, TensorMeta> DenseStores(const Graph& graph, const KernelPlan& kernel) {
  std::map<int, TensorMeta> layouts;
  for (int value : kernel.stores) {
    layouts[value] = DenseLayout(*ValueAt(graph, value).meta);
  }
  return layouts;
}

// `kernel` generated over `memory` (the values in memory before it runs), every value it stores dense.
inline KernelSource GenerateWithDenseStores(const Graph& graph, const KernelPlan& kernel,
                                            const std::map<int, TensorMeta>& memory) {
  return GenerateKernel(graph, kernel, memory, DenseStores(graph, kernel));
}

// The plan's only kernel (of `kind`, nothing left to PyTorch), changed by `edit` (its design, say), and the
// values in memory before it runs; nullopt (the test failed) when the plan has other kernels.
inline std::optional<std::pair<KernelPlan, std::map<int, TensorMeta>>> OnlyKernel(
    const Graph& graph, KernelKind kind, const std::function<void(KernelPlan&)>& edit) {
  const Plan plan = MakePlan(graph, {});
  EXPECT_TRUE(plan.extern_ops.empty());
  EXPECT_EQ(plan.kernels.size(), 1U);
  if (plan.kernels.size() != 1) {
    return std::nullopt;
  }
  KernelPlan kernel = plan.kernels[0];
  EXPECT_EQ(kernel.kind, kind);
  if (edit) {
    edit(kernel);
  }
  return std::make_pair(kernel, plan.memory_before[0]);
}

// The plan's only kernel, changed by `edit`, generated.
inline KernelSource WriteOnlyKernel(const Graph& graph, KernelKind kind,
                                    const std::function<void(KernelPlan&)>& edit = {}) {
  const auto only = OnlyKernel(graph, kind, edit);
  return only ? GenerateWithDenseStores(graph, only->first, only->second) : KernelSource{};
}

// The plan's only kernel, changed by `edit`, lowered to the kernel IR by its family.
inline kir::Kernel LowerOnlyKernel(const Graph& graph, KernelKind kind,
                                   const std::function<void(KernelPlan&)>& edit = {}) {
  const auto only = OnlyKernel(graph, kind, edit);
  return only ? FamilyOf(kind).LowerProgram(graph, only->first, only->second, DenseStores(graph, only->first))
              : kir::Kernel{};
}

inline bool Has(const std::string& code, const std::string& text) {
  return code.find(text) != std::string::npos;
}

}  // namespace egg::expert::testing
