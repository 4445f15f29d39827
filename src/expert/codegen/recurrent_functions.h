// The two jitted functions of a recurrent kernel in the kernel IR (recurrent_codegen.cpp plans the buffers
// and the launches): `_proj`, a layer's input projection of every time step in tl.dot tiles, and `_step`, its
// time loop. One compiled variant of each serves every layer and direction: sizes and strides are constexpr
// parameters and the direction and offsets runtime scalars, so both name their own parameters
// (kir::Function::signature) and lay out their lanes in their bodies (kir::Domain::Kind::kOwnLanes). Their
// loads and stores are hand-written over those strides, listed by parameter (text_loads, text_stores) so that
// kir::Reads and kir::Writes see the values each launch passes.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "expert/kir/kernel.h"
#include "expert/plan/plan.h"

namespace egg::expert::recurrent {

// How a function's hand-written lines reach a pointer parameter: reading an input of the kernel, storing, or
// neither (a counter, or a buffer the kernel itself wrote and reads back).
enum class Access { kNone, kLoad, kStore };

// A function's pointer parameters in launch order: their names in its signature, the values a launch passes,
// and the positions its hand-written loads read and stores write.
struct PointerParams {
  std::vector<std::string> names;
  std::vector<int> values;
  std::vector<size_t> loads;
  std::vector<size_t> stores;

  void Add(std::string name, int value, Access access = Access::kNone);
};

// `_proj` of `kernel` (its recurrent spec, name and design), over `pointers` (x_ptr, w_ptr[, b_ptr],
// out_ptr).
kir::Function ProjectionFunction(const KernelPlan& kernel, const PointerParams& pointers);
// `_step` of `kernel`, over `pointers`, its runtime scalars named as a launch's `scalars` (in parameter
// order).
kir::Function StepFunction(const KernelPlan& kernel, const PointerParams& pointers,
                           const std::vector<std::pair<std::string, int64_t>>& scalars);

}  // namespace egg::expert::recurrent
