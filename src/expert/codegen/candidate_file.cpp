#include "expert/codegen/candidate_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "expert/codegen/generate_at.h"
#include "expert/codegen/guard_code.h"
#include "expert/codegen/kernel_codegen.h"
#include "expert/codegen/templates.h"
#include "expert/design/defaults.h"
#include "expert/design/legality.h"
#include "expert/families/family.h"
#include "expert/ir/fold.h"

namespace egg::expert {
namespace {

// The most stages a tl.dot kernel's staged operand tiles allow (the launch and the design record say them).
int StagesThatFit(const KernelPlan& kernel, const KernelSource& source) {
  return FittingStages(kernel.design, source.a_tile_loads, source.b_tile_loads,
                       StagedOperandBytes(*kernel.matmul, kernel.design));
}

class ForwardWriter {
 public:
  // `graphed`: the forward runs as a CUDA graph, which replays every launch (no pack is kept between calls).
  ForwardWriter(const Graph& graph, const Plan& plan, bool graphed)
      : graph_(graph), plan_(plan), graphed_(graphed) {
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
    if (const auto sources = KeptSources(kernel, source)) {
      Kept(kernel, source, *sources);
      return;
    }
    Buffers(kernel);
    // A pack launch (weights repacked from parameters alone) runs once per parameter version, not per call.
    std::map<size_t, std::pair<const KernelLaunch*, std::vector<int>>> packs;  // the launch, its state
    for (const KernelLaunch& launch : source.launches) {
      const auto sources = graphed_ || launch.packs < 0 ? std::nullopt : StateSources(launch.pointers);
      if (sources) {
        packs[static_cast<size_t>(launch.packs)] = {&launch, *sources};
      }
    }
    std::vector<std::string> scratch;
    for (size_t i = 0; i < source.scratch.size(); ++i) {
      scratch.push_back(fmt::format("{}_scratch{}", source.name, i));
    }
    const std::string device = Device();
    for (size_t i = 0; i < source.scratch.size(); ++i) {
      const Scratch& buffer = source.scratch[i];
      const std::string allocate =
          fmt::format("torch.{}(({},), device={}, dtype={})", buffer.zeroed ? "zeros" : "empty", buffer.numel,
                      device, TorchDType(buffer.dtype));
      if (packs.count(i) == 0) {
        Line(fmt::format("{} = {}", scratch[i], allocate));
        continue;
      }
      const auto& [launch, sources] = packs.at(i);
      BindReads(*launch, {});
      std::vector<std::string> names = scratch;
      names[i] = "out";
      KeptCall(scratch[i], scratch[i], sources, {"out = " + allocate, LaunchCall(kernel, *launch, names)},
               "out");
    }
    for (const KernelLaunch& launch : source.launches) {
      if (launch.packs < 0 || packs.count(static_cast<size_t>(launch.packs)) == 0) {
        Line(LaunchCall(kernel, launch, scratch));
      }
    }
  }

  // The buffers a kernel stores into, allocated (a concatenation's piece: a view of the cat's buffer).
  void Buffers(const KernelPlan& kernel) {
    const std::string device = Device();
    for (int value : kernel.stores) {
      const auto slot = plan_.slots.find(value);
      const int buffer = slot == plan_.slots.end() ? value : slot->second.cat;
      if (bound_.count(buffer) == 0) {
        const TensorMeta& meta = *ValueAt(graph_, buffer).meta;
        Line(fmt::format("{} = torch.empty({}, device={}, dtype={})", Name(buffer), ShapeTuple(meta.shape),
                         device, TorchDType(meta.dtype)));
        bound_[buffer] = Name(buffer);
      }
      if (slot != plan_.slots.end()) {
        const int dim = slot->second.dim;
        Line(fmt::format("{} = {}.narrow({}, {}, {})", Name(value), Name(buffer), dim, slot->second.offset,
                         ValueAt(graph_, value).meta->shape.at(static_cast<size_t>(dim))));
        bound_[value] = Name(value);
      }
    }
  }

  // The module state (parameters, buffers, constants) under `pointers` but scratch, or nullopt where one is
  // not state or there is none. A view resolves to the tensor under it: a view is a new object at every call,
  // the state is not.
  std::optional<std::vector<int>> StateSources(const std::vector<int>& pointers) const {
    std::vector<int> sources;
    for (int pointer : pointers) {
      if (IsScratch(pointer)) {
        continue;
      }
      int base = pointer;
      while (base >= 0 && ValueAt(graph_, base).kind == ValueKind::kNode) {
        const Node& node = graph_.nodes.at(static_cast<size_t>(ValueAt(graph_, base).node));
        const bool view = ClassifyOp(node.op) == OpClass::kView && !node.args.empty() &&
                          node.args[0].kind == Arg::Kind::kValue;
        base = view ? node.args[0].value : -1;
      }
      if (base < 0 || ValueAt(graph_, base).kind != ValueKind::kState) {
        return std::nullopt;
      }
      if (std::find(sources.begin(), sources.end(), base) == sources.end()) {
        sources.push_back(base);
      }
    }
    if (sources.empty()) {
      return std::nullopt;
    }
    return sources;
  }

  // The state a kernel reads, where it reads nothing else, launches once with no scratch and stores values a
  // rewrite derived from the state (Node::keepable: a weight's row sums) that are neither returned, mutated
  // nor a concatenation's pieces: kept between calls like a pack. What the captured graph computes runs at
  // every call, from the state alone or not.
  std::optional<std::vector<int>> KeptSources(const KernelPlan& kernel, const KernelSource& source) const {
    if (graphed_ || !source.scratch.empty() || source.launches.size() != 1) {
      return std::nullopt;
    }
    for (int stored : kernel.stores) {
      const Value& value = ValueAt(graph_, stored);
      if (value.kind != ValueKind::kNode || !graph_.nodes.at(static_cast<size_t>(value.node)).keepable ||
          plan_.slots.count(stored) != 0 || IsGraphResult(graph_, stored)) {
        return std::nullopt;
      }
    }
    std::vector<int> pointers;
    for (int pointer : source.launches.front().pointers) {
      if (std::find(kernel.stores.begin(), kernel.stores.end(), pointer) == kernel.stores.end()) {
        pointers.push_back(pointer);
      }
    }
    return StateSources(pointers);
  }

  // What `launch` reads (not scratch, not `stored`) bound in the forward, before a function that is kept
  // between calls launches it: a name bound inside that function would not exist outside it.
  void BindReads(const KernelLaunch& launch, const std::vector<int>& stored) {
    for (int pointer : launch.pointers) {
      if (!IsScratch(pointer) && std::find(stored.begin(), stored.end(), pointer) == stored.end()) {
        Expr(pointer);
      }
    }
  }

  // `target` = what `body` makes (`result`), kept under `key` while `sources` are unchanged (`_egg_kept`).
  void KeptCall(const std::string& key, const std::string& target, const std::vector<int>& sources,
                const std::vector<std::string>& body, const std::string& result) {
    std::string names;
    for (int state : sources) {
      names += Expr(state) + ", ";
    }
    const std::string make = "_make_" + key;
    Line(fmt::format("def {}():", make));
    for (const std::string& line : body) {
      Line("    " + line);
    }
    Line("    return " + result);
    Line(fmt::format("{} = _egg_kept(self, {}, ({}), {})", target, Quote(key), names, make));
    uses_kept_ = true;
  }

  void Kept(const KernelPlan& kernel, const KernelSource& source, const std::vector<int>& sources) {
    BindReads(source.launches.front(), kernel.stores);
    Device();  // bound in the forward too
    const size_t start = lines_.size();
    Buffers(kernel);
    std::vector<std::string> body(lines_.begin() + static_cast<std::ptrdiff_t>(start), lines_.end());
    lines_.resize(start);
    body.push_back(LaunchCall(kernel, source.launches.front(), {}));
    std::string names;
    for (int value : kernel.stores) {
      names += (names.empty() ? "" : ", ") + Name(value);
    }
    KeptCall(source.name, names, sources, body, names);
  }

  std::string LaunchCall(const KernelPlan& kernel, const KernelLaunch& launch,
                         const std::vector<std::string>& scratch) {
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
    return call + ")";
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
  bool UsesKept() const { return uses_kept_; }

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
  bool graphed_ = false;
  bool uses_kept_ = false;
  std::set<int> stored_;
  std::map<int, std::string> bound_;
  std::vector<std::string> lines_;
  std::vector<int> constants_;
};

// The design a planned kernel is compiled with: the record's where it is legal, else the seed's default (an
// attention kernel's products from the candidate's precision).
KernelDesign KernelDesignFor(const KernelPlan& kernel, const CandidateDesign& design) {
  const auto chosen = design.kernels.find(kernel.name);
  if (chosen != design.kernels.end() && DesignFits(kernel, chosen->second)) {
    return chosen->second;
  }
  return FamilyOf(kernel.kind).FallbackDesign(kernel, design.seed, design.precision);
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
  return ConstantsSource(graph, forward->Constants()) + (forward->UsesKept() ? kKeptSource : "");
}

// The candidate's design record before its kernels: the search's choices, and what the graph says of the
// types and batches the kernels are made for.
CandidateDesign RecordHead(const Graph& graph, const CandidateDesign& design, const DynamicBatch* dynamic) {
  CandidateDesign head;
  head.seed = design.seed;
  head.plan = design.plan;
  head.precision = design.precision;
  head.dtype = GraphPrecision(graph);
  if (dynamic != nullptr) {
    for (const DynamicDim& dim : dynamic->dims) {
      head.dynamic.push_back({dim.axis, dim.min, dim.max});
    }
  }
  return head;
}

// The graph a candidate's plan is of: the captured one, or its rewrite where the design turns one on and it
// changes something (ir/fold.h), kept in the candidate.
const Graph& PlannedGraph(const Graph& captured, const CandidateDesign& design, Candidate* candidate) {
  std::optional<Graph> folded = FoldSummedProducts(captured);
  candidate->foldable = folded.has_value();
  if (folded && design.plan.fold_summed_products) {
    candidate->graph = std::make_shared<const Graph>(std::move(*folded));
  }
  return candidate->graph ? *candidate->graph : captured;
}

// The plan options as the record states them: an option off that changed nothing here reads as on (said
// only where it kept a summed product whole, or left a reduction of a product's columns to a kernel of its
// own).
void StateAppliedOptions(const PlanOptions& asked, Candidate* candidate) {
  PlanOptions& stated = candidate->design.plan;
  stated.fold_summed_products = asked.fold_summed_products || !candidate->foldable;
  stated.reduce_in_products = asked.reduce_in_products || !candidate->plan.products_reduced_apart;
}

}  // namespace

Candidate GenerateAt(const Graph& captured, const std::string& task_source, const std::string& task_name,
                     const CandidateDesign& design, const DynamicBatch* dynamic) {
  Candidate candidate;
  const Graph& graph = PlannedGraph(captured, design, &candidate);
  candidate.design = RecordHead(graph, design, dynamic);
  try {
    candidate.plan = MakePlan(graph, design.plan);
  } catch (const std::exception& error) {
    candidate.problem = std::string("planning failed: ") + error.what();
    return candidate;
  }
  StateAppliedOptions(design.plan, &candidate);
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
        layouts[value] = StoreLayout(graph, plan, value);
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
  ForwardWriter forward(graph, plan, candidate.design.plan.cuda_graph);
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
  WriteGuardCalls(graph, dynamic, &values);
  candidate.source = templates::Render("triton/model.py.mustache", values);
  return candidate;
}

Candidate GenerateCandidate(const Graph& graph, const std::string& task_source, const std::string& task_name,
                            const CandidateDesign& design) {
  if (graph.dynamic) {
    return GenerateDynamic(graph, task_source, task_name, design);
  }
  return GenerateAt(graph, task_source, task_name, design, nullptr);
}

}  // namespace egg::expert
