// The op table: each op's class, float literals, helper sources and view sources (the pointwise lowering:
// ops_pointwise_test.cpp).
#include "expert/ir/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "expert/ir/test_graphs.h"
#include "expert/ir/test_ops.h"

namespace egg::expert {
namespace {

using testing::Count;
using testing::Int;
using testing::Op;
using testing::TensorArg;

TEST(OpsTest, ClassifiesOpsByHowThePlannerTreatsThem) {
  EXPECT_EQ(ClassifyOp("aten.view.default"), OpClass::kView);
  EXPECT_EQ(ClassifyOp("aten.clone.default"), OpClass::kView) << "a copy is handled as a view of its input";
  EXPECT_EQ(ClassifyOp("aten.add.Tensor"), OpClass::kPointwise);
  EXPECT_EQ(ClassifyOp("aten.full.default"), OpClass::kPointwise);
  EXPECT_EQ(ClassifyOp("aten.var_mean.correction"), OpClass::kReduction);
  EXPECT_EQ(ClassifyOp("aten.avg_pool2d.default"), OpClass::kPool);
  EXPECT_EQ(ClassifyOp("aten.cumprod.default"), OpClass::kScan);
  EXPECT_EQ(ClassifyOp("aten.convolution.default"), OpClass::kMatmul);
  EXPECT_EQ(ClassifyOp("aten.gru.input"), OpClass::kRecurrent);
  EXPECT_EQ(ClassifyOp("aten.constant_pad_nd.default"), OpClass::kConcat);
  EXPECT_EQ(ClassifyOp("aten.index_select.default"), OpClass::kGather);
  EXPECT_EQ(ClassifyOp("getitem"), OpClass::kGetItem);
  EXPECT_EQ(ClassifyOp("aten.nonzero.default"), OpClass::kExtern) << "unknown ops run in PyTorch";
  EXPECT_EQ(ClassifyOp(""), OpClass::kExtern);
}

TEST(OpsTest, ClassNamesAreDistinct) {
  std::set<std::string> names;
  for (OpClass op_class : {OpClass::kView, OpClass::kPointwise, OpClass::kReduction, OpClass::kPool,
                           OpClass::kScan, OpClass::kConcat, OpClass::kGather, OpClass::kGetItem,
                           OpClass::kMatmul, OpClass::kRecurrent, OpClass::kExtern}) {
    names.insert(OpClassName(op_class));
  }
  EXPECT_EQ(names.size(), 11U);
  EXPECT_EQ(OpClassName(OpClass::kPointwise), "pointwise");
  EXPECT_EQ(OpClassName(OpClass::kExtern), "extern");
}

TEST(OpsTest, FloatLiteralsArePythonFloats) {
  EXPECT_EQ(FloatLiteral(1.0), "1.0");
  EXPECT_EQ(FloatLiteral(-3.0), "-3.0");
  EXPECT_EQ(FloatLiteral(0.25), "0.25");
  EXPECT_EQ(FloatLiteral(1e-5), "1e-05");
  EXPECT_EQ(FloatLiteral(1e20), "1e+20");
  EXPECT_EQ(FloatLiteral(std::numeric_limits<double>::infinity()), "float('inf')");
  EXPECT_EQ(FloatLiteral(-std::numeric_limits<double>::infinity()), "float('-inf')");
  EXPECT_EQ(FloatLiteral(std::nan("")), "float('nan')");
}

TEST(OpsTest, HelperSourceDefinesOnlyWhatIsCalled) {
  EXPECT_EQ(HelperSource("tl.exp(x)"), "");
  const std::string tanh = HelperSource("y = _egg_tanh(x)");
  EXPECT_EQ(Count(tanh, "@triton.jit"), 1U);
  EXPECT_NE(tanh.find("def _egg_tanh(x):"), std::string::npos);
  EXPECT_NE(tanh.find("if EGG_INTERPRET:"), std::string::npos) << "an interpreter fallback";
  EXPECT_NE(tanh.find("libdevice.tanh(x)"), std::string::npos);
  const std::string trunc = HelperSource("_egg_trunc(a) + _egg_trunc(b)");
  EXPECT_EQ(Count(trunc, "def _egg_trunc"), 1U) << "once however often it is called";
  EXPECT_EQ(Count(trunc, "EGG_INTERPRET"), 0U) << "one body for both";
  EXPECT_NE(HelperSource("tl.reduce(v, 1, _egg_prod)").find("def _egg_prod(a, b):"), std::string::npos)
      << "named as a combine function, not called";
  const std::string welford = HelperSource("redm, reds, redn = _egg_welford(m, s, n, 1)");
  EXPECT_NE(welford.find("def _egg_welford_combine("), std::string::npos) << "the GPU's combine";
  EXPECT_NE(welford.find("def _egg_welford(m, s, n, axis: tl.constexpr):"), std::string::npos) << welford;
  const std::string argmax = HelperSource("v, i = _egg_argmax(a, b, 1)");
  EXPECT_NE(argmax.find("(v2 > v1)"), std::string::npos) << argmax;
  EXPECT_NE(argmax.find("return tl.reduce((v, i), axis, _egg_argmax_combine)"), std::string::npos) << argmax;
  EXPECT_EQ(argmax.find("_egg_argmin"), std::string::npos);
  const std::string largest = HelperSource("m = _egg_max(x, 1)");
  EXPECT_NE(largest.find("tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)"), std::string::npos)
      << largest;
  EXPECT_NE(largest.find("return tl.reduce(x, axis, _egg_nanmax)"), std::string::npos) << largest;
  EXPECT_EQ(largest.find("_egg_min"), std::string::npos) << largest;
  EXPECT_NE(HelperSource("m = _egg_min(x, 1)").find("tl.min(tl.where(nan, tl.zeros_like(x), x), axis)"),
            std::string::npos);
  EXPECT_NE(HelperSource(std::string("a.to(") + kBf16Dot + ")")
                .find("tl.float32 if EGG_INTERPRET else tl.bfloat16"),
            std::string::npos);
}

TEST(OpsTest, AViewsSourceIsItsFirstTensorArgument) {
  EXPECT_EQ(ViewSource(Op("aten.view.default", {TensorArg(4), Arg{}})), 4);
  EXPECT_THROW(ViewSource(Op("aten.view.default", {Int(1)})), NotFusable);
  EXPECT_THROW(ViewSource(Op("aten.view.default")), NotFusable);
}

}  // namespace
}  // namespace egg::expert
