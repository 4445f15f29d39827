#include "expert/ir/ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
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
          "aten.view_as.default", "aten.unfold.default", "aten.repeat.default"}) {
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
                           "aten.adaptive_max_pool2d.default", "aten.adaptive_max_pool3d.default"}) {
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

namespace {

// Reductions whose combine is not one of Triton's own. On the GPU each is a tl.reduce over its combine. The
// interpreter runs such a combine element by element in Python (seconds for a small task), so there the same
// result comes from its vectorized max, min and sum: the same tie and nan rules, Welford's sums in another
// order.

// Per row: the mean, the sum of squared deviations and the count, from lanes that each hold those three.
constexpr const char* kWelfordReducer = R"(@triton.jit
def _egg_welford_combine(m1, s1, n1, m2, s2, n2):
    n = n1 + n2
    w = tl.where(n == 0.0, 0.0, n2 / tl.where(n == 0.0, 1.0, n))
    d = m2 - m1
    return m1 + d * w, s1 + s2 + d * d * n1 * w, n


@triton.jit
def _egg_welford(m, s, n, axis: tl.constexpr):
    if EGG_INTERPRET:
        count = tl.sum(n, axis)
        mean = tl.sum(m * n, axis) / tl.where(count == 0.0, 1.0, count)
        d = m - tl.expand_dims(mean, axis)
        return mean, tl.sum(s, axis) + tl.sum(n * d * d, axis), count
    else:
        return tl.reduce((m, s, n), axis, _egg_welford_combine)


)";

// A row's largest (smallest): nan where the row holds one, as torch's max, amax and max pooling have it
// (tl.max and tl.min skip nan on the GPU). {0}: max or min.
constexpr const char* kExtremumReducer = R"(@triton.jit
def _egg_nan{0}(a, b):
    return tl.{0}imum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _egg_{0}(x, axis: tl.constexpr):
    if EGG_INTERPRET:
        nan = x != x
        m = tl.{0}(tl.where(nan, tl.zeros_like(x), x), axis)
        if x.dtype.is_floating():
            m = tl.where(tl.max(nan.to(tl.int8), axis) > 0, float("nan"), m)
        return m
    else:
        return tl.reduce(x, axis, _egg_nan{0})


)";

// A row's (value, index) of its largest (smallest), the lowest index on ties; a nan wins over any number,
// the first nan over later ones, as torch's argmax and max(dim) have it. {0}: max or min; {1}: > or <.
constexpr const char* kArgReducer = R"(@triton.jit
def _egg_arg{0}_combine(v1, i1, v2, i2):
    pick = (v2 {1} v1) | ((v2 == v1) & (i2 < i1)) | ((v2 != v2) & ((v1 == v1) | (i2 < i1)))
    return tl.where(pick, v2, v1), tl.where(pick, i2, i1)


@triton.jit
def _egg_arg{0}(v, i, axis: tl.constexpr):
    if EGG_INTERPRET:
        nan = v != v
        m = tl.{0}(tl.where(nan, tl.zeros_like(v), v), axis)
        hit = v == tl.expand_dims(m, axis)
        if v.dtype.is_floating():
            any_nan = tl.max(nan.to(tl.int8), axis) > 0
            m = tl.where(any_nan, float("nan"), m)
            hit = tl.where(tl.expand_dims(any_nan, axis), nan, hit)
        return m, tl.min(tl.where(hit, i, 9223372036854775807), axis)
    else:
        return tl.reduce((v, i), axis, _egg_arg{0}_combine)


)";

}  // namespace

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
  if (code.find("_egg_welford(") != std::string::npos) {
    out << kWelfordReducer;
  }
  for (const auto& [op, better] : {std::pair<const char*, const char*>{"max", ">"}, {"min", "<"}}) {
    if (code.find(fmt::format("_egg_{}(", op)) != std::string::npos) {
      out << fmt::format(fmt::runtime(kExtremumReducer), op);
    }
    if (code.find(fmt::format("_egg_arg{}(", op)) != std::string::npos) {
      out << fmt::format(fmt::runtime(kArgReducer), op, better);
    }
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
