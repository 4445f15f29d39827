// The registry of kernel families: the built-in KernelKind constants at their families, every family found
// again by its kind and its name, unknown names and kinds refused, experimental families off by default.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "expert/families/family.h"
#include "expert/ir/name_table.h"

namespace egg::expert {
namespace {

TEST(FamilyRegistryTest, BuiltInKindsAreTheirFamilies) {
  const std::vector<std::pair<KernelKind, std::string>> builtins{
      {KernelKind::kPointwise, "pointwise"}, {KernelKind::kReduction, "reduction"},
      {KernelKind::kPool, "pool"},           {KernelKind::kScan, "scan"},
      {KernelKind::kMatmul, "matmul"},       {KernelKind::kRecurrent, "recurrent"},
      {KernelKind::kAttention, "attention"}};
  ASSERT_GE(Families().size(), builtins.size());
  for (const auto& [kind, name] : builtins) {
    EXPECT_EQ(FamilyOf(kind).Name(), name);
    EXPECT_EQ(FamilyOf(kind).Kind(), kind);
    EXPECT_EQ(KernelKindName(kind), name);
    EXPECT_EQ(&FamilyNamed(name), &FamilyOf(kind));
    EXPECT_FALSE(FamilyOf(kind).Experimental()) << name;
  }
}

TEST(FamilyRegistryTest, EveryFamilyIsFoundByItsKindAndItsDistinctName) {
  std::set<std::string> names;
  int place = 0;
  for (const KernelFamily* family : Families()) {
    EXPECT_EQ(family->Kind().id, place++);  // registration order is the kind
    EXPECT_EQ(&FamilyOf(family->Kind()), family);
    EXPECT_EQ(&FamilyNamed(family->Name()), family);
    EXPECT_TRUE(names.insert(std::string(family->Name())).second) << "two families named " << family->Name();
    EXPECT_FALSE(family->Rule().empty()) << family->Name();
  }
}

TEST(FamilyRegistryTest, UnknownNamesAndKindsAreRefused) {
  try {
    FamilyNamed("no-such-family");
    ADD_FAILURE() << "an unknown family name was accepted";
  } catch (const UnknownName& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("'no-such-family'"), std::string::npos) << what;
    for (const KernelFamily* family : Families()) {
      EXPECT_NE(what.find(std::string(family->Name())), std::string::npos) << what;
    }
    EXPECT_NE(what.find("pointwise, reduction, pool, scan, matmul, recurrent, attention"), std::string::npos)
        << what;
  }
  EXPECT_THROW(FamilyOf(KernelKind{-1}), std::logic_error);
  EXPECT_THROW(FamilyOf(KernelKind{static_cast<int>(Families().size())}), std::logic_error);
  EXPECT_THROW(KernelKindName(KernelKind{1000}), std::logic_error);
}

TEST(FamilyRegistryTest, ExperimentalFamiliesRunOnlyWhereTheOptionsNameThem) {
  const PlanOptions none;
  for (const KernelFamily* family : Families()) {
    EXPECT_EQ(FamilyEnabled(*family, none), !family->Experimental()) << family->Name();
    PlanOptions named;
    named.families = {std::string(family->Name())};
    EXPECT_TRUE(FamilyEnabled(*family, named)) << family->Name();
    if (family->Experimental()) {
      PlanOptions unknown;
      unknown.families = {"no-such-family"};
      EXPECT_THROW(FamilyEnabled(*family, unknown), UnknownName);
    }
  }
}

TEST(FamilyRegistryTest, DefaultHooksClaimNothingAndWriteEverything) {
  const KernelFamily& pointwise = FamilyOf(KernelKind::kPointwise);
  Graph graph;
  Node node;
  EXPECT_FALSE(pointwise.Claim(graph, node).has_value());
  KernelPlan kernel;
  kernel.shape = {4096};
  kernel.rows = 4096;
  KernelDesign design = pointwise.DefaultDesign(kernel, 0, Precision::kUnset);
  EXPECT_EQ(pointwise.Unwritable(kernel, design), "");
  EXPECT_EQ(pointwise.FallbackDesign(kernel, 1, Precision::kIeee),
            pointwise.DefaultDesign(kernel, 1, Precision::kIeee));
  EXPECT_TRUE(pointwise.FitsResources(kernel, design));  // 1024 elements, 128 threads
  design.xblock = 16;                                    // fewer than a quarter element a thread
  EXPECT_FALSE(pointwise.FitsResources(kernel, design));
}

}  // namespace
}  // namespace egg::expert
