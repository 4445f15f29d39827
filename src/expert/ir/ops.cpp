#include "expert/ir/ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "expert/ir/ops_indexing.h"

namespace egg::expert {
namespace {

const std::map<std::string, OpClass>& ClassTable() {
  static const std::map<std::string, OpClass> table = [] {
    std::map<std::string, OpClass> t;
    for (const char* op :
         {"aten.view.default", "aten._unsafe_view.default", "aten.reshape.default", "aten.permute.default",
          "aten.transpose.int", "aten.t.default", "aten.expand.default", "aten.unsqueeze.default",
          "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default", "aten.slice.Tensor",
          "aten.select.int", "aten.narrow.default", "aten.as_strided.default", "aten.alias.default",
          "aten.flip.default", "prims.broadcast_in_dim.default", "aten.detach.default",
          "aten.lift_fresh_copy.default", "aten.clone.default", "aten.contiguous.default",
          "aten.expand_copy.default", "aten.view_copy.default", "aten.permute_copy.default",
          "aten.unsqueeze_copy.default", "aten.squeeze_copy.dims", "prims.squeeze.default",
          "aten.view_as.default", "aten.unfold.default"}) {
      t[op] = OpClass::kView;
    }
    for (const char* op :
         {"aten.add.Tensor", "aten.add.Scalar", "aten.sub.Tensor", "aten.sub.Scalar", "aten.rsub.Scalar",
          "aten.mul.Tensor", "aten.mul.Scalar", "aten.div.Tensor", "aten.div.Scalar", "aten.div.Tensor_mode",
          "prims.div.default", "aten.neg.default", "aten.abs.default", "aten.exp.default", "aten.exp2.default",
          "aten.expm1.default", "aten.log.default", "aten.log2.default", "aten.log1p.default",
          "aten.sqrt.default", "aten.rsqrt.default", "aten.reciprocal.default", "aten.sin.default",
          "aten.cos.default", "aten.tanh.default", "aten.sigmoid.default", "aten.erf.default",
          "aten.erfc.default", "aten.relu.default", "aten.gelu.default",
          "aten.leaky_relu.default", "aten.elu.default", "aten.hardtanh.default", "aten.clamp.default",
          "aten.clamp.Tensor", "aten.clamp_min.default", "aten.clamp_max.default", "aten.minimum.default",
          "aten.maximum.default", "aten.where.self", "aten.where.ScalarOther", "aten.where.ScalarSelf",
          "aten.gt.Scalar", "aten.gt.Tensor", "aten.ge.Scalar", "aten.ge.Tensor", "aten.lt.Scalar",
          "aten.lt.Tensor", "aten.le.Scalar", "aten.le.Tensor", "aten.eq.Scalar", "aten.eq.Tensor",
          "aten.ne.Scalar", "aten.ne.Tensor", "aten.logical_not.default", "aten.logical_and.default",
          "aten.logical_or.default", "aten.bitwise_not.default", "aten.isnan.default", "aten.isinf.default",
          "aten.sign.default", "aten.floor.default", "aten.ceil.default", "aten.trunc.default",
          "aten.round.default", "aten.pow.Tensor_Scalar", "aten.pow.Tensor_Tensor", "aten.pow.Scalar",
          "aten._to_copy.default", "prims.convert_element_type.default", "aten.scalar_tensor.default",
          "aten.full.default", "aten.full_like.default", "aten.zeros_like.default", "aten.ones_like.default",
          "aten.zeros.default", "aten.ones.default", "aten.fill.Scalar", "aten.masked_fill.Scalar",
          "aten.remainder.Scalar", "aten.remainder.Tensor", "aten.fmod.Scalar", "aten.fmod.Tensor",
          "aten.copy.default", "aten.sigmoid_backward.default", "aten.silu.default",
          "aten.hardsigmoid.default", "aten.hardswish.default", "aten.softplus.default", "aten.mish.default",
          "aten.selu.default", "aten.celu.default", "aten.log_sigmoid_forward.default",
          "aten.threshold.default", "aten.square.default", "aten.sgn.default", "aten.arange.start_step",
          "aten.arange.default", "aten.arange.start"}) {
      t[op] = OpClass::kPointwise;
    }
    for (const char* op :
         {"aten.sum.dim_IntList", "aten.sum.default", "aten.mean.dim", "aten.mean.default", "aten.amax.default",
          "aten.amin.default", "aten.prod.dim_int", "aten.prod.default", "aten.var.correction",
          "aten.var.dim", "aten.std.correction", "aten.argmax.default", "aten.argmin.default",
          "aten.max.dim", "aten.min.dim", "aten.max.default", "aten.min.default", "aten.any.dim",
          "aten.any.dims", "aten.any.default", "aten.all.dim", "aten.all.default", "prims.sum.default",
          "prims.var.default", "prims.amax.default", "prims.amin.default", "prims.prod.default",
          "aten.var_mean.correction"}) {
      t[op] = OpClass::kReduction;
    }
    for (const char* op : {"aten.max_pool2d_with_indices.default", "aten.max_pool3d_with_indices.default",
                           "aten.avg_pool2d.default", "aten.avg_pool3d.default", "aten.avg_pool1d.default",
                           "aten.max_pool1d.default", "aten.max_pool2d.default",
                           "aten._adaptive_avg_pool2d.default", "aten._adaptive_avg_pool3d.default",
                           "aten.adaptive_max_pool2d.default"}) {
      t[op] = OpClass::kPool;
    }
    t["aten.cumsum.default"] = OpClass::kScan;
    for (const char* op : {"aten.mm.default", "aten.bmm.default", "aten.addmm.default", "aten.convolution.default"}) {
      t[op] = OpClass::kMatmul;
    }
    t["aten.cumprod.default"] = OpClass::kScan;
    for (const char* op : {"aten.lstm.input", "aten.gru.input", "aten.rnn_tanh.input", "aten.rnn_relu.input"}) {
      t[op] = OpClass::kRecurrent;
    }
    t["aten.cat.default"] = OpClass::kConcat;
    t["aten.constant_pad_nd.default"] = OpClass::kConcat;  // the input between constant borders
    t["aten.gather.default"] = OpClass::kGather;
    t["aten.index_select.default"] = OpClass::kGather;
    t["aten.index.Tensor"] = OpClass::kGather;  // one index tensor (Swin's relative position bias lookup)
    t["getitem"] = OpClass::kGetItem;
    AddIndexingClasses(&t);
    return t;
  }();
  return table;
}

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

using Lowering = std::function<std::string(const Node&, const std::vector<Operand>&, DType, std::vector<Helper>*)>;

std::string Unary(const char* pattern, const std::vector<Operand>& in) {
  return fmt::format(fmt::runtime(pattern), in.at(0).code);
}

const std::map<std::string, Lowering>& LoweringTable() {
  using V = std::vector<Operand>;
  using H = std::vector<Helper>;
  static const std::map<std::string, Lowering> table = [] {
    std::map<std::string, Lowering> t;
    auto binary = [](const char* symbol) {
      return [symbol](const Node& node, const V& in, DType, H*) {
        const std::string alpha = KwNumber(node, "alpha", 99, "");
        const std::string rhs = alpha.empty() || alpha == "1" ? in.at(1).code : "(" + alpha + " * " + in.at(1).code + ")";
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
      if (mode->s != "floor") {
        h->push_back(Helper::kTrunc);
      }
      const std::string rounded = mode->s == "floor" ? "tl.floor(" + quotient + ")" : "_egg_trunc(" + quotient + ")";
      return Cast(rounded, DType::kFloat32, out);
    };
    t["aten.div.Tensor"] = divide;
    t["aten.div.Scalar"] = divide;
    t["prims.div.default"] = divide;
    t["aten.div.Tensor_mode"] = divide;
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
    t["aten.erfc.default"] = [](const Node&, const V& in, DType, H*) { return Unary("(1.0 - tl.erf({}))", in); };
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
        return fmt::format("(0.5 * {0} * (1.0 + _egg_tanh(0.7978845608028654 * ({0} + 0.044715 * {0} * {0} * {0}))))",
                           in.at(0).code);
      }
      return fmt::format("(0.5 * {0} * (1.0 + tl.erf({0} * 0.7071067811865476)))", in.at(0).code);
    };
    t["aten.leaky_relu.default"] = [](const Node& node, const V& in, DType, H*) {
      return fmt::format("tl.where({0} > 0, {0}, {0} * {1})", in.at(0).code, KwNumber(node, "negative_slope", 1, "0.01"));
    };
    t["aten.elu.default"] = [](const Node& node, const V& in, DType, H* h) {
      h->push_back(Helper::kExpm1);
      const std::string alpha = KwNumber(node, "alpha", 1, "1.0");
      const std::string scale = KwNumber(node, "scale", 2, "1.0");
      const std::string input_scale = KwNumber(node, "input_scale", 3, "1.0");
      return fmt::format("tl.where({0} > 0, {0} * {2}, {1} * {2} * _egg_expm1({0} * {3}))", in.at(0).code, alpha, scale,
                         input_scale);
    };
    t["aten.hardtanh.default"] = [](const Node& node, const V& in, DType, H*) {
      const std::string lo = KwNumber(node, "min_val", 1, "-1.0");
      const std::string hi = KwNumber(node, "max_val", 2, "1.0");
      return fmt::format("tl.where({0} > {2}, {2}, tl.where({0} < {1}, {1}, {0}))", in.at(0).code, lo, hi);
    };
    t["aten.hardsigmoid.default"] = [](const Node&, const V& in, DType, H*) {
      return fmt::format("(tl.minimum(tl.maximum({0} + 3.0, 0.0), 6.0) / 6.0)", in.at(0).code);
    };
    t["aten.hardswish.default"] = [](const Node&, const V& in, DType, H*) {
      return fmt::format("({0} * tl.minimum(tl.maximum({0} + 3.0, 0.0), 6.0) / 6.0)", in.at(0).code);
    };
    t["aten.softplus.default"] = [](const Node& node, const V& in, DType, H* h) {
      h->push_back(Helper::kLog1p);
      const std::string beta = KwNumber(node, "beta", 1, "1.0");
      const std::string threshold = KwNumber(node, "threshold", 2, "20.0");
      return fmt::format("tl.where({0} * {1} > {2}, {0}, _egg_log1p(tl.exp({0} * {1})) / {1})", in.at(0).code, beta,
                         threshold);
    };
    t["aten.mish.default"] = [](const Node&, const V& in, DType, H* h) {
      h->push_back(Helper::kTanh);
      h->push_back(Helper::kLog1p);
      return fmt::format("({0} * _egg_tanh(tl.where({0} > 20.0, {0}, _egg_log1p(tl.exp({0})))))", in.at(0).code);
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
    auto clamp = [](const Node& node, const V& in, DType, H*) {
      std::string code = in.at(0).code;
      const bool is_min = node.op == "aten.clamp_min.default";
      const bool is_max = node.op == "aten.clamp_max.default";
      const bool has_lo = !is_max && HasNumber(node, "min", 1);
      const bool has_hi = is_max ? HasNumber(node, "max", 1) : (!is_min && HasNumber(node, "max", 2));
      if (has_lo) {
        code = fmt::format("tl.where({0} < {1}, {1}, {0})", code, At(in, 1, KwNumber(node, "min", 1, "0")));
      }
      if (has_hi) {
        const size_t position = is_max ? 1 : 2;
        code = fmt::format("tl.where({0} > {1}, {1}, {0})", code,
                           At(in, position, KwNumber(node, "max", position, "0")));
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
      return fmt::format("(({} != 0) & ({} != 0))", in.at(0).code, in.at(1).code);
    };
    t["aten.logical_or.default"] = [](const Node&, const V& in, DType, H*) {
      return fmt::format("(({} != 0) | ({} != 0))", in.at(0).code, in.at(1).code);
    };
    t["aten.isnan.default"] = [](const Node&, const V& in, DType, H*) { return Unary("({0} != {0})", in); };
    t["aten.isinf.default"] = [](const Node&, const V& in, DType, H*) {
      return Unary("(tl.abs({}) == float('inf'))", in);
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
    auto convert = [](const Node&, const V& in, DType out, H*) { return Cast(in.at(0).code, in.at(0).dtype, out); };
    t["aten._to_copy.default"] = convert;
    t["prims.convert_element_type.default"] = convert;
    auto constant = [](const Node& node, const V&, DType out, H*) { return ConstantOf(node, out); };
    for (const char* op : {"aten.scalar_tensor.default", "aten.full.default", "aten.full_like.default",
                           "aten.zeros_like.default", "aten.ones_like.default", "aten.zeros.default",
                           "aten.ones.default", "aten.fill.Scalar"}) {
      t[op] = constant;
    }
    t["aten.masked_fill.Scalar"] = [](const Node& node, const V& in, DType, H*) {
      return fmt::format("tl.where({}, {}, {})", in.at(1).code, KwNumber(node, "value", 2, "0.0"), in.at(0).code);
    };
    // In float arithmetic (`/` is true division), cast back for integers (torch.roll's index arithmetic):
    // exact for the small integers of index computations.
    auto remainder = [](const Node&, const V& in, DType out, H*) {
      const std::string code = fmt::format("({0} - tl.floor({0} / {1}) * {1})", in.at(0).code, in.at(1).code);
      return IsFloating(out) ? code : Cast(code, DType::kFloat32, out);
    };
    t["aten.remainder.Scalar"] = remainder;
    t["aten.remainder.Tensor"] = remainder;
    auto fmod = [](const Node&, const V& in, DType out, H* h) {
      h->push_back(Helper::kTrunc);
      const std::string code = fmt::format("({0} - _egg_trunc({0} / {1}) * {1})", in.at(0).code, in.at(1).code);
      return IsFloating(out) ? code : Cast(code, DType::kFloat32, out);
    };
    t["aten.fmod.Scalar"] = fmod;
    t["aten.fmod.Tensor"] = fmod;
    t["aten.copy.default"] = [](const Node&, const V& in, DType out, H*) { return Cast(in.at(1).code, in.at(1).dtype, out); };
    t["aten.log_sigmoid_forward.default"] = [](const Node&, const V& in, DType, H* h) {
      h->push_back(Helper::kLog1p);
      return fmt::format("(tl.minimum({0}, 0.0) - _egg_log1p(tl.exp(-tl.abs({0}))))", in.at(0).code);
    };
    return t;
  }();
  return table;
}

}  // namespace

OpClass ClassifyOp(const std::string& op) {
  const auto& table = ClassTable();
  const auto found = table.find(op);
  return found == table.end() ? OpClass::kExtern : found->second;
}

std::string OpClassName(OpClass op_class) {
  switch (op_class) {
    case OpClass::kView:
      return "view";
    case OpClass::kPointwise:
      return "pointwise";
    case OpClass::kReduction:
      return "reduction";
    case OpClass::kPool:
      return "pool";
    case OpClass::kScan:
      return "scan";
    case OpClass::kConcat:
      return "concat";
    case OpClass::kGather:
      return "gather";
    case OpClass::kGetItem:
      return "getitem";
    case OpClass::kMatmul:
      return "matmul";
    case OpClass::kRecurrent:
      return "recurrent";
    case OpClass::kExtern:
      return "extern";
  }
  return "extern";
}

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

std::string FloatLiteral(double value) {
  if (std::isnan(value)) {
    return "float('nan')";
  }
  if (std::isinf(value)) {
    return value > 0 ? "float('inf')" : "float('-inf')";
  }
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".eEn") == std::string::npos) {
    text += ".0";
  }
  return text;
}

std::string HelperSource(const std::string& code) {
  struct Source {
    const char* name;
    const char* params;
    const char* interpreted;  // nullptr: one body for both
    const char* compiled;
  };
  static const Source kSources[] = {
      {"_egg_tanh", "x", "1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0)", "libdevice.tanh(x)"},
      {"_egg_expm1", "x", "tl.where(tl.abs(x) < 1e-5, x + 0.5 * x * x, tl.exp(x) - 1.0)", "libdevice.expm1(x)"},
      {"_egg_log1p", "x", "tl.where(tl.abs(x) < 1e-4, x - 0.5 * x * x, tl.log(1.0 + x))", "libdevice.log1p(x)"},
      {"_egg_pow", "x, y", "tl.exp2(y * tl.log2(x))", "libdevice.pow(x, y)"},
      {"_egg_trunc", "x", nullptr, "tl.where(x < 0, tl.ceil(x), tl.floor(x))"},
      {"_egg_round", "x",
       "tl.where(tl.abs(x - tl.floor(x) - 0.5) == 0.0, 2.0 * tl.floor(0.5 * x + 0.5), tl.floor(x + 0.5))",
       "libdevice.nearbyint(x)"},
      {"_egg_prod", "a, b", nullptr, "a * b"},
  };
  std::ostringstream out;
  for (const Source& source : kSources) {
    if (code.find(std::string(source.name) + "(") == std::string::npos &&
        code.find(std::string(source.name) + ")") == std::string::npos) {
      continue;
    }
    out << "@triton.jit\ndef " << source.name << "(" << source.params << "):\n";
    if (source.interpreted != nullptr) {
      out << "    if EGG_INTERPRET:\n        return " << source.interpreted << "\n"
          << "    else:\n        return " << source.compiled << "\n\n\n";
    } else {
      out << "    return " << source.compiled << "\n\n\n";
    }
  }
  if (code.find(kBf16Dot) != std::string::npos) {  // the interpreter's bf16 tl.dot is wrong: float32 there
    out << kBf16Dot << ": tl.constexpr = tl.constexpr(tl.float32 if EGG_INTERPRET else tl.bfloat16)\n\n\n";
  }
  if (code.find("_egg_welford_combine") != std::string::npos) {
    out << "@triton.jit\ndef _egg_welford_combine(m1, s1, n1, m2, s2, n2):\n"
        << "    n = n1 + n2\n"
        << "    w = tl.where(n == 0.0, 0.0, n2 / tl.where(n == 0.0, 1.0, n))\n"
        << "    d = m2 - m1\n"
        << "    return m1 + d * w, s1 + s2 + d * d * n1 * w, n\n\n\n";
  }
  for (const auto& [name, better] : {std::pair<const char*, const char*>{"_egg_argmax_combine", ">"},
                                     std::pair<const char*, const char*>{"_egg_argmin_combine", "<"}}) {
    if (code.find(name) == std::string::npos) {
      continue;
    }
    out << "@triton.jit\ndef " << name << "(v1, i1, v2, i2):\n"
        << "    pick = (v2 " << better << " v1) | ((v2 == v1) & (i2 < i1)) | ((v2 != v2) & (v1 == v1))\n"
        << "    return tl.where(pick, v2, v1), tl.where(pick, i2, i1)\n\n\n";
  }
  return out.str();
}

int ViewSource(const Node& node) {
  if (node.args.empty() || node.args[0].kind != Arg::Kind::kValue) {
    throw NotFusable(node.op + " without a tensor source");
  }
  return node.args[0].value;
}

}  // namespace egg::expert
