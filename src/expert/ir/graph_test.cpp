// The graph IR's edge: ParseGraph builds values, users and producers from the worker's JSON, and refuses a
// malformed document with a one-line reason; tensor metadata helpers.
#include "expert/ir/graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "expert/ir/test_graphs.h"

namespace egg::expert {
namespace {

using testing::Fixture;
using testing::FixtureJson;
using ::testing::HasSubstr;

Json Meta(std::vector<int64_t> shape, const std::string& dtype = "float32") {
  return {{"shape", shape}, {"stride", ContiguousStrides(shape)}, {"offset", 0}, {"dtype", dtype}};
}

// x [4, 8] -> relu -> mul by the buffer `scale` [8]; returns the product.
Json SmallIr() {
  return {{"format", "egg-graph"},
          {"version", 1},
          {"torch", "test"},
          {"inputs", {{{"name", "x"}, {"position", 0}, {"kind", "tensor"}, {"meta", Meta({4, 8})}}}},
          {"state", {{{"name", "p_scale"}, {"kind", "buffer"}, {"target", "scale"}, {"meta", Meta({8})}}}},
          {"nodes",
           {{{"name", "relu"},
             {"op", "aten.relu.default"},
             {"args", {{{"node", "x"}}}},
             {"kwargs", Json::object()},
             {"meta", Meta({4, 8})}},
            {{"name", "mul"},
             {"op", "aten.mul.Tensor"},
             {"args", {{{"node", "relu"}}, {{"node", "p_scale"}}}},
             {"kwargs", Json::object()},
             {"meta", Meta({4, 8})}}}},
          {"outputs", {{{"node", "mul"}}}},
          {"settings", {{{"path", "eps"}, {"literal", "1e-05"}}}},
          {"returns", "tensor"}};
}

std::string Problem(const Json& ir) {
  const ParsedGraph parsed = ParseGraph(ir);
  EXPECT_FALSE(parsed.graph.has_value());
  return parsed.problem;
}

TEST(GraphTest, ParsesCapturedGraphs) {
  const Graph graph = Fixture("level2_1_Conv2D_ReLU_BiasAdd");
  ASSERT_EQ(graph.nodes.size(), 3U);
  EXPECT_EQ(graph.nodes[0].op, "aten.convolution.default");
  EXPECT_EQ(graph.Inputs().size(), 1U);
  const auto state = std::count_if(graph.values.begin(), graph.values.end(),
                                   [](const Value& v) { return v.kind == ValueKind::kState; });
  EXPECT_EQ(state, 3);
  EXPECT_EQ(graph.outputs.size(), 1U);
}

TEST(GraphTest, RejectsMalformedCapturedDocuments) {
  EXPECT_FALSE(ParseGraph(Json::object()).graph);
  Json ir = FixtureJson("level1_23_Softmax");
  ir["nodes"][1]["args"][0] = Json{{"node", "nowhere"}};
  const ParsedGraph parsed = ParseGraph(ir);
  EXPECT_FALSE(parsed.graph);
  EXPECT_NE(parsed.problem.find("unknown value nowhere"), std::string::npos);
  ir = FixtureJson("level1_23_Softmax");
  ir["version"] = 99;
  EXPECT_FALSE(ParseGraph(ir).graph);
}

TEST(GraphTest, ParsesValuesUsersProducersAndSettings) {
  const Graph graph = testing::LoadGraph(SmallIr());
  ASSERT_EQ(graph.values.size(), 4U);
  EXPECT_EQ(graph.Inputs(), std::vector<int>{0});
  const Value& scale = graph.values[1];
  EXPECT_EQ(scale.kind, ValueKind::kState);
  EXPECT_EQ(scale.state_kind, "buffer");
  EXPECT_EQ(scale.target, "scale");
  ASSERT_EQ(graph.nodes.size(), 2U);
  const Node& mul = graph.nodes[1];
  EXPECT_EQ(mul.op, "aten.mul.Tensor");
  EXPECT_EQ(graph.ValueOf(mul.args[0]).name, "relu");
  EXPECT_EQ(graph.values[0].users, std::vector<int>{0}) << "x is read by relu";
  EXPECT_EQ(scale.users, std::vector<int>{1});
  EXPECT_EQ(graph.Producer(mul.value), &mul);
  EXPECT_EQ(graph.Producer(0), nullptr) << "an input has no producer";
  ASSERT_EQ(graph.outputs.size(), 1U);
  EXPECT_EQ(graph.ValueOf(graph.outputs[0]).name, "mul");
  ASSERT_EQ(graph.settings.size(), 1U);
  EXPECT_EQ(graph.settings[0].literal, "1e-05");
  EXPECT_EQ(graph.torch_version, "test");
}

TEST(GraphTest, MalformedDocumentsGetAOneLineReason) {
  EXPECT_THAT(Problem(Json::array()), HasSubstr("not an egg-graph document"));
  Json ir = SmallIr();
  ir["version"] = 99;
  EXPECT_THAT(Problem(ir), HasSubstr("unsupported egg-graph version"));
  ir = SmallIr();
  ir.erase("nodes");
  EXPECT_THAT(Problem(ir), HasSubstr("missing field 'nodes'"));
  ir = SmallIr();
  ir["nodes"][1]["args"][1] = {{"node", "nowhere"}};
  EXPECT_THAT(Problem(ir), HasSubstr("reference to unknown value nowhere"));
  ir = SmallIr();
  ir["state"][0]["name"] = "x";
  EXPECT_THAT(Problem(ir), HasSubstr("duplicate value name x"));
  ir = SmallIr();
  ir["inputs"][0]["meta"]["dtype"] = "complex64";
  EXPECT_THAT(Problem(ir), HasSubstr("unsupported dtype complex64"));
  ir = SmallIr();
  ir["inputs"][0]["meta"]["stride"] = {1};
  EXPECT_THAT(Problem(ir), HasSubstr("shape and stride differ in rank"));
  ir = SmallIr();
  ir["outputs"] = {3};
  EXPECT_THAT(Problem(ir), HasSubstr("a graph output is not a tensor"));
  for (const std::string& problem : {Problem(Json::array()), Problem(ir)}) {
    EXPECT_EQ(problem.find('\n'), std::string::npos) << problem;
    EXPECT_EQ(problem.rfind("bad graph IR: ", 0), 0U) << problem;
  }
}

TEST(GraphTest, TensorMetaSpansAndLayouts) {
  TensorMeta meta;
  meta.shape = {4, 8};
  meta.stride = {1, 4};  // a transposed view of a [8, 4] tensor
  EXPECT_EQ(meta.Numel(), 32);
  EXPECT_FALSE(meta.IsContiguous());
  EXPECT_EQ(meta.StorageSpan(), 32);
  const TensorMeta dense = DenseLayout(meta);
  EXPECT_EQ(dense.stride, (std::vector<int64_t>{8, 1}));
  EXPECT_TRUE(dense.IsContiguous());
  meta.stride = {0, 1};  // a broadcast row
  EXPECT_EQ(meta.StorageSpan(), 8);
  meta.offset = 5;
  EXPECT_EQ(meta.StorageSpan(), 13);
  EXPECT_EQ(ContiguousStrides({2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(Product({2, 3, 4}), 24);
  EXPECT_EQ(NextPowerOfTwo(1), 1);
  EXPECT_EQ(NextPowerOfTwo(17), 32);
  EXPECT_EQ(NextPowerOfTwo(64), 64);
}

TEST(GraphTest, DTypesRoundTripTheirNames) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt64,
                      DType::kInt32, DType::kInt16, DType::kInt8, DType::kUInt8, DType::kBool}) {
    EXPECT_EQ(ParseDType(DTypeName(dtype)), dtype) << DTypeName(dtype);
    EXPECT_EQ(TorchDType(dtype), "torch." + DTypeName(dtype));
  }
  EXPECT_EQ(ParseDType("complex64"), std::nullopt);
  EXPECT_EQ(TritonDType(DType::kBFloat16), "tl.bfloat16");
  EXPECT_EQ(DTypeBytes(DType::kBFloat16), 2);
  EXPECT_EQ(DTypeBytes(DType::kInt64), 8);
  EXPECT_TRUE(IsFloating(DType::kFloat16));
  EXPECT_FALSE(IsFloating(DType::kInt32));
}

// x [B, 8] -> view as [B*8] -> relu, for B in 1..16 (the worker's captured example: 4). A size that depends
// on the batch is the linear form {"sym": [a, d]}.
Json DynamicIr() {
  const Json b = {{"sym", {1, 0}}};
  const Json b8 = {{"sym", {8, 0}}};
  auto meta = [](const Json& shape, const Json& stride) {
    return Json{{"shape", shape}, {"stride", stride}, {"offset", 0}, {"dtype", "float32"}};
  };
  return {
      {"format", "egg-graph"},
      {"version", 1},
      {"torch", "test"},
      {"dynamic", {{"dim", "batch"}, {"min", 1}, {"max", 16}, {"example", 4}}},
      {"inputs",
       {{{"name", "x"}, {"position", 0}, {"kind", "tensor"}, {"meta", meta(Json::array({b, 8}), {8, 1})}}}},
      {"state", Json::array()},
      {"nodes",
       {{{"name", "view"},
         {"op", "aten.view.default"},
         {"args", {{{"node", "x"}}, Json::array({b8})}},
         {"kwargs", Json::object()},
         {"meta", meta(Json::array({b8}), {1})}},
        {{"name", "relu"},
         {"op", "aten.relu.default"},
         {"args", {{{"node", "view"}}}},
         {"kwargs", Json::object()},
         {"meta", meta(Json::array({b8}), {1})}}}},
      {"outputs", {{{"node", "relu"}}}},
      {"returns", "tensor"}};
}

TEST(GraphTest, ADynamicBatchIrParsesAtItsLargestBatch) {
  const Graph graph = testing::LoadGraph(DynamicIr());
  ASSERT_TRUE(graph.dynamic.has_value());
  EXPECT_EQ(graph.dynamic->dims[0].min, 1);
  EXPECT_EQ(graph.dynamic->dims[0].max, 16);
  EXPECT_EQ(graph.dynamic->dims[0].example, 4);
  ASSERT_NE(graph.dynamic->ir, nullptr);
  EXPECT_EQ(*graph.dynamic->ir, DynamicIr()) << "the IR is kept as written";
  const Value& x = graph.values[0];
  ASSERT_TRUE(x.meta);
  EXPECT_EQ(x.meta->shape, (std::vector<int64_t>{16, 8}));
  ASSERT_EQ(graph.nodes.size(), 2U);
  EXPECT_EQ(graph.nodes[0].args.at(1).AsInts(), std::vector<int64_t>{128}) << "arguments are evaluated too";
  EXPECT_EQ(ValueAt(graph, graph.nodes[1].value).meta->shape, std::vector<int64_t>{128});

  const ParsedGraph at5 = GraphAtSizes(*graph.dynamic, {5});
  ASSERT_TRUE(at5.graph) << at5.problem;
  EXPECT_EQ(at5.graph->values[0].meta->shape, (std::vector<int64_t>{5, 8}));
  EXPECT_EQ(at5.graph->nodes[0].args.at(1).AsInts(), std::vector<int64_t>{40});
  EXPECT_EQ(ValueAt(*at5.graph, at5.graph->nodes[1].value).meta->shape, std::vector<int64_t>{40});
  ASSERT_TRUE(at5.graph->dynamic.has_value()) << "the graph at a batch keeps the range";
  EXPECT_EQ(at5.graph->dynamic->dims[0].max, 16);
  EXPECT_EQ(at5.graph->dynamic->ir, graph.dynamic->ir);

  Json no_example = DynamicIr();
  no_example["dynamic"].erase("example");
  EXPECT_EQ(testing::LoadGraph(no_example).dynamic->dims[0].example, 16) << "the example defaults to the top";
  EXPECT_FALSE(testing::LoadGraph(SmallIr()).dynamic.has_value());
}

TEST(GraphTest, AnIrOfSeveralDynamicSizesParsesAtEveryTopAndAtAnyPoint) {
  // x [B, S] with B in 1..16 and S in 1..32; the view's length is B*S + S*S, a polynomial of both
  Json ir = DynamicIr();
  ir["dynamic"] = {{"dims",
                    {{{"dim", "batch"}, {"axis", 0}, {"min", 1}, {"max", 16}, {"example", 4}},
                     {{"dim", "dim1"}, {"axis", 1}, {"min", 1}, {"max", 32}, {"example", 8}}}}};
  const Json b = {{"poly", {{1, {1, 0}}}}};
  const Json s = {{"poly", {{1, {0, 1}}}}};
  const Json length = {{"poly", {{1, {1, 1}}, {1, {0, 2}}}}};
  ir["inputs"][0]["meta"]["shape"] = Json::array({b, s});
  ir["inputs"][0]["meta"]["stride"] = Json::array({s, 1});
  for (Json& node : ir["nodes"]) {
    node["meta"]["shape"] = Json::array({length});
  }
  ir["nodes"][0]["args"][1] = Json::array({length});
  ir["inputs"][0]["meta"]["shape"] = Json::array({b, s});
  // the view of [B, S] to B*S + S*S elements is not a real view, but the IR parses: sizes are what is checked
  const Graph graph = testing::LoadGraph(ir);
  ASSERT_TRUE(graph.dynamic.has_value());
  ASSERT_EQ(graph.dynamic->dims.size(), 2U);
  EXPECT_EQ(graph.dynamic->dims[1].axis, 1);
  EXPECT_EQ(graph.dynamic->Tops(), (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(ValueAt(graph, graph.Inputs()[0]).meta->shape, (std::vector<int64_t>{16, 32}));
  const ParsedGraph at = GraphAtSizes(*graph.dynamic, {2, 3});
  ASSERT_TRUE(at.graph.has_value()) << at.problem;
  EXPECT_EQ(ValueAt(*at.graph, at.graph->Inputs()[0]).meta->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(ValueAt(*at.graph, at.graph->nodes.back().value).meta->shape,
            (std::vector<int64_t>{2 * 3 + 3 * 3}));
  ir["nodes"][1]["meta"]["shape"] = Json::array({{{"poly", {{1, {1}}}}}});
  EXPECT_EQ(Problem(ir), "bad graph IR: a size's polynomial term is not [c, [one power per dynamic size]]");
}

TEST(GraphTest, AMalformedDynamicBatchIsABadGraphIr) {
  Json ir = DynamicIr();
  ir["inputs"][0]["meta"]["shape"][0] = {{"sym", {1}}};
  EXPECT_EQ(Problem(ir), "bad graph IR: a size's form is not [a, d] or [q, a, d]");
  ir["inputs"][0]["meta"]["shape"][0] = {{"sym", {1, 0.5}}};
  EXPECT_EQ(Problem(ir), "bad graph IR: a size's form is not [a, d] or [q, a, d]");
  ir["inputs"][0]["meta"]["shape"][0] = {{"sym", {1, 2, 3, 4}}};
  EXPECT_EQ(Problem(ir), "bad graph IR: a size's form is not [a, d] or [q, a, d]");
  ir = DynamicIr();
  ir["dynamic"]["min"] = 17;
  EXPECT_EQ(Problem(ir), "bad graph IR: the dynamic batch's range is empty");
  ir["dynamic"]["min"] = 0;
  EXPECT_EQ(Problem(ir), "bad graph IR: the dynamic batch's range is empty");
  ir = DynamicIr();
  ir["dynamic"].erase("max");
  EXPECT_THAT(Problem(ir), HasSubstr("bad graph IR"));
}

}  // namespace
}  // namespace egg::expert
