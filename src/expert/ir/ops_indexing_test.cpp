// The op table's indexing part: the classes of bitwise, embedding, interpolation, sort and topk ops, and the
// Triton expressions of bitwise and, or and xor on bools and integers.
#include "expert/ir/ops_indexing.h"

#include <gtest/gtest.h>

namespace egg::expert {
namespace {

Node Op(const std::string& op) {
  Node node;
  node.op = op;
  return node;
}

Operand Tile(const std::string& code, DType dtype) { return {code, dtype, false}; }
Operand Literal(const std::string& code, DType dtype) { return {code, dtype, true}; }

TEST(OpsIndexingTest, AddsEachFamilysClass) {
  std::map<std::string, OpClass> table;
  AddIndexingClasses(&table);
  EXPECT_EQ(table.at("aten.bitwise_and.Tensor"), OpClass::kPointwise);
  EXPECT_EQ(table.at("aten.bitwise_xor.Scalar"), OpClass::kPointwise);
  EXPECT_EQ(table.at("aten.embedding.default"), OpClass::kGather);
  EXPECT_EQ(table.at("aten.upsample_nearest2d.vec"), OpClass::kGather);
  EXPECT_EQ(table.at("aten.upsample_trilinear3d.default"), OpClass::kGather);
  EXPECT_EQ(table.at("aten.sort.stable"), OpClass::kScan);
  EXPECT_EQ(table.at("aten.topk.default"), OpClass::kScan);
  EXPECT_EQ(table.count("aten.bitwise_not.default"), 0U) << "not a binary bitwise op";
  EXPECT_EQ(table.count("aten.add.Tensor"), 0U) << "only this part's ops";
  EXPECT_EQ(table.size(), 6U + 1U + 12U + 3U);
}

TEST(OpsIndexingTest, TheOpTableKnowsThem) {
  EXPECT_EQ(ClassifyOp("aten.bitwise_or.Tensor"), OpClass::kPointwise);
  EXPECT_EQ(ClassifyOp("aten.embedding.default"), OpClass::kGather);
  EXPECT_EQ(ClassifyOp("aten.upsample_bilinear2d.vec"), OpClass::kGather);
  EXPECT_EQ(ClassifyOp("aten.sort.default"), OpClass::kScan);
}

TEST(OpsIndexingTest, IntegerOperandsKeepTheirValues) {
  const std::vector<Operand> operands = {Tile("tmp0", DType::kInt32), Tile("tmp1", DType::kInt32)};
  EXPECT_EQ(LowerBitwise(Op("aten.bitwise_and.Tensor"), operands, DType::kInt32), "(tmp0 & tmp1)");
  EXPECT_EQ(LowerBitwise(Op("aten.bitwise_or.Tensor"), operands, DType::kInt32), "(tmp0 | tmp1)");
  EXPECT_EQ(LowerBitwise(Op("aten.bitwise_xor.Tensor"), operands, DType::kInt32), "(tmp0 ^ tmp1)");
  EXPECT_EQ(LowerBitwise(Op("aten.bitwise_and.Scalar"),
                         {Tile("tmp0", DType::kInt64), Literal("12", DType::kInt64)}, DType::kInt64),
            "(tmp0 & 12)");
}

// Two operands that are no literals meet as int8 (either may be a scalar read at a fixed address, which
// Triton's interpreter refuses to `&` with a tile of booleans: egg_fuzz seed 5115).
TEST(OpsIndexingTest, BoolResultsCompareNonBoolOperandsWithZero) {
  EXPECT_EQ(LowerBitwise(Op("aten.bitwise_and.Tensor"),
                         {Tile("tmp0", DType::kBool), Tile("tmp1", DType::kBool)}, DType::kBool),
            "(((tmp0).to(tl.int8) & (tmp1).to(tl.int8)) != 0)");
  EXPECT_EQ(LowerBitwise(Op("aten.bitwise_or.Tensor"),
                         {Tile("tmp0", DType::kBool), Tile("tmp1", DType::kUInt8)}, DType::kBool),
            "(((tmp0).to(tl.int8) | ((tmp1 != 0)).to(tl.int8)) != 0)");
}

TEST(OpsIndexingTest, ALiteralGoesOnTheRightAndFoldsToAPythonBool) {
  const Node op = Op("aten.bitwise_and.Scalar");
  EXPECT_EQ(LowerBitwise(op, {Literal("1", DType::kBool), Tile("tmp0", DType::kBool)}, DType::kBool),
            "(tmp0 & True)");
  EXPECT_EQ(LowerBitwise(op, {Tile("tmp0", DType::kBool), Literal("0", DType::kInt64)}, DType::kBool),
            "(tmp0 & False)");
  EXPECT_EQ(LowerBitwise(op, {Tile("tmp0", DType::kBool), Literal("0.0", DType::kFloat32)}, DType::kBool),
            "(tmp0 & False)");
  EXPECT_EQ(LowerBitwise(Op("aten.bitwise_xor.Scalar"),
                         {Literal("3", DType::kInt64), Tile("tmp2", DType::kInt64)}, DType::kInt64),
            "(tmp2 ^ 3)")
      << "integers swap too";
  EXPECT_EQ(LowerBitwise(op, {Literal("1", DType::kInt64), Literal("3", DType::kInt64)}, DType::kInt64),
            "(1 & 3)")
      << "two literals keep their order";
}

TEST(OpsIndexingTest, OtherOpsAreNotBitwise) {
  const std::vector<Operand> operands = {Tile("tmp0", DType::kInt32), Tile("tmp1", DType::kInt32)};
  EXPECT_FALSE(LowerBitwise(Op("aten.add.Tensor"), operands, DType::kInt32).has_value());
  EXPECT_FALSE(LowerBitwise(Op("aten.logical_and.default"), operands, DType::kBool).has_value());
}

}  // namespace
}  // namespace egg::expert
