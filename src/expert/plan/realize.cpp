// Which values the planner realizes in memory, and why.
#include <fmt/format.h>

#include "expert/plan/planner.h"

namespace egg::expert {

bool Planner::IsZeroCopyView(const Node& node) const {
  static const std::set<std::string> kCopies = {"aten.flip.default",         "aten.clone.default",
                                                "aten.contiguous.default",   "aten.lift_fresh_copy.default",
                                                "aten.expand_copy.default",  "aten.view_copy.default",
                                                "aten.permute_copy.default", "aten.unsqueeze_copy.default",
                                                "aten.squeeze_copy.dims", "aten.repeat.default"};
  return ClassifyOp(node.op) == OpClass::kView && kCopies.count(node.op) == 0;
}

void Planner::NeedMemory(int value, bool allow_view) {
  const Value& v = ValueAt(graph_, value);
  if (v.kind != ValueKind::kNode) {
    return;
  }
  const Node& node = graph_.nodes.at(static_cast<size_t>(v.node));
  const int index = v.node;
  if (externs_.count(index) != 0 || reductions_.count(index) != 0 || scans_.count(index) != 0 ||
      matmuls_.count(index) != 0 || recurrents_.count(index) != 0 || attentions_.count(index) != 0) {
    return;
  }
  if (node.op == "getitem") {
    const Value& parent = ValueAt(graph_, node.args.at(0).value);
    const int parent_node = parent.node;
    if (externs_.count(parent_node) != 0 || reductions_.count(parent_node) != 0 ||
        recurrents_.count(parent_node) != 0 || scans_.count(parent_node) != 0) {
      return;
    }
    if (pools_.count(parent_node) != 0 && pools_.at(parent_node).output == value) {
      return;
    }
  }
  if (pools_.count(index) != 0) {
    return;
  }
  if (allow_view && IsZeroCopyView(node) && v.meta) {
    torch_views_.insert(value);
    NeedMemory(ViewSource(node));
    return;
  }
  roots_.insert(value);
}

void Planner::MarkRealizations() {
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    const Node& node = graph_.nodes[n];
    const auto index = static_cast<int>(n);
    if (reductions_.count(index) != 0 || scans_.count(index) != 0 || matmuls_.count(index) != 0 ||
        attentions_.count(index) != 0 || claims_.count(index) != 0) {
      roots_.insert(node.value);
    } else if (pools_.count(index) != 0) {
      roots_.insert(node.value);
    } else if (recurrents_.count(index) != 0) {
      roots_.insert(node.value);
      for (const Arg& arg : node.args) {
        NeedArg(arg, /*allow_view=*/false);
      }
    } else if (externs_.count(index) != 0) {
      for (const Arg& arg : node.args) {
        NeedArg(arg);
      }
      for (const auto& [key, arg] : node.kwargs) {
        NeedArg(arg);
      }
    }
  }
  for (const Arg& output : graph_.outputs) {
    NeedMemory(output.value);
  }
  for (const auto& [target, arg] : graph_.mutations) {
    if (arg.kind == Arg::Kind::kValue) {
      NeedMemory(arg.value);
    }
  }
}

bool Planner::Slottable(int value, int cat) const {
  const Value& v = ValueAt(graph_, value);
  const Value& c = ValueAt(graph_, cat);
  if (v.kind != ValueKind::kNode || !v.meta || v.meta->dtype != c.meta->dtype ||
      v.meta->Rank() != c.meta->Rank() || v.meta->Numel() == 0 || plan_.slots.count(value) != 0) {
    return false;
  }
  const int node = v.node;
  const OpClass op_class = classes_.at(node);
  const bool computed =
      ((op_class == OpClass::kPointwise || op_class == OpClass::kConcat || op_class == OpClass::kGather) &&
       claims_.count(node) == 0) ||
      matmuls_.count(node) != 0 || (scans_.count(node) != 0 && scans_.at(node).kind != ScanKind::kSort);
  if (!computed || externs_.count(node) != 0) {
    return false;
  }
  for (const Arg& output : graph_.outputs) {
    if (output.value == value) {
      return false;
    }
  }
  for (const auto& [target, arg] : graph_.mutations) {
    if (arg.kind == Arg::Kind::kValue && arg.value == value) {
      return false;
    }
  }
  static const std::set<OpClass> kReaders = {OpClass::kPointwise, OpClass::kReduction, OpClass::kPool,
                                             OpClass::kScan,      OpClass::kConcat,    OpClass::kGather,
                                             OpClass::kMatmul};
  for (int user : v.users) {
    if (user != c.node && (kReaders.count(classes_.at(user)) == 0 || externs_.count(user) != 0)) {
      return false;
    }
  }
  return true;
}

void Planner::PlaceConcatenations() {
  if (!plan_.options.concat_in_place) {
    return;
  }
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    const Node& node = graph_.nodes[n];
    const Value& c = ValueAt(graph_, node.value);
    if (node.op != "aten.cat.default" || roots_.count(node.value) == 0 ||
        claims_.count(static_cast<int>(n)) != 0 || externs_.count(static_cast<int>(n)) != 0 || !c.meta ||
        node.args.empty()) {
      continue;
    }
    const Arg* dim_arg = node.ArgAt(1, "dim");
    int64_t dim = dim_arg != nullptr ? dim_arg->i : 0;
    dim = dim < 0 ? dim + c.meta->Rank() : dim;
    std::set<int> pieces;
    bool placeable = dim >= 0 && dim < c.meta->Rank();
    for (const Arg& piece : node.args[0].list) {
      placeable = placeable && piece.kind == Arg::Kind::kValue && pieces.insert(piece.value).second &&
                  Slottable(piece.value, node.value);
    }
    if (!placeable || pieces.size() < 2) {
      continue;
    }
    int64_t offset = 0;
    std::string names;
    for (const Arg& piece : node.args[0].list) {
      plan_.slots[piece.value] = ConcatSlot{node.value, static_cast<int>(dim), offset};
      offset += ValueAt(graph_, piece.value).meta->shape.at(static_cast<size_t>(dim));
      roots_.insert(piece.value);
      names += (names.empty() ? "" : ", ") + ValueAt(graph_, piece.value).name;
    }
    roots_.erase(node.value);
    plan_.notes.push_back(
        fmt::format("{} in place: {} stored into their slices of it, never copied", node.name, names));
  }
}

void Planner::NeedArg(const Arg& arg, bool allow_view) {
  if (arg.kind == Arg::Kind::kValue && ValueAt(graph_, arg.value).meta) {
    NeedMemory(arg.value, allow_view);
  }
  for (const Arg& item : arg.list) {
    NeedArg(item, allow_view);
  }
}

void Planner::AddExternResults(const Node& node) {
  const Value& v = ValueAt(graph_, node.value);
  if (v.meta) {
    memory_[node.value] = DenseLayout(*v.meta);
    extern_results_.insert(node.value);
  }
  for (int user : v.users) {
    const Node& getitem = graph_.nodes.at(static_cast<size_t>(user));
    const Value& item = ValueAt(graph_, getitem.value);
    if (getitem.op == "getitem" && item.meta) {
      memory_[getitem.value] = DenseLayout(*item.meta);
      extern_results_.insert(getitem.value);
    }
  }
}

}  // namespace egg::expert
