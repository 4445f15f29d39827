// Kernels formed from realized roots: a root joins the previous kernel when the domains agree and the kernel
// still lowers (asked through the lowering probe), else it starts a new one.
#include <fmt/format.h>

#include <algorithm>

#include "expert/design/defaults.h"
#include "expert/design/legality.h"
#include "expert/families/lowering_probe.h"
#include "expert/plan/planner.h"

namespace egg::expert {

std::vector<int> Planner::Results(const KernelPlan& kernel) const {
  std::vector<int> results;
  for (int root : kernel.roots) {
    bool reduction = false;
    for (const ReductionSpec& spec : kernel.reductions) {
      if (graph_.nodes.at(static_cast<size_t>(spec.node)).value == root) {
        reduction = true;
        for (int output : spec.outputs) {
          if (output >= 0) {
            results.push_back(output);
          }
        }
      }
    }
    if (kernel.scan && kernel.scan->kind == ScanKind::kSort &&
        graph_.nodes.at(static_cast<size_t>(kernel.scan->node)).value == root) {
      for (int output : kernel.scan->outputs) {
        if (output >= 0) {
          results.push_back(output);
        }
      }
    } else if (!reduction) {
      results.push_back(root);
    }
  }
  return results;
}

std::map<int, TensorMeta> Planner::Layouts(const KernelPlan& kernel) const {
  std::map<int, TensorMeta> layouts;
  for (int value : Results(kernel)) {
    layouts[value] = StoreLayout(graph_, plan_, value);
  }
  return layouts;
}

bool Planner::Generates(KernelPlan kernel, const std::map<int, TensorMeta>& memory,
                        std::string* problem) const {
  kernel.stores = Results(kernel);
  const LoweringProbe probe = ProbeSeeds(kernel, memory);
  if (!probe.lowers) {
    *problem = probe.problem;
  }
  return probe.lowers;
}

LoweringProbe Planner::ProbeSeeds(KernelPlan kernel, const std::map<int, TensorMeta>& memory) const {
  kernel.design = DefaultDesign(kernel, 0);
  LoweringProbe probe = ProbeLowering(graph_, kernel, memory, Layouts(kernel));
  if (!probe.lowers || kernel.kind != KernelKind::kMatmul) {
    return probe;
  }
  KernelDesign other = DefaultDesign(kernel, 1);
  if (other.algorithm == kernel.design.algorithm) {
    return probe;
  }
  kernel.design = other;
  LoweringProbe gather = ProbeLowering(graph_, kernel, memory, Layouts(kernel));
  if (!gather.lowers) {
    return gather;
  }
  probe.loaded.insert(gather.loaded.begin(), gather.loaded.end());
  return probe;
}

namespace {

// An attention pattern as one flash kernel.
void AttentionKernel(const Graph& graph, const AttentionSpec& at, const Node& node, KernelPlan* kernel) {
  kernel->kind = KernelKind::kAttention;
  kernel->shape = ValueAt(graph, node.value).meta->shape;
  kernel->rows = Product(kernel->shape);
  kernel->attention = at;
  kernel->roots.push_back(node.value);
  kernel->reasons.push_back(fmt::format(
      "attention {}: {} x softmax([{}x{}] @ [{}x{}]{}) @ [{}x{}] in one flash loop (scores {} and the "
      "softmax never stored)",
      node.name, at.batch, at.lq, at.d, at.d, at.lk, at.safe ? ", safe" : "", at.lk, at.dv,
      graph.nodes.at(static_cast<size_t>(at.scores)).name));
}

// A recurrent layer stack as one kernel: its roots are the outputs used.
void RecurrentKernel(const RecurrentSpec& rnn, const Node& node, KernelPlan* kernel) {
  kernel->kind = KernelKind::kRecurrent;
  kernel->shape = {rnn.seq, rnn.batch, rnn.Directions() * rnn.hidden};
  kernel->rows = rnn.batch;
  kernel->length = rnn.seq;
  kernel->recurrent = rnn;
  for (int output : rnn.outputs) {
    if (output >= 0) {
      kernel->roots.push_back(output);
    }
  }
  kernel->reasons.push_back(
      fmt::format("{} {}: {} layer(s){}, {} steps of batch {}, hidden {}: per layer and direction an input "
                  "projection GEMM of every step, then a time loop with the gates fused",
                  NameOf(rnn.cell), node.name, rnn.layers, rnn.bidirectional ? " x 2 directions" : "",
                  rnn.seq, rnn.batch, rnn.hidden));
}

}  // namespace

KernelPlan Planner::NewKernel(const Node& node) const {
  KernelPlan kernel;
  const auto index = static_cast<int>(&node - graph_.nodes.data());
  kernel.name = fmt::format("egg_k{}_{}", plan_.kernels.size(), node.name);
  if (reductions_.count(index) != 0) {
    const ReductionSpec& spec = reductions_.at(index);
    kernel.kind = KernelKind::kReduction;
    kernel.shape = ValueAt(graph_, spec.input).meta->shape;
    kernel.reduced = spec.dims;
    kernel.rows = spec.Rows();
    kernel.length = spec.Length();
    kernel.reductions.push_back(spec);
    kernel.roots.push_back(node.value);
    kernel.reasons.push_back(
        fmt::format("{} {} over {} of {} rows", NameOf(spec.kind), node.name, kernel.length, kernel.rows));
  } else if (pools_.count(index) != 0) {
    const PoolSpec& pool = pools_.at(index);
    kernel.kind = KernelKind::kPool;
    kernel.shape = ValueAt(graph_, pool.output).meta->shape;
    kernel.rows = Product(kernel.shape);
    kernel.pool = pool;
    kernel.roots.push_back(pool.output);
    kernel.reasons.push_back(
        fmt::format("{} pooling {} ({} outputs)", NameOf(pool.kind), node.name, kernel.rows));
  } else if (scans_.count(index) != 0) {
    const ScanSpec& scan = scans_.at(index);
    kernel.kind = KernelKind::kScan;
    kernel.shape = ValueAt(graph_, scan.input).meta->shape;
    kernel.reduced = {scan.dim};
    kernel.length = kernel.shape.at(static_cast<size_t>(scan.dim));
    kernel.rows = Product(kernel.shape) / std::max<int64_t>(kernel.length, 1);
    kernel.scan = scan;
    kernel.roots.push_back(node.value);
    kernel.reasons.push_back(scan.kind == ScanKind::kSort
                                 ? fmt::format("{} {} along {} of {} rows, {} kept", node.op, node.name,
                                               kernel.length, kernel.rows, scan.keep)
                                 : fmt::format("cumulative {} {} along {} of {} rows", NameOf(scan.kind),
                                               node.name, kernel.length, kernel.rows));
  } else if (matmuls_.count(index) != 0) {
    const MatmulSpec& mm = matmuls_.at(index);
    kernel.kind = KernelKind::kMatmul;
    kernel.shape = ValueAt(graph_, node.value).meta->shape;
    kernel.rows = Product(kernel.shape);
    kernel.matmul = mm;
    kernel.roots.push_back(node.value);
    kernel.reasons.push_back(
        fmt::format("{} {}: {}x[{}x{}] @ [{}x{}]", node.op, node.name, mm.batch, mm.m, mm.k, mm.k, mm.n));
  } else if (attentions_.count(index) != 0) {
    AttentionKernel(graph_, attentions_.at(index), node, &kernel);
  } else if (recurrents_.count(index) != 0) {
    RecurrentKernel(recurrents_.at(index), node, &kernel);
  } else if (claims_.count(index) != 0) {
    const FamilyClaim& claim = claims_.at(index);
    kernel.kind = claim.kind;
    kernel.shape = ValueAt(graph_, node.value).meta->shape;
    kernel.rows = Product(kernel.shape);
    kernel.claim = claim;
    kernel.roots.push_back(node.value);
    kernel.reasons.push_back(claim.reason);
  } else {
    kernel.kind = KernelKind::kPointwise;
    kernel.shape = ValueAt(graph_, node.value).meta->shape;
    kernel.rows = Product(kernel.shape);
    kernel.roots.push_back(node.value);
    kernel.reasons.push_back(
        fmt::format("{} realized ({} elements){}", node.name, kernel.rows, RealizeWhy(node.value)));
  }
  return kernel;
}

std::string Planner::RealizeWhy(int value) const {
  for (const Arg& output : graph_.outputs) {
    if (output.value == value) {
      return ": a graph output";
    }
  }
  return ": read by an op that runs in PyTorch or through a view";
}

std::optional<KernelPlan> Planner::Extend(const KernelPlan& kernel, const Node& node,
                                          bool* reduced_apart) const {
  const auto index = static_cast<int>(&node - graph_.nodes.data());
  if (kernel.kind == KernelKind::kRecurrent || recurrents_.count(index) != 0 ||
      attentions_.count(index) != 0 || kernel.claim || claims_.count(index) != 0) {
    // a time loop or a claimed node's kernel takes no epilogue and joins no kernel; attention starts its own
    return std::nullopt;
  }
  KernelPlan extended = kernel;
  if (reductions_.count(index) != 0) {
    if (!plan_.options.fuse_reductions) {
      return std::nullopt;
    }
    const ReductionSpec& spec = reductions_.at(index);
    if (kernel.kind == KernelKind::kMatmul) {
      if (!plan_.options.fuse_epilogues || !ReducesColumns(graph_, kernel, spec)) {
        return std::nullopt;
      }
      if (!plan_.options.reduce_in_products) {
        *reduced_apart = true;  // Place notes it (Plan::products_reduced_apart)
        return std::nullopt;
      }
      extended.reductions.push_back(spec);
      extended.roots.push_back(node.value);
      extended.reasons.push_back(fmt::format("+ {} {} over the product's {} columns, in its tile's epilogue",
                                             NameOf(spec.kind), node.name, kernel.matmul->n));
      return extended;
    }
    if (kernel.kind == KernelKind::kPointwise && Product(kernel.shape) == spec.Rows() * spec.Length() &&
        plan_.options.fuse_epilogues) {
      extended.kind = KernelKind::kReduction;
      extended.shape = ValueAt(graph_, spec.input).meta->shape;
      extended.reduced = spec.dims;
      extended.rows = spec.Rows();
      extended.length = spec.Length();
    } else if (kernel.kind != KernelKind::kReduction || spec.Rows() != kernel.rows ||
               spec.Length() != kernel.length) {
      return std::nullopt;
    }
    extended.reductions.push_back(spec);
    extended.roots.push_back(node.value);
    extended.reasons.push_back(fmt::format("+ {} {}: same {} rows x {}, reads earlier results at its own row",
                                           NameOf(spec.kind), node.name, spec.Rows(), spec.Length()));
    return extended;
  }
  if (pools_.count(index) != 0 || scans_.count(index) != 0 || matmuls_.count(index) != 0 ||
      !plan_.options.fuse_epilogues) {
    return std::nullopt;
  }
  const int64_t numel = ValueAt(graph_, node.value).meta->Numel();
  const bool full = numel == kernel.rows * kernel.length;
  // a matmul kernel whose tile reduces the product's columns: consumers of its reductions per row
  const bool column_row = kernel.kind == KernelKind::kMatmul && !kernel.reductions.empty() &&
                          numel * kernel.matmul->n == kernel.rows;
  const bool row = (kernel.kind == KernelKind::kReduction && numel == kernel.rows) || column_row;
  if (!full && !row) {
    return std::nullopt;
  }
  if ((kernel.kind == KernelKind::kPool || kernel.kind == KernelKind::kMatmul ||
       kernel.kind == KernelKind::kAttention) &&
      !full && !column_row) {
    return std::nullopt;
  }
  if (full && kernel.kind == KernelKind::kReduction && kernel.rows < kSplitRowLimit &&
      kernel.length >= kSplitMinLength &&
      Splittable(kernel, kernel_memory_.back(), /*reductions_only=*/true)) {
    return std::nullopt;  // few long rows: the reduction splits across programs; elementwise work runs apart
  }
  extended.roots.push_back(node.value);
  extended.reasons.push_back(fmt::format("+ {}: {} consumer over the same {}", node.name,
                                         full ? "elementwise" : "per-row", full ? "elements" : "rows"));
  return extended;
}

bool Planner::Place(const Node& node) {
  if (!plan_.kernels.empty()) {
    const KernelPlan& last = plan_.kernels.back();
    bool reduced_apart = false;
    auto extended = Extend(last, node, &reduced_apart);
    plan_.products_reduced_apart = plan_.products_reduced_apart || reduced_apart;
    if (extended) {
      std::string problem;
      if (Generates(*extended, kernel_memory_.back(), &problem)) {
        plan_.kernels.back() = std::move(*extended);
        AddResults(plan_.kernels.back());
        return true;
      }
      plan_.notes.push_back(fmt::format("{} not fused into {}: {}", node.name, last.name, problem));
    }
  }
  KernelPlan kernel = NewKernel(node);
  std::string problem;
  bool generates = Generates(kernel, memory_, &problem);
  if (!generates && StoreMatmulOperands(node, problem)) {
    kernel = NewKernel(node);  // named after the kernels stored before it
    generates = Generates(kernel, memory_, &problem);
  }
  if (!generates) {
    plan_.notes.push_back(fmt::format("{} runs in PyTorch: {}", node.name, problem));
    return false;
  }
  Push(std::move(kernel));
  return true;
}

void Planner::Push(KernelPlan kernel) {
  kernel_memory_.push_back(memory_);
  plan_.steps.push_back({Step::Kind::kKernel, static_cast<int>(plan_.kernels.size())});
  plan_.kernels.push_back(std::move(kernel));
  AddResults(plan_.kernels.back());
}

bool Planner::StoreMatmulOperands(const Node& node, const std::string& problem) {
  const auto index = static_cast<int>(&node - graph_.nodes.data());
  if (matmuls_.count(index) == 0) {
    return false;
  }
  const MatmulSpec& mm = matmuls_.at(index);
  bool stored = false;
  for (int operand : {mm.a, mm.b}) {
    const Value& value = ValueAt(graph_, operand);
    if (memory_.count(operand) != 0 || value.kind != ValueKind::kNode || value.node < 0) {
      continue;
    }
    const Node& producer = graph_.nodes.at(static_cast<size_t>(value.node));
    KernelPlan kernel = NewKernel(producer);
    std::string why;
    if (!Generates(kernel, memory_, &why)) {
      continue;
    }
    plan_.notes.push_back(fmt::format("{} stored for {} to read: {}", producer.name, node.name, problem));
    Push(std::move(kernel));
    stored = true;
  }
  return stored;
}

void Planner::AddResults(const KernelPlan& kernel) {
  for (const auto& [value, layout] : Layouts(kernel)) {
    memory_[value] = layout;
  }
}

bool Planner::Splittable(const KernelPlan& kernel, const std::map<int, TensorMeta>& memory,
                         bool reductions_only) const {
  KernelPlan trial = kernel;
  if (reductions_only) {
    trial.roots.clear();
    for (const ReductionSpec& spec : kernel.reductions) {
      trial.roots.push_back(graph_.nodes.at(static_cast<size_t>(spec.node)).value);
    }
  }
  trial.design.algorithm = Algorithm::kSplit;
  trial.design.xblock = 1;
  trial.design.rblock = kMinSplitBlock;
  trial.design.split = 2;
  trial.stores = Results(trial);
  return ProbeLowering(graph_, trial, memory, Layouts(trial)).lowers;
}

void Planner::MarkAlgorithms(KernelPlan* kernel, const std::map<int, TensorMeta>& memory) const {
  if (kernel->kind != KernelKind::kReduction) {
    return;
  }
  kernel->online_candidate = !OnlinePairs(graph_, kernel->reductions).empty();
  kernel->splittable = Splittable(*kernel, memory, /*reductions_only=*/false);
}

}  // namespace egg::expert
