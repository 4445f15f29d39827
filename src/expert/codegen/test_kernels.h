// Test helpers of the codegen room: a planned kernel generated the way GenerateCandidate lays out what it
// stores, and a search in generated text. Tests only.
#pragma once

#include <map>
#include <string>

#include "expert/codegen/kernel_codegen.h"

namespace egg::expert::testing {

// `kernel` generated over `memory` (the values in memory before it runs), every value it stores dense.
inline KernelSource GenerateWithDenseStores(const Graph& graph, const KernelPlan& kernel,
                                            const std::map<int, TensorMeta>& memory) {
  std::map<int, TensorMeta> layouts;
  for (int value : kernel.stores) {
    layouts[value] = DenseLayout(*ValueAt(graph, value).meta);
  }
  return GenerateKernel(graph, kernel, memory, layouts);
}

inline bool Has(const std::string& code, const std::string& text) {
  return code.find(text) != std::string::npos;
}

}  // namespace egg::expert::testing
