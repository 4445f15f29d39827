// The printer of whole functions and kernels: the signature, the domain's lane variables (64-bit where asked;
// rows with or without their RBLOCK tile), the body, functions two blank lines apart.
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
  function.domain = {Domain::Kind::kFlat, 4096, int64};
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
  function.domain = {Domain::Kind::kRows, 64, false};
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

TEST(KernelTest, ARowBlockFunctionPrintsItsRowsWithoutARowTile) {
  Function function = Relu(false);
  function.constexprs = {"XBLOCK", "SBLOCK"};
  function.domain = {Domain::Kind::kRowBlock, 64, false};
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
