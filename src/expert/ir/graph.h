// The captured forward of a task: an ATen-level graph parsed from the worker's JSON IR (docs/expert.md) into
// native structs. ParseGraph validates at the edge and returns the graph or a one-line reason; nothing past
// it sees raw JSON.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"

namespace egg::expert {

enum class DType { kFloat32, kFloat16, kBFloat16, kFloat64, kInt64, kInt32, kInt16, kInt8, kUInt8, kBool };

std::optional<DType> ParseDType(const std::string& name);
std::string DTypeName(DType dtype);       // "float32"
std::string TritonDType(DType dtype);     // "tl.float32"
std::string TorchDType(DType dtype);      // "torch.float32"
bool IsFloating(DType dtype);
int64_t DTypeBytes(DType dtype);
// bfloat16 and float16: storage types only. Kernels load them upcast to float32, compute and accumulate in
// float32, and cast to the half type when they store (ComputeDType is the type a kernel computes a value in).
bool IsHalf(DType dtype);
DType ComputeDType(DType dtype);

struct TensorMeta {
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;
  int64_t offset = 0;
  DType dtype = DType::kFloat32;

  int64_t Numel() const;
  int Rank() const { return static_cast<int>(shape.size()); }
  bool IsContiguous() const;
  // The largest element offset reached plus one (storage elements spanned).
  int64_t StorageSpan() const;
};

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape);
int64_t Product(const std::vector<int64_t>& values);
// The smallest power of two >= value (1 for value <= 1).
int64_t NextPowerOfTwo(int64_t value);

// One argument of a node.
struct Arg {
  enum class Kind { kNone, kValue, kInt, kFloat, kBool, kString, kList, kDType, kOther };
  Kind kind = Kind::kNone;
  int value = -1;  // kValue: index into Graph::values
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string s;  // kString, kOther (its repr)
  std::vector<Arg> list;
  DType dtype = DType::kFloat32;

  static Arg OfValue(int value) {
    return Of(Kind::kValue, [value](Arg& a) { a.value = value; });
  }
  static Arg OfInt(int64_t i) {
    return Of(Kind::kInt, [i](Arg& a) { a.i = i; });
  }
  static Arg OfFloat(double f) {
    return Of(Kind::kFloat, [f](Arg& a) { a.f = f; });
  }
  static Arg OfBool(bool b) {
    return Of(Kind::kBool, [b](Arg& a) { a.b = b; });
  }
  static Arg OfInts(const std::vector<int64_t>& ints) {
    return Of(Kind::kList, [&ints](Arg& a) {
      for (int64_t i : ints) {
        a.list.push_back(OfInt(i));
      }
    });
  }

  bool IsNumber() const { return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool; }
  double AsDouble() const;
  std::optional<std::vector<int64_t>> AsInts() const;  // an int or a list of ints

 private:
  template <typename Fill>
  static Arg Of(Kind kind, Fill fill) {
    Arg arg;
    arg.kind = kind;
    fill(arg);
    return arg;
  }
};

enum class ValueKind { kInput, kState, kNode };

// Anything an argument can name: a user input, a parameter/buffer/constant, or a node's result.
struct Value {
  std::string name;
  ValueKind kind = ValueKind::kNode;
  std::optional<TensorMeta> meta;  // nullopt: not a tensor (a scalar input, a tuple-producing node)
  int node = -1;                   // kNode: index into Graph::nodes
  int position = -1;               // kInput: position in forward's arguments
  std::string state_kind;          // kState: parameter | buffer | constant
  std::string target;              // kState: the module attribute path ("conv.weight")
  std::optional<std::vector<double>> constant_values;
  Arg scalar;  // kInput of a non-tensor argument: its captured value
  std::vector<int> users;  // nodes that read this value
};

struct Node {
  std::string name;
  std::string op;  // "aten.add.Tensor", "prims.var.default", "getitem"
  std::vector<Arg> args;
  std::map<std::string, Arg> kwargs;
  int value = -1;  // the Value this node produces
  std::vector<std::optional<TensorMeta>> tuple_meta;  // for tuple-producing nodes: each element
  // A value a rewrite derived from the module's state alone (ir/fold.h: a weight's row sums), which the
  // candidate file may keep between calls; never set on a captured node, whose work runs at every call.
  bool keepable = false;

  const Arg* Kwarg(const std::string& key) const;
  // Positional argument `index`, else the keyword `key`, else nullptr.
  const Arg* ArgAt(size_t index, const std::string& key = "") const;
};

// A plain attribute the forward read at capture (`norm.eps`), whose value the graph holds as a constant: a
// candidate runs its kernels only while the attribute still has it (docs/expert.md, "Settings").
struct Setting {
  std::string path;     // from the model: "scale", "layers.0.eps"
  std::string literal;  // its value then, as a Python literal: "1e-05", "(1, 1)", "'zeros'"
};

// One dynamic size: dim `axis` of every tensor input that has one (0: the batch), in [min, max].
struct DynamicDim {
  int axis = 0;
  int64_t min = 1;
  int64_t max = 1;
  int64_t example = 1;  // the task's own size, captured
};

// A capture whose batch (dim 0 of every tensor input; or other dimensions, each its own symbol) is one symbol
// B in [min, max] (docs/expert.md, "Dynamic batch"): the IR as the worker wrote it, every size that depends
// on B a linear form {"sym": [a, d]} (a*B + d) or a quadratic one {"sym": [q, a, d]}; with several dynamic
// sizes a polynomial {"poly": [[c, [e0, e1, ...]], ...]} (c * x0^e0 * x1^e1 ...). The graph it belongs to is
// this IR at every size's max, the bound every range-based decision must hold for.
struct DynamicBatch {
  std::shared_ptr<const Json> ir;
  std::vector<DynamicDim> dims;  // one at least; dims[0]'s size is egg_B, dims[1]'s egg_C, ...
  // Every kernel indexes in int64: set when the samples the module is generated at straddle int32 offsets
  // (a far sample past 2^31 where the range's top is under it), so that every sample has the same code.
  bool wide_indexing = false;

  std::vector<int64_t> Tops() const;
};

struct Graph {
  std::vector<Value> values;
  std::vector<Node> nodes;  // topological order
  std::vector<Arg> outputs;
  std::vector<std::pair<std::string, Arg>> mutations;  // buffer target -> new value
  std::string returns = "tensor";                     // tensor | tuple | list
  std::string torch_version;
  std::vector<Setting> settings;
  std::optional<DynamicBatch> dynamic;

  std::vector<int> Inputs() const;  // values of kind kInput, by position
  const Value& ValueOf(const Arg& arg) const { return values.at(static_cast<size_t>(arg.value)); }
  const Node* Producer(int value) const;
};

struct ParsedGraph {
  std::optional<Graph> graph;
  std::string problem;  // when graph is empty
};

// A dynamic-batch IR ("dynamic" present) is parsed at its largest batch and keeps the IR in Graph::dynamic.
ParsedGraph ParseGraph(const Json& ir);
// The graph of a dynamic-batch capture at `batch`, or a problem. It keeps `dynamic`: code generators write a
// count they would compute from a size that may change with the batch as an expression of that size.
ParsedGraph GraphAtSizes(const DynamicBatch& dynamic, const std::vector<int64_t>& sizes);

// The value with index `value` of `graph`.
inline const Value& ValueAt(const Graph& graph, int value) { return graph.values.at(static_cast<size_t>(value)); }

// The precision a graph was captured in (KernelBench's names): "bf16" or "fp16" when a floating input or
// parameter is of that half type, else "fp32".
std::string GraphPrecision(const Graph& graph);

// The floating dtypes other than float32 among a node's tensor operands and result ("bfloat16, float64"), or
// "" when there are none: the types a float32-only kernel family does not lower.
std::string NonFloat32Types(const Graph& graph, const Node& node);

// Whether `value` leaves the forward: an output, or the new value of a mutated buffer.
bool IsGraphResult(const Graph& graph, int value);

// The layout egg gives a value it materializes: contiguous in the value's shape.
TensorMeta DenseLayout(const TensorMeta& meta);

}  // namespace egg::expert
