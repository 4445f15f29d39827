// The pointwise lowering (ops_pointwise.cpp): the Triton expression of each op over its operands, arguments
// by position or keyword, rounding modes and casts, clamp bounds, small powers, constants, the helpers an
// expression calls, and the problem when there is no lowering.
#include <gtest/gtest.h>

#include "expert/ir/ops.h"
#include "expert/ir/test_graphs.h"
#include "expert/ir/test_ops.h"

namespace egg::expert {
namespace {

using testing::Count;
using testing::Int;
using testing::Literal;
using testing::Number;
using testing::Op;
using testing::TensorArg;
using testing::Text;
using testing::X;
using testing::Y;

// The expression of `node` over `operands`; fails the test when there is none.
std::string Lower(const Node& node, const std::vector<Operand>& operands, DType out = DType::kFloat32) {
  const PointwiseCode code = LowerPointwise(node, operands, out);
  EXPECT_TRUE(code.code.has_value()) << code.problem;
  return code.code.value_or("");
}

TEST(PointwiseLoweringTest, BinaryOpsScaleTheirRightOperandByAlpha) {
  EXPECT_EQ(Lower(Op("aten.add.Tensor"), {X(), Y()}), "(x + y)");
  EXPECT_EQ(Lower(Op("aten.sub.Tensor", {}, {{"alpha", Number(2.0)}}), {X(), Y()}), "(x - (2.0 * y))");
  EXPECT_EQ(Lower(Op("aten.add.Tensor", {}, {{"alpha", Int(1)}}), {X(), Y()}), "(x + y)")
      << "alpha 1 is dropped";
  EXPECT_EQ(Lower(Op("aten.rsub.Scalar"), {X(), Literal("1.0")}), "(1.0 - 1 * x)") << "other - alpha * self";
  EXPECT_EQ(Lower(Op("aten.mul.Scalar"), {X(), Literal("0.5")}), "(x * 0.5)");
}

TEST(PointwiseLoweringTest, DivisionRoundsByItsMode) {
  EXPECT_EQ(Lower(Op("aten.div.Tensor"), {X(), Y()}), "(x / y)");
  EXPECT_EQ(Lower(Op("aten.div.Tensor_mode", {}, {{"rounding_mode", Text("floor")}}), {X(), Y()}),
            "tl.floor((x / y))");
  const PointwiseCode trunc = LowerPointwise(
      Op("aten.div.Tensor_mode", {}, {{"rounding_mode", Text("trunc")}}), {X(), Y()}, DType::kFloat32);
  ASSERT_TRUE(trunc.code);
  EXPECT_EQ(*trunc.code, "_egg_trunc((x / y))");
  EXPECT_EQ(trunc.helpers, std::vector<Helper>{Helper::kTrunc});
}

TEST(PointwiseLoweringTest, IntegerQuotientsAndRemaindersStayInIntegers) {
  const std::vector<Operand> ints = {X(DType::kInt64), Y(DType::kInt64)};
  auto mode = [](const char* rounding) {
    return Op("aten.div.Tensor_mode", {}, {{"rounding_mode", Text(rounding)}});
  };
  EXPECT_EQ(Lower(mode("trunc"), ints, DType::kInt64), "((x // y)).to(tl.int64)") << "Triton's // truncates";
  // floor: one less where the truncated remainder is nonzero and its sign is not the divisor's
  EXPECT_EQ(Lower(mode("floor"), ints, DType::kInt64),
            "(tl.where(((x % y) != 0) & (((x % y) < 0) != (y < 0)), (x // y) - 1, (x // y))).to(tl.int64)");
  EXPECT_EQ(
      Lower(Op("aten.remainder.Scalar"), {X(DType::kInt64), Literal("3", DType::kInt64)}, DType::kInt64),
      "(tl.where(((x % 3) != 0) & (((x % 3) < 0) != (3 < 0)), (x % 3) + 3, (x % 3))).to(tl.int64)");
  EXPECT_EQ(Lower(Op("aten.fmod.Tensor"), ints, DType::kInt64), "((x % y)).to(tl.int64)");
  EXPECT_EQ(Lower(mode("floor"), {X(DType::kInt64), Y()}, DType::kFloat32), "tl.floor((x / y))")
      << "a float operand: float arithmetic";
}

TEST(PointwiseLoweringTest, ActivationsReadTheirParametersByPositionOrKeyword) {
  EXPECT_EQ(Lower(Op("aten.relu.default"), {X()}), "tl.where(x < 0, 0.0, x)");
  // the GPU's tl.maximum and tl.minimum drop a nan unless told: torch's hardsigmoid keeps it
  EXPECT_EQ(Count(Lower(Op("aten.hardsigmoid.default"), {X()}), "propagate_nan=tl.PropagateNan.ALL"), 2U);
  EXPECT_EQ(Lower(Op("aten.relu.default"), {X(DType::kInt32)}, DType::kInt32), "tl.where(x < 0, 0, x)");
  EXPECT_EQ(Lower(Op("aten.leaky_relu.default"), {X()}), "tl.where(x > 0, x, x * 0.01)")
      << "the default slope";
  EXPECT_EQ(Lower(Op("aten.leaky_relu.default", {Arg{}, Number(0.2)}), {X()}), "tl.where(x > 0, x, x * 0.2)");
  EXPECT_EQ(Lower(Op("aten.leaky_relu.default", {}, {{"negative_slope", Number(0.3)}}), {X()}),
            "tl.where(x > 0, x, x * 0.3)");
  EXPECT_EQ(Lower(Op("aten.hardtanh.default", {Arg{}, Number(-2.0), Number(3.0)}), {X()}),
            "tl.where(x > 3.0, 3.0, tl.where(x < -2.0, -2.0, x))");
  EXPECT_EQ(Lower(Op("aten.threshold.default", {Arg{}, Number(0.5), Int(7)}), {X()}),
            "tl.where(x <= 0.5, 7, x)");
  const PointwiseCode gelu =
      LowerPointwise(Op("aten.gelu.default", {}, {{"approximate", Text("tanh")}}), {X()}, DType::kFloat32);
  ASSERT_TRUE(gelu.code);
  EXPECT_NE(gelu.code->find("_egg_tanh(0.7978845608028654"), std::string::npos) << *gelu.code;
  EXPECT_EQ(gelu.helpers, std::vector<Helper>{Helper::kTanh});
  EXPECT_NE(Lower(Op("aten.gelu.default"), {X()}).find("tl.erf(x * 0.7071067811865476)"), std::string::npos)
      << "exact gelu by default";
}

TEST(PointwiseLoweringTest, ClampTakesEitherBoundAsLiteralOrTensor) {
  EXPECT_EQ(Lower(Op("aten.clamp.default", {Arg{}, Number(0.0), Number(6.0)}), {X(), Operand{}, Operand{}}),
            "tl.where(tl.where(x < 0.0, 0.0, x) > 6.0, 6.0, tl.where(x < 0.0, 0.0, x))");
  EXPECT_EQ(Lower(Op("aten.clamp.default", {Arg{}, Arg{}, Number(6.0)}), {X(), Operand{}, Operand{}}),
            "tl.where(x > 6.0, 6.0, x)")
      << "no lower bound";
  EXPECT_EQ(Lower(Op("aten.clamp_min.default", {Arg{}, Number(1.0)}), {X(), Operand{}}),
            "tl.where(x < 1.0, 1.0, x)");
  EXPECT_EQ(Lower(Op("aten.clamp_max.default", {Arg{}, Number(1.0)}), {X(), Operand{}}),
            "tl.where(x > 1.0, 1.0, x)");
  EXPECT_EQ(Lower(Op("aten.clamp.Tensor", {TensorArg(0), TensorArg(1), Arg{}}), {X(), Y(), Operand{}}),
            "tl.where(x < y, y, x)")
      << "a tensor bound is its operand";
  // a tensor bound passed by keyword has no operand (operands follow the positional arguments): refused,
  // where it used to be read as 0
  const PointwiseCode by_keyword = LowerPointwise(
      Op("aten.clamp.Tensor", {TensorArg(0)}, {{"max", TensorArg(1)}}), {X()}, DType::kFloat32);
  EXPECT_FALSE(by_keyword.code) << *by_keyword.code;
  EXPECT_NE(by_keyword.problem.find("max bound is a tensor passed by keyword"), std::string::npos)
      << by_keyword.problem;
}

TEST(PointwiseLoweringTest, PowerSpecialCasesSmallExponents) {
  const auto pow = [](double exponent) {
    return LowerPointwise(Op("aten.pow.Tensor_Scalar", {Arg{}, Number(exponent)}), {X()}, DType::kFloat32);
  };
  EXPECT_EQ(pow(2).code, "(x * x)");
  EXPECT_EQ(pow(3).code, "(x * x * x)");
  EXPECT_EQ(pow(0.5).code, "tl.sqrt(x)");
  EXPECT_EQ(pow(-0.5).code, "tl.rsqrt(x)");
  EXPECT_EQ(pow(-1).code, "(1.0 / x)");
  EXPECT_EQ(pow(1).code, "x");
  EXPECT_TRUE(pow(2).helpers.empty());
  const PointwiseCode general = pow(2.5);
  EXPECT_EQ(general.code, "_egg_pow(x, 2.5)");
  EXPECT_EQ(general.helpers, std::vector<Helper>{Helper::kPow});
  EXPECT_EQ(Lower(Op("aten.pow.Tensor_Scalar", {}, {{"exponent", Int(2)}}), {X()}), "(x * x)")
      << "an int exponent by keyword";
}

TEST(PointwiseLoweringTest, ConversionsCastOnlyWhenTheTypeChanges) {
  const Node convert = Op("prims.convert_element_type.default");
  EXPECT_EQ(Lower(convert, {X()}, DType::kFloat32), "x");
  EXPECT_EQ(Lower(convert, {X()}, DType::kInt32), "(x).to(tl.int32)");
  EXPECT_EQ(Lower(convert, {X()}, DType::kBool), "(x != 0)") << "to bool: compared with zero";
  EXPECT_EQ(Lower(Op("aten.sign.default"), {X(DType::kInt64)}, DType::kInt64),
            "(tl.where(x > 0, 1.0, tl.where(x < 0, -1.0, 0.0))).to(tl.int64)");
  EXPECT_EQ(Lower(Op("aten.remainder.Scalar"), {X(), Literal("3.0")}, DType::kFloat32),
            "(x - tl.floor(x / 3.0) * 3.0)");
}

TEST(PointwiseLoweringTest, ConstantsTakeTheResultsType) {
  EXPECT_EQ(Lower(Op("aten.full.default", {Arg{}, Number(2.5)}), {}, DType::kFloat32), "2.5");
  EXPECT_EQ(Lower(Op("aten.full.default", {Arg{}, Number(2.5)}), {}, DType::kInt64), "2") << "truncated";
  EXPECT_EQ(Lower(Op("aten.full_like.default", {}, {{"fill_value", Int(3)}}), {}, DType::kFloat32), "3.0");
  EXPECT_EQ(Lower(Op("aten.ones_like.default"), {X()}, DType::kBool), "1");
  EXPECT_EQ(Lower(Op("aten.zeros.default"), {}, DType::kFloat32), "0.0");
  EXPECT_EQ(Lower(Op("aten.scalar_tensor.default", {Number(-1.0)}), {}, DType::kFloat32), "-1.0");
  EXPECT_EQ(Lower(Op("aten.fill.Scalar", {Arg{}, Number(std::numeric_limits<double>::infinity())}), {X()}),
            "float('inf')");
}

TEST(PointwiseLoweringTest, HelpersAreReportedForWhatTheExpressionCalls) {
  const PointwiseCode mish = LowerPointwise(Op("aten.mish.default"), {X()}, DType::kFloat32);
  ASSERT_TRUE(mish.code);
  EXPECT_EQ(mish.helpers, (std::vector<Helper>{Helper::kTanh, Helper::kLog1p}));
  for (const auto& [op, helper] :
       std::vector<std::pair<std::string, Helper>>{{"aten.tanh.default", Helper::kTanh},
                                                   {"aten.expm1.default", Helper::kExpm1},
                                                   {"aten.log1p.default", Helper::kLog1p},
                                                   {"aten.round.default", Helper::kRound},
                                                   {"aten.trunc.default", Helper::kTrunc},
                                                   {"aten.elu.default", Helper::kExpm1}}) {
    const PointwiseCode code = LowerPointwise(Op(op), {X()}, DType::kFloat32);
    ASSERT_TRUE(code.code) << op;
    EXPECT_EQ(code.helpers, std::vector<Helper>{helper}) << op;
    EXPECT_NE(HelperSource(*code.code).find("@triton.jit"), std::string::npos)
        << op << ": its source is known";
  }
}

TEST(PointwiseLoweringTest, WithoutALoweringTheProblemNamesTheOp) {
  PointwiseCode code = LowerPointwise(Op("aten.cumsum.default"), {X()}, DType::kFloat32);
  EXPECT_FALSE(code.code.has_value());
  EXPECT_EQ(code.problem, "no Triton lowering for aten.cumsum.default");
  code = LowerPointwise(Op("aten.mul.Tensor"), {X()}, DType::kFloat32);
  EXPECT_FALSE(code.code.has_value()) << "a missing operand is a problem, not a crash";
  EXPECT_EQ(code.problem.rfind("aten.mul.Tensor: ", 0), 0U) << code.problem;
}

}  // namespace
}  // namespace egg::expert
