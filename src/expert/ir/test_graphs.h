// Test helpers: captured KernelBench graphs from tests/fixtures/ir, optionally with their sizes scaled up.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "common/fs.h"
#include "expert/ir/graph.h"

namespace egg::expert::testing {

inline Json FixtureJson(const std::string& name) {
  return Json::parse(ReadFile(std::string(EGG_SOURCE_DIR) + "/tests/fixtures/ir/" + name + ".json"));
}

// Every dimension of size `from` becomes `to` (strides recomputed contiguously): the same graph at full size.
inline Json Scaled(Json json, int64_t from, int64_t to) {
  if (json.is_object()) {
    if (json.contains("shape") && json.contains("stride")) {
      std::vector<int64_t> shape = json["shape"].get<std::vector<int64_t>>();
      for (int64_t& size : shape) {
        size = size == from ? to : size;
      }
      json["shape"] = shape;
      json["stride"] = ContiguousStrides(shape);
      return json;
    }
    for (auto& [key, value] : json.items()) {
      if (key != "args" && key != "kwargs") {
        value = Scaled(value, from, to);
      }
    }
  } else if (json.is_array()) {
    for (Json& item : json) {
      item = Scaled(item, from, to);
    }
  }
  return json;
}

// Building small graph documents in a test: contiguous tensor metas, inputs, nodes and references to them.
inline Json Meta(const std::vector<int64_t>& shape, const std::string& dtype = "float32") {
  return {{"shape", shape}, {"stride", ContiguousStrides(shape)}, {"offset", 0}, {"dtype", dtype}};
}

inline Json Input(const std::string& name, int position, const Json& meta) {
  return {{"name", name}, {"position", position}, {"kind", "tensor"}, {"meta", meta}};
}

inline Json NodeJson(const std::string& name, const std::string& op, const Json& args, const Json& meta) {
  return {{"name", name}, {"op", op}, {"args", args}, {"kwargs", Json::object()}, {"meta", meta}};
}

inline Json Ref(const std::string& name) { return {{"node", name}}; }

// A graph document of `inputs` and `nodes` in order, returning `outputs` (one: a tensor, more: a tuple).
// (Json arrays built explicitly: a one-element brace list would be copied, not wrapped.)
inline Json GraphJson(const std::vector<Json>& inputs, const std::vector<Json>& nodes,
                      const std::vector<std::string>& outputs) {
  Json refs = Json::array();
  for (const std::string& output : outputs) {
    refs.push_back(Ref(output));
  }
  return {{"format", "egg-graph"},      {"version", 1},
          {"torch", "fixture"},         {"mode", "eval"},
          {"inputs", Json(inputs)},     {"state", Json::array()},
          {"nodes", Json(nodes)},       {"outputs", refs},
          {"mutations", Json::array()}, {"returns", outputs.size() == 1 ? "tensor" : "tuple"}};
}

// Every dtype `from` (metadata and dtype arguments) becomes `to`: the graph a capture of the module and
// inputs cast to `to` gives (egg --precision), for graphs whose decompositions do not depend on the dtype.
inline Json Retyped(Json json, const std::string& from, const std::string& to) {
  if (json.is_object()) {
    for (auto& [key, value] : json.items()) {
      if (key == "dtype" && value == from) {
        value = to;
      } else {
        value = Retyped(value, from, to);
      }
    }
  } else if (json.is_array()) {
    for (Json& item : json) {
      item = Retyped(item, from, to);
    }
  }
  return json;
}

inline Graph LoadGraph(const Json& json) {
  ParsedGraph parsed = ParseGraph(json);
  EXPECT_TRUE(parsed.graph.has_value()) << parsed.problem;
  return parsed.graph ? *parsed.graph : Graph{};
}

inline Graph Fixture(const std::string& name) { return LoadGraph(FixtureJson(name)); }

// The value named `name` in `graph` (a failure, and -1, when there is none).
inline int ValueNamed(const Graph& graph, const std::string& name) {
  for (size_t v = 0; v < graph.values.size(); ++v) {
    if (graph.values[v].name == name) {
      return static_cast<int>(v);
    }
  }
  ADD_FAILURE() << "no value " << name;
  return -1;
}

// One reduction `op`(x [rows, length] of `dtype`, args...) of type `out_dtype` [rows].
inline Graph RowReduction(const std::string& op, const Json& args, int64_t rows, int64_t length,
                          const std::string& dtype = "float32", const std::string& out_dtype = "float32") {
  Json all = Json::array({Ref("x")});
  for (const Json& arg : args) {
    all.push_back(arg);
  }
  return LoadGraph(GraphJson({Input("x", 0, Meta({rows, length}, dtype))},
                             {NodeJson("red", op, all, Meta({rows}, out_dtype))}, {"red"}));
}

// Softmax over rows of 65536 (level1_23_Softmax's 64 scaled up): long rows, where the design moves matter.
inline Graph BigSoftmax() { return LoadGraph(Scaled(FixtureJson("level1_23_Softmax"), 64, 65536)); }

// How many times `word` occurs in `text` (overlapping occurrences too): lines of generated source.
inline size_t Count(const std::string& text, const std::string& word) {
  size_t count = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    ++count;
  }
  return count;
}

}  // namespace egg::expert::testing
