// The Python around the kernels: shape tuples, attribute paths and indentation as Python text, and forward's
// guard calls for a static graph and for one with a dynamic batch (_egg_batch, egg_B passed to the guard).
#include "expert/codegen/guard_code.h"

#include <gtest/gtest.h>

#include "expert/ir/test_graphs.h"

namespace egg::expert {
namespace {

using testing::GraphJson;
using testing::Input;
using testing::LoadGraph;
using testing::Meta;
using testing::NodeJson;
using testing::Ref;

// s [] (a 0-d tensor) and x [4, 8] -> add; `settings` adds a module setting to check.
Graph TwoInputs(bool settings) {
  Json ir = GraphJson({Input("s", 0, Meta({})), Input("x", 1, Meta({4, 8}))},
                      {NodeJson("add", "aten.add.Tensor", Json::array({Ref("x"), Ref("s")}), Meta({4, 8}))},
                      {"add"});
  if (settings) {
    ir["settings"] = Json::array({{{"path", "norm.eps"}, {"literal", "1e-05"}}});
  }
  return LoadGraph(ir);
}

TEST(GuardCodeTest, ShapeTuplesArePythonTuples) {
  EXPECT_EQ(ShapeTuple({}), "()");
  EXPECT_EQ(ShapeTuple({5}), "(5,)");
  EXPECT_EQ(ShapeTuple({2, 3}), "(2, 3)");
  EXPECT_EQ(ShapeTuple({0, 1, 2}), "(0, 1, 2)");
}

TEST(GuardCodeTest, AttributePathsReadNonIdentifiersWithGetattr) {
  EXPECT_EQ(AttributePath("weight"), "self.weight");
  EXPECT_EQ(AttributePath("conv.weight"), "self.conv.weight");
  EXPECT_EQ(AttributePath("layers.0.weight"), "getattr(self.layers, '0').weight");
  EXPECT_EQ(AttributePath("blocks.1.2.bias"), "getattr(getattr(self.blocks, '1'), '2').bias");
}

TEST(GuardCodeTest, IndentPadsEveryLineAndEndsIt) {
  EXPECT_EQ(Indent({"a = 1", "return a"}, 0), "a = 1\nreturn a\n");
  EXPECT_EQ(Indent({"a = 1", "if a:", "    return a"}, 2),
            "        a = 1\n        if a:\n            return a\n");
  EXPECT_EQ(Indent({}, 3), "");
}

TEST(GuardCodeTest, AStaticGraphGuardsWithItsInputs) {
  templates::Values values;
  WriteGuardCalls(TwoInputs(false), nullptr, &values);
  EXPECT_EQ(values.text["guard_args"], "s, x");
  EXPECT_EQ(values.text["batch_fn"], "");
  EXPECT_EQ(
      values.text["forward_guard"],
      "        if not _egg_specialized(s, x):\n"
      "            _egg_fell_back(self, \"the inputs are not the shapes, dtypes and strides the kernels were "
      "compiled for\")\n"
      "            return super().forward(s, x)");
  EXPECT_EQ(values.text.count("design_line"), 0U);

  WriteGuardCalls(TwoInputs(true), nullptr, &values);
  EXPECT_EQ(
      values.text["forward_guard"],
      "        if not _egg_specialized(s, x):\n"
      "            _egg_fell_back(self, \"the inputs are not the shapes, dtypes and strides the kernels were "
      "compiled for\")\n"
      "            return super().forward(s, x)\n"
      "        if not _egg_settings_hold(self):\n"
      "            _egg_fell_back(self, \"a setting the kernels hold has another value than at capture\")\n"
      "            return super().forward(s, x)");
}

TEST(GuardCodeTest, ADynamicGraphTakesTheBatchFromTheFirstTensorWithADimension) {
  const Graph graph = TwoInputs(false);
  EXPECT_EQ(BatchInput(graph), "x");
  EXPECT_EQ(ForwardArgs(graph), "s, x");
  const DynamicBatch dynamic{nullptr, {{0, 1, 32, 4}}};
  templates::Values values;
  values.text["design_line"] = "# egg-design: {}";
  WriteGuardCalls(graph, &dynamic, &values);
  EXPECT_EQ(values.text["guard_args"], "egg_B, s, x");
  EXPECT_EQ(values.text["batch_fn"],
            "def _egg_batch(s, x):\n"
            "    \"\"\"The batch of these inputs (dim 0 of x), or None outside the 1..32 the kernels hold "
            "for.\"\"\"\n"
            "    if not isinstance(x, torch.Tensor) or x.dim() == 0:\n"
            "        return None\n"
            "    batch = x.shape[0]\n"
            "    return batch if 1 <= batch <= 32 else None\n"
            "\n"
            "\n");
  EXPECT_EQ(
      values.text["forward_guard"],
      "        egg_B = _egg_batch(s, x)\n"
      "        if egg_B is None:\n"
      "            _egg_fell_back(self, \"the batch is outside the 1..32 the kernels hold for\")\n"
      "            return super().forward(s, x)\n"
      "        if not _egg_specialized(egg_B, s, x):\n"
      "            _egg_fell_back(self, \"the inputs are not the shapes, dtypes and strides the kernels were "
      "compiled for\")\n"
      "            return super().forward(s, x)");
  EXPECT_EQ(
      values.text["design_line"],
      "# egg-design: {}\n"
      "# Dynamic batch: every kernel takes the batch egg_B (dim 0 of each tensor input) as an argument, for "
      "egg_B in\n"
      "# 1..32; other batch sizes run the task's own forward.");

  templates::Values with_settings;
  WriteGuardCalls(TwoInputs(true), &dynamic, &with_settings);
  EXPECT_EQ(with_settings.text["forward_guard"], values.text["forward_guard"] +
                                                     "\n        if not _egg_settings_hold(self):\n"
                                                     "            _egg_fell_back(self, \"a setting the "
                                                     "kernels hold has another value than at capture\")\n"
                                                     "            return super().forward(s, x)");
}

TEST(GuardCodeTest, ADynamicDim1TakesItsSizeFromTheFirstTensorThatHasOne) {
  const Graph graph = TwoInputs(false);  // s is 0-d, x [4, 8]: x's dim 1
  EXPECT_EQ(BatchInput(graph, 1), "x");
  EXPECT_EQ(BatchInput(graph, 2), "");
  const DynamicBatch dynamic{nullptr, {{1, 1, 64, 8}}};
  templates::Values values;
  values.text["design_line"] = "# egg-design: {}";
  WriteGuardCalls(graph, &dynamic, &values);
  EXPECT_EQ(values.text["batch_fn"],
            "def _egg_batch(s, x):\n"
            "    \"\"\"The size of dim 1 of these inputs (dim 1 of x), or None outside the 1..64 the kernels "
            "hold for.\"\"\"\n"
            "    if not isinstance(x, torch.Tensor) or x.dim() <= 1:\n"
            "        return None\n"
            "    batch = x.shape[1]\n"
            "    return batch if 1 <= batch <= 64 else None\n"
            "\n"
            "\n");
  EXPECT_NE(values.text["forward_guard"].find("the size of dim 1 is outside the 1..64 the kernels hold for"),
            std::string::npos);
  EXPECT_NE(values.text["design_line"].find("# Dynamic dim 1: every kernel takes the size egg_B of dim 1"),
            std::string::npos);
}

TEST(GuardCodeTest, SeveralDynamicSizesComeAsATupleUnpackedIntoEggBAndEggC) {
  const Graph graph = TwoInputs(false);  // s is 0-d, x [4, 8]
  const DynamicBatch dynamic{nullptr, {{0, 1, 4, 4}, {1, 1, 64, 8}}};
  templates::Values values;
  values.text["design_line"] = "# egg-design: {}";
  WriteGuardCalls(graph, &dynamic, &values);
  EXPECT_EQ(values.text["guard_args"], "egg_B, egg_C, s, x");
  EXPECT_EQ(values.text["batch_fn"],
            "def _egg_batch(s, x):\n"
            "    \"\"\"The dynamic sizes of these inputs (x.shape[0], x.shape[1]), or None outside the 1..4 "
            "x 1..64 "
            "the kernels hold for.\"\"\"\n"
            "    if not isinstance(x, torch.Tensor) or x.dim() <= 0:\n"
            "        return None\n"
            "    if not isinstance(x, torch.Tensor) or x.dim() <= 1:\n"
            "        return None\n"
            "    sizes = (x.shape[0], x.shape[1],)\n"
            "    return sizes if 1 <= sizes[0] <= 4 and 1 <= sizes[1] <= 64 else None\n"
            "\n"
            "\n");
  EXPECT_EQ(
      values.text["forward_guard"],
      "        egg_sizes = _egg_batch(s, x)\n"
      "        if egg_sizes is None:\n"
      "            _egg_fell_back(self, \"the sizes are outside the 1..4 x 1..64 the kernels hold for\")\n"
      "            return super().forward(s, x)\n"
      "        egg_B, egg_C = egg_sizes\n"
      "        if not _egg_specialized(egg_B, egg_C, s, x):\n"
      "            _egg_fell_back(self, \"the inputs are not the shapes, dtypes and strides the kernels were "
      "compiled for\")\n"
      "            return super().forward(s, x)");
  EXPECT_NE(
      values.text["design_line"].find("# Dynamic sizes: every kernel takes them as arguments, egg_B (dim 0"),
      std::string::npos);
  EXPECT_NE(
      values.text["strides_fn"].find("return all(s == e or n == 1 for s, e, n in zip(x.stride(), strides, "
                                     "x.shape))"),
      std::string::npos)
      << "a size of 1 may keep any stride";
}

TEST(GuardCodeTest, TheGuardChecksEveryTensorInput) {
  EXPECT_EQ(
      Guard(TwoInputs(false)),
      "((isinstance(s, torch.Tensor) and s.shape == () and s.dtype == torch.float32 and s.stride() == () "
      "and s.storage_offset() == 0)\n"
      "            and (isinstance(x, torch.Tensor) and x.shape == (4, 8) and x.dtype == torch.float32 and "
      "x.stride() == (8, 1) and x.storage_offset() == 0))");
}

}  // namespace
}  // namespace egg::expert
