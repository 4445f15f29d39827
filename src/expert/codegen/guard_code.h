// The Python around the kernels in a candidate file: its guard (the shapes, dtypes and strides the kernels
// were made for; with a dynamic batch, _egg_batch and the batch as egg_B), the settings check, the helpers
// its forward calls (embedded constants, kept weight packs), and small text helpers the file's writer shares.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "expert/codegen/templates.h"
#include "expert/ir/graph.h"

namespace egg::expert {

// "(2, 3)", "(5,)", "()"
std::string ShapeTuple(const std::vector<int64_t>& values);
// self.conv.weight, getattr(self.layers, '0').weight
std::string AttributePath(const std::string& target);
// Each line indented by `levels` x 4 spaces, each ending in a newline.
std::string Indent(const std::vector<std::string>& lines, int levels);

// _egg_specialized's expression: every input's shape, dtype, strides and offset (scalars: their value).
std::string Guard(const Graph& graph);
// The body of _egg_settings_hold, as the template's text.
std::string SettingsCheckText(const Graph& graph);
// forward's parameters: the graph's inputs by name, in order.
std::string ForwardArgs(const Graph& graph);
// The first tensor input with a dim `axis`: the one whose size there names the dynamic batch ("" when none).
std::string BatchInput(const Graph& graph, int axis = 0);
// The template's guard slots: forward's guard call, the guard's arguments and, for a dynamic batch (`dynamic`
// not null), _egg_batch and the header's note of the range.
void WriteGuardCalls(const Graph& graph, const DynamicBatch* dynamic, templates::Values* values);

// The embedded constants (`_EGG_CONSTANTS`) and `_egg_constant_of`, "" when there are none.
std::string ConstantsSource(const Graph& graph, const std::vector<int>& constants);
// `_egg_kept(module, key, sources, make)`: what the forward computes from the module's state alone (a pack
// launch's scratch buffer, a kernel's values of the state) kept between calls while that state is unchanged.
extern const char* const kKeptSource;

}  // namespace egg::expert
