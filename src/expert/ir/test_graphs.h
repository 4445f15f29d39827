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

// How many times `word` occurs in `text` (overlapping occurrences too): lines of generated source.
inline size_t Count(const std::string& text, const std::string& word) {
  size_t count = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    ++count;
  }
  return count;
}

}  // namespace egg::expert::testing
