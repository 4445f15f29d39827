// Test helpers of the ir room: aten nodes and their arguments built by hand, and operands for the pointwise
// lowering. Tests only.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "expert/ir/ops.h"

namespace egg::expert::testing {

inline Arg Number(double value) { return Arg::OfFloat(value); }
inline Arg Int(int64_t value) { return Arg::OfInt(value); }

inline Arg Text(const std::string& text) {
  Arg arg;
  arg.kind = Arg::Kind::kString;
  arg.s = text;
  return arg;
}

inline Arg TensorArg(int value) { return Arg::OfValue(value); }

inline Node Op(const std::string& op, std::vector<Arg> args = {}, std::map<std::string, Arg> kwargs = {}) {
  Node node;
  node.op = op;
  node.args = std::move(args);
  node.kwargs = std::move(kwargs);
  return node;
}

inline Operand X(DType dtype = DType::kFloat32) { return {"x", dtype, false}; }
inline Operand Y(DType dtype = DType::kFloat32) { return {"y", dtype, false}; }
inline Operand Literal(const std::string& code, DType dtype = DType::kFloat32) { return {code, dtype, true}; }

}  // namespace egg::expert::testing
