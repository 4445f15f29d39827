// The printer of whole functions and kernels: the signature (or the lines a function writes as its own), the
// domain's lane variables (64-bit where asked; rows with or without their RBLOCK tile; none for a body that
// lays out its own), the body, functions two blank lines apart.
#include "expert/kir/kernel.h"

#include <gtest/gtest.h>

namespace egg::expert::kir {
namespace {

Function Relu(bool int64) {
  Function function;
  function.name = "egg_k0_relu";
  function.pointers = 2;
  function.constexprs = {"XBLOCK"};
  function.comment = "pointwise over 4096 elements: relu";
  function.domain = {Domain::Kind::kFlat, 4096, int64, 0, {}, {}};
  function.body = {Statement::Text(1, "tmp0 = tl.load(ptr0 + (xindex), xmask, other=0.0)"),
                   Statement::Text(1, "tl.store(ptr1 + (xindex), tl.maximum(tmp0, 0.0), xmask)")};
  return function;
}

TEST(KernelTest, AFlatFunctionPrintsItsSignatureLanesAndBody) {
  EXPECT_EQ(Print(Relu(false)),
            "@triton.jit\n"
            "def egg_k0_relu(ptr0, ptr1, XBLOCK: tl.constexpr):\n"
            "    # pointwise over 4096 elements: relu\n"
            "    xoffset = tl.program_id(0) * XBLOCK\n"
            "    xindex = xoffset + tl.arange(0, XBLOCK)\n"
            "    xmask = xindex < 4096\n"
            "    tmp0 = tl.load(ptr0 + (xindex), xmask, other=0.0)\n"
            "    tl.store(ptr1 + (xindex), tl.maximum(tmp0, 0.0), xmask)\n");
  EXPECT_NE(Print(Relu(true)).find("xoffset = tl.program_id(0).to(tl.int64) * XBLOCK\n"), std::string::npos);
}

TEST(KernelTest, ARowsFunctionPrintsItsRowsAndItsRowTile) {
  Function function = Relu(false);
  function.constexprs = {"XBLOCK", "RBLOCK"};
  function.domain = {Domain::Kind::kRows, 64, false, 0, {}, {}};
  function.body.clear();
  EXPECT_EQ(Print(function),
            "@triton.jit\n"
            "def egg_k0_relu(ptr0, ptr1, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):\n"
            "    # pointwise over 4096 elements: relu\n"
            "    xoffset = tl.program_id(0) * XBLOCK\n"
            "    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]\n"
            "    xmask = xindex < 64\n"
            "    rbase = tl.arange(0, RBLOCK)[None, :]\n");
}

TEST(KernelTest, ATilesFunctionPrintsItsGroupedTileOrderAndMasks) {
  Function function = Relu(false);
  function.constexprs = {"BLOCK_M", "BLOCK_N", "BLOCK_K"};
  function.comment = "1 x [100 x 64] @ [64 x 48]: mm\nsecond line";
  function.domain.kind = Domain::Kind::kTiles;
  function.domain.size = 100;
  function.domain.columns = 48;
  function.domain.tiles = {false, 4, false, 4, 8};
  function.body.clear();
  EXPECT_EQ(
      Print(function),
      "@triton.jit\n"
      "def egg_k0_relu(ptr0, ptr1, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):\n"
      "    # 1 x [100 x 64] @ [64 x 48]: mm\n"
      "    # second line\n"
      "    # grouped tile order: 4 tile rows advance together along N, so their A rows and B columns stay "
      "in L2\n"
      "    tile = tl.program_id(0)\n"
      "    group = tile // 8\n"
      "    group_rows = tl.minimum(4 - group * 4, 4)\n"
      "    tile_m = group * 4 + (tile % 8) % group_rows\n"
      "    tile_n = (tile % 8) // group_rows\n"
      "    mindex = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]\n"
      "    nindex = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]\n"
      "    mmask = mindex < 100\n"
      "    nmask = nindex < 48\n"
      "    omask = mmask & nmask\n");
  // a batch along the grid's second axis, 64-bit offsets, M known only at run time
  function.domain.int64 = true;
  function.domain.tiles.batched = true;
  function.domain.tiles.runtime_rows = true;
  const std::string code = Print(function);
  EXPECT_NE(code.find("    group_rows = tl.minimum(tl.cdiv(100, BLOCK_M) - group * 4, 4)\n"),
            std::string::npos)
      << code;
  EXPECT_NE(code.find("    bindex = tl.program_id(1).to(tl.int64)\n"), std::string::npos) << code;
  EXPECT_NE(code.find("    mindex = tile_m.to(tl.int64) * BLOCK_M"), std::string::npos) << code;
}

TEST(KernelTest, APanelsFunctionPrintsItsTwoAxes) {
  Function function = Relu(true);
  function.constexprs = {"BLOCK_P", "BLOCK_C"};
  function.domain.kind = Domain::Kind::kPanels;
  function.domain.size = 4096;
  function.domain.columns = 64;
  function.body.clear();
  const std::string code = Print(function);
  EXPECT_NE(
      code.find("    pindex = tl.program_id(0).to(tl.int64) * BLOCK_P + tl.arange(0, BLOCK_P)[:, None]\n"
                "    cindex = tl.program_id(1).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)[None, :]\n"
                "    pmask = pindex < 4096\n"
                "    cmask = cindex < 64\n"
                "    mask = pmask & cmask\n"),
      std::string::npos)
      << code;
}

TEST(KernelTest, ARowBlockFunctionPrintsItsRowsWithoutARowTile) {
  Function function = Relu(false);
  function.constexprs = {"XBLOCK", "SBLOCK"};
  function.domain = {Domain::Kind::kRowBlock, 64, false, 0, {}, {}};
  function.body = {Statement::Text(1, "sindex = tl.arange(0, SBLOCK)[None, :]")};
  EXPECT_EQ(Print(function),
            "@triton.jit\n"
            "def egg_k0_relu(ptr0, ptr1, XBLOCK: tl.constexpr, SBLOCK: tl.constexpr):\n"
            "    # pointwise over 4096 elements: relu\n"
            "    xoffset = tl.program_id(0) * XBLOCK\n"
            "    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]\n"
            "    xmask = xindex < 64\n"
            "    sindex = tl.arange(0, SBLOCK)[None, :]\n");
}

TEST(KernelTest, AQueryBlocksFunctionPrintsTheBatchQueryRowsAndHeadDims) {
  Function function = Relu(false);
  function.constexprs = {"BLOCK_M", "BLOCK_N"};
  function.domain.kind = Domain::Kind::kQueryBlocks;
  function.domain.size = 100;
  function.domain.heads = {40, 64, 24, 32};
  function.body.clear();
  EXPECT_EQ(Print(function),
            "@triton.jit\n"
            "def egg_k0_relu(ptr0, ptr1, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):\n"
            "    # pointwise over 4096 elements: relu\n"
            "    bindex = tl.program_id(1)\n"
            "    mindex = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]\n"
            "    mmask = mindex < 100\n"
            "    dqindex = tl.arange(0, 64)[None, :]\n"
            "    dqmask = dqindex < 40\n"
            "    dkindex = tl.arange(0, 64)[:, None]\n"
            "    dkmask = dkindex < 40\n"
            "    dvindex = tl.arange(0, 32)[None, :]\n"
            "    dvmask = dvindex < 24\n"
            "    omask = mmask & dvmask\n");
  function.domain.int64 = true;
  const std::string code = Print(function);
  EXPECT_NE(code.find("    bindex = tl.program_id(1).to(tl.int64)\n"
                      "    mindex = tl.program_id(0).to(tl.int64) * BLOCK_M"),
            std::string::npos)
      << code;
}

TEST(KernelTest, AFunctionWithItsOwnLanesAndSignaturePrintsThemAsWritten) {
  Function function = Relu(false);
  function.signature = {"x_ptr, out_ptr,", "      reverse, N: tl.constexpr"};
  function.domain.kind = Domain::Kind::kOwnLanes;
  function.body = {Statement::Text(1, "nindex = tl.arange(0, N)")};
  EXPECT_EQ(Print(function),
            "@triton.jit\n"
            "def egg_k0_relu(x_ptr, out_ptr,\n"
            "      reverse, N: tl.constexpr):\n"
            "    # pointwise over 4096 elements: relu\n"
            "    nindex = tl.arange(0, N)\n");
}

TEST(KernelTest, AKernelPrintsItsFunctionsApart) {
  Kernel kernel;
  kernel.functions = {Relu(false), Relu(false)};
  kernel.functions[1].name = "egg_k0_relu_again";
  const std::string code = Print(kernel);
  EXPECT_NE(code.find("xmask)\n\n\n@triton.jit\ndef egg_k0_relu_again("), std::string::npos) << code;
  EXPECT_EQ(Print(Kernel{}), "");
}

}  // namespace
}  // namespace egg::expert::kir
