#include "expert/codegen/emitter.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "expert/patterns/node_args.h"

namespace egg::expert {
namespace {

// The terms of a mask expression joined by " & ".
std::vector<std::string> MaskTerms(const std::string& mask) {
  std::vector<std::string> terms;
  size_t start = 0;
  while (start < mask.size()) {
    const size_t end = std::min(mask.find(" & ", start), mask.size());
    terms.push_back(mask.substr(start, end - start));
    start = end + 3;
  }
  return terms;
}

std::string And(const std::string& a, const std::string& b) {
  if (a.empty()) {
    return b;
  }
  if (b.empty()) {
    return a;
  }
  return "(" + a + ") & (" + b + ")";
}

}  // namespace

std::string JoinIndexKeys(const std::vector<Index>& index) {
  std::string key;
  for (const Index& component : index) {
    key += component.Key() + ",";
  }
  return key;
}

KernelEmitter::KernelEmitter(const Graph& graph, const std::map<int, TensorMeta>& memory, MaskSet masks)
    : graph_(graph), memory_(memory), masks_(std::move(masks)) {
  scopes_.push_back(Scope{1, {}, {}});
}

void KernelEmitter::Line(const std::string& text) {
  Scope& scope = scopes_.back();
  scope.statements.push_back(kir::Statement::Text(scope.indent, text));
}

void KernelEmitter::Loop(const std::string& variable, kir::LoopRange range) {
  Add(kir::Statement::Loop(0, variable, std::move(range)));  // Add sets the scope's depth
}

void KernelEmitter::Add(kir::Statement statement) {
  Scope& scope = scopes_.back();
  statement.depth = scope.indent;
  scope.statements.push_back(std::move(statement));
}

void KernelEmitter::Append(const std::vector<std::string>& lines) {
  for (const std::string& line : lines) {
    scopes_.back().statements.push_back(kir::Statement::Text(0, line));  // indented already
  }
}

void KernelEmitter::Append(std::vector<kir::Statement> statements) {
  Scope& scope = scopes_.back();
  scope.statements.insert(scope.statements.end(), std::make_move_iterator(statements.begin()),
                          std::make_move_iterator(statements.end()));
}

void KernelEmitter::OpenScope(int indent) { scopes_.push_back(Scope{indent, {}, {}}); }

std::vector<kir::Statement> KernelEmitter::CloseStatements() {
  std::vector<kir::Statement> statements = std::move(scopes_.back().statements);
  if (scopes_.size() > 1) {
    scopes_.pop_back();
  } else {
    scopes_.back() = Scope{1, {}, {}};
  }
  return statements;
}

std::vector<std::string> KernelEmitter::CloseScope() { return kir::Print(CloseStatements()); }

std::string KernelEmitter::Temp(const std::string& prefix) { return prefix + std::to_string(next_temp_++); }

void KernelEmitter::PushCondition(const std::string& condition) { conditions_.push_back(condition); }
void KernelEmitter::PopCondition() { conditions_.pop_back(); }

std::string KernelEmitter::Condition() const {
  std::string condition;
  for (const std::string& c : conditions_) {
    condition = And(condition, c);
  }
  return condition;
}

std::string KernelEmitter::PointerName(int value) {
  auto found = pointer_names_.find(value);
  if (found != pointer_names_.end()) {
    return found->second;
  }
  const std::string name = "ptr" + std::to_string(pointer_values_.size());
  pointer_values_.push_back(value);
  pointer_names_[value] = name;
  return name;
}

MaskSet MaskSet::Flat() { return MaskSet{{{"xindex", "xmask"}}, {}, "xindex"}; }

MaskSet MaskSet::Tiles() {
  MaskSet tiles{{{"mindex", "mmask"}, {"nindex", "nmask"}, {"kaindex", "kamask"}, {"kbindex", "kbmask"}},
                {{"mmask & nmask", "omask"}},
                "omask"};
  tiles.max_concat_pieces = kMaxConcatPiecesInTiles;
  tiles.scalar_constants = true;
  return tiles;
}

MaskSet MaskSet::Rows() {
  return MaskSet{{{"xindex", "xmask"}, {"rindex", "rmask"}}, {{"xmask & rmask", "mask"}}, "xindex"};
}

std::set<std::string> KernelEmitter::LanesOf(const Index& index) const {
  std::set<std::string> used;
  for (const auto& [var, mask] : masks_.vars) {
    if (index.Uses(var)) {
      used.insert(var);
    }
  }
  for (const auto& [name, vars] : runtime_vars_) {
    if (index.Uses(name)) {
      used.insert(vars.begin(), vars.end());
    }
  }
  return used;
}

std::string KernelEmitter::MaskFor(const Index& address, bool conditions) const {
  std::set<std::string> used;
  for (const auto& [var, mask] : masks_.vars) {
    if (address.Uses(var)) {
      used.insert(var);
    }
  }
  for (const auto& [name, vars] : runtime_vars_) {
    if (address.Uses(name)) {
      used.insert(vars.begin(), vars.end());
    }
  }
  std::string mask;
  for (const auto& [var, var_mask] : masks_.vars) {
    if (used.count(var) != 0 && !var_mask.empty()) {
      mask = mask.empty() ? var_mask : mask + " & " + var_mask;
    }
  }
  if (const auto found = masks_.combined.find(mask); found != masks_.combined.end()) {
    mask = found->second;
  }
  if (used.empty()) {
    // An address of no lane variable (a constant, or a program id such as a convolution's group) is the same,
    // in-bounds address for every lane: the lane conditions (padding, cat slices) do not apply to it, and a
    // block mask on a scalar pointer does not compile.
    return mask;
  }
  return conditions ? And(mask, Condition()) : mask;
}

void KernelEmitter::DefineRow(int value, const Operand& operand, const Index& row) { rows_[value] = Row{operand, row}; }

bool KernelEmitter::ReadThroughViews(int value) const {
  for (;;) {
    if (rows_.count(value) != 0) {
      return false;
    }
    if (memory_.count(value) != 0) {
      return true;
    }
    const Value& v = graph_.values.at(static_cast<size_t>(value));
    if (v.kind != ValueKind::kNode || !v.meta) {
      return false;
    }
    const Node& node = graph_.nodes.at(static_cast<size_t>(v.node));
    if (ClassifyOp(node.op) != OpClass::kView) {
      return false;
    }
    value = ViewSource(node);
  }
}

Operand KernelEmitter::Emit(int value, const std::vector<Index>& index) {
  const std::string key = std::to_string(value) + "@" + JoinIndexKeys(index) + "|" + Condition() +
                          (keep_half_loads_ ? "|half" : "");
  for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
    const auto found = scope->cse.find(key);
    if (found != scope->cse.end()) {
      return found->second;
    }
  }
  Operand operand = Compute(value, index);
  scopes_.back().cse[key] = operand;
  return operand;
}

Operand KernelEmitter::Compute(int value, const std::vector<Index>& index) {
  const Value& v = graph_.values.at(static_cast<size_t>(value));
  if (const auto row = rows_.find(value); row != rows_.end()) {
    const Index flat = Linearize(index, v.meta->shape);
    if (!(flat == row->second.row)) {
      throw NotFusable(v.name + " is read at another row (" + flat.Code() + " vs " + row->second.row.Code() + ")");
    }
    return row->second.operand;
  }
  if (memory_.count(value) != 0) {
    return Load(value, index);
  }
  if (v.kind != ValueKind::kNode || !v.meta) {
    throw NotFusable(v.name + " is not available in memory");
  }
  const Node& node = graph_.nodes.at(static_cast<size_t>(v.node));
  computed_.insert(v.node);
  switch (ClassifyOp(node.op)) {
    case OpClass::kView:
      return Emit(ViewSource(node), ViewSourceIndex(graph_, node, index));
    case OpClass::kPointwise:
      return Pointwise(node, v, index);
    case OpClass::kConcat:
      return node.op == "aten.constant_pad_nd.default" ? Pad(node, v, index) : Concat(node, v, index);
    case OpClass::kGather:
      return Gather(node, v, index);
    default:
      throw NotFusable(v.name + " (" + node.op + ") is not computed in this kernel");
  }
}

Operand KernelEmitter::Bind(const std::string& expression, DType dtype) {
  const std::string name = Temp();
  Line(name + " = " + expression);
  return Operand{name, dtype, false};
}

Operand KernelEmitter::Load(int value, const std::vector<Index>& index) {
  const TensorMeta& layout = memory_.at(value);
  const Index address = Offset(index, layout.stride, layout.offset);
  max_address_ = std::max(max_address_, address.Hi());
  loaded_.insert(value);
  // The lane conditions (padding, cat slices, pooling windows) keep a load's address inside its tensor; every
  // consumer selects with tl.where under the same condition. A load whose every index is inside its dimension
  // for every lane (a per-channel parameter in a padded convolution's prologue) needs only the lane masks:
  // masking it by the condition would turn a broadcast row of BLOCK_K values into a full gathered tile.
  bool inside = index.size() == layout.shape.size();
  for (size_t d = 0; inside && d < index.size(); ++d) {
    inside = index[d].Lo() >= 0 && index[d].Hi() < layout.shape[d];
  }
  kir::Statement load;
  load.kind = kir::Statement::Kind::kLoad;
  load.depth = scopes_.back().indent;
  load.buffer = value;
  load.pointer = PointerName(value);
  load.address = address;
  load.mask = MaskFor(address, !inside);
  load.name = Temp();
  DType dtype = layout.dtype;
  if (IsHalf(layout.dtype)) {
    // Kept half for tl.dot, or upcast as loaded. No half constant: Triton's interpreter has none (a bf16
    // `other` fails there), so the masked lanes are zeroed after the upcast.
    load.form = keep_half_loads_
                    ? kir::LoadForm::kHalfKept
                    : (load.mask.empty() ? kir::LoadForm::kHalfWidened : kir::LoadForm::kHalfWidenedMasked);
    dtype = keep_half_loads_ ? layout.dtype : DType::kFloat32;
  } else if (!load.mask.empty()) {
    load.form = kir::LoadForm::kMasked;
    load.other = layout.dtype == DType::kBool ? "0" : (IsFloating(layout.dtype) ? "0.0" : "0");
  }
  const bool zero_masked = !load.mask.empty() && (IsHalf(layout.dtype) || layout.dtype == DType::kFloat32);
  if (zero_masked) {
    NoteZeroMasked(load.name, load.mask);
  }
  Operand loaded{load.name, dtype, false};
  scopes_.back().statements.push_back(std::move(load));
  return loaded;
}

void KernelEmitter::NoteZeroMasked(const std::string& temp, const std::string& mask) {
  std::set<std::string>& terms = float_load_masks_[temp];
  for (const std::string& term : MaskTerms(mask)) {
    terms.insert(term);
    for (const auto& [expression, name] : masks_.combined) {  // a precomputed mask stands for its terms
      if (name == term) {
        for (const std::string& part : MaskTerms(expression)) {
          terms.insert(part);
        }
      }
    }
  }
}

bool KernelEmitter::ZeroWhereMasked(const Operand& operand, const std::vector<std::string>& masks) const {
  const auto found = float_load_masks_.find(operand.code);
  if (operand.scalar || found == float_load_masks_.end()) {
    return false;
  }
  return std::all_of(masks.begin(), masks.end(), [&](const std::string& mask) { return found->second.count(mask); });
}

Operand KernelEmitter::Pointwise(const Node& node, const Value& out, const std::vector<Index>& index) {
  if (node.op == "aten.arange.start_step" || node.op == "aten.arange.default" || node.op == "aten.arange.start") {
    return Arange(node, out, index);
  }
  std::vector<Operand> operands;
  bool all_scalar = true;
  for (const Arg& arg : node.args) {
    Operand operand;
    if (arg.kind == Arg::Kind::kValue) {
      const Value& input = graph_.values.at(static_cast<size_t>(arg.value));
      if (input.meta && IsConstantFill(node.op)) {  // only its shape is read: the input is never loaded
        operand = Operand{"0", input.meta->dtype, true};
      } else if (!input.meta) {
        if (!input.scalar.IsNumber()) {
          throw NotFusable(node.name + ": non-numeric scalar input");
        }
        operand = Operand{input.scalar.kind == Arg::Kind::kFloat ? FloatLiteral(input.scalar.f)
                                                                 : std::to_string(static_cast<int64_t>(input.scalar.AsDouble())),
                          DType::kFloat32, true};
      } else {
        operand = Emit(arg.value, BroadcastIndex(index, out.meta->shape, input.meta->shape));
        all_scalar = all_scalar && operand.scalar;
      }
    } else if (arg.kind == Arg::Kind::kFloat) {
      operand = Operand{FloatLiteral(arg.f), DType::kFloat32, true};
    } else if (arg.kind == Arg::Kind::kInt) {
      operand = Operand{std::to_string(arg.i), DType::kInt64, true};
    } else if (arg.kind == Arg::Kind::kBool) {
      operand = Operand{arg.b ? "1" : "0", DType::kBool, true};
    }
    operands.push_back(operand);
  }
  const DType type = ComputeDType(out.meta->dtype);
  const PointwiseCode code = LowerPointwise(node, operands, type);
  if (!code.code) {
    throw NotFusable(code.problem);
  }
  helpers_.insert(helpers_.end(), code.helpers.begin(), code.helpers.end());
  if (all_scalar) {
    return Operand{*code.code, type, true};
  }
  return Bind(*code.code, type);
}

// arange(start, end, step)[i] = start + step * i: the index itself, as a value.
Operand KernelEmitter::Arange(const Node& node, const Value& out, const std::vector<Index>& index) {
  const bool only_end = node.op == "aten.arange.default";
  const Arg* start = only_end ? nullptr : node.ArgAt(0, "start");
  const Arg* step = node.op == "aten.arange.start_step" ? node.ArgAt(2, "step") : nullptr;
  auto literal = [](const Arg* arg, const std::string& fallback) {
    if (arg == nullptr || !arg->IsNumber()) {
      return fallback;
    }
    return arg->kind == Arg::Kind::kFloat ? FloatLiteral(arg->f) : std::to_string(static_cast<int64_t>(arg->AsDouble()));
  };
  std::string code = "(" + index.at(0).Code() + ")";
  const std::string factor = literal(step, "1");
  if (factor != "1") {
    code = factor + " * " + code;
  }
  const std::string offset = literal(start, "0");
  if (offset != "0") {
    code = offset + " + " + code;
  }
  // An index of no lane variable is a scalar: it takes the kernel's tile shape. One of lane variables has their
  // shape already (in a matrix product's operand tile, the tile variable's would not broadcast with it).
  const bool scalar = LanesOf(index.at(0)).empty();
  const DType type = ComputeDType(out.meta->dtype);
  if (scalar && masks_.scalar_constants) {  // a 0-d tensor: it broadcasts with an operand tile of any shape
    return Bind(fmt::format("tl.full([], {}, {})", code, TritonDType(type)), type);
  }
  const std::string tile =
      masks_.tile_var.empty() || !scalar ? code : "(" + code + " + tl.zeros_like(" + masks_.tile_var + "))";
  return Bind(tile + ".to(" + TritonDType(type) + ")", type);
}

// constant_pad_nd(x, pad, value): `pad` holds (before, after) pairs from the last dim backwards (negative ones
// crop); the input is read under the in-bounds condition, `value` is taken elsewhere.
Operand KernelEmitter::Pad(const Node& node, const Value& out, const std::vector<Index>& index) {
  const int source = ViewSource(node);
  const auto& in_shape = ShapeOf(graph_, source);
  const auto pad = IntsOf(node, 1, "pad");
  if (pad.size() % 2 != 0 || pad.size() / 2 > in_shape.size()) {
    throw NotFusable(node.name + ": bad padding");
  }
  std::vector<Index> in_index = index;
  std::string condition;
  for (size_t k = 0; k < pad.size() / 2; ++k) {
    const size_t d = in_shape.size() - 1 - k;
    in_index[d] = index[d] - Index(pad[2 * k]);
    const Index& at = in_index[d];
    const std::string code = at.Code();
    if (at.Lo() < 0) {
      condition = And(condition, fmt::format("({}) >= 0", code));
    }
    if (at.Hi() >= in_shape[d]) {
      condition = And(condition, fmt::format("({}) < {}", code, in_shape[d]));
    }
  }
  if (condition.empty()) {
    return Emit(source, in_index);
  }
  const Arg* fill = node.ArgAt(2, "value");
  const double value = fill != nullptr && fill->IsNumber() ? fill->AsDouble() : 0.0;
  const std::string literal = IsFloating(out.meta->dtype) ? FloatLiteral(value)
                                                           : std::to_string(static_cast<int64_t>(value));
  PushCondition(condition);
  const Operand operand = Emit(source, in_index);
  PopCondition();
  return Bind(fmt::format("tl.where({}, {}, {})", condition, operand.code, literal),
              ComputeDType(out.meta->dtype));
}

Operand KernelEmitter::Concat(const Node& node, const Value& out, const std::vector<Index>& index) {
  const Arg& tensors = node.args.at(0);
  const auto dim = static_cast<size_t>(NormalizeDim(IntOf(node, 1, "dim", 0), out.meta->shape.size()));
  struct Piece {
    std::string condition;
    Operand operand;
  };
  std::vector<Piece> pieces;
  int64_t offset = 0;
  for (const Arg& item : tensors.list) {
    const auto& shape = ShapeOf(graph_, item.value);
    if (shape.size() != out.meta->shape.size()) {
      continue;  // legacy empty tensor
    }
    const int64_t size = shape[dim];
    if (size == 0) {
      continue;
    }
    const Index& at = index[dim];
    const bool always = at.Lo() >= offset && at.Hi() < offset + size;
    const bool never = at.Hi() < offset || at.Lo() >= offset + size;
    if (!never) {
      std::string condition;
      if (!always) {
        const std::string code = at.Code();
        condition = offset == 0 ? fmt::format("({}) < {}", code, size)
                                : fmt::format("(({0}) >= {1}) & (({0}) < {2})", code, offset, offset + size);
      }
      std::vector<Index> piece_index = index;
      piece_index[dim] = at - Index(offset);
      if (!condition.empty()) {
        PushCondition(condition);
      }
      Operand operand = Emit(item.value, piece_index);
      if (!condition.empty()) {
        PopCondition();
      }
      pieces.push_back(Piece{condition, operand});
      if (always) {
        break;
      }
    }
    offset += size;
  }
  if (pieces.empty()) {
    throw NotFusable(node.name + ": empty concatenation");
  }
  if (pieces.size() > masks_.max_concat_pieces) {
    throw NotFusable(fmt::format("{}: {} concatenated pieces, at most {} read in this kernel", node.name,
                                 pieces.size(), masks_.max_concat_pieces));
  }
  // One tl.where a line, from the last piece back: a nested expression of a few hundred pieces (a stack of
  // every time step of an unrolled loop) is past Python's parser nesting limit.
  Operand selected = pieces.back().operand;
  for (size_t i = pieces.size() - 1; i-- > 0;) {
    const std::string code =
        fmt::format("tl.where({}, {}, {})", pieces[i].condition, pieces[i].operand.code, selected.code);
    selected = Bind(code, ComputeDType(out.meta->dtype));
  }
  return pieces.size() == 1 ? Bind(selected.code, ComputeDType(out.meta->dtype)) : selected;
}

void KernelEmitter::Store(int value, const std::vector<Index>& index, const Operand& operand,
                          const TensorMeta& layout, const std::string& mask) {
  const Index address = Offset(index, layout.stride, layout.offset);
  max_address_ = std::max(max_address_, address.Hi());
  const std::string pointer = PointerName(value);
  const std::string full_mask = And(mask, Condition());
  std::string data = operand.code;
  if (operand.scalar) {  // a half constant made in float32 (the interpreter has no bf16 constants)
    data =
        fmt::format("tl.full({}.shape, {}, {})", mask, operand.code, TritonDType(ComputeDType(layout.dtype)));
  }
  if (operand.scalar && IsHalf(layout.dtype)) {
    data += ".to(" + TritonDType(layout.dtype) + ")";
  } else if (!operand.scalar && (operand.dtype != layout.dtype || IsHalf(layout.dtype))) {
    data = layout.dtype == DType::kBool ? "(" + data + " != 0)" : data + ".to(" + TritonDType(layout.dtype) + ")";
  }
  // A fixed address (a single-element result), or a matrix tile's address that misses a tile variable (a single
  // row), is broadcast to the tile so value and pointer shapes agree.
  const bool partial_tile = mask == masks_.tile_var && MaskFor(address) != mask;
  kir::Statement store;
  store.kind = kir::Statement::Kind::kStore;
  store.depth = scopes_.back().indent;
  store.buffer = value;
  store.pointer = pointer;
  store.address = address;
  store.mask = full_mask;
  store.data = data;
  if ((address.IsConstant() || partial_tile) && !masks_.tile_var.empty()) {
    store.broadcast = masks_.tile_var;
  }
  scopes_.back().statements.push_back(std::move(store));
}

}  // namespace egg::expert
