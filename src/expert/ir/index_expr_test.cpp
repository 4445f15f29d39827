#include "expert/ir/index_expr.h"

#include <gtest/gtest.h>

#include "expert/ir/graph.h"

namespace egg::expert {
namespace {

TEST(IndexTest, RangesDecideDivisionAndRemainder) {
  const Index x = Index::Var("x", 64);
  EXPECT_EQ(x.FloorDiv(64).Code(), "0");
  EXPECT_EQ(x.Mod(64).Code(), "x");
  EXPECT_EQ(x.FloorDiv(8).Code(), "(x // 8)");
  EXPECT_EQ(x.Lo(), 0);
  EXPECT_EQ(x.Hi(), 63);
}

TEST(IndexTest, LinearTermsSplitOutOfDivisions) {
  const Index x = Index::Var("x", 10);
  const Index r = Index::Var("r", 32);
  const Index flat = x * 32 + r;
  EXPECT_EQ(flat.FloorDiv(32), x);
  EXPECT_EQ(flat.Mod(32), r);
  // (256*x + r) // 2048 with r < 256 is x // 8: the factor 256 divides the divisor.
  const Index wide = Index::Var("x", 96) * 256 + Index::Var("r", 256);
  EXPECT_EQ(wide.FloorDiv(2048), Index::Var("x", 96).FloorDiv(8));
  EXPECT_EQ(wide.Mod(2048), Index::Var("x", 96).Mod(8) * 256 + Index::Var("r", 256));
}

TEST(IndexTest, DelinearizeThenLinearizeIsTheIdentity) {
  const Index flat = Index::Var("xindex", 2 * 3 * 4 * 5);
  const std::vector<int64_t> shape = {2, 3, 4, 5};
  const auto index = Delinearize(flat, shape);
  EXPECT_EQ(index[0].Code(), "(xindex // 60)");
  EXPECT_EQ(index[3].Code(), "(xindex % 5)");
  EXPECT_EQ(Linearize(index, shape), flat);
}

TEST(IndexTest, ReshapesComposeIntoPlainOffsets) {
  // A [B, F, H, W] tensor read at (b, f, h, w) where b, h, w come from a row x and f from r.
  const Index x = Index::Var("x", 4 * 8 * 8);
  const Index r = Index::Var("r", 16);
  const auto kept = Delinearize(x, {4, 8, 8});
  const Index offset = Offset({kept[0], r, kept[1], kept[2]}, ContiguousStrides({4, 16, 8, 8}), 0);
  EXPECT_EQ(offset.Code(), "(x % 64) + 1024*(x // 64) + 64*r");
}

TEST(IndexTest, CodeParenthesizesCompoundOperands) {
  const Index x = Index::Var("x", 100);
  EXPECT_EQ((x + Index(3)).FloorDiv(7).Code(), "((x + 3) // 7)");
  EXPECT_EQ((x * 2 - Index(1)).Code(), "2*x - 1");
  EXPECT_EQ((Index(9) - x).Lo(), -90);
}

TEST(IndexTest, RuntimeValuesAndVariableQueries) {
  const Index position = Index::Runtime("tmp3", 0, 41);
  const Index address = position * 64 + Index::Var("x", 64);
  EXPECT_TRUE(address.Uses("tmp3"));
  EXPECT_TRUE(address.Uses("x"));
  EXPECT_FALSE(address.Uses("r"));
  EXPECT_EQ(address.CoefficientOf("tmp3"), 0);  // runtime atoms are not variables
  EXPECT_EQ(address.CoefficientOf("x"), 1);
  EXPECT_EQ(address.Without("tmp3").Code(), "x");
  EXPECT_EQ(address.Hi(), 41 * 64 + 63);
}

TEST(IndexTest, NestedDivisionsCollapse) {
  const Index x = Index::Var("x", 1 << 20);
  EXPECT_EQ(x.FloorDiv(4).FloorDiv(8), x.FloorDiv(32));
  EXPECT_EQ(x.Mod(64).Mod(8), x.Mod(8));
  EXPECT_EQ(x.Mod(64).FloorDiv(8), x.FloorDiv(8).Mod(8));
}

// A constant made directly keys and compares like the same constant reached by arithmetic: the emitter
// caches loads by key, and one key for all constants makes select(x, -1, 0) read what select(x, -1, 1) reads.
TEST(IndexTest, ConstantsKeyByTheirValue) {
  EXPECT_FALSE(Index(0) == Index(1));
  EXPECT_NE(Index(0).Key(), Index(1).Key());
  EXPECT_TRUE(Index(3) == Index(1) + Index(2));
  EXPECT_EQ(Index(3).Key(), (Index::Var("x", 4) + Index(3) - Index::Var("x", 4)).Key());
  EXPECT_TRUE(Index() == Index(0));
}

}  // namespace
}  // namespace egg::expert
