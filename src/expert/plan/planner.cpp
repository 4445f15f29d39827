#include "expert/plan/planner.h"

#include <fmt/format.h>

#include <stdexcept>

#include "expert/families/family.h"

namespace egg::expert {

bool Planner::Run(int* failed_node) {
  Classify();
  FindAttention();
  FindClaims();
  for (int value = 0; value < static_cast<int>(graph_.values.size()); ++value) {
    const Value& v = ValueAt(graph_, value);
    if ((v.kind == ValueKind::kInput || v.kind == ValueKind::kState) && v.meta) {
      memory_[value] = *v.meta;
    }
  }
  MarkRealizations();
  PlaceConcatenations();
  std::set<int> placed_cats;
  for (const auto& [value, slot] : plan_.slots) {
    placed_cats.insert(slot.cat);
  }
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    const Node& node = graph_.nodes[n];
    const auto index = static_cast<int>(n);
    if (externs_.count(index) != 0) {
      plan_.steps.push_back({Step::Kind::kExtern, index});
      plan_.extern_ops.push_back(node.op);
      AddExternResults(node);
      continue;
    }
    if (placed_cats.count(node.value) != 0) {  // its pieces, placed before it, wrote it
      memory_[node.value] = DenseLayout(*ValueAt(graph_, node.value).meta);
      continue;
    }
    if (roots_.count(node.value) == 0) {
      continue;
    }
    if (!Place(node)) {
      *failed_node = index;
      return false;
    }
  }
  FinalizeStores();
  return true;
}

void Planner::Classify() {
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    const Node& node = graph_.nodes[n];
    const auto index = static_cast<int>(n);
    OpClass op_class = ClassifyOp(node.op);
    if (forced_extern_.count(index) != 0) {
      op_class = OpClass::kExtern;
    }
    if (op_class == OpClass::kReduction) {
      if (auto spec = ParseReduction(graph_, node)) {
        reductions_[index] = *spec;
      } else {
        op_class = OpClass::kExtern;
      }
    } else if (op_class == OpClass::kPool) {
      if (auto spec = ParsePool(graph_, node)) {
        pools_[index] = *spec;
      } else {
        op_class = OpClass::kExtern;
      }
    } else if (op_class == OpClass::kScan) {
      if (auto spec = ParseScan(graph_, node)) {
        scans_[index] = *spec;
      } else {
        op_class = OpClass::kExtern;
      }
    } else if (op_class == OpClass::kMatmul) {
      if (auto spec = ParseMatmul(graph_, node)) {
        matmuls_[index] = *spec;
      } else {
        op_class = OpClass::kExtern;
        NoteUnloweredTypes(node, "products of one operand type, float32, bfloat16 or float16");
      }
    } else if (op_class == OpClass::kRecurrent) {
      if (auto spec = ParseRecurrent(graph_, node)) {
        recurrents_[index] = *spec;
      } else {
        op_class = OpClass::kExtern;
        NoteUnloweredTypes(node, "recurrent layers of one type, float32, bfloat16 or float16");
      }
    } else if (op_class == OpClass::kGetItem) {
      op_class = OpClass::kGetItem;
    }
    if (op_class == OpClass::kExtern) {
      externs_.insert(index);
    }
    classes_[index] = op_class;
  }
}

void Planner::NoteUnloweredTypes(const Node& node, const std::string& lowered) {
  const std::string types = NonFloat32Types(graph_, node);
  if (!types.empty()) {
    plan_.notes.push_back(fmt::format("{} runs in PyTorch: {} on {} (the kernels lower {})", node.name,
                                      node.op, types, lowered));
  }
}

void Planner::FindClaims() {
  for (const KernelFamily* family : Families()) {
    if (!FamilyEnabled(*family, plan_.options)) {
      continue;
    }
    for (size_t n = 0; n < graph_.nodes.size(); ++n) {
      const auto index = static_cast<int>(n);
      if (classes_.at(index) != OpClass::kPointwise || claims_.count(index) != 0) {
        continue;
      }
      if (std::optional<FamilyClaim> claim = family->Claim(graph_, graph_.nodes[n])) {
        claim->kind = family->Kind();
        claim->node = index;
        claims_[index] = std::move(*claim);
      }
    }
  }
}

void Planner::FindAttention() {
  std::vector<int> products;
  for (const auto& [index, mm] : matmuls_) {
    products.push_back(index);
  }
  std::set<int> taken;
  for (int index : products) {
    const Node& node = graph_.nodes.at(static_cast<size_t>(index));
    auto spec = ParseAttention(graph_, node);
    if (!spec || matmuls_.count(spec->scores) == 0 || taken.count(index) != 0) {
      continue;
    }
    bool clear = true;
    for (int absorbed : spec->absorbed) {
      clear = clear && externs_.count(absorbed) == 0 && taken.count(absorbed) == 0;
    }
    if (!clear) {
      continue;
    }
    if (!plan_.options.fuse_attention || unfused_.count(index) != 0) {
      plan_.unfused_attention += plan_.options.fuse_attention ? 0 : 1;
      continue;
    }
    for (int absorbed : spec->absorbed) {
      matmuls_.erase(absorbed);
      reductions_.erase(absorbed);
      taken.insert(absorbed);
    }
    matmuls_.erase(index);
    taken.insert(index);
    attentions_[index] = *spec;
  }
}

Plan MakePlan(const Graph& graph, const PlanOptions& options) {
  std::set<int> forced;
  std::set<int> unfused;
  for (size_t attempt = 0; attempt <= 2 * graph.nodes.size(); ++attempt) {
    Planner planner(graph, options, forced, unfused);
    int failed = -1;
    if (planner.Run(&failed)) {
      Plan plan = planner.Take();
      for (int node : unfused) {
        plan.notes.push_back("attention " + graph.nodes.at(static_cast<size_t>(node)).name +
                             " planned unfused: its flash kernel does not generate");
      }
      for (int node : forced) {
        plan.notes.push_back(graph.nodes.at(static_cast<size_t>(node)).name + " runs in PyTorch");
      }
      return plan;
    }
    (planner.IsAttention(failed) ? unfused : forced).insert(failed);
  }
  throw std::logic_error("planner did not converge");
}
}  // namespace egg::expert
