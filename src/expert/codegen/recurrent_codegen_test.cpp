// Recurrent layer stacks: per layer and direction an input-projection GEMM into scratch and a time loop,
// layers chained through two alternating scratch buffers, the last writing the graph's output (batch-first
// strides where the module is), h_n and c_n written where stored, per-direction runtime scalars, step
// counters per batch block, and the gates' accumulators and pre-activations of each cell.
#include <gtest/gtest.h>

#include "expert/codegen/kernel_codegen.h"
#include "expert/codegen/test_kernels.h"
#include "expert/ir/test_graphs.h"
#include "expert/kir/analysis.h"

namespace egg::expert {
namespace {

using testing::Count;

using testing::Has;

// The plan's recurrent kernel, written with its planned design (BLOCK_B `xblock` where not 0).
KernelSource WriteRecurrent(const Graph& graph, KernelPlan* planned = nullptr, int64_t xblock = 0) {
  const Plan plan = MakePlan(graph, {});
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    if (plan.kernels[k].kind != KernelKind::kRecurrent) {
      continue;
    }
    KernelPlan kernel = plan.kernels[k];
    if (xblock != 0) {
      kernel.design.xblock = xblock;
    }
    if (planned != nullptr) {
      *planned = kernel;
    }
    return testing::GenerateWithDenseStores(graph, kernel, plan.memory_before[k]);
  }
  ADD_FAILURE() << "no recurrent kernel planned";
  return {};
}

// The plan's recurrent kernel lowered to the kernel IR with its planned design (`planned`: that kernel).
kir::Kernel LowerRecurrent(const Graph& graph, KernelPlan* planned) {
  const Plan plan = MakePlan(graph, {});
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    if (plan.kernels[k].kind == KernelKind::kRecurrent) {
      *planned = plan.kernels[k];
      return RecurrentProgram(graph, *planned, plan.memory_before[k], testing::DenseStores(graph, *planned));
    }
  }
  ADD_FAILURE() << "no recurrent kernel planned";
  return {};
}

// What the template writer reported it loaded: the input, every layer's weights and biases, the initial
// states.
std::set<int> Inputs(const RecurrentSpec& spec) {
  std::set<int> values = {spec.input, spec.h0};
  if (spec.cell == RecurrentCell::kLstm) {
    values.insert(spec.c0);
  }
  for (int64_t layer = 0; layer < spec.layers; ++layer) {
    for (int64_t direction = 0; direction < spec.Directions(); ++direction) {
      for (int param : spec.LayerParams(layer, direction)) {
        if (param >= 0) {
          values.insert(param);
        }
      }
    }
  }
  return values;
}

int64_t Scalar(const KernelLaunch& launch, const std::string& name) {
  for (const auto& [key, value] : launch.scalars) {
    if (key == name) {
      return value;
    }
  }
  ADD_FAILURE() << name << " not among " << launch.function << "'s scalars";
  return -1;
}

// 3_42: a 6-layer bidirectional GRU, batch 10, 64 steps, 32 inputs, hidden 48; only h_n is returned.
Graph Gru() { return testing::Fixture("level3_42_GRUBidirectionalHidden"); }

TEST(RecurrentCodegenTest, EachLayerAndDirectionProjectsThenLoopsOverTime) {
  KernelPlan kernel;
  const KernelSource source = WriteRecurrent(Gru(), &kernel);
  ASSERT_TRUE(kernel.recurrent.has_value());
  ASSERT_EQ(source.launches.size(), 6U * 2U * 2U);
  for (size_t i = 0; i < source.launches.size(); ++i) {
    EXPECT_EQ(source.launches[i].function, source.name + (i % 2 == 0 ? "_proj" : "_step")) << i;
  }
  // the projection: every (step, batch) row x the 3 gates of 48 units, K the layer's inputs
  const KernelLaunch& first = source.launches[0];
  EXPECT_EQ(first.grid, "(triton.cdiv(640, 64), triton.cdiv(144, 64))");
  EXPECT_EQ(first.constexprs.at("M"), 640);
  EXPECT_EQ(first.constexprs.at("N"), 144);
  EXPECT_EQ(first.constexprs.at("K"), 32) << "layer 0 reads the input's 32 features";
  EXPECT_EQ(source.launches[4].constexprs.at("K"), 96) << "later layers read both directions' 48";
  EXPECT_EQ(first.pointers.front(), kernel.recurrent->input);
  EXPECT_EQ(first.pointers.back(), ScratchId(0)) << "into the projection buffer";
  EXPECT_EQ(source.launches[1].pointers.front(), ScratchId(0)) << "the time loop reads it back";
  // the step: one batch block of 16 over 10 rows, 3 programs of 16 of the 48 units
  EXPECT_EQ(source.launches[1].grid, "(1, 1 if EGG_INTERPRET.value else 3)");
  EXPECT_EQ(source.launches[1].constexprs.at("BLOCK_B"), kernel.design.xblock);
  EXPECT_EQ(source.launches[1].constexprs.at("SEQ"), 64);
  EXPECT_EQ(source.launches[1].constexprs.at("HIDDEN"), 48);
  EXPECT_EQ(source.computed, (std::set<int>{kernel.recurrent->node}));
}

TEST(RecurrentCodegenTest, TwoFunctionsNameTheirOwnParametersAndLayOutTheirOwnLanes) {
  KernelPlan kernel;
  const kir::Kernel program = LowerRecurrent(Gru(), &kernel);
  ASSERT_EQ(program.functions.size(), 2U);
  const kir::Function& proj = program.functions[0];
  const kir::Function& step = program.functions[1];
  EXPECT_EQ(proj.name, kernel.name + "_proj");
  EXPECT_EQ(step.name, kernel.name + "_step");
  for (const kir::Function* function : {&proj, &step}) {
    EXPECT_EQ(function->domain.kind, kir::Domain::Kind::kOwnLanes) << function->name;
    for (const KernelLaunch& launch : program.launches) {
      if (launch.function == function->name) {
        EXPECT_EQ(launch.pointers.size(), function->pointers) << function->name;
      }
    }
  }
  // x_ptr, w_ptr, b_ptr read; out_ptr the projection written
  EXPECT_EQ(proj.signature.size(), 4U);
  EXPECT_EQ(proj.signature[0].substr(0, proj.signature[0].find(" M:")), "x_ptr, w_ptr, b_ptr, out_ptr,");
  EXPECT_EQ(proj.text_loads, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(proj.text_stores, std::vector<size_t>{3});
  EXPECT_EQ(proj.constexprs.front(), "M");
  EXPECT_EQ(proj.constexprs.size(), 13U);
  // xp_ptr (its own projection), w_ptr, b_ptr, h0_ptr read, out_ptr and hn_ptr written, sync_ptr counted
  EXPECT_EQ(step.signature.size(), 6U);
  EXPECT_EQ(step.signature[0], "xp_ptr, w_ptr, b_ptr, h0_ptr, out_ptr, hn_ptr, sync_ptr,");
  EXPECT_NE(step.signature[1].find("reverse, h0_offset, out_column, hn_offset, sync_offset,"),
            std::string::npos);
  EXPECT_EQ(step.text_loads, (std::vector<size_t>{1, 2, 3}));
  EXPECT_EQ(step.text_stores, (std::vector<size_t>{4, 5}));
  EXPECT_EQ(program.helpers, std::vector<Helper>{Helper::kTanh});
  EXPECT_EQ(program.computed, (std::set<int>{kernel.recurrent->node}));
}

TEST(RecurrentCodegenTest, ItReadsItsInputWeightsAndStatesAndWritesWhatThePlanStores) {
  for (const char* fixture : {"level3_42_GRUBidirectionalHidden", "level3_38_LSTMBidirectional"}) {
    const Graph graph = testing::Fixture(fixture);
    KernelPlan kernel;
    const kir::Kernel program = LowerRecurrent(graph, &kernel);
    ASSERT_TRUE(kernel.recurrent.has_value());
    // the hand-written loads through their launches' pointers: layer 0's input, not later layers' scratch
    EXPECT_EQ(kir::Reads(program), Inputs(*kernel.recurrent)) << fixture;
    EXPECT_EQ(kir::Writes(program), std::set<int>(kernel.stores.begin(), kernel.stores.end())) << fixture;
    EXPECT_FALSE(kernel.stores.empty()) << fixture;
  }
}

TEST(RecurrentCodegenTest, LayersChainThroughAlternatingBuffers) {
  const KernelSource source = WriteRecurrent(Gru());
  ASSERT_EQ(source.launches.size(), 24U);
  // step pointers: projection, w_hh, b_hh, h0, output, h_n, step counters
  auto output_of = [&](size_t layer, size_t direction) {
    return source.launches[4 * layer + 2 * direction + 1].pointers.at(4);
  };
  for (size_t layer = 0; layer < 6; ++layer) {
    EXPECT_EQ(output_of(layer, 0), output_of(layer, 1))
        << "both directions write one output, layer " << layer;
    if (layer > 0) {
      EXPECT_EQ(source.launches[4 * layer].pointers.front(), output_of(layer - 1, 0))
          << "layer " << layer << " reads the layer before";
      EXPECT_NE(output_of(layer, 0), output_of(layer - 1, 0)) << "and writes the other buffer";
    }
  }
  EXPECT_EQ(output_of(0, 0), ScratchId(1));
  EXPECT_EQ(output_of(1, 0), ScratchId(2));
  EXPECT_EQ(output_of(5, 0), ScratchId(3)) << "the sequence output is not returned: a scratch of its own";
  // projection, two layer buffers, the unreturned output, then the step counters
  ASSERT_EQ(source.scratch.size(), 5U);
  EXPECT_EQ(source.scratch[0].numel, 640 * 3 * 48);
  EXPECT_EQ(source.scratch[1].numel, 640 * 96);
  EXPECT_EQ(source.scratch[3].numel, 640 * 96);
  EXPECT_EQ(source.scratch[4].numel, 6 * 2 * 1) << "a counter per layer, direction and batch block";
  EXPECT_EQ(source.scratch[4].dtype, DType::kInt32);
  EXPECT_TRUE(source.scratch[4].zeroed);
  EXPECT_FALSE(source.scratch[0].zeroed);
}

TEST(RecurrentCodegenTest, DirectionsTakeTheirOwnOffsetsAsRuntimeScalars) {
  const KernelSource source = WriteRecurrent(Gru());
  ASSERT_EQ(source.launches.size(), 24U);
  for (int64_t layer = 0; layer < 6; ++layer) {
    for (int64_t direction = 0; direction < 2; ++direction) {
      const KernelLaunch& step = source.launches[static_cast<size_t>(4 * layer + 2 * direction + 1)];
      const int64_t state = layer * 2 + direction;
      EXPECT_EQ(Scalar(step, "reverse"), direction);
      EXPECT_EQ(Scalar(step, "out_column"), direction * 48) << "the backward half of the features";
      EXPECT_EQ(Scalar(step, "h0_offset"), state * 10 * 48);
      EXPECT_EQ(Scalar(step, "hn_offset"), state * 10 * 48);
      EXPECT_EQ(Scalar(step, "sync_offset"), state);
    }
  }
  EXPECT_EQ(source.launches[1].pointers.at(5), source.launches[23].pointers.at(5)) << "one h_n for all";
}

TEST(RecurrentCodegenTest, SmallerBatchBlocksMeanMoreCountersAndProgramRows) {
  const KernelSource source = WriteRecurrent(Gru(), nullptr, 4);  // 10 rows in blocks of 4: 3 blocks
  ASSERT_EQ(source.launches.size(), 24U);
  EXPECT_EQ(source.launches[1].grid, "(3, 1 if EGG_INTERPRET.value else 3)");
  EXPECT_EQ(Scalar(source.launches[3], "sync_offset"), 3) << "the backward direction's counters follow";
  ASSERT_FALSE(source.scratch.empty());
  EXPECT_EQ(source.scratch.back().numel, 6 * 2 * 3);
}

TEST(RecurrentCodegenTest, AGruKeepsTheHiddenSideOfItsNewGateApart) {
  const KernelSource source = WriteRecurrent(Gru());
  EXPECT_TRUE(Has(source.code, "acc2 = tl.zeros([BLOCK_B, BLOCK_H], dtype=tl.float32)")) << source.code;
  EXPECT_FALSE(Has(source.code, "acc3")) << "three gates: " << source.code;
  EXPECT_TRUE(
      Has(source.code, "acc2 += tl.dot(h, tl.load(wpointer + 2 * HIDDEN * W_SN, mask=wmask, other=0.0)"))
      << source.code;
  EXPECT_TRUE(Has(source.code, "x2 = tl.load(xpointer + 2 * HIDDEN, mask=omask, other=0.0)")) << source.code;
  EXPECT_TRUE(
      Has(source.code, "pre2 = acc2 + tl.load(b_ptr + (2 * HIDDEN + jindex) * B_S, mask=jmask, other=0.0)"))
      << source.code;
  EXPECT_EQ(Count(source.code, "input_precision=\"ieee\""), 3U + 1U)
      << "three gate products and the projection";
}

TEST(RecurrentCodegenTest, AnLstmCarriesItsCellStateAndReturnsTheOutputBatchFirst) {
  // 3_38: a 6-layer bidirectional batch-first LSTM (batch 10, 64 steps, hidden 48) whose output the fc reads
  KernelPlan kernel;
  const KernelSource source = WriteRecurrent(testing::Fixture("level3_38_LSTMBidirectional"), &kernel);
  ASSERT_TRUE(kernel.recurrent.has_value());
  ASSERT_EQ(source.launches.size(), 24U);
  const KernelLaunch& first_step = source.launches[1];
  EXPECT_EQ(source.launches[0].constexprs.at("N"), 4 * 48) << "four gates";
  EXPECT_EQ(source.launches[0].constexprs.at("X_SB"), 64 * 32) << "batch-first input: a row per batch";
  EXPECT_EQ(source.launches[0].constexprs.at("X_ST"), 32);
  EXPECT_EQ(first_step.pointers.at(4), kernel.recurrent->c0);
  EXPECT_EQ(Scalar(source.launches[3], "c0_offset"), 10 * 48);
  EXPECT_EQ(first_step.constexprs.count("C0_SB"), 1U);
  const KernelLaunch& last_step = source.launches[23];
  EXPECT_EQ(last_step.pointers.at(5), kernel.recurrent->outputs[0]) << "the last layer writes the output";
  EXPECT_EQ(last_step.constexprs.at("O_ST"), 96) << "batch-first output: steps are rows of 96";
  EXPECT_EQ(last_step.constexprs.at("O_SB"), 64 * 96);
  EXPECT_EQ(first_step.constexprs.at("O_ST"), 10 * 96) << "inner layers write [seq, batch, features]";
  // projection, two layer buffers, h_n and c_n (not returned), the cell buffer, the counters
  ASSERT_EQ(source.scratch.size(), 7U);
  EXPECT_EQ(source.scratch[0].numel, 640 * 4 * 48);
  EXPECT_EQ(source.scratch[5].numel, 2 * 10 * 48) << "the cell state, double-buffered";
  EXPECT_TRUE(source.scratch[6].zeroed);
  EXPECT_TRUE(Has(source.code, "acc3 = tl.zeros([BLOCK_B, BLOCK_H], dtype=tl.float32)")) << source.code;
  EXPECT_TRUE(Has(source.code, "pre3 = tl.load(xpointer + 3 * HIDDEN, mask=omask, other=0.0) + acc3"))
      << source.code;
}

TEST(RecurrentCodegenTest, AHalfLayerFeedsTheTensorCoresInItsTypeAndStoresIntoIt) {
  const Json fixture = testing::FixtureJson("level3_38_LSTMBidirectional");
  const std::string half =
      WriteRecurrent(testing::LoadGraph(testing::Retyped(fixture, "float32", "bfloat16"))).code;
  // the projection's and every gate's product cast for the tensor cores (float32 in the interpreter)
  EXPECT_EQ(Count(half, "a.to(EGG_BF16_DOT), b.to(EGG_BF16_DOT)"), 1U) << half;
  EXPECT_EQ(Count(half, "tl.dot(h.to(EGG_BF16_DOT), tl.load(wpointer"), 4U) << "four LSTM gates";
  EXPECT_TRUE(Has(half, "hnew.to(out_ptr.dtype.element_ty)"));
  EXPECT_TRUE(Has(half, "c.to(cn_ptr.dtype.element_ty)"));
  const std::string exact = WriteRecurrent(testing::LoadGraph(fixture)).code;
  EXPECT_FALSE(Has(exact, "EGG_BF16_DOT"));
  EXPECT_FALSE(Has(exact, "element_ty")) << "float32 layers store as they compute";
}

}  // namespace
}  // namespace egg::expert
