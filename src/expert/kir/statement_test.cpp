// Each statement prints as the Triton line it stands for: text as it is, every load form, stores with and
// without a mask and widened to a tile, loops over each form of range, register tiles zeroed or filled.
#include "expert/kir/statement.h"

#include <gtest/gtest.h>

namespace egg::expert::kir {
namespace {

Statement LoadOf(LoadForm form, const std::string& mask) {
  Statement load;
  load.kind = Statement::Kind::kLoad;
  load.depth = 1;
  load.buffer = 3;
  load.pointer = "ptr0";
  load.address = Index::Var("xindex", 64) * 2 + Index(1);
  load.mask = mask;
  load.name = "tmp4";
  load.form = form;
  load.other = "0.0";
  return load;
}

TEST(StatementTest, TextIsPrintedAtItsDepth) {
  EXPECT_EQ(Print(Statement::Text(2, "acc = acc + tmp0")), "        acc = acc + tmp0");
  EXPECT_EQ(Print(Statement::Text(0, "    already indented")), "    already indented");
}

TEST(StatementTest, LoopsPrintEachFormOfTheirRange) {
  EXPECT_EQ(Print(Statement::Loop(1, "k0", LoopRange::Stepped("0", "1600", "BLOCK_K"))),
            "    for k0 in range(0, 1600, BLOCK_K):");
  EXPECT_EQ(Print(Statement::Loop(1, "s", LoopRange::Upto("SEQ"))), "    for s in range(SEQ):");
  EXPECT_EQ(Print(Statement::Loop(2, "t0", LoopRange::Unrolled("5"))),
            "        for t0 in tl.static_range(5):");
  EXPECT_EQ(Code(LoopRange::Stepped("split * 32", "64", "")), "range(split * 32, 64)")
      << "no step: a step of 1";
  EXPECT_TRUE(LoopRange{}.empty());
  EXPECT_FALSE(LoopRange::Upto("9").empty());
}

TEST(StatementTest, RegisterTilesPrintZerosOrTheirFill) {
  EXPECT_EQ(Print(Statement::Tile(1, "acc", {"BLOCK_M", "BLOCK_N"}, "tl.float32")),
            "    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)");
  EXPECT_EQ(Print(Statement::Tile(1, "m0", {"XBLOCK", "RBLOCK"}, "tl.float32", "float('-inf')")),
            "    m0 = tl.full([XBLOCK, RBLOCK], float('-inf'), tl.float32)");
  EXPECT_EQ(Print(Statement::Tile(2, "acc0i", {"XBLOCK", "RBLOCK"}, "tl.int64")),
            "        acc0i = tl.zeros([XBLOCK, RBLOCK], dtype=tl.int64)");
}

TEST(StatementTest, EveryLoadFormPrintsItsLoad) {
  EXPECT_EQ(Print(LoadOf(LoadForm::kPlain, "")), "    tmp4 = tl.load(ptr0 + (2*xindex + 1))");
  EXPECT_EQ(Print(LoadOf(LoadForm::kMasked, "xmask")),
            "    tmp4 = tl.load(ptr0 + (2*xindex + 1), xmask, other=0.0)");
  EXPECT_EQ(Print(LoadOf(LoadForm::kHalfKept, "xmask")),
            "    tmp4 = tl.load(ptr0 + (2*xindex + 1), xmask, other=0.0)");
  EXPECT_EQ(Print(LoadOf(LoadForm::kHalfKept, "")), "    tmp4 = tl.load(ptr0 + (2*xindex + 1))");
  EXPECT_EQ(Print(LoadOf(LoadForm::kHalfWidened, "")),
            "    tmp4 = tl.load(ptr0 + (2*xindex + 1)).to(tl.float32)");
  EXPECT_EQ(Print(LoadOf(LoadForm::kHalfWidenedMasked, "xmask")),
            "    tmp4 = tl.where(xmask, tl.load(ptr0 + (2*xindex + 1), xmask).to(tl.float32), 0.0)");
}

TEST(StatementTest, StoresPrintTheirMaskAndTheirWideningToATile) {
  Statement store;
  store.kind = Statement::Kind::kStore;
  store.depth = 1;
  store.buffer = 5;
  store.pointer = "ptr2";
  store.address = Index::Var("xindex", 64);
  store.data = "tmp1.to(tl.bfloat16)";
  store.mask = "xmask";
  EXPECT_EQ(Print(store), "    tl.store(ptr2 + (xindex), tmp1.to(tl.bfloat16), xmask)");
  store.mask = "";
  store.address = Index(0);
  store.broadcast = "xindex";
  EXPECT_EQ(Print(store), "    tl.store(ptr2 + (0) + tl.zeros_like(xindex), tmp1.to(tl.bfloat16))");
}

TEST(StatementTest, ScratchBuffersAreNegativeIds) {
  EXPECT_EQ(ScratchId(0), -1);
  EXPECT_TRUE(IsScratch(ScratchId(2)));
  EXPECT_EQ(ScratchIndex(ScratchId(2)), 2U);
  EXPECT_FALSE(IsScratch(0));
}

}  // namespace
}  // namespace egg::expert::kir
