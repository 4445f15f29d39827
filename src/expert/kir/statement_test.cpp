// Each statement prints as the Triton line it stands for: text as it is (its leading spaces counted as
// depth), every load form, stores with and without a mask and widened to a tile, loops over each form of
// range, register tiles zeroed or filled, every form of update and matrix products.
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
  const Statement indented = Statement::Text(0, "    already indented");
  EXPECT_EQ(Print(indented), "    already indented");
  EXPECT_EQ(indented.depth, 1) << "four leading spaces are a level";
  EXPECT_EQ(indented.text, "already indented");
  const Statement continuation = Statement::Text(1, "             cache_modifier=\".cg\")");
  EXPECT_EQ(continuation.depth, 4);
  EXPECT_EQ(Print(continuation), std::string(17, ' ') + "cache_modifier=\".cg\")") << "the odd space kept";
  EXPECT_EQ(Print(Statement::Text(2, "")), "        ");
}

TEST(StatementTest, UpdatesPrintEachForm) {
  EXPECT_EQ(Print(Statement::Sum(2, "acc", "a * tl.trans(b)")), "        acc += a * tl.trans(b)");
  EXPECT_EQ(Print(Statement::Fold(1, "acc0", Combine::kAdd, "tl.where(mask, t, 0.0)")),
            "    acc0 = acc0 + tl.where(mask, t, 0.0)");
  EXPECT_EQ(Print(Statement::Fold(1, "acc0", Combine::kMul, "t")), "    acc0 = acc0 * t");
  EXPECT_EQ(Print(Statement::Fold(1, "acc", Combine::kMax, "t")),
            "    acc = tl.maximum(acc, t, propagate_nan=tl.PropagateNan.ALL)");
  EXPECT_EQ(Print(Statement::FoldMasked(1, "acc1", Combine::kMin, "t", "mask")),
            "    acc1 = tl.where(mask, tl.minimum(acc1, t, propagate_nan=tl.PropagateNan.ALL), acc1)");
  EXPECT_EQ(Print(Statement::FoldMasked(1, "wm0", Combine::kAdd, "wd0 / wn0", "mask")),
            "    wm0 = tl.where(mask, wm0 + wd0 / wn0, wm0)");
  EXPECT_EQ(Print(Statement::Fold(1, "m0", Combine::kTake, "mn0")), "    m0 = mn0");
  const Statement taken = Statement::FoldMasked(1, "acc0v", Combine::kTake, "val0", "take0");
  EXPECT_EQ(Print(taken), "    acc0v = tl.where(take0, val0, acc0v)");
  EXPECT_EQ(taken.update, UpdateForm::kMasked);
  const Statement rescaled = Statement::Rescale(1, "s0", "alpha", "p");
  EXPECT_EQ(Print(rescaled), "    s0 = s0 * alpha + p");
  EXPECT_EQ(rescaled.scale, "alpha");
  EXPECT_TRUE(rescaled.mask.empty());
}

TEST(StatementTest, ReductionsPrintByTheirCombineOrFunction) {
  Reduction sum{{"red0"}, {"acc0"}, Combine::kAdd, "", 1, true};
  EXPECT_EQ(Print(Statement::Reduce(1, sum)), "    red0 = tl.sum(acc0, 1)[:, None]");
  Reduction product{{"red1"}, {"acc1"}, Combine::kMul, "", 1, true};
  EXPECT_EQ(Code(product), "red1 = tl.reduce(acc1, 1, _egg_prod)[:, None]");
  Reduction largest{{"m"}, {"x"}, Combine::kMax, "", 0, false};
  EXPECT_EQ(Code(largest), "m = _egg_max(x, 0)");
  Reduction smallest{{"m"}, {"x"}, Combine::kMin, "", 1, false};
  EXPECT_EQ(Code(smallest), "m = _egg_min(x, 1)");
  Reduction pair{{"redv2", "redi2"}, {"acc2v", "acc2i"}, Combine::kAdd, "_egg_argmax", 1, false};
  const Statement reduced = Statement::Reduce(2, pair);
  EXPECT_EQ(Print(reduced), "        redv2, redi2 = _egg_argmax(acc2v, acc2i, 1)");
  EXPECT_EQ(reduced.kind, Statement::Kind::kReduce);
}

TEST(StatementTest, ProductsPrintTheirOperandsCastAndPrecision) {
  EXPECT_EQ(Code(Product{"a", "b", "", Precision::kTf32x3}), "tl.dot(a, b, input_precision=\"tf32x3\")");
  const Statement accumulated =
      Statement::Accumulate(2, "acc", {"a", "b", ".to(tl.bfloat16)", Precision::kIeee});
  EXPECT_EQ(Print(accumulated),
            "        acc += tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16), input_precision=\"ieee\")");
  EXPECT_EQ(accumulated.kind, Statement::Kind::kUpdate);
  EXPECT_EQ(Print(Statement::Accumulate(2, "acc", {"p", "v", "", Precision::kTf32}, "alpha[:, None]")),
            "        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision=\"tf32\")");
  const Statement scores = Statement::Dot(2, "s", {"q", "kt", "", Precision::kTf32x3});
  EXPECT_EQ(Print(scores), "        s = tl.dot(q, kt, input_precision=\"tf32x3\")");
  EXPECT_EQ(scores.kind, Statement::Kind::kProduct);
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
