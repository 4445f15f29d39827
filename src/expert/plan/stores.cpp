// What each kernel writes to memory: the results some later kernel, extern op or output reads.
#include <stdexcept>

#include "expert/design/defaults.h"
#include "expert/families/lowering_probe.h"
#include "expert/plan/planner.h"

namespace egg::expert {

TensorMeta StoreLayout(const Graph& graph, const Plan& plan, int value) {
  const TensorMeta& meta = *ValueAt(graph, value).meta;
  const auto slot = plan.slots.find(value);
  if (slot == plan.slots.end()) {
    return DenseLayout(meta);
  }
  TensorMeta layout = meta;
  layout.stride = ContiguousStrides(ValueAt(graph, slot->second.cat).meta->shape);
  layout.offset = 0;
  return layout;
}

void Planner::FinalizeStores() {
  std::set<int> needed;
  auto need_base = [&](int value) {
    int current = value;
    while (torch_views_.count(current) != 0) {
      current = ViewSource(*graph_.Producer(current));
    }
    needed.insert(current);
  };
  for (int index : externs_) {
    const Node& node = graph_.nodes.at(static_cast<size_t>(index));
    std::vector<const Arg*> pending;
    for (const Arg& arg : node.args) {
      pending.push_back(&arg);
    }
    for (const auto& [key, arg] : node.kwargs) {
      pending.push_back(&arg);
    }
    while (!pending.empty()) {
      const Arg* arg = pending.back();
      pending.pop_back();
      if (arg->kind == Arg::Kind::kValue && ValueAt(graph_, arg->value).meta) {
        need_base(arg->value);
      }
      for (const Arg& item : arg->list) {
        pending.push_back(&item);
      }
    }
  }
  for (const Arg& output : graph_.outputs) {
    need_base(output.value);
  }
  for (const auto& [target, arg] : graph_.mutations) {
    if (arg.kind == Arg::Kind::kValue) {
      need_base(arg.value);
    }
  }
  for (const auto& [value, slot] : plan_.slots) {
    needed.insert(value);  // the cat is its pieces' stores
  }
  for (size_t k = 0; k < plan_.kernels.size(); ++k) {
    MarkAlgorithms(&plan_.kernels[k], kernel_memory_[k]);
  }
  for (size_t k = 0; k < plan_.kernels.size(); ++k) {
    KernelPlan& kernel = plan_.kernels[k];
    kernel.stores = Results(kernel);
    const LoweringProbe probe = ProbeSeeds(kernel, kernel_memory_[k]);
    kernel.design = DefaultDesign(kernel, 0);
    if (!probe.lowers) {
      throw std::runtime_error(probe.problem);
    }
    needed.insert(probe.loaded.begin(), probe.loaded.end());
  }
  for (KernelPlan& kernel : plan_.kernels) {
    std::vector<int> stores;
    for (int value : Results(kernel)) {
      if (needed.count(value) != 0) {
        stores.push_back(value);
      }
    }
    kernel.stores = stores;
  }
  RecordMemory();
}

void Planner::RecordMemory() {
  // What each kernel may read: inputs, state, earlier extern results and earlier kernels' stores.
  std::map<int, TensorMeta> memory;
  for (const auto& [value, layout] : memory_) {
    const Value& v = ValueAt(graph_, value);
    if (v.kind != ValueKind::kNode || extern_results_.count(value) != 0) {
      memory[value] = layout;
    }
  }
  std::map<int, TensorMeta> available;
  std::map<int, int> pieces_left;  // a concatenation in place: its pieces no kernel has stored yet
  for (const auto& [value, slot] : plan_.slots) {
    ++pieces_left[slot.cat];
  }
  for (const Step& step : plan_.steps) {
    if (step.kind == Step::Kind::kExtern) {
      continue;
    }
    const KernelPlan& kernel = plan_.kernels[static_cast<size_t>(step.index)];
    std::map<int, TensorMeta> before;
    for (const auto& [value, layout] : kernel_memory_[static_cast<size_t>(step.index)]) {
      if (memory.count(value) != 0 || available.count(value) != 0) {
        before[value] = layout;
      }
    }
    plan_.memory_before.push_back(before);
    for (int value : kernel.stores) {
      available[value] = StoreLayout(graph_, plan_, value);
      const auto slot = plan_.slots.find(value);
      if (slot != plan_.slots.end() && --pieces_left[slot->second.cat] == 0) {  // the last piece: the cat
        available[slot->second.cat] = DenseLayout(*ValueAt(graph_, slot->second.cat).meta);
      }
    }
  }
  // In memory by the end: what the first kernel may read (inputs, state, extern results) and every store. A
  // value a kernel computes and its epilogue reads in registers is not.
  plan_.memory.clear();
  for (const auto& [value, layout] : memory) {
    plan_.memory.insert(value);
  }
  for (const auto& [value, layout] : available) {
    plan_.memory.insert(value);
  }
}

}  // namespace egg::expert
