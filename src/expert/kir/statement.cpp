#include "expert/kir/statement.h"

#include <fmt/format.h>

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

}  // namespace

Statement Statement::Text(int depth, std::string text) {
  Statement statement;
  statement.depth = depth;
  statement.text = std::move(text);
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
