// The pointwise lowering (ir/ops.h's LowerPointwise): the Triton expression of one element of an aten op,
// from a table of lowerings per op (bitwise ops: ir/ops_indexing.h).
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "expert/ir/ops.h"
#include "expert/ir/ops_indexing.h"

namespace egg::expert {
namespace {

// The operand at argument `index`, else a literal of `fallback`.
std::string At(const std::vector<Operand>& operands, size_t index, const std::string& fallback) {
  if (index < operands.size() && !operands[index].code.empty()) {
    return operands[index].code;
  }
  return fallback;
}

std::string KwNumber(const Node& node, const std::string& key, size_t position, const std::string& fallback) {
  const Arg* arg = node.ArgAt(position, key);
  if (arg == nullptr || !arg->IsNumber()) {
    return fallback;
  }
  if (arg->kind == Arg::Kind::kFloat) {
    return FloatLiteral(arg->f);
  }
  if (arg->kind == Arg::Kind::kBool) {
    return arg->b ? "1" : "0";
  }
  return std::to_string(arg->i);
}

bool HasNumber(const Node& node, const std::string& key, size_t position) {
  const Arg* arg = node.ArgAt(position, key);
  return arg != nullptr && (arg->IsNumber() || arg->kind == Arg::Kind::kValue);
}

std::string Zero(DType dtype) { return IsFloating(dtype) ? "0.0" : "0"; }

std::string Cast(const std::string& code, DType from, DType to) {
  if (from == to) {
    return code;
  }
  if (to == DType::kBool) {
    return "(" + code + " != 0)";
  }
  return "(" + code + ").to(" + TritonDType(to) + ")";
}

// Ops whose value is one constant everywhere: a tensor argument gives only the shape.
constexpr const char* kConstantFills[] = {
    "aten.scalar_tensor.default", "aten.full.default",  "aten.full_like.default", "aten.zeros_like.default",
    "aten.ones_like.default",     "aten.zeros.default", "aten.ones.default",      "aten.fill.Scalar"};

}  // namespace

bool IsConstantFill(const std::string& op) {
  return std::any_of(std::begin(kConstantFills), std::end(kConstantFills),
                     [&](const char* fill) { return op == fill; });
}

namespace {

// Where the value is a literal, make it a tile-free constant of the right type.
std::string ConstantOf(const Node& node, DType out) {
  const Arg* value = nullptr;
  const std::string& op = node.op;
  if (op == "aten.scalar_tensor.default" || op == "aten.fill.Scalar") {
    value = node.ArgAt(op == "aten.fill.Scalar" ? 1 : 0);
  } else if (op == "aten.full.default" || op == "aten.full_like.default") {
    value = node.ArgAt(1, "fill_value");
  }
  double number = 0;
  if (op == "aten.ones_like.default" || op == "aten.ones.default") {
    number = 1;
  } else if (value != nullptr && value->IsNumber()) {
    number = value->AsDouble();
  }
  if (out == DType::kBool) {
    return number != 0 ? "1" : "0";
  }
  if (!IsFloating(out)) {
    return std::to_string(static_cast<int64_t>(number));
  }
  return FloatLiteral(number);
}

std::string PowCode(const std::string& base, double exponent, std::vector<Helper>* helpers) {
  constexpr double kHalf = 0.5;
  if (exponent == 1) {
    return base;
  }
  if (exponent == 2) {
    return fmt::format("({0} * {0})", base);
  }
  if (exponent == 3) {
    return fmt::format("({0} * {0} * {0})", base);
  }
  if (exponent == kHalf) {
    return fmt::format("tl.sqrt({})", base);
  }
  if (exponent == -kHalf) {
    return fmt::format("tl.rsqrt({})", base);
  }
  if (exponent == -1) {
    return fmt::format("(1.0 / {})", base);
  }
  if (exponent == -2) {
    return fmt::format("(1.0 / ({0} * {0}))", base);
  }
  if (exponent == 0) {
    return fmt::format("({0} * 0.0 + 1.0)", base);
  }
  helpers->push_back(Helper::kPow);
  return fmt::format("_egg_pow({}, {})", base, FloatLiteral(exponent));
}

using Lowering =
    std::function<std::string(const Node&, const std::vector<Operand>&, DType, std::vector<Helper>*)>;
using LoweringMap = std::map<std::string, Lowering>;
using V = std::vector<Operand>;  // short names for the lowerings' parameters
using H = std::vector<Helper>;

std::string Unary(const char* pattern, const std::vector<Operand>& in) {
  return fmt::format(fmt::runtime(pattern), in.at(0).code);
}

// Both operands integers (tiles or literals): their quotients and remainders in integer arithmetic, exact at
// any magnitude (a float32 quotient is not past 2^24).
bool Integers(const V& in) {
  return in.size() >= 2 && !IsFloating(in[0].dtype) && !IsFloating(in[1].dtype) &&
         in[0].dtype != DType::kBool && in[1].dtype != DType::kBool;
}

// Triton's integer // and % truncate toward zero (as C does, on the GPU and in the interpreter); torch's
// floor division and remainder round toward minus infinity: where the truncated remainder is not zero and its
// sign differs from the divisor's, the truncated `result` is corrected by `fix` (`- 1` for a quotient, `+ b`
// for a remainder).
std::string FloorCorrected(const V& in, const std::string& result, const std::string& fix) {
  const std::string& a = in.at(0).code;
  const std::string& b = in.at(1).code;
  return fmt::format("tl.where((({0} % {1}) != 0) & ((({0} % {1}) < 0) != ({1} < 0)), {2} {3}, {2})", a, b,
                     result, fix);
}

// An integer result in the output's type (Triton's promotion of the operands may differ from torch's).
std::string IntegerResult(const std::string& code, DType out) {
  return "(" + code + ").to(" + TritonDType(out) + ")";
}

// add, sub, mul, div (with its rounding modes) and the remainders.
LoweringMap ArithmeticLowerings() {
  LoweringMap t;
  auto binary = [](const char* symbol) {
    return [symbol](const Node& node, const V& in, DType, H*) {
      const std::string alpha = KwNumber(node, "alpha", 99, "");
      const std::string rhs =
          alpha.empty() || alpha == "1" ? in.at(1).code : "(" + alpha + " * " + in.at(1).code + ")";
      return fmt::format("({} {} {})", in.at(0).code, symbol, rhs);
    };
  };
  t["aten.add.Tensor"] = binary("+");
  t["aten.add.Scalar"] = binary("+");
  t["aten.sub.Tensor"] = binary("-");
  t["aten.sub.Scalar"] = binary("-");
  t["aten.rsub.Scalar"] = [](const Node& node, const V& in, DType, H*) {
    const std::string alpha = KwNumber(node, "alpha", 99, "1");
    return fmt::format("({} - {} * {})", in.at(1).code, alpha, in.at(0).code);
  };
  t["aten.mul.Tensor"] = [](const Node&, const V& in, DType, H*) {
    return fmt::format("({} * {})", in.at(0).code, in.at(1).code);
  };
  t["aten.mul.Scalar"] = t["aten.mul.Tensor"];
  t["aten.square.default"] = [](const Node&, const V& in, DType, H*) {
    return fmt::format("({0} * {0})", in.at(0).code);
  };
  auto divide = [](const Node& node, const V& in, DType out, H* h) {
    const Arg* mode = node.Kwarg("rounding_mode");
    const std::string quotient = fmt::format("({} / {})", in.at(0).code, in.at(1).code);
    if (mode == nullptr || mode->kind != Arg::Kind::kString) {
      return IsFloating(out) ? quotient : Cast(quotient, DType::kFloat32, out);
    }
    if (Integers(in) && !IsFloating(out)) {
      const std::string truncated = fmt::format("({} // {})", in.at(0).code, in.at(1).code);
      return IntegerResult(mode->s == "floor" ? FloorCorrected(in, truncated, "- 1") : truncated, out);
    }
    if (mode->s != "floor") {
      h->push_back(Helper::kTrunc);
    }
    const std::string rounded =
        mode->s == "floor" ? "tl.floor(" + quotient + ")" : "_egg_trunc(" + quotient + ")";
    return Cast(rounded, DType::kFloat32, out);
  };
  t["aten.div.Tensor"] = divide;
  t["aten.div.Scalar"] = divide;
  t["prims.div.default"] = divide;
  t["aten.div.Tensor_mode"] = divide;
  // Floats in float arithmetic (`/` is true division); integers in Triton's integer // and %.
  auto remainder = [](const Node&, const V& in, DType out, H*) {
    if (Integers(in) && !IsFloating(out)) {
      return IntegerResult(
          FloorCorrected(in, fmt::format("({} % {})", in.at(0).code, in.at(1).code), "+ " + in.at(1).code),
          out);
    }
    const std::string code = fmt::format("({0} - tl.floor({0} / {1}) * {1})", in.at(0).code, in.at(1).code);
    return IsFloating(out) ? code : Cast(code, DType::kFloat32, out);
  };
  t["aten.remainder.Scalar"] = remainder;
  t["aten.remainder.Tensor"] = remainder;
  auto fmod = [](const Node&, const V& in, DType out, H* h) {
    if (Integers(in) && !IsFloating(out)) {
      return IntegerResult(fmt::format("({} % {})", in.at(0).code, in.at(1).code), out);
    }
    h->push_back(Helper::kTrunc);
    const std::string code = fmt::format("({0} - _egg_trunc({0} / {1}) * {1})", in.at(0).code, in.at(1).code);
    return IsFloating(out) ? code : Cast(code, DType::kFloat32, out);
  };
  t["aten.fmod.Scalar"] = fmod;
  t["aten.fmod.Tensor"] = fmod;
  return t;
}

// One-operand math functions, rounding and sign, and powers.
LoweringMap MathLowerings() {
  LoweringMap t;
  t["aten.neg.default"] = [](const Node&, const V& in, DType, H*) { return Unary("(-{})", in); };
  t["aten.abs.default"] = [](const Node&, const V& in, DType, H*) { return Unary("tl.abs({})", in); };
  t["aten.exp.default"] = [](const Node&, const V& in, DType, H*) { return Unary("tl.exp({})", in); };
  t["aten.exp2.default"] = [](const Node&, const V& in, DType, H*) { return Unary("tl.exp2({})", in); };
  t["aten.log.default"] = [](const Node&, const V& in, DType, H*) { return Unary("tl.log({})", in); };
  t["aten.log2.default"] = [](const Node&, const V& in, DType, H*) { return Unary("tl.log2({})", in); };
  t["aten.sqrt.default"] = [](const Node&, const V& in, DType, H*) { return Unary("tl.sqrt({})", in); };
  t["aten.rsqrt.default"] = [](const Node&, const V& in, DType, H*) { return Unary("tl.rsqrt({})", in); };
  t["aten.reciprocal.default"] = [](const Node&, const V& in, DType, H*) { return Unary("(1.0 / {})", in); };
  t["aten.sin.default"] = [](const Node&, const V& in, DType, H*) { return Unary("tl.sin({})", in); };
  t["aten.cos.default"] = [](const Node&, const V& in, DType, H*) { return Unary("tl.cos({})", in); };
  t["aten.sigmoid.default"] = [](const Node&, const V& in, DType, H*) { return Unary("tl.sigmoid({})", in); };
  t["aten.erf.default"] = [](const Node&, const V& in, DType, H*) { return Unary("tl.erf({})", in); };
  t["aten.erfc.default"] = [](const Node&, const V& in, DType, H*) {
    return Unary("(1.0 - tl.erf({}))", in);
  };
  t["aten.floor.default"] = [](const Node&, const V& in, DType, H*) { return Unary("tl.floor({})", in); };
  t["aten.ceil.default"] = [](const Node&, const V& in, DType, H*) { return Unary("tl.ceil({})", in); };
  t["aten.trunc.default"] = [](const Node&, const V& in, DType, H* h) {
    h->push_back(Helper::kTrunc);
    return Unary("_egg_trunc({})", in);
  };
  t["aten.tanh.default"] = [](const Node&, const V& in, DType, H* h) {
    h->push_back(Helper::kTanh);
    return Unary("_egg_tanh({})", in);
  };
  t["aten.expm1.default"] = [](const Node&, const V& in, DType, H* h) {
    h->push_back(Helper::kExpm1);
    return Unary("_egg_expm1({})", in);
  };
  t["aten.log1p.default"] = [](const Node&, const V& in, DType, H* h) {
    h->push_back(Helper::kLog1p);
    return Unary("_egg_log1p({})", in);
  };
  auto sign = [](const Node&, const V& in, DType out, H*) {
    return Cast(fmt::format("tl.where({0} > 0, 1.0, tl.where({0} < 0, -1.0, 0.0))", in.at(0).code),
                DType::kFloat32, out);
  };
  t["aten.sign.default"] = sign;
  t["aten.sgn.default"] = sign;
  t["aten.round.default"] = [](const Node&, const V& in, DType, H* h) {
    h->push_back(Helper::kRound);
    return Unary("_egg_round({})", in);
  };
  t["aten.pow.Tensor_Scalar"] = [](const Node& node, const V& in, DType, H* h) {
    const Arg* exponent = node.ArgAt(1, "exponent");
    return PowCode(in.at(0).code, exponent->AsDouble(), h);
  };
  t["aten.pow.Tensor_Tensor"] = [](const Node&, const V& in, DType, H* h) {
    h->push_back(Helper::kPow);
    return fmt::format("_egg_pow({}, {})", in.at(0).code, in.at(1).code);
  };
  t["aten.pow.Scalar"] = [](const Node&, const V& in, DType, H*) {
    return fmt::format("tl.exp2({} * tl.log2({}))", in.at(1).code, in.at(0).code);
  };
  return t;
}

// The activation functions.
LoweringMap ActivationLowerings() {
  LoweringMap t;
  t["aten.relu.default"] = [](const Node&, const V& in, DType out, H*) {
    return fmt::format("tl.where({0} < 0, {1}, {0})", in.at(0).code, Zero(out));
  };
  t["aten.silu.default"] = [](const Node&, const V& in, DType, H*) {
    return fmt::format("({0} * tl.sigmoid({0}))", in.at(0).code);
  };
  t["aten.gelu.default"] = [](const Node& node, const V& in, DType, H* h) {
    const Arg* approximate = node.ArgAt(1, "approximate");
    if (approximate != nullptr && approximate->kind == Arg::Kind::kString && approximate->s == "tanh") {
      h->push_back(Helper::kTanh);
      return fmt::format(
          "(0.5 * {0} * (1.0 + _egg_tanh(0.7978845608028654 * ({0} + 0.044715 * {0} * {0} * {0}))))",
          in.at(0).code);
    }
    return fmt::format("(0.5 * {0} * (1.0 + tl.erf({0} * 0.7071067811865476)))", in.at(0).code);
  };
  t["aten.leaky_relu.default"] = [](const Node& node, const V& in, DType, H*) {
    return fmt::format("tl.where({0} > 0, {0}, {0} * {1})", in.at(0).code,
                       KwNumber(node, "negative_slope", 1, "0.01"));
  };
  t["aten.elu.default"] = [](const Node& node, const V& in, DType, H* h) {
    h->push_back(Helper::kExpm1);
    const std::string alpha = KwNumber(node, "alpha", 1, "1.0");
    const std::string scale = KwNumber(node, "scale", 2, "1.0");
    const std::string input_scale = KwNumber(node, "input_scale", 3, "1.0");
    return fmt::format("tl.where({0} > 0, {0} * {2}, {1} * {2} * _egg_expm1({0} * {3}))", in.at(0).code,
                       alpha, scale, input_scale);
  };
  t["aten.hardtanh.default"] = [](const Node& node, const V& in, DType, H*) {
    const std::string lo = KwNumber(node, "min_val", 1, "-1.0");
    const std::string hi = KwNumber(node, "max_val", 2, "1.0");
    return fmt::format("tl.where({0} > {2}, {2}, tl.where({0} < {1}, {1}, {0}))", in.at(0).code, lo, hi);
  };
  t["aten.hardsigmoid.default"] = [](const Node&, const V& in, DType, H*) {  // nan stays nan, as in torch
    return fmt::format(
        "(tl.minimum(tl.maximum({0} + 3.0, 0.0, propagate_nan=tl.PropagateNan.ALL), 6.0, "
        "propagate_nan=tl.PropagateNan.ALL) / 6.0)",
        in.at(0).code);
  };
  t["aten.hardswish.default"] = [](const Node&, const V& in, DType, H*) {
    return fmt::format("({0} * tl.minimum(tl.maximum({0} + 3.0, 0.0), 6.0) / 6.0)", in.at(0).code);
  };
  t["aten.softplus.default"] = [](const Node& node, const V& in, DType, H* h) {
    h->push_back(Helper::kLog1p);
    const std::string beta = KwNumber(node, "beta", 1, "1.0");
    const std::string threshold = KwNumber(node, "threshold", 2, "20.0");
    return fmt::format("tl.where({0} * {1} > {2}, {0}, _egg_log1p(tl.exp({0} * {1})) / {1})", in.at(0).code,
                       beta, threshold);
  };
  t["aten.mish.default"] = [](const Node&, const V& in, DType, H* h) {
    h->push_back(Helper::kTanh);
    h->push_back(Helper::kLog1p);
    return fmt::format("({0} * _egg_tanh(tl.where({0} > 20.0, {0}, _egg_log1p(tl.exp({0})))))",
                       in.at(0).code);
  };
  t["aten.selu.default"] = [](const Node&, const V& in, DType, H* h) {
    h->push_back(Helper::kExpm1);
    return fmt::format("tl.where({0} > 0, 1.0507009873554805 * {0}, 1.7580993408473766 * _egg_expm1({0}))",
                       in.at(0).code);
  };
  t["aten.celu.default"] = [](const Node& node, const V& in, DType, H* h) {
    h->push_back(Helper::kExpm1);
    const std::string alpha = KwNumber(node, "alpha", 1, "1.0");
    return fmt::format("tl.where({0} > 0, {0}, {1} * _egg_expm1({0} / {1}))", in.at(0).code, alpha);
  };
  t["aten.threshold.default"] = [](const Node& node, const V& in, DType, H*) {
    return fmt::format("tl.where({0} <= {1}, {2}, {0})", in.at(0).code, KwNumber(node, "threshold", 1, "0.0"),
                       KwNumber(node, "value", 2, "0.0"));
  };
  t["aten.log_sigmoid_forward.default"] = [](const Node&, const V& in, DType, H* h) {
    h->push_back(Helper::kLog1p);
    return fmt::format("(tl.minimum({0}, 0.0) - _egg_log1p(tl.exp(-tl.abs({0}))))", in.at(0).code);
  };
  return t;
}

// Comparisons and logic, and the ops that select by them: clamp, minimum, maximum, where, masked_fill.
// A clamp bound: its operand, or its number; a tensor passed by keyword has no operand (they come from the
// positional arguments), so it is refused rather than read as 0.
std::string ClampBound(const Node& node, const V& in, const std::string& key, size_t position) {
  const Arg* arg = node.ArgAt(position, key);
  if (arg != nullptr && arg->kind == Arg::Kind::kValue &&
      (position >= in.size() || in[position].code.empty())) {
    throw std::invalid_argument("the " + key + " bound is a tensor passed by keyword");
  }
  return At(in, position, KwNumber(node, key, position, "0"));
}

LoweringMap ComparisonLowerings() {
  LoweringMap t;
  auto clamp = [](const Node& node, const V& in, DType, H*) {
    std::string code = in.at(0).code;
    const bool is_min = node.op == "aten.clamp_min.default";
    const bool is_max = node.op == "aten.clamp_max.default";
    const bool has_lo = !is_max && HasNumber(node, "min", 1);
    const bool has_hi = is_max ? HasNumber(node, "max", 1) : (!is_min && HasNumber(node, "max", 2));
    if (has_lo) {
      code = fmt::format("tl.where({0} < {1}, {1}, {0})", code, ClampBound(node, in, "min", 1));
    }
    if (has_hi) {
      const size_t position = is_max ? 1 : 2;
      code = fmt::format("tl.where({0} > {1}, {1}, {0})", code, ClampBound(node, in, "max", position));
    }
    return code;
  };
  t["aten.clamp.default"] = clamp;
  t["aten.clamp.Tensor"] = clamp;
  t["aten.clamp_min.default"] = clamp;
  t["aten.clamp_max.default"] = clamp;
  t["aten.minimum.default"] = [](const Node&, const V& in, DType, H*) {
    return fmt::format("tl.minimum({}, {}, propagate_nan=tl.PropagateNan.ALL)", in.at(0).code, in.at(1).code);
  };
  t["aten.maximum.default"] = [](const Node&, const V& in, DType, H*) {
    return fmt::format("tl.maximum({}, {}, propagate_nan=tl.PropagateNan.ALL)", in.at(0).code, in.at(1).code);
  };
  auto where = [](const Node&, const V& in, DType, H*) {
    return fmt::format("tl.where({}, {}, {})", in.at(0).code, in.at(1).code, in.at(2).code);
  };
  t["aten.where.self"] = where;
  t["aten.where.ScalarOther"] = where;
  t["aten.where.ScalarSelf"] = where;
  auto compare = [](const char* symbol) {
    return [symbol](const Node&, const V& in, DType, H*) {
      return fmt::format("({} {} {})", in.at(0).code, symbol, in.at(1).code);
    };
  };
  for (const auto& [name, symbol] : std::vector<std::pair<std::string, const char*>>{
           {"gt", ">"}, {"ge", ">="}, {"lt", "<"}, {"le", "<="}, {"eq", "=="}, {"ne", "!="}}) {
    t["aten." + name + ".Scalar"] = compare(symbol);
    t["aten." + name + ".Tensor"] = compare(symbol);
  }
  t["aten.logical_not.default"] = [](const Node&, const V& in, DType, H*) { return Unary("({} == 0)", in); };
  t["aten.bitwise_not.default"] = [](const Node&, const V& in, DType out, H*) {
    return out == DType::kBool ? Unary("({} == 0)", in) : Unary("(~{})", in);
  };
  t["aten.logical_and.default"] = [](const Node&, const V& in, DType, H*) {
    return BoolCombine(in.at(0), "&", in.at(1));
  };
  t["aten.logical_or.default"] = [](const Node&, const V& in, DType, H*) {
    return BoolCombine(in.at(0), "|", in.at(1));
  };
  t["aten.isnan.default"] = [](const Node&, const V& in, DType, H*) { return Unary("({0} != {0})", in); };
  t["aten.isinf.default"] = [](const Node&, const V& in, DType, H*) {
    return Unary("(tl.abs({}) == float('inf'))", in);
  };
  t["aten.masked_fill.Scalar"] = [](const Node& node, const V& in, DType, H*) {
    return fmt::format("tl.where({}, {}, {})", in.at(1).code, KwNumber(node, "value", 2, "0.0"),
                       in.at(0).code);
  };
  return t;
}

// Casts, copies and constants.
LoweringMap ConversionLowerings() {
  LoweringMap t;
  auto convert = [](const Node&, const V& in, DType out, H*) {
    return Cast(in.at(0).code, in.at(0).dtype, out);
  };
  t["aten._to_copy.default"] = convert;
  t["prims.convert_element_type.default"] = convert;
  auto constant = [](const Node& node, const V&, DType out, H*) { return ConstantOf(node, out); };
  for (const char* op : kConstantFills) {
    t[op] = constant;
  }
  t["aten.copy.default"] = [](const Node&, const V& in, DType out, H*) {
    return Cast(in.at(1).code, in.at(1).dtype, out);
  };
  return t;
}

// Every op's lowering: the families' tables joined (no op is in two).
const LoweringMap& LoweringTable() {
  static const LoweringMap table = [] {
    LoweringMap t;
    for (LoweringMap (*family)() : {ArithmeticLowerings, MathLowerings, ActivationLowerings,
                                    ComparisonLowerings, ConversionLowerings}) {
      t.merge(family());
    }
    return t;
  }();
  return table;
}

}  // namespace

PointwiseCode LowerPointwise(const Node& node, const std::vector<Operand>& operands, DType out) {
  if (auto bitwise = LowerBitwise(node, operands, out)) {
    return {std::move(bitwise), "", {}};
  }
  const auto& table = LoweringTable();
  const auto found = table.find(node.op);
  if (found == table.end()) {
    return {std::nullopt, "no Triton lowering for " + node.op, {}};
  }
  PointwiseCode result;
  try {
    result.code = found->second(node, operands, out, &result.helpers);
  } catch (const std::exception& error) {
    return {std::nullopt, node.op + ": " + error.what(), {}};
  }
  return result;
}

}  // namespace egg::expert
