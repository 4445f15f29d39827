// The recurrent kernel's two functions in the kernel IR: parameters named in their own signatures (the
// runtime scalars a launch passes, the constexpr strides), lanes laid out in their bodies, the hand-written
// loads and stores listed by parameter, and the cell's lines per kind.
#include "expert/codegen/recurrent_functions.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "expert/kir/analysis.h"

namespace egg::expert::recurrent {
namespace {

KernelPlan Layer(RecurrentCell cell, DType dtype = DType::kFloat32) {
  KernelPlan kernel;
  kernel.name = "k";
  kernel.kind = KernelKind::kRecurrent;
  kernel.recurrent = RecurrentSpec{};
  kernel.recurrent->cell = cell;
  kernel.recurrent->hidden = 48;
  kernel.recurrent->has_biases = true;
  kernel.recurrent->dtype = dtype;
  kernel.design.precision = Precision::kIeee;
  return kernel;
}

// Whether a text line of `function` at `depth` reads `text`.
bool HasLine(const kir::Function& function, int depth, const std::string& text) {
  return std::any_of(function.body.begin(), function.body.end(), [&](const kir::Statement& statement) {
    return kir::Print(statement) == std::string(static_cast<size_t>(depth) * 4, ' ') + text;
  });
}

PointerParams StepPointers(bool lstm) {
  PointerParams pointers;
  pointers.Add("xp_ptr", ScratchId(0));
  pointers.Add("w_ptr", 3, Access::kLoad);
  pointers.Add("b_ptr", 4, Access::kLoad);
  pointers.Add("h0_ptr", 5, Access::kLoad);
  if (lstm) {
    pointers.Add("c0_ptr", 6, Access::kLoad);
  }
  pointers.Add("out_ptr", 7, Access::kStore);
  pointers.Add("hn_ptr", 8, Access::kStore);
  pointers.Add("sync_ptr", ScratchId(1));
  return pointers;
}

TEST(RecurrentFunctionsTest, PointerParamsListTheLoadedAndStoredPositions) {
  const PointerParams pointers = StepPointers(true);
  EXPECT_EQ(pointers.names.size(), 8U);
  EXPECT_EQ(pointers.values.front(), ScratchId(0));
  EXPECT_EQ(pointers.loads, (std::vector<size_t>{1, 2, 3, 4}));
  EXPECT_EQ(pointers.stores, (std::vector<size_t>{5, 6}));
}

TEST(RecurrentFunctionsTest, TheProjectionNamesItsParametersAndLaysOutItsTile) {
  PointerParams pointers;
  pointers.Add("x_ptr", 0, Access::kLoad);
  pointers.Add("w_ptr", 1, Access::kLoad);
  pointers.Add("b_ptr", 2, Access::kLoad);
  pointers.Add("out_ptr", ScratchId(0), Access::kStore);
  const kir::Function proj = ProjectionFunction(Layer(RecurrentCell::kGru), pointers);
  EXPECT_EQ(proj.name, "k_proj");
  EXPECT_EQ(proj.pointers, 4U);
  EXPECT_EQ(proj.domain.kind, kir::Domain::Kind::kOwnLanes);
  ASSERT_EQ(proj.signature.size(), 4U);
  EXPECT_EQ(proj.signature[0],
            "x_ptr, w_ptr, b_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,");
  EXPECT_EQ(proj.signature[3],
            "                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr");
  EXPECT_EQ(proj.constexprs.size(), 13U);
  EXPECT_EQ(proj.text_loads, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(proj.text_stores, std::vector<size_t>{3});
  EXPECT_EQ(proj.comment.substr(0, proj.comment.find(':')),
            "gru input projection of every time step at once");
  EXPECT_NE(proj.comment.find("\n[K x N] + b_ih, tl.dot input_precision ieee"), std::string::npos);
  EXPECT_TRUE(HasLine(proj, 1, "mindex = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]"));
  EXPECT_TRUE(HasLine(proj, 2, "acc += tl.dot(a, b, input_precision=\"ieee\")"));
  EXPECT_TRUE(HasLine(proj, 1, "acc += tl.load(b_ptr + nindex * B_S, mask=nmask, other=0.0)"));
}

TEST(RecurrentFunctionsTest, TheStepTakesTheLaunchesScalarsAndAnLstmItsCellState) {
  const std::vector<std::pair<std::string, int64_t>> scalars = {{"reverse", 0},   {"h0_offset", 0},
                                                                {"c0_offset", 0}, {"out_column", 0},
                                                                {"hn_offset", 0}, {"sync_offset", 0}};
  const kir::Function step = StepFunction(Layer(RecurrentCell::kLstm), StepPointers(true), scalars);
  EXPECT_EQ(step.name, "k_step");
  EXPECT_EQ(step.domain.kind, kir::Domain::Kind::kOwnLanes);
  ASSERT_EQ(step.signature.size(), 6U);
  EXPECT_EQ(step.signature[0], "xp_ptr, w_ptr, b_ptr, h0_ptr, c0_ptr, out_ptr, hn_ptr, sync_ptr,");
  EXPECT_EQ(step.signature[1],
            "                  reverse, h0_offset, c0_offset, out_column, hn_offset, sync_offset,");
  EXPECT_EQ(step.signature[3],
            "                  H0_SB: tl.constexpr, H0_SH: tl.constexpr, C0_SB: tl.constexpr, C0_SH: "
            "tl.constexpr, ")
      << "the separator it always ended with";
  EXPECT_EQ(std::count(step.constexprs.begin(), step.constexprs.end(), "C0_SB"), 1);
  EXPECT_EQ(step.comment.substr(0, step.comment.find(" (")), "lstm time loop of one layer and direction");
  EXPECT_EQ(std::count(step.comment.begin(), step.comment.end(), '\n'), 6) << "seven lines";
  EXPECT_TRUE(HasLine(step, 3, "acc3 = tl.zeros([BLOCK_B, BLOCK_H], dtype=tl.float32)"));
  const std::vector<kir::Statement> tiles = kir::RegisterTiles(step);
  ASSERT_EQ(tiles.size(), 4U) << "a gate accumulator each, LSTM's four";
  EXPECT_EQ(tiles[3].name, "acc3");
  EXPECT_EQ(tiles[3].shape, (std::vector<std::string>{"BLOCK_B", "BLOCK_H"}));
  EXPECT_TRUE(HasLine(step, 3, "hnew = tl.sigmoid(pre3) * _egg_tanh(c)"));
  EXPECT_TRUE(HasLine(step, 3, "pass")) << "the barrier's spin";
  EXPECT_EQ(step.text_loads, (std::vector<size_t>{1, 2, 3, 4}));
  EXPECT_EQ(step.text_stores, (std::vector<size_t>{5, 6}));
  EXPECT_TRUE(std::none_of(step.body.begin(), step.body.end(), [](const kir::Statement& statement) {
    return statement.kind == kir::Statement::Kind::kLoad || statement.kind == kir::Statement::Kind::kStore;
  })) << "no typed access: the addresses are over constexpr strides";
  // the time loop, the hidden units this program owns at each step, and the K steps of h_prev @ W_hh^T
  std::vector<std::vector<std::string>> nests;
  for (const kir::LoopNest& loop : kir::Loops(step)) {
    nests.push_back(loop.enclosing);
    nests.back().push_back(loop.variable);
  }
  ASSERT_FALSE(nests.empty());
  EXPECT_EQ(nests[0], std::vector<std::string>{"s"});
  EXPECT_NE(std::find(nests.begin(), nests.end(), std::vector<std::string>{"s", "j0", "k0"}), nests.end());
}

TEST(RecurrentFunctionsTest, EachCellComputesItsNewState) {
  const std::vector<std::pair<std::string, int64_t>> scalars = {{"reverse", 0}};
  const kir::Function gru = StepFunction(Layer(RecurrentCell::kGru), StepPointers(false), scalars);
  EXPECT_TRUE(HasLine(gru, 3, "x2 = tl.load(xpointer + 2 * HIDDEN, mask=omask, other=0.0)"));
  EXPECT_TRUE(HasLine(gru, 3, "hnew = (1.0 - z) * n + z * hprev"));
  EXPECT_EQ(gru.signature[3], "                  H0_SB: tl.constexpr, H0_SH: tl.constexpr, ");
  const kir::Function relu = StepFunction(Layer(RecurrentCell::kRnnRelu), StepPointers(false), scalars);
  EXPECT_TRUE(HasLine(relu, 3, "hnew = tl.where(pre0 < 0, 0.0, pre0)"));
  EXPECT_FALSE(HasLine(relu, 3, "acc1 = tl.zeros([BLOCK_B, BLOCK_H], dtype=tl.float32)")) << "one gate";
  const kir::Function tanh =
      StepFunction(Layer(RecurrentCell::kRnnTanh, DType::kBFloat16), StepPointers(false), scalars);
  EXPECT_TRUE(HasLine(tanh, 3, "hnew = _egg_tanh(pre0)"));
  EXPECT_TRUE(
      HasLine(tanh, 3,
              "tl.store(hn_ptr + hn_offset + bindex * HIDDEN + jindex, hnew.to(hn_ptr.dtype.element_ty), "
              "mask=omask & last)"))
      << "a half layer stores in its type";
}

}  // namespace
}  // namespace egg::expert::recurrent
