#include "expert/ir/ops_indexing.h"

#include <fmt/format.h>

namespace egg::expert {
namespace {

const std::map<std::string, std::string>& BitwiseSymbols() {
  static const std::map<std::string, std::string> symbols = {
      {"aten.bitwise_and.Tensor", "&"}, {"aten.bitwise_and.Scalar", "&"}, {"aten.bitwise_or.Tensor", "|"},
      {"aten.bitwise_or.Scalar", "|"},  {"aten.bitwise_xor.Tensor", "^"}, {"aten.bitwise_xor.Scalar", "^"},
  };
  return symbols;
}

// A bool operand as a Triton int1: a literal folds to a Python bool, anything else is compared with zero.
std::string AsBool(const Operand& operand) {
  if (operand.scalar) {
    return operand.code == "0" || operand.code == "0.0" ? "False" : "True";
  }
  return operand.dtype == DType::kBool ? operand.code : "(" + operand.code + " != 0)";
}

}  // namespace

void AddIndexingClasses(std::map<std::string, OpClass>* table) {
  for (const auto& [op, symbol] : BitwiseSymbols()) {
    (*table)[op] = OpClass::kPointwise;
  }
  (*table)["aten.embedding.default"] = OpClass::kGather;
  for (const char* op :
       {"aten.upsample_nearest1d.vec", "aten.upsample_nearest2d.vec", "aten.upsample_nearest3d.vec",
        "aten.upsample_nearest1d.default", "aten.upsample_nearest2d.default",
        "aten.upsample_nearest3d.default", "aten.upsample_linear1d.vec", "aten.upsample_bilinear2d.vec",
        "aten.upsample_trilinear3d.vec", "aten.upsample_linear1d.default", "aten.upsample_bilinear2d.default",
        "aten.upsample_trilinear3d.default"}) {
    (*table)[op] = OpClass::kGather;  // the input read at computed positions
  }
  for (const char* op : {"aten.sort.default", "aten.sort.stable", "aten.topk.default"}) {
    (*table)[op] = OpClass::kScan;  // a row kernel, as cumsum's
  }
}

std::string BoolCombine(const Operand& a, const std::string& symbol, const Operand& b) {
  if (a.scalar || b.scalar) {  // a literal side: True or False, which meets a tile or a scalar alike
    return fmt::format("({} {} {})", AsBool(a), symbol, AsBool(b));
  }
  return fmt::format("((({}).to(tl.int8) {} ({}).to(tl.int8)) != 0)", AsBool(a), symbol, AsBool(b));
}

std::optional<std::string> LowerBitwise(const Node& node, const std::vector<Operand>& operands, DType out) {
  const auto found = BitwiseSymbols().find(node.op);
  if (found == BitwiseSymbols().end()) {
    return std::nullopt;
  }
  // A literal goes on the right: a Triton constexpr on the left of `&` does not take a tensor.
  const bool swap = operands.at(0).scalar && !operands.at(1).scalar;
  const Operand& a = operands.at(swap ? 1 : 0);
  const Operand& b = operands.at(swap ? 0 : 1);
  if (out == DType::kBool) {
    return BoolCombine(a, found->second, b);
  }
  return fmt::format("({} {} {})", a.code, found->second, b.code);
}

}  // namespace egg::expert
