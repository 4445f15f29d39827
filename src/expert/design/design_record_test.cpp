#include "expert/design/design_record.h"

#include <gtest/gtest.h>

namespace egg::expert {
namespace {

TEST(DesignRecordTest, KernelDesignJsonKeepsItsStoredShape) {
  KernelDesign design;
  design.algorithm = Algorithm::kTiled;
  design.xblock = 64;
  design.yblock = 32;
  design.rblock = 16;
  design.num_stages = 3;
  design.precision = Precision::kTf32;
  EXPECT_EQ(design.ToJson().dump(),
            R"({"algorithm":"tiled","num_stages":3,"num_warps":4,"precision":"tf32","rblock":16,"split":0,)"
            R"("xblock":64,"yblock":32})");
  EXPECT_EQ(KernelDesign::FromJson(design.ToJson()), design);
  KernelDesign flat;
  flat.algorithm = Algorithm::kFlat;
  flat.xblock = 1024;
  EXPECT_FALSE(flat.ToJson().contains("yblock")) << "unset fields stay out of the record";
  EXPECT_FALSE(flat.ToJson().contains("precision"));
}

TEST(DesignRecordTest, DTypeIsRecordedOnlyWhenHalf) {
  CandidateDesign design;
  EXPECT_FALSE(design.ToJson().contains("dtype")) << "fp32 records keep their stored shape";
  design.dtype = "bf16";
  EXPECT_EQ(design.ToJson()["dtype"], "bf16");
  EXPECT_EQ(CandidateDesign::FromJson(design.ToJson()).dtype, "bf16");
  EXPECT_EQ(CandidateDesign::FromJson(Json::object()).dtype, "fp32");
}

TEST(DesignRecordTest, ADynamicRangeNamesItsDimension) {
  CandidateDesign design;
  EXPECT_FALSE(design.ToJson().contains("dynamic"));
  design.dynamic = {{0, 1, 64}};
  EXPECT_EQ(design.ToJson()["dynamic"], (Json{{"dim", "batch"}, {"min", 1}, {"max", 64}}));
  design.dynamic[0].dim = 2;
  EXPECT_EQ(design.ToJson()["dynamic"]["dim"], "dim2");
  EXPECT_EQ(CandidateDesign::FromJson(design.ToJson()).dynamic[0].dim, 2);
  EXPECT_EQ(CandidateDesign::FromJson(Json{{"dynamic", {{"min", 1}, {"max", 4}}}}).dynamic[0].dim, 0);
  design.dynamic = {{0, 1, 8}, {1, 1, 512}};
  EXPECT_EQ(
      design.ToJson()["dynamic"],
      (Json{{"dims",
             {{{"dim", "batch"}, {"min", 1}, {"max", 8}}, {{"dim", "dim1"}, {"min", 1}, {"max", 512}}}}}));
  EXPECT_EQ(CandidateDesign::FromJson(design.ToJson()).ToJson(), design.ToJson());
  EXPECT_THROW(CandidateDesign::FromJson(Json{{"dynamic", {{"dim", "rows"}, {"min", 1}, {"max", 4}}}}),
               UnknownName);
}

TEST(DesignRecordTest, CandidateDesignRoundTripsAndIsReadBackFromSource) {
  CandidateDesign design;
  design.seed = 2;
  design.precision = Precision::kTf32x3;
  design.plan.fuse_attention = false;
  design.kernels["egg_k0_amax"].algorithm = Algorithm::kOnline;
  design.kernels["egg_k0_amax"].rblock = 2048;
  const Json json = design.ToJson();
  EXPECT_EQ(json["plan"],
            (Json{{"fuse_reductions", true}, {"fuse_epilogues", true}, {"fuse_attention", false}}));
  EXPECT_EQ(CandidateDesign::FromJson(json).ToJson(), json);
}

TEST(DesignRecordTest, AnUnknownAlgorithmOrPrecisionIsRefusedNotDefaulted) {
  Json kernel = {{"algorithm", "tiled"}, {"xblock", 64}, {"precision", "ieee"}};
  EXPECT_EQ(KernelDesign::FromJson(kernel).algorithm, Algorithm::kTiled);
  EXPECT_EQ(KernelDesign::FromJson(kernel).precision, Precision::kIeee);
  kernel["algorithm"] = "tiledd";
  EXPECT_THROW(KernelDesign::FromJson(kernel), UnknownName);
  kernel["algorithm"] = "tiled";
  kernel["precision"] = "fp16";
  EXPECT_THROW(KernelDesign::FromJson(kernel), UnknownName);
  EXPECT_THROW(CandidateDesign::FromJson(Json{{"seed", 0}, {"precision", "bf16"}}), UnknownName);
  EXPECT_THROW(CandidateDesign::FromJson(Json{{"kernels", {{"egg_k0", {{"algorithm", "warp"}}}}}}),
               UnknownName);
}

TEST(DesignRecordTest, ExplicitIeeeAndAnAbsentPrecisionKeepTheirForms) {
  const Json absent = {{"seed", 1}, {"plan", PlanOptions{}.ToJson()}, {"kernels", Json::object()}};
  EXPECT_EQ(CandidateDesign::FromJson(absent).precision, Precision::kUnset);
  EXPECT_EQ(CandidateDesign::FromJson(absent).ToJson(), absent);
  Json ieee = absent;
  ieee["precision"] = "ieee";
  EXPECT_EQ(CandidateDesign::FromJson(ieee).ToJson(), ieee);
}

TEST(DesignRecordTest, KernelKindNames) {
  EXPECT_EQ(KernelKindName(KernelKind::kReduction), "reduction");
  EXPECT_EQ(KernelKindName(KernelKind::kAttention), "attention");
}

}  // namespace
}  // namespace egg::expert
