#include "expert/ir/graph.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>

namespace egg::expert {
namespace {

constexpr int kIrVersion = 1;

struct DTypeInfo {
  DType dtype;
  const char* name;
  const char* triton;
  int64_t bytes;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::kFloat32, "float32", "tl.float32", 4}, {DType::kFloat16, "float16", "tl.float16", 2},
    {DType::kBFloat16, "bfloat16", "tl.bfloat16", 2}, {DType::kFloat64, "float64", "tl.float64", 8},
    {DType::kInt64, "int64", "tl.int64", 8},       {DType::kInt32, "int32", "tl.int32", 4},
    {DType::kInt16, "int16", "tl.int16", 2},       {DType::kInt8, "int8", "tl.int8", 1},
    {DType::kUInt8, "uint8", "tl.uint8", 1},       {DType::kBool, "bool", "tl.int1", 1},
};

const DTypeInfo& Info(DType dtype) {
  for (const auto& info : kDTypes) {
    if (info.dtype == dtype) {
      return info;
    }
  }
  throw std::logic_error("unknown dtype");
}

// Thrown inside the parser only; ParseGraph turns it into ParsedGraph::problem.
struct IrProblem : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const Json& Field(const Json& object, const char* key) {
  if (!object.is_object() || !object.contains(key)) {
    throw IrProblem(std::string("missing field '") + key + "'");
  }
  return object.at(key);
}

std::vector<int64_t> Ints(const Json& array, const char* what) {
  if (!array.is_array()) {
    throw IrProblem(std::string(what) + " is not a list");
  }
  std::vector<int64_t> out;
  for (const Json& item : array) {
    if (!item.is_number_integer()) {
      throw IrProblem(std::string(what) + " holds a non-integer");
    }
    out.push_back(item.get<int64_t>());
  }
  return out;
}

TensorMeta ParseMeta(const Json& json) {
  TensorMeta meta;
  meta.shape = Ints(Field(json, "shape"), "shape");
  meta.stride = Ints(Field(json, "stride"), "stride");
  meta.offset = Field(json, "offset").get<int64_t>();
  const auto dtype = ParseDType(Field(json, "dtype").get<std::string>());
  if (!dtype) {
    throw IrProblem("unsupported dtype " + json.at("dtype").get<std::string>());
  }
  meta.dtype = *dtype;
  if (meta.shape.size() != meta.stride.size()) {
    throw IrProblem("shape and stride differ in rank");
  }
  return meta;
}

std::optional<TensorMeta> ParseOptionalMeta(const Json& json) {
  if (json.is_object()) {
    return ParseMeta(json);
  }
  return std::nullopt;
}

class Parser {
 public:
  Graph Parse(const Json& ir) {
    if (!ir.is_object() || ir.value("format", "") != "egg-graph") {
      throw IrProblem("not an egg-graph document");
    }
    if (ir.value("version", 0) != kIrVersion) {
      throw IrProblem("unsupported egg-graph version");
    }
    graph_.torch_version = ir.value("torch", "");
    graph_.returns = ir.value("returns", "tensor");
    for (const Json& input : Field(ir, "inputs")) {
      Value value;
      value.name = Field(input, "name").get<std::string>();
      value.kind = ValueKind::kInput;
      value.position = Field(input, "position").get<int>();
      if (Field(input, "kind").get<std::string>() == "tensor") {
        value.meta = ParseMeta(Field(input, "meta"));
      } else {
        value.scalar = ParseArg(input.value("value", Json()));
      }
      Add(std::move(value));
    }
    for (const Json& entry : Field(ir, "state")) {
      Value value;
      value.name = Field(entry, "name").get<std::string>();
      value.kind = ValueKind::kState;
      value.state_kind = Field(entry, "kind").get<std::string>();
      value.target = Field(entry, "target").get<std::string>();
      value.meta = ParseMeta(Field(entry, "meta"));
      if (entry.contains("values")) {
        std::vector<double> numbers;
        for (const Json& number : entry.at("values")) {
          const Arg arg = ParseArg(number);
          if (!arg.IsNumber()) {
            throw IrProblem("constant " + value.name + " holds a non-number");
          }
          numbers.push_back(arg.AsDouble());
        }
        value.constant_values = std::move(numbers);
      }
      Add(std::move(value));
    }
    for (const Json& json : Field(ir, "nodes")) {
      ParseNode(json);
    }
    for (const Json& output : Field(ir, "outputs")) {
      graph_.outputs.push_back(ParseArg(output));
    }
    for (const Json& setting : ir.value("settings", Json::array())) {
      graph_.settings.push_back(
          {Field(setting, "path").get<std::string>(), Field(setting, "literal").get<std::string>()});
    }
    const Json mutations = ir.value("mutations", Json::array());
    for (const Json& mutation : mutations) {
      graph_.mutations.emplace_back(Field(mutation, "target").get<std::string>(),
                                    ParseArg(Field(mutation, "value")));
    }
    for (const Arg& output : graph_.outputs) {
      if (output.kind != Arg::Kind::kValue) {
        throw IrProblem("a graph output is not a tensor");
      }
    }
    return std::move(graph_);
  }

 private:
  int Add(Value value) {
    if (by_name_.count(value.name) != 0) {
      throw IrProblem("duplicate value name " + value.name);
    }
    const int index = static_cast<int>(graph_.values.size());
    by_name_[value.name] = index;
    graph_.values.push_back(std::move(value));
    return index;
  }

  void ParseNode(const Json& json) {
    Node node;
    node.name = Field(json, "name").get<std::string>();
    node.op = Field(json, "op").get<std::string>();
    for (const Json& arg : Field(json, "args")) {
      node.args.push_back(ParseArg(arg));
    }
    const Json kwargs = json.value("kwargs", Json::object());
    for (const auto& [key, arg] : kwargs.items()) {
      node.kwargs[key] = ParseArg(arg);
    }
    Value value;
    value.name = node.name;
    value.kind = ValueKind::kNode;
    value.node = static_cast<int>(graph_.nodes.size());
    const Json& meta = json.contains("meta") ? json.at("meta") : Json();
    if (meta.is_array()) {
      for (const Json& item : meta) {
        node.tuple_meta.push_back(ParseOptionalMeta(item));
      }
    } else {
      value.meta = ParseOptionalMeta(meta);
    }
    node.value = Add(std::move(value));
    const int node_index = static_cast<int>(graph_.nodes.size());
    for (int used : UsedValues(node)) {
      auto& users = graph_.values[static_cast<size_t>(used)].users;
      if (std::find(users.begin(), users.end(), node_index) == users.end()) {
        users.push_back(node_index);
      }
    }
    graph_.nodes.push_back(std::move(node));
  }

  static void Collect(const Arg& arg, std::vector<int>* out) {
    if (arg.kind == Arg::Kind::kValue) {
      out->push_back(arg.value);
    }
    for (const Arg& item : arg.list) {
      Collect(item, out);
    }
  }

  static std::vector<int> UsedValues(const Node& node) {
    std::vector<int> used;
    for (const Arg& arg : node.args) {
      Collect(arg, &used);
    }
    for (const auto& [key, arg] : node.kwargs) {
      Collect(arg, &used);
    }
    return used;
  }

  Arg ParseArg(const Json& json) {
    Arg arg;
    if (json.is_null()) {
      return arg;
    }
    if (json.is_boolean()) {
      arg.kind = Arg::Kind::kBool;
      arg.b = json.get<bool>();
    } else if (json.is_number_integer()) {
      arg.kind = Arg::Kind::kInt;
      arg.i = json.get<int64_t>();
    } else if (json.is_number()) {
      arg.kind = Arg::Kind::kFloat;
      arg.f = json.get<double>();
    } else if (json.is_string()) {
      arg.kind = Arg::Kind::kString;
      arg.s = json.get<std::string>();
    } else if (json.is_array()) {
      arg.kind = Arg::Kind::kList;
      for (const Json& item : json) {
        arg.list.push_back(ParseArg(item));
      }
    } else if (json.contains("node")) {
      const std::string name = json.at("node").get<std::string>();
      const auto found = by_name_.find(name);
      if (found == by_name_.end()) {
        throw IrProblem("reference to unknown value " + name);
      }
      arg.kind = Arg::Kind::kValue;
      arg.value = found->second;
    } else if (json.contains("float")) {
      arg.kind = Arg::Kind::kFloat;
      const std::string text = json.at("float").get<std::string>();
      arg.f = text == "nan"   ? std::numeric_limits<double>::quiet_NaN()
              : text == "inf" ? std::numeric_limits<double>::infinity()
                              : -std::numeric_limits<double>::infinity();
    } else if (json.contains("dtype")) {
      const auto dtype = ParseDType(json.at("dtype").get<std::string>());
      if (!dtype) {
        throw IrProblem("unsupported dtype " + json.at("dtype").get<std::string>());
      }
      arg.kind = Arg::Kind::kDType;
      arg.dtype = *dtype;
    } else {
      arg.kind = Arg::Kind::kOther;
      arg.s = json.dump();
    }
    return arg;
  }

  Graph graph_;
  std::map<std::string, int> by_name_;
};

}  // namespace

std::optional<DType> ParseDType(const std::string& name) {
  for (const auto& info : kDTypes) {
    if (name == info.name) {
      return info.dtype;
    }
  }
  return std::nullopt;
}

std::string DTypeName(DType dtype) { return Info(dtype).name; }
std::string TritonDType(DType dtype) { return Info(dtype).triton; }
std::string TorchDType(DType dtype) { return std::string("torch.") + Info(dtype).name; }
int64_t DTypeBytes(DType dtype) { return Info(dtype).bytes; }

bool IsFloating(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat16 || dtype == DType::kBFloat16 ||
         dtype == DType::kFloat64;
}

bool IsHalf(DType dtype) { return dtype == DType::kFloat16 || dtype == DType::kBFloat16; }

DType ComputeDType(DType dtype) { return IsHalf(dtype) ? DType::kFloat32 : dtype; }

int64_t Product(const std::vector<int64_t>& values) {
  int64_t product = 1;
  for (int64_t value : values) {
    product *= value;
  }
  return product;
}

int64_t NextPowerOfTwo(int64_t value) {
  int64_t power = 1;
  while (power < value) {
    power *= 2;
  }
  return power;
}

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) {
    strides[d - 1] = strides[d] * std::max<int64_t>(shape[d], 1);
  }
  return strides;
}

int64_t TensorMeta::Numel() const { return Product(shape); }

bool TensorMeta::IsContiguous() const {
  const auto expected = ContiguousStrides(shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] != 1 && stride[d] != expected[d]) {
      return false;
    }
  }
  return true;
}

int64_t TensorMeta::StorageSpan() const {
  int64_t last = offset;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) {
      return offset;
    }
    last += (shape[d] - 1) * stride[d];
  }
  return last + 1;
}

double Arg::AsDouble() const {
  switch (kind) {
    case Kind::kInt:
      return static_cast<double>(i);
    case Kind::kFloat:
      return f;
    case Kind::kBool:
      return b ? 1.0 : 0.0;
    default:
      throw std::logic_error("argument is not a number");
  }
}

std::optional<std::vector<int64_t>> Arg::AsInts() const {
  if (kind == Kind::kInt) {
    return std::vector<int64_t>{i};
  }
  if (kind != Kind::kList) {
    return std::nullopt;
  }
  std::vector<int64_t> out;
  for (const Arg& item : list) {
    if (item.kind != Kind::kInt) {
      return std::nullopt;
    }
    out.push_back(item.i);
  }
  return out;
}

const Arg* Node::Kwarg(const std::string& key) const {
  const auto found = kwargs.find(key);
  return found == kwargs.end() ? nullptr : &found->second;
}

const Arg* Node::ArgAt(size_t index, const std::string& key) const {
  if (index < args.size()) {
    return &args[index];
  }
  return key.empty() ? nullptr : Kwarg(key);
}

std::vector<int> Graph::Inputs() const {
  std::vector<int> inputs;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].kind == ValueKind::kInput) {
      inputs.push_back(static_cast<int>(i));
    }
  }
  std::sort(inputs.begin(), inputs.end(), [&](int a, int b) {
    return values[static_cast<size_t>(a)].position < values[static_cast<size_t>(b)].position;
  });
  return inputs;
}

const Node* Graph::Producer(int value) const {
  const Value& v = values.at(static_cast<size_t>(value));
  return v.kind == ValueKind::kNode ? &nodes.at(static_cast<size_t>(v.node)) : nullptr;
}

namespace {

// A size's form at `sizes`: {"sym": [a, d]} is a*B + d and {"sym": [q, a, d]} q*B*B + a*B + d over the first
// size; {"poly": [[c, [e0, e1, ...]], ...]} the sum of c * x0^e0 * x1^e1 ... over all of them.
int64_t FormAt(const Json& form, const std::string& kind, const std::vector<int64_t>& sizes) {
  const auto integer = [](const Json& c) { return c.is_number_integer(); };
  if (kind == "sym") {
    if (!form.is_array() || form.size() < 2 || form.size() > 3 ||
        !std::all_of(form.begin(), form.end(), integer)) {
      throw IrProblem("a size's form is not [a, d] or [q, a, d]");
    }
    int64_t value = 0;
    for (const Json& coefficient : form) {  // Horner's rule, highest power first
      value = value * sizes[0] + coefficient.get<int64_t>();
    }
    return value;
  }
  if (!form.is_array()) {
    throw IrProblem("a size's polynomial is not a list of terms");
  }
  int64_t value = 0;
  for (const Json& term : form) {
    if (!term.is_array() || term.size() != 2 || !term[0].is_number_integer() || !term[1].is_array() ||
        term[1].size() != sizes.size() || !std::all_of(term[1].begin(), term[1].end(), integer)) {
      throw IrProblem("a size's polynomial term is not [c, [one power per dynamic size]]");
    }
    int64_t product = term[0].get<int64_t>();
    for (size_t i = 0; i < sizes.size(); ++i) {
      for (int64_t e = term[1][i].get<int64_t>(); e > 0; --e) {
        product *= sizes[i];
      }
    }
    value += product;
  }
  return value;
}

// `ir` with every size's form (FormAt) replaced by its value at `sizes`.
Json AtSizes(const Json& ir, const std::vector<int64_t>& sizes) {
  if (ir.is_object()) {
    for (const char* kind : {"sym", "poly"}) {
      const auto form = ir.find(kind);
      if (form != ir.end() && ir.size() == 1) {
        return FormAt(*form, kind, sizes);
      }
    }
    Json out = Json::object();
    for (auto it = ir.begin(); it != ir.end(); ++it) {
      out[it.key()] = AtSizes(it.value(), sizes);
    }
    return out;
  }
  if (ir.is_array()) {
    Json out = Json::array();
    for (const Json& item : ir) {
      out.push_back(AtSizes(item, sizes));
    }
    return out;
  }
  return ir;
}

DynamicDim ReadDynamicDim(const Json& range) {
  DynamicDim dim{range.value("axis", 0), range.at("min").get<int64_t>(), range.at("max").get<int64_t>(),
                 range.value("example", range.at("max").get<int64_t>())};
  if (dim.min < 1 || dim.max < dim.min) {
    throw IrProblem("the dynamic batch's range is empty");
  }
  if (dim.axis < 0) {
    throw IrProblem("the dynamic dimension's axis is negative");
  }
  return dim;
}

// The IR's "dynamic": one size's range ({"dim", "axis", "min", "max", "example"}) or several ({"dims":
// [...]}).
std::vector<DynamicDim> ReadDynamicDims(const Json& dynamic) {
  std::vector<DynamicDim> dims;
  if (!dynamic.contains("dims")) {
    return {ReadDynamicDim(dynamic)};
  }
  for (const Json& range : dynamic.at("dims")) {
    dims.push_back(ReadDynamicDim(range));
  }
  if (dims.empty()) {
    throw IrProblem("the dynamic sizes' list is empty");
  }
  return dims;
}

Graph ParseAnyGraph(const Json& ir) {
  if (!ir.is_object() || !ir.contains("dynamic")) {
    return Parser().Parse(ir);
  }
  DynamicBatch dynamic{std::make_shared<const Json>(ir), ReadDynamicDims(ir.at("dynamic"))};
  Json concrete = AtSizes(ir, dynamic.Tops());
  concrete.erase("dynamic");
  Graph graph = Parser().Parse(concrete);
  graph.dynamic = std::move(dynamic);
  return graph;
}

}  // namespace

std::vector<int64_t> DynamicBatch::Tops() const {
  std::vector<int64_t> tops;
  for (const DynamicDim& dim : dims) {
    tops.push_back(dim.max);
  }
  return tops;
}

ParsedGraph GraphAtSizes(const DynamicBatch& dynamic, const std::vector<int64_t>& sizes) {
  Json concrete;
  try {
    concrete = AtSizes(*dynamic.ir, sizes);
  } catch (const IrProblem& problem) {
    return {std::nullopt, std::string("bad graph IR: ") + problem.what()};
  }
  concrete.erase("dynamic");
  ParsedGraph parsed = ParseGraph(concrete);
  if (parsed.graph) {
    parsed.graph->dynamic = dynamic;
  }
  return parsed;
}

ParsedGraph ParseGraph(const Json& ir) {
  try {
    return {ParseAnyGraph(ir), ""};
  } catch (const IrProblem& problem) {
    return {std::nullopt, std::string("bad graph IR: ") + problem.what()};
  } catch (const Json::exception& error) {
    return {std::nullopt, std::string("bad graph IR: ") + error.what()};
  }
}

std::string GraphPrecision(const Graph& graph) {
  for (const Value& value : graph.values) {
    if ((value.kind == ValueKind::kInput || value.kind == ValueKind::kState) && value.meta) {
      if (value.meta->dtype == DType::kBFloat16) {
        return "bf16";
      }
      if (value.meta->dtype == DType::kFloat16) {
        return "fp16";
      }
    }
  }
  return "fp32";
}

std::string NonFloat32Types(const Graph& graph, const Node& node) {
  std::set<std::string> names;
  auto note = [&](int value) {
    const auto& meta = ValueAt(graph, value).meta;
    if (meta && IsFloating(meta->dtype) && meta->dtype != DType::kFloat32) {
      names.insert(DTypeName(meta->dtype));
    }
  };
  for (const Arg& arg : node.args) {
    if (arg.kind == Arg::Kind::kValue) {
      note(arg.value);
    }
    for (const Arg& item : arg.list) {
      if (item.kind == Arg::Kind::kValue) {
        note(item.value);
      }
    }
  }
  if (node.value >= 0) {
    note(node.value);
  }
  std::string text;
  for (const std::string& name : names) {
    text += (text.empty() ? "" : ", ") + name;
  }
  return text;
}

bool IsGraphResult(const Graph& graph, int value) {
  const auto is = [value](const Arg& arg) { return arg.kind == Arg::Kind::kValue && arg.value == value; };
  return std::any_of(graph.outputs.begin(), graph.outputs.end(), is) ||
         std::any_of(graph.mutations.begin(), graph.mutations.end(),
                     [&is](const auto& m) { return is(m.second); });
}

TensorMeta DenseLayout(const TensorMeta& meta) {
  TensorMeta layout = meta;
  layout.stride = ContiguousStrides(meta.shape);
  layout.offset = 0;
  return layout;
}

}  // namespace egg::expert
