// Reduction kernels: persistent (a row tile in registers), looped (streamed in RBLOCK tiles, Welford
// variance) and online softmax.
#include <fmt/format.h>

#include <algorithm>

#include "expert/codegen/kernel_writer.h"

namespace egg::expert::writer {
namespace {

// A looped sum, product, any or all folding `element` into its tile `a`: any / all keep the tile's lanes
// where masked, sums and products fold the identity there.
kir::Statement FoldUpdate(ReductionKind kind, const std::string& a, const std::string& element,
                          const std::string& identity) {
  if (IsLogical(kind)) {
    return kir::Statement::FoldMasked(
        0, a, kind == ReductionKind::kAny ? kir::Combine::kMax : kir::Combine::kMin, element, "mask");
  }
  return kir::Statement::Fold(0, a, kind == ReductionKind::kProd ? kir::Combine::kMul : kir::Combine::kAdd,
                              fmt::format("tl.where(mask, {}, {})", element, identity));
}

}  // namespace

std::vector<Index> KernelWriter::ReductionInputIndex(const ReductionSpec& spec, const Index& x,
                                                     const Index& r) {
  const TensorMeta& in = MetaOf(graph_, spec.input);
  return AnchorIndex(in.shape, spec.dims, x, r);
}

KernelWriter::Accumulator KernelWriter::Accumulate(const ReductionSpec& spec, const Operand& input,
                                                   bool looped, const std::string& tag,
                                                   const std::string& center) {
  Accumulator acc;
  const DType in_type = input.dtype;
  const DType acc_type = AccumulatorType(spec.kind, in_type);
  const std::string tl_acc = TritonDType(acc_type);
  std::string value = input.code;
  if (acc_type != in_type) {
    value = "(" + value + ").to(" + tl_acc + ")";
  }
  if (!center.empty()) {
    value = "(" + value + " - " + center + ")";
  }
  const std::string a = "acc" + tag;
  const ReductionKind kind = spec.kind;
  const DType out_type = ComputeDType(MetaOf(graph_, spec.outputs.at(0)).dtype);
  auto result = [&](int value_id, const std::string& code, DType dtype) {
    acc.results.emplace_back(value_id, Operand{code, dtype, false});
  };
  const std::string count = std::to_string(spec.Length());
  if (kind == ReductionKind::kSum || kind == ReductionKind::kMean || egg::expert::IsVariance(kind) ||
      IsLogical(kind) || kind == ReductionKind::kProd) {
    std::string element = value;
    if (egg::expert::IsVariance(kind)) {
      element = "(" + value + " * " + value + ")";
    } else if (IsLogical(kind)) {
      element = "(" + value + " != 0).to(tl.int32)";
    }
    const std::string identity = Identity(kind, acc_type);
    if (looped) {
      acc.init.push_back(kir::Statement::Tile(0, a, {"XBLOCK", "RBLOCK"}, tl_acc, identity));
      acc.update.push_back(FoldUpdate(kind, a, element, identity));
      acc.finish.push_back(RowReduce("red" + tag, a, kind));
    } else {
      acc.update.push_back(
          RowReduce("red" + tag, fmt::format("tl.where(mask, {}, {})", element, identity), kind));
    }
    const std::string red = "red" + tag;
    if (kind == ReductionKind::kSum || kind == ReductionKind::kProd) {
      result(spec.outputs[0], red, out_type);
    } else if (kind == ReductionKind::kMean) {
      result(spec.outputs[0], fmt::format("({} / {})", red, count), out_type);
    } else if (IsLogical(kind)) {
      result(spec.outputs[0], "(" + red + " != 0)", out_type);
    }
    // var, std, var_mean are finished by the caller (two passes).
    acc.results.emplace_back(-1, Operand{red, acc_type, false});
    return acc;
  }
  if (kind == ReductionKind::kMax || kind == ReductionKind::kMin) {
    const std::string fn = kind == ReductionKind::kMax ? "maximum" : "minimum";
    const std::string identity = Identity(kind, acc_type);
    if (looped) {
      acc.init.push_back(kir::Statement::Tile(0, a, {"XBLOCK", "RBLOCK"}, tl_acc, identity));
      acc.update.push_back(kir::Statement::FoldMasked(
          0, a, kind == ReductionKind::kMax ? kir::Combine::kMax : kir::Combine::kMin, value, "mask"));
      acc.finish.push_back(RowReduce("red" + tag, a, kind));
    } else {
      acc.update.push_back(
          RowReduce("red" + tag, fmt::format("tl.where(mask, {}, {})", value, identity), kind));
    }
    result(spec.outputs[0], "red" + tag, out_type);
    return acc;
  }
  AccumulateIndexed(spec, value, acc_type, out_type, looped, tag, &acc);
  return acc;
}

void KernelWriter::AccumulateIndexed(const ReductionSpec& spec, const std::string& value, DType acc_type,
                                     DType out_type, bool looped, const std::string& tag, Accumulator* acc) {
  const std::string a = "acc" + tag;
  const std::string tl_acc = TritonDType(acc_type);
  const bool is_max = IsMaxLike(spec.kind);
  const std::string identity = Identity(is_max ? ReductionKind::kMax : ReductionKind::kMin, acc_type);
  const std::string reducer = ArgReducer(is_max);
  const std::string better = is_max ? ">" : "<";
  if (looped) {
    acc->init.push_back(kir::Statement::Tile(0, a + "v", {"XBLOCK", "RBLOCK"}, tl_acc, identity));
    acc->init.push_back(kir::Statement::Tile(0, a + "i", {"XBLOCK", "RBLOCK"}, "tl.int64"));
    // A (value, index) pair: where the value wins (a nan wins over a number, as torch's argmax has it) both
    // tiles take the new lane. The value is in the accumulator's shape: a scalar one (read at no lane) would
    // meet block-shaped booleans in `&`, which Triton's interpreter refuses.
    const std::string take = "take" + tag;
    acc->update.push_back(
        kir::Statement::Text(0, fmt::format("val{0} = tl.where(mask, {1}, {2})", tag, value, identity)));
    acc->update.push_back(kir::Statement::Text(
        0, fmt::format("{0} = mask & ((val{1} {2} {3}v) | ((val{1} != val{1}) & ({3}v == {3}v)))", take, tag,
                       better, a)));
    acc->update.push_back(kir::Statement::FoldMasked(0, a + "v", kir::Combine::kTake, "val" + tag, take));
    acc->update.push_back(kir::Statement::FoldMasked(
        0, a + "i", kir::Combine::kTake, fmt::format("rindex.to(tl.int64) + tl.zeros_like({}i)", a), take));
    acc->finish.push_back(PairReduce(tag, {a + "v", a + "i"}, reducer));
  } else {
    acc->update.push_back(PairReduce(tag,
                                     {fmt::format("tl.where(mask, {}, {})", value, identity),
                                      "rindex.to(tl.int64) + tl.zeros([XBLOCK, RBLOCK], tl.int64)"},
                                     reducer));
  }
  const std::string v = "redv" + tag + "[:, None]";
  const std::string i = "redi" + tag + "[:, None]";
  if (spec.kind == ReductionKind::kArgmax || spec.kind == ReductionKind::kArgmin) {
    acc->results.emplace_back(spec.outputs[0], Operand{i, DType::kInt64, false});
  } else {
    if (spec.outputs.size() > 0 && spec.outputs[0] >= 0) {
      acc->results.emplace_back(spec.outputs[0], Operand{v, out_type, false});
    }
    if (spec.outputs.size() > 1 && spec.outputs[1] >= 0) {
      acc->results.emplace_back(spec.outputs[1], Operand{i, DType::kInt64, false});
    }
  }
}

void KernelWriter::EmitReductionPass(const ReductionSpec& spec, size_t number, bool looped,
                                     const std::string& center, const std::string& tag, Accumulator* out) {
  const Index x = Index::Var("xindex", kernel_.rows);
  const Index r = Index::Var("rindex", kernel_.length);
  if (looped) {
    emitter_.OpenScope(2);
  }
  const Operand input = emitter_.Emit(spec.input, ReductionInputIndex(spec, x, r));
  *out = Accumulate(spec, input, looped, tag, center);
  (void)number;
  if (looped) {
    for (const kir::Statement& statement : out->update) {
      emitter_.Add(statement);
    }
    std::vector<kir::Statement> body = emitter_.CloseStatements();
    for (const kir::Statement& tile : out->init) {
      emitter_.Add(tile);
    }
    emitter_.Loop("roffset", RowLoop());
    emitter_.Append(TileLines(true));
    emitter_.Append(std::move(body));
    for (const kir::Statement& statement : out->finish) {
      emitter_.Add(statement);
    }
  } else {
    for (const kir::Statement& statement : out->update) {
      emitter_.Add(statement);
    }
  }
}

kir::LoopRange KernelWriter::RowLoop() const {
  return kir::LoopRange::Stepped("0", std::to_string(kernel_.length), "RBLOCK");
}

std::vector<kir::Statement> KernelWriter::TileLines(bool looped) const {
  return looped ? TileLines(2, "roffset + ") : TileLines(1, "");
}

std::vector<kir::Statement> KernelWriter::TileLines(int depth, const std::string& start) const {
  return {kir::Statement::Text(depth, "rindex = " + start + "rbase"),
          kir::Statement::Text(depth, fmt::format("rmask = rindex < {}", kernel_.length)),
          kir::Statement::Text(depth, "mask = xmask & rmask")};
}

void KernelWriter::DefineResults(const ReductionSpec& spec, const Accumulator& acc) {
  const Index x = Index::Var("xindex", kernel_.rows);
  for (const auto& [value, operand] : acc.results) {
    if (value < 0) {
      continue;
    }
    emitter_.DefineRow(value, operand, x);
    StoreIfNeeded(value, Delinearize(x, MetaOf(graph_, value).shape), operand, "xmask");
  }
  (void)spec;
}

void KernelWriter::EmitVariance(const ReductionSpec& spec, size_t number, bool looped) {
  ReductionSpec mean_spec = spec;
  mean_spec.kind = ReductionKind::kSum;
  Accumulator first;
  const std::string tag = std::to_string(number);
  EmitReductionPass(mean_spec, number, looped, "", tag + "m", &first);
  const std::string mean = "mean" + tag;
  emitter_.Line(fmt::format("{} = {} / {}", mean, first.results.back().second.code, spec.Length()));
  Accumulator second;
  EmitReductionPass(spec, number, looped, mean, tag, &second);
  Accumulator results;
  WelfordResults(spec, mean, second.results.back().second.code, &results);
  DefineResults(spec, results);
}

const ReductionSpec* KernelWriter::ReductionOf(int root) const {
  for (const ReductionSpec& spec : kernel_.reductions) {
    if (graph_.nodes.at(static_cast<size_t>(spec.node)).value == root) {
      return &spec;
    }
  }
  return nullptr;
}

bool KernelWriter::IsVariance(const ReductionSpec& spec) { return egg::expert::IsVariance(spec.kind); }

std::vector<KernelWriter::Unit> KernelWriter::Units(bool online) const {
  const auto pairs =
      online ? OnlinePairs(graph_, kernel_.reductions) : std::vector<std::pair<size_t, size_t>>{};
  std::set<size_t> partners;
  for (const auto& [first, second] : pairs) {
    partners.insert(second);
  }
  std::vector<Unit> units;
  for (int root : kernel_.roots) {
    const ReductionSpec* spec = ReductionOf(root);
    if (spec == nullptr) {
      continue;
    }
    const auto index = static_cast<size_t>(spec - kernel_.reductions.data());
    if (partners.count(index) != 0) {
      continue;
    }
    Unit unit;
    unit.spec = index;
    const auto pair =
        std::find_if(pairs.begin(), pairs.end(), [&](const auto& p) { return p.first == index; });
    if (pair != pairs.end()) {
      unit.kind = Unit::Kind::kOnline;
      unit.partner = pair->second;
    } else if (IsVariance(*spec)) {
      unit.kind = Unit::Kind::kVariance;
    }
    units.push_back(unit);
  }
  return units;
}

std::vector<int> KernelWriter::UnitOutputs(const Unit& unit) const {
  std::vector<int> outputs = kernel_.reductions[unit.spec].outputs;
  if (unit.kind == Unit::Kind::kOnline) {
    for (int output : kernel_.reductions[unit.partner].outputs) {
      outputs.push_back(output);
    }
  }
  return outputs;
}

bool KernelWriter::Reads(int value, const std::set<int>& targets, std::set<int>* seen) const {
  if (targets.count(value) != 0) {
    return true;
  }
  if (memory_.count(value) != 0 || !seen->insert(value).second) {
    return false;
  }
  const Node* node = graph_.Producer(value);
  if (node == nullptr) {
    return false;
  }
  std::vector<const Arg*> pending;
  for (const Arg& arg : node->args) {
    pending.push_back(&arg);
  }
  while (!pending.empty()) {
    const Arg* arg = pending.back();
    pending.pop_back();
    if (arg->kind == Arg::Kind::kValue && Reads(arg->value, targets, seen)) {
      return true;
    }
    for (const Arg& item : arg->list) {
      pending.push_back(&item);
    }
  }
  return false;
}

std::vector<std::vector<KernelWriter::Unit>> KernelWriter::Groups(const std::vector<Unit>& units) const {
  std::vector<std::vector<Unit>> groups;
  std::set<int> outputs;
  for (const Unit& unit : units) {
    std::set<int> seen;
    if (groups.empty() || Reads(kernel_.reductions[unit.spec].input, outputs, &seen)) {
      groups.emplace_back();
      outputs.clear();
    }
    groups.back().push_back(unit);
    for (int output : UnitOutputs(unit)) {
      outputs.insert(output);
    }
  }
  return groups;
}

KernelWriter::Accumulator KernelWriter::WelfordAccumulate(const ReductionSpec& spec, const Operand& input,
                                                          const std::string& tag) {
  Accumulator acc;
  for (const char* name : {"wm", "ws", "wn"}) {
    acc.init.push_back(kir::Statement::Tile(0, name + tag, {"XBLOCK", "RBLOCK"}, "tl.float32"));
  }
  using kir::Combine;
  using kir::Statement;
  acc.update.push_back(Statement::Text(0, fmt::format("wv{} = ({}).to(tl.float32)", tag, input.code)));
  acc.update.push_back(Statement::Fold(0, "wn" + tag, Combine::kAdd, "tl.where(mask, 1.0, 0.0)"));
  acc.update.push_back(Statement::Text(0, fmt::format("wd{0} = wv{0} - wm{0}", tag)));
  acc.update.push_back(Statement::FoldMasked(0, "wm" + tag, Combine::kAdd,
                                             fmt::format("wd{0} / tl.maximum(wn{0}, 1.0)", tag), "mask"));
  acc.update.push_back(Statement::FoldMasked(0, "ws" + tag, Combine::kAdd,
                                             fmt::format("wd{0} * (wv{0} - wm{0})", tag), "mask"));
  acc.finish.push_back(WelfordReduce(tag, {"wm" + tag, "ws" + tag, "wn" + tag}));
  WelfordResults(spec, "redm" + tag + "[:, None]", "reds" + tag + "[:, None]", &acc);
  return acc;
}

void KernelWriter::WelfordResults(const ReductionSpec& spec, const std::string& mean, const std::string& m2,
                                  Accumulator* acc) {
  const double denominator = std::max(static_cast<double>(spec.Length()) - spec.correction, 0.0);
  const std::string variance = fmt::format("({} / {})", m2, FloatLiteral(denominator));
  const DType out_type =
      ComputeDType(MetaOf(graph_, spec.outputs[0] >= 0 ? spec.outputs[0] : spec.outputs.at(1)).dtype);
  if (spec.kind == ReductionKind::kVar) {
    acc->results.emplace_back(spec.outputs[0], Operand{variance, out_type, false});
  } else if (spec.kind == ReductionKind::kStd) {
    acc->results.emplace_back(spec.outputs[0], Operand{"tl.sqrt(" + variance + ")", out_type, false});
  } else {
    if (spec.outputs[0] >= 0) {
      acc->results.emplace_back(spec.outputs[0], Operand{variance, out_type, false});
    }
    if (spec.outputs.size() > 1 && spec.outputs[1] >= 0) {
      acc->results.emplace_back(spec.outputs[1], Operand{mean, out_type, false});
    }
  }
}

KernelWriter::Accumulator KernelWriter::OnlineAccumulate(const ReductionSpec& max_spec,
                                                         const ReductionSpec& sum_spec, const Operand& input,
                                                         const std::string& t) {
  Accumulator acc;
  acc.init.push_back(kir::Statement::Tile(0, "m" + t, {"XBLOCK", "RBLOCK"}, "tl.float32", "float('-inf')"));
  acc.init.push_back(kir::Statement::Tile(0, "s" + t, {"XBLOCK", "RBLOCK"}, "tl.float32"));
  acc.update.push_back(kir::Statement::Text(
      0, fmt::format("t{0} = tl.where(mask, ({1}).to(tl.float32), float('-inf'))", t, input.code)));
  acc.update.push_back(kir::Statement::Text(0, fmt::format("mn{0} = tl.maximum(m{0}, t{0})", t)));
  // the running sum rescaled to the new running max (the max's tile is set from mn, not folded)
  acc.update.push_back(kir::Statement::Rescale(
      0, "s" + t, fmt::format("tl.where(mn{0} == float('-inf'), 0.0, tl.exp(m{0} - mn{0}))", t),
      fmt::format("tl.where(mask, tl.exp(t{0} - mn{0}), 0.0)", t)));
  acc.update.push_back(kir::Statement::Fold(0, "m" + t, kir::Combine::kTake, "mn" + t));
  acc.finish.push_back(RowReduce("redm" + t, "m" + t, ReductionKind::kMax));
  // each lane's sum rescaled from its own running max to the row's
  acc.finish.push_back(RowReduce(
      "reds" + t, fmt::format("s{0} * tl.where(m{0} == float('-inf'), 0.0, tl.exp(m{0} - redm{0}))", t),
      ReductionKind::kSum));
  acc.results.emplace_back(
      max_spec.outputs[0],
      Operand{"redm" + t, ComputeDType(MetaOf(graph_, max_spec.outputs[0]).dtype), false});
  acc.results.emplace_back(
      sum_spec.outputs[0],
      Operand{"reds" + t, ComputeDType(MetaOf(graph_, sum_spec.outputs[0]).dtype), false});
  return acc;
}

void KernelWriter::EmitLoopGroup(const std::vector<Unit>& group) {
  const Index x = Index::Var("xindex", kernel_.rows);
  const Index r = Index::Var("rindex", kernel_.length);
  emitter_.OpenScope(2);
  std::vector<Accumulator> accumulators;
  for (const Unit& unit : group) {
    const ReductionSpec& spec = kernel_.reductions[unit.spec];
    const Operand input = emitter_.Emit(spec.input, ReductionInputIndex(spec, x, r));
    const std::string tag = std::to_string(unit.spec);
    if (unit.kind == Unit::Kind::kOnline) {
      accumulators.push_back(OnlineAccumulate(spec, kernel_.reductions[unit.partner], input, tag));
    } else if (unit.kind == Unit::Kind::kVariance) {
      accumulators.push_back(WelfordAccumulate(spec, input, tag));
    } else {
      accumulators.push_back(Accumulate(spec, input, true, tag, ""));
    }
    for (const kir::Statement& statement : accumulators.back().update) {
      emitter_.Add(statement);
    }
  }
  std::vector<kir::Statement> body = emitter_.CloseStatements();
  for (const Accumulator& acc : accumulators) {
    for (const kir::Statement& tile : acc.init) {
      emitter_.Add(tile);
    }
  }
  emitter_.Loop("roffset", RowLoop());
  emitter_.Append(TileLines(true));
  emitter_.Append(std::move(body));
  for (size_t i = 0; i < group.size(); ++i) {
    for (const kir::Statement& statement : accumulators[i].finish) {
      emitter_.Add(statement);
    }
    DefineResults(kernel_.reductions[group[i].spec], accumulators[i]);
  }
}

void KernelWriter::EmitPersistentUnit(const Unit& unit, size_t number) {
  const ReductionSpec& spec = kernel_.reductions[unit.spec];
  if (unit.kind == Unit::Kind::kVariance) {
    EmitVariance(spec, number, false);
    return;
  }
  Accumulator acc;
  EmitReductionPass(spec, number, false, "", std::to_string(unit.spec), &acc);
  DefineResults(spec, acc);
}

kir::Kernel KernelWriter::ReductionProgram() {
  const bool looped = kernel_.design.algorithm != Algorithm::kPersistent;
  const Index x = Index::Var("xindex", kernel_.rows);
  const Index r = Index::Var("rindex", kernel_.length);
  if (!looped) {
    emitter_.Append(TileLines(false));
  }
  std::vector<int> full_roots;
  std::vector<int> row_roots;
  for (int root : kernel_.roots) {
    if (ReductionOf(root) != nullptr) {
      continue;
    }
    const int64_t numel = MetaOf(graph_, root).Numel();
    (numel == kernel_.rows && kernel_.length != 1 ? row_roots : full_roots).push_back(root);
  }
  const std::vector<Unit> units = Units(kernel_.design.algorithm == Algorithm::kOnline);
  if (looped) {
    for (const std::vector<Unit>& group : Groups(units)) {
      EmitLoopGroup(group);
    }
  } else {
    for (size_t u = 0; u < units.size(); ++u) {
      EmitPersistentUnit(units[u], u);
    }
  }
  if (!full_roots.empty()) {
    if (looped) {
      emitter_.OpenScope(2);
    }
    const auto anchor = AnchorIndex(kernel_.shape, kernel_.reduced, x, r);
    const Index flat = Linearize(anchor, kernel_.shape);
    for (int root : full_roots) {
      const auto index = Delinearize(flat, MetaOf(graph_, root).shape);
      const Operand value = emitter_.Emit(root, index);
      StoreIfNeeded(root, index, value, "mask");
    }
    if (looped) {
      std::vector<kir::Statement> body = emitter_.CloseStatements();
      emitter_.Loop("roffset", RowLoop());
      emitter_.Append(TileLines(true));
      emitter_.Append(std::move(body));
    }
  }
  for (int root : row_roots) {
    const auto index = Delinearize(x, MetaOf(graph_, root).shape);
    const Operand value = emitter_.Emit(root, index);
    StoreIfNeeded(root, index, value, "xmask");
  }
  return FinishRows(fmt::format("{} reduction, {} rows x {}: {}", NameOf(kernel_.design.algorithm),
                                kernel_.rows, kernel_.length, Summary(graph_, kernel_)));
}

}  // namespace egg::expert::writer
