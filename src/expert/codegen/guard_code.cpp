#include "expert/codegen/guard_code.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>

#include "expert/codegen/dynamic_batch.h"
#include "expert/ir/ops.h"

namespace egg::expert {
namespace {

bool IsIdentifier(const std::string& text) {
  if (text.empty() || std::isdigit(static_cast<unsigned char>(text[0])) != 0) {
    return false;
  }
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; });
}

// The module that holds the setting at `path` ("downsample.0.eps":
// `self._modules['downsample']._modules['0']`), read through the module dictionaries (a replaced submodule is
// the one read).
std::string SettingOwner(const std::string& path) {
  std::string owner = "self";
  size_t start = 0;
  for (size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', start)) {
    owner += fmt::format("._modules['{}']", path.substr(start, dot - start));
    start = dot + 1;
  }
  return owner;
}

// "(a, b)", or "(a,)" for one.
std::string PythonTuple(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) {
    text += (text.empty() ? "" : ", ") + item;
  }
  return "(" + text + (items.size() == 1 ? ",)" : ")");
}

// The body of `_egg_settings_hold(self)`: per module, its settings compared as one tuple with their values at
// capture; False at the first that differs or a module that is gone.
std::vector<std::string> SettingsCheck(const Graph& graph) {
  std::vector<std::string> owners;
  std::map<std::string, std::pair<std::vector<std::string>, std::vector<std::string>>>
      reads;  // owner -> read
  for (const Setting& setting : graph.settings) {
    const size_t dot = setting.path.rfind('.');
    const std::string owner = SettingOwner(setting.path);
    if (!reads.contains(owner)) {
      owners.push_back(owner);
    }
    reads[owner].first.push_back("o." +
                                 (dot == std::string::npos ? setting.path : setting.path.substr(dot + 1)));
    reads[owner].second.push_back(setting.literal);
  }
  std::vector<std::string> lines = {"try:"};
  for (const std::string& owner : owners) {
    lines.push_back("    o = " + owner);
    lines.push_back(
        fmt::format("    if {} != {}:", PythonTuple(reads[owner].first), PythonTuple(reads[owner].second)));
    lines.push_back("        return False");
  }
  lines.insert(lines.end(), {"except (KeyError, AttributeError):", "    return False", "return True"});
  return lines;
}

}  // namespace

std::string ShapeTuple(const std::vector<int64_t>& values) {
  std::string text = "(";
  for (size_t i = 0; i < values.size(); ++i) {
    text += std::to_string(values[i]) + (values.size() == 1 || i + 1 < values.size() ? ", " : "");
  }
  while (!text.empty() && text.back() == ' ') {
    text.pop_back();
  }
  return text + ")";
}

// self.conv.weight, getattr(self.layers, '0').weight
std::string AttributePath(const std::string& target) {
  std::string expr = "self";
  std::stringstream stream(target);
  std::string part;
  while (std::getline(stream, part, '.')) {
    expr = IsIdentifier(part) ? expr + "." + part : fmt::format("getattr({}, '{}')", expr, part);
  }
  return expr;
}

std::string Indent(const std::vector<std::string>& lines, int levels) {
  std::string out;
  const std::string pad(static_cast<size_t>(levels) * 4, ' ');
  for (const std::string& line : lines) {
    out += pad + line + "\n";
  }
  return out;
}

std::string Guard(const Graph& graph) {
  std::vector<std::string> checks;
  for (int input : graph.Inputs()) {
    const Value& v = ValueAt(graph, input);
    if (v.meta) {
      // with dynamic sizes a dimension may be 1, whose stride no kernel reads (_egg_strides, WriteGuardCalls)
      const std::string strides =
          graph.dynamic ? fmt::format("_egg_strides({}, {})", v.name, ShapeTuple(v.meta->stride))
                        : fmt::format("{}.stride() == {}", v.name, ShapeTuple(v.meta->stride));
      checks.push_back(
          fmt::format("isinstance({0}, torch.Tensor) and {0}.shape == {1} and {0}.dtype == {2} and "
                      "{3} and {0}.storage_offset() == {4}",
                      v.name, ShapeTuple(v.meta->shape), TorchDType(v.meta->dtype), strides, v.meta->offset));
    } else if (v.scalar.IsNumber()) {
      checks.push_back(fmt::format("{} == {}", v.name,
                                   v.scalar.kind == Arg::Kind::kFloat  ? FloatLiteral(v.scalar.f)
                                   : v.scalar.kind == Arg::Kind::kBool ? (v.scalar.b ? "True" : "False")
                                                                       : std::to_string(v.scalar.i)));
    }
  }
  if (checks.empty()) {
    return "True";
  }
  std::string guard = "(";
  for (size_t i = 0; i < checks.size(); ++i) {
    guard += (i == 0 ? "(" : "\n            and (") + checks[i] + ")";
  }
  return guard + ")";
}

// The settings check as the template's text (the template ends its last line).
std::string SettingsCheckText(const Graph& graph) {
  std::string text = Indent(SettingsCheck(graph), 1);
  text.pop_back();
  return text;
}

// forward's parameters: the graph's inputs by name, in order.
std::string ForwardArgs(const Graph& graph) {
  std::string args;
  for (int input : graph.Inputs()) {
    args += (args.empty() ? "" : ", ") + ValueAt(graph, input).name;
  }
  return args;
}

// The first tensor input with a dim `axis`: the one whose size there names the dynamic batch.
std::string BatchInput(const Graph& graph, int axis) {
  for (int input : graph.Inputs()) {
    const Value& v = ValueAt(graph, input);
    if (v.meta && v.meta->Rank() > axis) {
      return v.name;
    }
  }
  return "";
}

namespace {

// Each check's fallback: says once why the task's own forward runs (_egg_fell_back in the file).
std::string Fallback(const std::string& args, const std::string& condition, const std::string& why) {
  return fmt::format(
      "        if {}:\n            _egg_fell_back(self, \"{}\")\n            return super().forward({})\n",
      condition, why, args);
}

constexpr const char* kLayout =
    "the inputs are not the shapes, dtypes and strides the kernels were compiled for";

// One dynamic size: _egg_batch gives it (dim `axis` of the first tensor input that has one), or None outside
// the range; the design line says which.
std::string OneDynamicSize(const Graph& graph, const DynamicDim& dim, const std::string& args,
                           templates::Values* values) {
  const int axis = dim.axis;
  const std::string input = BatchInput(graph, axis);
  const std::string what = axis == 0 ? std::string("batch") : fmt::format("size of dim {}", axis);
  values->text["design_line"] +=
      axis == 0
          ? fmt::format(
                "\n# Dynamic batch: every kernel takes the batch egg_B (dim 0 of each tensor input) as an "
                "argument, for egg_B in\n# {}..{}; other batch sizes run the task's own forward.",
                dim.min, dim.max)
          : fmt::format(
                "\n# Dynamic dim {0}: every kernel takes the size egg_B of dim {0} (of each tensor input "
                "that has one) as an argument, for egg_B in\n# {1}..{2}; other sizes run the task's own "
                "forward.",
                axis, dim.min, dim.max);
  values->text["batch_fn"] = fmt::format(
      "def _egg_batch({0}):\n"
      "    \"\"\"The {4} of these inputs (dim {5} of {1}), or None outside the {2}..{3} the kernels hold "
      "for.\"\"\"\n"
      "    if not isinstance({1}, torch.Tensor) or {1}.dim() {6}:\n"
      "        return None\n"
      "    batch = {1}.shape[{5}]\n"
      "    return batch if {2} <= batch <= {3} else None\n\n\n",
      args, input, dim.min, dim.max, what, axis, axis == 0 ? "== 0" : fmt::format("<= {}", axis));
  return fmt::format("        egg_B = _egg_batch({})\n", args) +
         Fallback(args, "egg_B is None",
                  fmt::format("the {} is outside the {}..{} the kernels hold for", what, dim.min, dim.max));
}

// Several dynamic sizes: _egg_batch gives them as a tuple (each from the first tensor input with its
// dimension), or None when one is outside its range; forward unpacks them into egg_B, egg_C, ...
std::string SeveralDynamicSizes(const Graph& graph, const DynamicBatch& dynamic, const std::string& args,
                                templates::Values* values) {
  std::vector<std::string> names;
  std::vector<std::string> reads;
  std::vector<std::string> ranges;
  std::vector<std::string> checks;
  std::vector<std::string> where;
  std::string present;
  for (size_t i = 0; i < dynamic.dims.size(); ++i) {
    const DynamicDim& dim = dynamic.dims[i];
    const std::string input = BatchInput(graph, dim.axis);
    names.push_back(DynamicSizeName(i));
    reads.push_back(fmt::format("{}.shape[{}]", input, dim.axis));
    ranges.push_back(fmt::format("{}..{}", dim.min, dim.max));
    checks.push_back(fmt::format("{} <= sizes[{}] <= {}", dim.min, i, dim.max));
    where.push_back(fmt::format("{} (dim {} of each tensor input that has one) in {}..{}", names.back(),
                                dim.axis, dim.min, dim.max));
    present +=
        fmt::format("    if not isinstance({0}, torch.Tensor) or {0}.dim() <= {1}:\n        return None\n",
                    input, dim.axis);
  }
  values->text["design_line"] += fmt::format(
      "\n# Dynamic sizes: every kernel takes them as arguments, {};\n# other sizes run the task's own "
      "forward.",
      fmt::join(where, ", "));
  values->text["batch_fn"] = fmt::format(
      "def _egg_batch({0}):\n"
      "    \"\"\"The dynamic sizes of these inputs ({1}), or None outside the {2} the kernels hold "
      "for.\"\"\"\n"
      "{3}"
      "    sizes = ({1},)\n"
      "    return sizes if {4} else None\n\n\n",
      args, fmt::join(reads, ", "), fmt::join(ranges, " x "), present, fmt::join(checks, " and "));
  return fmt::format("        egg_sizes = _egg_batch({})\n", args) +
         Fallback(
             args, "egg_sizes is None",
             fmt::format("the sizes are outside the {} the kernels hold for", fmt::join(ranges, " x "))) +
         fmt::format("        {} = egg_sizes\n", fmt::join(names, ", "));
}

}  // namespace

// The guard's calls in forward (and _egg_batch before the guard for a dynamic batch: the batch comes from the
// first tensor input, and the guard checks every shape against it).
void WriteGuardCalls(const Graph& graph, const DynamicBatch* dynamic, templates::Values* values) {
  const std::string args = ForwardArgs(graph);
  const std::string settings = graph.settings.empty()
                                   ? ""
                                   : Fallback(args, "not _egg_settings_hold(self)",
                                              "a setting the kernels hold has another value than at capture");
  if (dynamic == nullptr) {
    values->text["guard_args"] = args;
    values->text["batch_fn"] = "";
    values->text["strides_fn"] = "";
    values->text["forward_guard"] =
        Fallback(args, fmt::format("not _egg_specialized({})", args), kLayout) + settings;
    values->text["forward_guard"].pop_back();
    return;
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < dynamic->dims.size(); ++i) {
    names.push_back(DynamicSizeName(i));
  }
  const std::string sizes = fmt::format("{}, ", fmt::join(names, ", "));
  values->text["guard_args"] = sizes + args;
  const std::string read = dynamic->dims.size() == 1 ? OneDynamicSize(graph, dynamic->dims[0], args, values)
                                                     : SeveralDynamicSizes(graph, *dynamic, args, values);
  values->text["strides_fn"] =
      "def _egg_strides(x, strides):\n"
      "    \"\"\"x's strides are `strides` but where its size is 1 (a dynamic size of 1 from a slice keeps "
      "the\n"
      "    stride it had, and no kernel reads it).\"\"\"\n"
      "    return all(s == e or n == 1 for s, e, n in zip(x.stride(), strides, x.shape))\n\n\n";
  values->text["forward_guard"] =
      read + Fallback(args, fmt::format("not _egg_specialized({}{})", sizes, args), kLayout) + settings;
  values->text["forward_guard"].pop_back();
}

std::string ConstantsSource(const Graph& graph, const std::vector<int>& constants) {
  if (constants.empty()) {
    return "";
  }
  std::string text = "_EGG_CONSTANTS = {\n";
  for (int value : constants) {
    const Value& v = ValueAt(graph, value);
    if (!v.constant_values) {
      throw std::logic_error("constant " + v.name + " is too large to embed");
    }
    std::string numbers;
    for (double number : *v.constant_values) {
      numbers += FloatLiteral(number) + ", ";
    }
    text += fmt::format("    {}: ([{}], {}, {}),\n", Json(v.name).dump(), numbers, TorchDType(v.meta->dtype),
                        ShapeTuple(v.meta->shape));
  }
  text += "}\n\n\n";
  text +=
      "def _egg_constant_of(module, name, device):\n"
      "    cache = module.__dict__.setdefault(\"_egg_constant_cache\", {})\n"
      "    if (name, device) not in cache:\n"
      "        values, dtype, shape = _EGG_CONSTANTS[name]\n"
      "        cache[(name, device)] = torch.tensor(values, "
      "dtype=torch.float64).to(dtype).reshape(shape).to(device)\n"
      "    return cache[(name, device)]\n";
  return text;
}

// The cache of what the forward computes from the module's state alone (a weight's repacked rows, its row
// sums): kept per module while every tensor it read is the same object (a weak reference: a freed parameter's
// memory may hold its replacement) at the same address and version. A write the version counter does not see
// (through `.data`, which autograd does not see either) leaves it stale; docs/expert.md says so.
const char* const kKeptSource =
    "def _egg_kept(module, key, sources, make):\n"
    "    \"\"\"What `make` computes from `sources` (parameters, buffers) alone, kept while they are "
    "unchanged.\"\"\"\n"
    "    if any(t.is_inference() for t in sources):  # no version counter to tell an update by: every call\n"
    "        return make()\n"
    "    cache = module.__dict__.setdefault(\"_egg_kept\", {})\n"
    "    stamp = tuple((t.data_ptr(), t._version) for t in sources)\n"
    "    kept = cache.get(key)\n"
    "    if kept is None or kept[1] != stamp or any(r() is not t for r, t in zip(kept[0], sources)):\n"
    "        kept = cache[key] = ([weakref.ref(t) for t in sources], stamp, make())\n"
    "    return kept[2]\n\n\n";

}  // namespace egg::expert
