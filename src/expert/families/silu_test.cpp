// The example family: claimed only where a plan names it, one kernel of its own computing x * sigmoid(x), and
// a registered unit like the built-in ones (its moves and legality come from FlatFamily).
#include <gtest/gtest.h>

#include "expert/codegen/kernel_codegen.h"
#include "expert/codegen/test_kernels.h"
#include "expert/design/legality.h"
#include "expert/families/family.h"
#include "expert/ir/test_graphs.h"

namespace egg::expert {
namespace {

using testing::GraphJson;
using testing::Has;
using testing::Input;
using testing::LoadGraph;
using testing::Meta;
using testing::NodeJson;
using testing::Ref;

// relu(x) * sigmoid(relu(x)) + 1 over [4, 8] (the product's operands in `order`), of `dtype`.
Graph SiluGraph(bool sigmoid_first = false, const std::string& dtype = "float32") {
  const Json product =
      sigmoid_first ? Json::array({Ref("sig"), Ref("relu")}) : Json::array({Ref("relu"), Ref("sig")});
  return LoadGraph(
      GraphJson({Input("x", 0, Meta({4, 8}, dtype))},
                {NodeJson("relu", "aten.relu.default", Json::array({Ref("x")}), Meta({4, 8}, dtype)),
                 NodeJson("sig", "aten.sigmoid.default", Json::array({Ref("relu")}), Meta({4, 8}, dtype)),
                 NodeJson("mul", "aten.mul.Tensor", product, Meta({4, 8}, dtype)),
                 NodeJson("add", "aten.add.Tensor", Json::array({Ref("mul"), 1.0}), Meta({4, 8}, dtype))},
                {"add"}));
}

PlanOptions WithSilu() {
  PlanOptions options;
  options.families = {"silu"};
  return options;
}

TEST(SiluFamilyTest, RegisteredAfterTheBuiltInFamiliesAndOffUnlessNamed) {
  const KernelFamily& silu = FamilyNamed("silu");
  EXPECT_TRUE(silu.Experimental());
  EXPECT_GT(silu.Kind(), KernelKind::kAttention);
  EXPECT_EQ(KernelKindName(silu.Kind()), "silu");
  EXPECT_FALSE(FamilyEnabled(silu, PlanOptions{}));
  EXPECT_TRUE(FamilyEnabled(silu, WithSilu()));

  const Plan plain = MakePlan(SiluGraph(), {});
  ASSERT_EQ(plain.kernels.size(), 1U) << "off: the pointwise family fuses the whole chain";
  EXPECT_EQ(plain.kernels[0].kind, KernelKind::kPointwise);
}

TEST(SiluFamilyTest, ClaimsTheProductInEitherOrderAsAKernelOfItsOwn) {
  for (const bool sigmoid_first : {false, true}) {
    const Graph graph = SiluGraph(sigmoid_first);
    const Plan plan = MakePlan(graph, WithSilu());
    ASSERT_EQ(plan.kernels.size(), 2U) << "the claimed product, then the add reading it";
    const KernelPlan& kernel = plan.kernels[0];
    EXPECT_EQ(kernel.kind, FamilyNamed("silu").Kind());
    ASSERT_TRUE(kernel.claim.has_value());
    EXPECT_EQ(ValueAt(graph, kernel.claim->operands.at(0)).name, "relu");
    EXPECT_EQ(plan.kernels[1].kind, KernelKind::kPointwise) << "a claimed kernel takes no epilogue";
    EXPECT_EQ(kernel.design.algorithm, Algorithm::kFlat);
    EXPECT_EQ(kernel.design.xblock, 32);
  }
}

TEST(SiluFamilyTest, LowersThroughTheEmitterWithTheProducerInlined) {
  const Graph graph = SiluGraph();
  const Plan plan = MakePlan(graph, WithSilu());
  ASSERT_FALSE(plan.kernels.empty());
  const KernelSource source = testing::GenerateWithDenseStores(graph, plan.kernels[0], plan.memory_before[0]);
  EXPECT_TRUE(Has(source.code, "tl.sigmoid(")) << source.code;
  EXPECT_TRUE(Has(source.code, "tl.where(tmp0 < 0")) << "relu computed in the kernel, not stored:\n"
                                                     << source.code;
  ASSERT_EQ(source.launches.size(), 1U);
  EXPECT_EQ(source.launches[0].constexprs.at("XBLOCK"), 32);
  EXPECT_EQ(source.loaded.size(), 1U) << "only x is read";
}

TEST(SiluFamilyTest, LeavesOtherProductsAndIntegerTensorsToThePointwiseFamily) {
  const Graph other = LoadGraph(
      GraphJson({Input("x", 0, Meta({4, 8})), Input("y", 1, Meta({4, 8}))},
                {NodeJson("sig", "aten.sigmoid.default", Json::array({Ref("y")}), Meta({4, 8})),
                 NodeJson("mul", "aten.mul.Tensor", Json::array({Ref("x"), Ref("sig")}), Meta({4, 8}))},
                {"mul"}));
  const Plan plan = MakePlan(other, WithSilu());
  ASSERT_EQ(plan.kernels.size(), 1U);
  EXPECT_EQ(plan.kernels[0].kind, KernelKind::kPointwise) << "x * sigmoid(y) is no SiLU";
}

TEST(SiluFamilyTest, ItsDesignsFollowTheFlatRules) {
  const Plan plan = MakePlan(SiluGraph(), WithSilu());
  ASSERT_FALSE(plan.kernels.empty());
  KernelDesign design = plan.kernels[0].design;
  EXPECT_TRUE(DesignFits(plan.kernels[0], design));
  design.xblock = 48;
  EXPECT_FALSE(DesignFits(plan.kernels[0], design)) << "xblock a power of two";
}

TEST(SiluFamilyTest, AnUnknownFamilyInARecordIsRefusedByName) {
  const Json record = {
      {"seed", 0}, {"plan", {{"families", Json::array({"swish"})}}}, {"kernels", Json::object()}};
  try {
    CandidateDesign::FromJson(record);
    FAIL() << "an unknown family was accepted";
  } catch (const UnknownName& error) {
    EXPECT_TRUE(Has(error.what(), "'swish'")) << error.what();
    EXPECT_TRUE(Has(error.what(), "silu")) << error.what();
  }
}

}  // namespace
}  // namespace egg::expert
