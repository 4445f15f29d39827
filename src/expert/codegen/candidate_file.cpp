#include "expert/codegen/candidate_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include "expert/codegen/kernel_codegen.h"
#include "expert/codegen/templates.h"
#include "expert/design/defaults.h"
#include "expert/design/legality.h"

namespace egg::expert {
namespace {

// The most stages a tl.dot kernel's staged operand tiles allow (the launch and the design record say them).
int StagesThatFit(const KernelPlan& kernel, const KernelSource& source) {
  return FittingStages(kernel.design, source.a_tile_loads, source.b_tile_loads,
                       StagedOperandBytes(*kernel.matmul, kernel.design));
}

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

bool IsIdentifier(const std::string& text) {
  if (text.empty() || std::isdigit(static_cast<unsigned char>(text[0])) != 0) {
    return false;
  }
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; });
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

class ForwardWriter {
 public:
  ForwardWriter(const Graph& graph, const Plan& plan) : graph_(graph), plan_(plan) {
    for (size_t k = 0; k < plan.kernels.size(); ++k) {
      for (int value : plan.kernels[k].stores) {
        stored_.insert(value);
      }
    }
  }

  std::string Device() {
    for (int input : graph_.Inputs()) {
      if (ValueAt(graph_, input).meta) {
        return Name(input) + ".device";
      }
    }
    for (size_t v = 0; v < graph_.values.size(); ++v) {
      if (graph_.values[v].kind == ValueKind::kState && graph_.values[v].state_kind != "constant") {
        return Expr(static_cast<int>(v)) + ".device";
      }
    }
    return "torch.device('cuda' if torch.cuda.is_available() else 'cpu')";
  }

  std::string Name(int value) const {
    const Value& v = ValueAt(graph_, value);
    return v.kind == ValueKind::kInput ? v.name : "v_" + v.name;
  }

  // A Python expression for a value that is in memory (or a PyTorch view of memory), emitting what it needs.
  std::string Expr(int value) {
    const auto found = bound_.find(value);
    if (found != bound_.end()) {
      return found->second;
    }
    const Value& v = ValueAt(graph_, value);
    std::string name = Name(value);
    if (v.kind == ValueKind::kInput) {
      return name;
    }
    if (v.kind == ValueKind::kState) {
      if (v.state_kind == "constant") {
        Line(fmt::format("{} = _egg_constant_of(self, {}, {})", name, Quote(v.name), Device()));
        constants_.push_back(value);
      } else {
        Line(fmt::format("{} = {}", name, AttributePath(v.target)));
      }
      bound_[value] = name;
      return name;
    }
    const Node& node = graph_.nodes.at(static_cast<size_t>(v.node));
    if (ClassifyOp(node.op) == OpClass::kView || node.op == "getitem") {
      if (node.op == "getitem") {
        Line(fmt::format("{} = {}[{}]", name, Expr(node.args.at(0).value), node.args.at(1).i));
      } else {
        Line(fmt::format("{} = {}", name, OpCall(node)));
      }
      bound_[value] = name;
      return name;
    }
    throw std::logic_error("value " + v.name + " is not in memory when the forward reads it");
  }

  void Kernel(const KernelPlan& kernel, const KernelSource& source) {
    const std::string device = Device();
    for (int value : kernel.stores) {
      const TensorMeta& meta = *ValueAt(graph_, value).meta;
      const std::string name = Name(value);
      Line(fmt::format("{} = torch.empty({}, device={}, dtype={})", name, ShapeTuple(meta.shape), device,
                       TorchDType(meta.dtype)));
      bound_[value] = name;
    }
    std::vector<std::string> scratch;
    for (size_t i = 0; i < source.scratch.size(); ++i) {
      scratch.push_back(fmt::format("{}_scratch{}", source.name, i));
      Line(fmt::format("{} = torch.{}(({},), device={}, dtype={})", scratch.back(),
                       source.scratch[i].zeroed ? "zeros" : "empty", source.scratch[i].numel, device,
                       TorchDType(source.scratch[i].dtype)));
    }
    for (const KernelLaunch& launch : source.launches) {
      std::vector<std::string> args;
      for (int pointer : launch.pointers) {
        args.push_back(IsScratch(pointer) ? scratch.at(ScratchIndex(pointer)) : Expr(pointer));
      }
      for (const auto& scalar : launch.scalars) {
        args.push_back(std::to_string(scalar.second));
      }
      for (const auto& [key, number] : launch.constexprs) {
        args.push_back(fmt::format("{}={}", key, number));
      }
      args.push_back(fmt::format("num_warps={}", kernel.design.num_warps));
      args.push_back(fmt::format("num_stages={}", kernel.design.num_stages));
      std::string call = launch.function + "[" + launch.grid + "](";
      for (size_t i = 0; i < args.size(); ++i) {
        call += (i == 0 ? "" : ", ") + args[i];
      }
      Line(call + ")");
    }
  }

  void Extern(const Node& node) {
    const std::string name = Name(node.value);
    Line(fmt::format("{} = {}", name, OpCall(node)));
    bound_[node.value] = name;
    const Value& v = ValueAt(graph_, node.value);
    if (v.meta) {
      Line(fmt::format("{0} = {0}.contiguous()", name));
    }
    for (int user : v.users) {
      const Node& getitem = graph_.nodes.at(static_cast<size_t>(user));
      if (getitem.op != "getitem") {
        continue;
      }
      const std::string item = Name(getitem.value);
      Line(fmt::format("{} = {}[{}]", item, name, getitem.args.at(1).i));
      if (ValueAt(graph_, getitem.value).meta) {
        Line(fmt::format("{0} = {0}.contiguous()", item));
      }
      bound_[getitem.value] = item;
    }
  }

  void Return() {
    std::vector<std::string> outputs;
    for (const Arg& output : graph_.outputs) {
      std::string expr = Expr(output.value);
      if (AliasesCallerMemory(output.value)) {
        expr += ".clone()";
      }
      outputs.push_back(expr);
    }
    for (const auto& [target, arg] : graph_.mutations) {
      if (arg.kind == Arg::Kind::kValue) {
        Line(fmt::format("{}.copy_({})", AttributePath(target), Expr(arg.value)));
      }
    }
    if (graph_.returns == "tensor" && outputs.size() == 1) {
      Line("return " + outputs[0]);
      return;
    }
    std::string joined;
    for (const std::string& expr : outputs) {
      joined += expr + ", ";
    }
    Line(graph_.returns == "list" ? "return [" + joined + "]" : "return (" + joined + ")");
  }

  std::vector<std::string> Lines() const { return lines_; }
  const std::vector<int>& Constants() const { return constants_; }

 private:
  static std::string Quote(const std::string& text) { return Json(text).dump(); }

  bool AliasesCallerMemory(int value) const {
    int current = value;
    while (true) {
      const Value& v = ValueAt(graph_, current);
      if (v.kind != ValueKind::kNode) {
        return true;
      }
      const Node& node = graph_.nodes.at(static_cast<size_t>(v.node));
      if (ClassifyOp(node.op) != OpClass::kView || stored_.count(current) != 0) {
        return false;
      }
      current = ViewSource(node);
    }
  }

  std::string ArgCode(const Arg& arg) {
    switch (arg.kind) {
      case Arg::Kind::kNone:
        return "None";
      case Arg::Kind::kValue: {
        const Value& v = ValueAt(graph_, arg.value);
        if (!v.meta && v.kind == ValueKind::kInput) {
          return v.name;
        }
        return Expr(arg.value);
      }
      case Arg::Kind::kInt:
        return std::to_string(arg.i);
      case Arg::Kind::kFloat:
        return FloatLiteral(arg.f);
      case Arg::Kind::kBool:
        return arg.b ? "True" : "False";
      case Arg::Kind::kString:
        return Quote(arg.s);
      case Arg::Kind::kDType:
        return TorchDType(arg.dtype);
      case Arg::Kind::kList: {
        std::string text = "[";
        for (size_t i = 0; i < arg.list.size(); ++i) {
          text += (i == 0 ? "" : ", ") + ArgCode(arg.list[i]);
        }
        return text + "]";
      }
      case Arg::Kind::kOther: {
        const Json json = Json::parse(arg.s);
        if (json.contains("device")) {
          return Device();
        }
        if (json.contains("layout")) {
          return "torch." + json.at("layout").get<std::string>();
        }
        if (json.contains("memory_format")) {
          return "torch." + json.at("memory_format").get<std::string>();
        }
        throw std::logic_error("argument " + arg.s + " has no Python form");
      }
    }
    return "None";
  }

  std::string OpCall(const Node& node) {
    std::vector<std::string> args;
    for (const Arg& arg : node.args) {
      args.push_back(ArgCode(arg));
    }
    for (const auto& [key, arg] : node.kwargs) {
      args.push_back(key + "=" + ArgCode(arg));
    }
    std::string call = "torch.ops." + node.op + "(";
    for (size_t i = 0; i < args.size(); ++i) {
      call += (i == 0 ? "" : ", ") + args[i];
    }
    return call + ")";
  }

  void Line(const std::string& text) { lines_.push_back(text); }

  const Graph& graph_;
  const Plan& plan_;
  std::set<int> stored_;
  std::map<int, std::string> bound_;
  std::vector<std::string> lines_;
  std::vector<int> constants_;
};

std::string Guard(const Graph& graph) {
  std::vector<std::string> checks;
  for (int input : graph.Inputs()) {
    const Value& v = ValueAt(graph, input);
    if (v.meta) {
      checks.push_back(fmt::format("isinstance({0}, torch.Tensor) and {0}.shape == {1} and {0}.dtype == {2} and "
                                   "{0}.stride() == {3} and {0}.storage_offset() == {4}",
                                   v.name, ShapeTuple(v.meta->shape), TorchDType(v.meta->dtype),
                                   ShapeTuple(v.meta->stride), v.meta->offset));
    } else if (v.scalar.IsNumber()) {
      checks.push_back(fmt::format("{} == {}", v.name,
                                   v.scalar.kind == Arg::Kind::kFloat ? FloatLiteral(v.scalar.f)
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
      "        cache[(name, device)] = torch.tensor(values, dtype=torch.float64).to(dtype).reshape(shape).to(device)\n"
      "    return cache[(name, device)]\n";
  return text;
}

// kernel.warmup(torch.float32, ..., XBLOCK=..., grid=(1,)): Triton compiles from dtypes alone.
std::vector<std::string> PrecompileCalls(const Graph& graph, const KernelPlan& kernel, const KernelSource& source) {
  std::vector<std::string> calls;
  for (const KernelLaunch& launch : source.launches) {
    std::string call = launch.function + ".warmup(";
    for (int pointer : launch.pointers) {
      const DType dtype = IsScratch(pointer) ? source.scratch.at(ScratchIndex(pointer)).dtype
                                             : ValueAt(graph, pointer).meta->dtype;
      call += TorchDType(dtype) + ", ";
    }
    for (const auto& scalar : launch.scalars) {  // a runtime integer: its value only picks specializations
      call += std::to_string(scalar.second) + ", ";
    }
    for (const auto& [key, number] : launch.constexprs) {
      call += fmt::format("{}={}, ", key, number);
    }
    calls.push_back(call + fmt::format("num_warps={}, num_stages={}, grid=(1,))", kernel.design.num_warps,
                                       kernel.design.num_stages));
  }
  return calls;
}

// The design a planned kernel is compiled with: the record's where it is legal, else the seed's default (an
// attention kernel's products from the candidate's precision).
KernelDesign KernelDesignFor(const KernelPlan& kernel, const CandidateDesign& design) {
  const auto chosen = design.kernels.find(kernel.name);
  if (chosen != design.kernels.end() && DesignFits(kernel, chosen->second)) {
    return chosen->second;
  }
  KernelDesign fallback = DefaultDesign(kernel, design.seed, design.precision);
  if (kernel.kind == KernelKind::kAttention) {  // ieee maps to tf32x3: float32 accuracy, tensor cores
    fallback.precision = FlashPrecision(design.precision);
  }
  return fallback;
}

// The plan as comment lines for people: each kernel with its reasons, then the ops left to PyTorch.
std::string PlanComment(const Candidate& candidate) {
  std::string comment;
  for (const KernelReport& kernel : candidate.kernels) {
    comment += "# " + kernel.name + " (" + kernel.kind + "): ";
    for (size_t i = 0; i < kernel.reasons.size(); ++i) {
      comment += (i == 0 ? "" : "; ") + kernel.reasons[i];
    }
    comment += "\n";
  }
  for (const std::string& op : candidate.pytorch_ops) {
    comment += "# in PyTorch: " + op + "\n";
  }
  return comment;
}

// forward's body: the kernels launched and the extern ops called in plan order; returns the source of the
// constants it uses.
std::string WriteForward(const Graph& graph, const Plan& plan, const std::vector<KernelSource>& sources,
                         ForwardWriter* forward) {
  for (const Step& step : plan.steps) {
    if (step.kind == Step::Kind::kKernel) {
      const auto k = static_cast<size_t>(step.index);
      forward->Kernel(plan.kernels[k], sources[k]);
    } else {
      forward->Extern(graph.nodes.at(static_cast<size_t>(step.index)));
    }
  }
  forward->Return();
  return ConstantsSource(graph, forward->Constants());
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

}  // namespace

Candidate GenerateCandidate(const Graph& graph, const std::string& task_source, const std::string& task_name,
                            const CandidateDesign& design) {
  Candidate candidate;
  candidate.design.seed = design.seed;
  candidate.design.plan = design.plan;
  candidate.design.precision = design.precision;
  candidate.design.dtype = GraphPrecision(graph);
  try {
    candidate.plan = MakePlan(graph, design.plan);
  } catch (const std::exception& error) {
    candidate.problem = std::string("planning failed: ") + error.what();
    return candidate;
  }
  Plan& plan = candidate.plan;
  std::vector<KernelSource> sources;
  std::string kernels_code;
  std::vector<std::string> precompile;
  try {
    for (size_t k = 0; k < plan.kernels.size(); ++k) {
      KernelPlan& kernel = plan.kernels[k];
      kernel.design = KernelDesignFor(kernel, design);
      candidate.design.kernels[kernel.name] = kernel.design;
      std::map<int, TensorMeta> layouts;
      for (int value : kernel.stores) {
        layouts[value] = DenseLayout(*ValueAt(graph, value).meta);
      }
      sources.push_back(GenerateKernel(graph, kernel, plan.memory_before.at(k), layouts));
      candidate.launches += sources.back().launches.size();
      if (DotTiles(kernel)) {  // the launch and the design record say the stages it can use
        kernel.design.num_stages = StagesThatFit(kernel, sources.back());
        candidate.design.kernels[kernel.name] = kernel.design;
      }
      kernels_code += sources.back().code + "\n\n";
      for (const std::string& call : PrecompileCalls(graph, kernel, sources.back())) {
        precompile.push_back(call);
      }
      KernelReport report{kernel.name, KernelKindName(kernel.kind), {}, kernel.design, kernel.reasons};
      for (int node : sources.back().computed) {
        report.ops.push_back(graph.nodes.at(static_cast<size_t>(node)).op);
      }
      candidate.kernels.push_back(report);
    }
  } catch (const std::exception& error) {
    candidate.problem = std::string("code generation failed: ") + error.what();
    return candidate;
  }
  candidate.pytorch_ops = plan.extern_ops;
  // An op left to PyTorch may synchronize with the host or draw random numbers: no graph around it.
  candidate.design.plan.cuda_graph = design.plan.cuda_graph && plan.extern_ops.empty();
  // recorded only where it kept an attention pattern unfused
  candidate.design.plan.fuse_attention = design.plan.fuse_attention || plan.unfused_attention == 0;
  ForwardWriter forward(graph, plan);
  std::string constants;
  try {
    constants = WriteForward(graph, plan, sources, &forward);
  } catch (const std::exception& error) {
    candidate.problem = std::string("forward generation failed: ") + error.what();
    return candidate;
  }
  templates::Values values;
  values.text["task"] = task_name;
  values.text["summary"] = fmt::format("{} Triton kernel(s), {} op(s) left to PyTorch.", plan.kernels.size(),
                                       candidate.pytorch_ops.size());
  values.text["design_line"] = kDesignMarker + candidate.design.ToJson().dump();
  values.text["plan_comment"] = PlanComment(candidate);
  values.text["task_source"] = task_source;
  values.text["helpers"] = HelperSource(kernels_code);
  values.text["kernels"] = kernels_code;
  values.text["constants"] = constants;
  values.text["args"] = ForwardArgs(graph);
  values.text["guard"] = Guard(graph);
  values.text["settings_check"] = SettingsCheckText(graph);
  values.flags["settings"] = !graph.settings.empty();
  values.text["body"] = Indent(forward.Lines(), 2);
  values.flags["cuda_graph"] = candidate.design.plan.cuda_graph;
  values.text["precompile"] = Indent(precompile.empty() ? std::vector<std::string>{"pass"} : precompile, 1);
  candidate.source = templates::Render("triton/model.py.mustache", values);
  return candidate;
}

}  // namespace egg::expert
