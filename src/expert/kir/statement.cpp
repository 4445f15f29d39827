#include "expert/kir/statement.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace egg::expert::kir {
namespace {

std::string LoadCode(const Statement& s) {
  const std::string at = fmt::format("{} + ({})", s.pointer, s.address.Code());
  switch (s.form) {
    case LoadForm::kPlain:
      return fmt::format("tl.load({})", at);
    case LoadForm::kMasked:
      return fmt::format("tl.load({}, {}, other={})", at, s.mask, s.other);
    case LoadForm::kHalfKept:
      return fmt::format("tl.load({}{})", at, s.mask.empty() ? "" : ", " + s.mask + ", other=0.0");
    case LoadForm::kHalfWidened:
      return fmt::format("tl.load({}).to(tl.float32)", at);
    case LoadForm::kHalfWidenedMasked:
      return fmt::format("tl.where({0}, tl.load({1}, {0}).to(tl.float32), 0.0)", s.mask, at);
  }
  return "";
}

std::string StoreCode(const Statement& s) {
  const std::string where = s.broadcast.empty() ? fmt::format("{} + ({})", s.pointer, s.address.Code())
                                                : fmt::format("{} + ({}) + tl.zeros_like({})", s.pointer,
                                                              s.address.Code(), s.broadcast);
  return fmt::format("tl.store({}, {}{})", where, s.data, s.mask.empty() ? "" : ", " + s.mask);
}

std::string ValueCode(const Statement& s) { return s.product ? Code(*s.product) : s.data; }

std::string UpdateCode(const Statement& s) {
  const std::string& t = s.name;
  const std::string value = ValueCode(s);
  std::string folded;  // the tile and the value combined
  switch (s.combine) {
    case Combine::kAdd:
      folded = fmt::format("{} + {}", t, value);
      break;
    case Combine::kMul:
      folded = fmt::format("{} * {}", t, value);
      break;
    case Combine::kMax:
      folded = fmt::format("tl.maximum({}, {}, propagate_nan=tl.PropagateNan.ALL)", t, value);
      break;
    case Combine::kMin:
      folded = fmt::format("tl.minimum({}, {}, propagate_nan=tl.PropagateNan.ALL)", t, value);
      break;
    case Combine::kTake:
      folded = value;
      break;
  }
  switch (s.update) {
    case UpdateForm::kAugmented:
      return fmt::format("{} += {}", t, value);  // a sum (Statement::Sum, Accumulate)
    case UpdateForm::kExpanded:
      return fmt::format("{} = {}", t, folded);
    case UpdateForm::kMasked:
      return fmt::format("{0} = tl.where({1}, {2}, {0})", t, s.mask, folded);
    case UpdateForm::kRescaled:
      return fmt::format("{0} = {0} * {1} + {2}", t, s.scale, value);
  }
  return "";
}

// A statement that folds `value` into `tile` (the form's mask or scale set by the caller).
Statement UpdateOf(int depth, std::string tile, Combine combine, UpdateForm form, std::string value) {
  Statement statement;
  statement.kind = Statement::Kind::kUpdate;
  statement.depth = depth;
  statement.name = std::move(tile);
  statement.combine = combine;
  statement.update = form;
  statement.data = std::move(value);
  return statement;
}

}  // namespace

std::string Code(const Product& product) {
  return fmt::format("tl.dot({}{}, {}{}, input_precision=\"{}\")", product.a, product.cast, product.b,
                     product.cast, NameText(product.precision));
}

std::string Code(const Reduction& reduction) {
  std::string call;
  if (reduction.operands.size() > 1) {
    call = fmt::format("{}({}, {})", reduction.function, fmt::join(reduction.operands, ", "), reduction.axis);
  } else if (reduction.combine == Combine::kMul) {
    call = fmt::format("tl.reduce({}, {}, _egg_prod)", reduction.operands.at(0), reduction.axis);
  } else {
    // max and min through the candidate file's helpers, which keep a nan as torch does
    const char* name = reduction.combine == Combine::kMax   ? "_egg_max"
                       : reduction.combine == Combine::kMin ? "_egg_min"
                                                            : "tl.sum";
    call = fmt::format("{}({}, {})", name, reduction.operands.at(0), reduction.axis);
  }
  return fmt::format("{} = {}{}", fmt::join(reduction.results, ", "), call,
                     reduction.keep_dims ? "[:, None]" : "");
}

LoopRange LoopRange::Upto(std::string stop) {
  LoopRange range;
  range.stop = std::move(stop);
  return range;
}

LoopRange LoopRange::Stepped(std::string start, std::string stop, std::string step) {
  LoopRange range;
  range.start = std::move(start);
  range.stop = std::move(stop);
  range.step = std::move(step);
  return range;
}

LoopRange LoopRange::Unrolled(std::string stop) {
  LoopRange range = Upto(std::move(stop));
  range.unrolled = true;
  return range;
}

std::string Code(const LoopRange& range) {
  if (range.unrolled) {
    return fmt::format("tl.static_range({})", range.stop);
  }
  std::string bounds = range.start.empty() ? range.stop : range.start + ", " + range.stop;
  if (!range.step.empty()) {
    bounds += ", " + range.step;
  }
  return fmt::format("range({})", bounds);
}

Statement Statement::Loop(int depth, std::string variable, LoopRange range) {
  Statement statement;
  statement.kind = Kind::kLoop;
  statement.depth = depth;
  statement.name = std::move(variable);
  statement.range = std::move(range);
  return statement;
}

Statement Statement::Tile(int depth, std::string name, std::vector<std::string> shape, std::string type,
                          std::string fill) {
  Statement statement;
  statement.kind = Kind::kTile;
  statement.depth = depth;
  statement.name = std::move(name);
  statement.shape = std::move(shape);
  statement.type = std::move(type);
  statement.fill = std::move(fill);
  return statement;
}

Statement Statement::Text(int depth, std::string text) {
  Statement statement;
  const size_t spaces = std::min(text.find_first_not_of(' '), text.size());
  statement.depth = depth + static_cast<int>(spaces / 4);
  statement.text = text.substr(spaces - spaces % 4);
  return statement;
}

Statement Statement::Sum(int depth, std::string tile, std::string value) {
  return UpdateOf(depth, std::move(tile), Combine::kAdd, UpdateForm::kAugmented, std::move(value));
}

Statement Statement::Fold(int depth, std::string tile, Combine combine, std::string value) {
  return UpdateOf(depth, std::move(tile), combine, UpdateForm::kExpanded, std::move(value));
}

Statement Statement::FoldMasked(int depth, std::string tile, Combine combine, std::string value,
                                std::string mask) {
  Statement statement = UpdateOf(depth, std::move(tile), combine, UpdateForm::kMasked, std::move(value));
  statement.mask = std::move(mask);
  return statement;
}

Statement Statement::Rescale(int depth, std::string tile, std::string scale, std::string value) {
  Statement statement =
      UpdateOf(depth, std::move(tile), Combine::kAdd, UpdateForm::kRescaled, std::move(value));
  statement.scale = std::move(scale);
  return statement;
}

Statement Statement::Accumulate(int depth, std::string tile, Product product, std::string scale) {
  Statement statement =
      scale.empty() ? Sum(depth, std::move(tile), "") : Rescale(depth, std::move(tile), std::move(scale), "");
  statement.product = std::move(product);
  return statement;
}

Statement Statement::Dot(int depth, std::string name, Product product) {
  Statement statement;
  statement.kind = Kind::kProduct;
  statement.depth = depth;
  statement.name = std::move(name);
  statement.product = std::move(product);
  return statement;
}

Statement Statement::Reduce(int depth, Reduction reduction) {
  Statement statement;
  statement.kind = Kind::kReduce;
  statement.depth = depth;
  statement.reduction = std::move(reduction);
  return statement;
}

std::string Print(const Statement& statement) {
  const std::string indent(static_cast<size_t>(statement.depth) * 4, ' ');
  switch (statement.kind) {
    case Statement::Kind::kText:
      return indent + statement.text;
    case Statement::Kind::kLoad:
      return indent + statement.name + " = " + LoadCode(statement);
    case Statement::Kind::kStore:
      return indent + StoreCode(statement);
    case Statement::Kind::kLoop:
      return fmt::format("{}for {} in {}:", indent, statement.name, Code(statement.range));
    case Statement::Kind::kTile:
      return statement.fill.empty()
                 ? fmt::format("{}{} = tl.zeros([{}], dtype={})", indent, statement.name,
                               fmt::join(statement.shape, ", "), statement.type)
                 : fmt::format("{}{} = tl.full([{}], {}, {})", indent, statement.name,
                               fmt::join(statement.shape, ", "), statement.fill, statement.type);
    case Statement::Kind::kUpdate:
      return indent + UpdateCode(statement);
    case Statement::Kind::kProduct:
      return fmt::format("{}{} = {}", indent, statement.name, Code(*statement.product));
    case Statement::Kind::kReduce:
      return indent + Code(*statement.reduction);
  }
  return "";
}

std::vector<std::string> Print(const std::vector<Statement>& statements) {
  std::vector<std::string> lines;
  lines.reserve(statements.size());
  for (const Statement& statement : statements) {
    lines.push_back(Print(statement));
  }
  return lines;
}

}  // namespace egg::expert::kir
