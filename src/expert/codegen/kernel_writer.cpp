#include "expert/codegen/kernel_writer.h"

#include <fmt/format.h>

#include <algorithm>

#include "expert/design/legality.h"
#include "expert/families/family.h"
#include "expert/kir/analysis.h"

namespace egg::expert::writer {

const TensorMeta& MetaOf(const Graph& graph, int value) {
  const Value& v = ValueAt(graph, value);
  if (!v.meta) {
    throw NotFusable(v.name + " has no tensor type");
  }
  return *v.meta;
}

bool Contains(const std::vector<int>& values, int value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

std::string Summary(const Graph& graph, const KernelPlan& kernel) {
  std::vector<std::string> names;
  for (int root : kernel.roots) {
    names.push_back(ValueAt(graph, root).name);
  }
  std::string text;
  for (const std::string& name : names) {
    text += (text.empty() ? "" : ", ") + name;
  }
  return text;
}

namespace {

// The smallest and largest values of an integer type, as Python literals (the int64 minimum as an expression:
// its magnitude is no int64 literal).
std::pair<std::string, std::string> IntegerLimits(DType dtype) {
  switch (dtype) {
    case DType::kInt32:
      return {"-2147483648", "2147483647"};
    case DType::kInt16:
      return {"-32768", "32767"};
    case DType::kInt8:
      return {"-128", "127"};
    case DType::kUInt8:
      return {"0", "255"};
    case DType::kBool:
      return {"0", "1"};
    default:
      return {"(-9223372036854775807 - 1)", "9223372036854775807"};
  }
}

}  // namespace

// Identity element of a reduction's accumulator, as code for its dtype: an integer one within the
// accumulator's own type (a 64-bit limit in an int32 tl.full does not compile).
std::string Identity(ReductionKind kind, DType dtype) {
  const bool floating = IsFloating(dtype);
  if (IsMaxLike(kind)) {
    return floating ? "float('-inf')" : IntegerLimits(dtype).first;
  }
  if (IsMinLike(kind)) {
    return floating ? "float('inf')" : IntegerLimits(dtype).second;
  }
  if (kind == ReductionKind::kProd || kind == ReductionKind::kAll) {
    return "1";
  }
  return "0";
}

kir::Combine RowCombine(ReductionKind kind) {
  if (kind == ReductionKind::kMax || kind == ReductionKind::kAny) {
    return kir::Combine::kMax;
  }
  if (kind == ReductionKind::kProd) {
    return kir::Combine::kMul;
  }
  return kind == ReductionKind::kMin || kind == ReductionKind::kAll ? kir::Combine::kMin : kir::Combine::kAdd;
}

kir::Statement WelfordReduce(const std::string& tag, std::vector<std::string> operands) {
  kir::Reduction reduction;
  reduction.results = {"redm" + tag, "reds" + tag, "redn" + tag};
  reduction.operands = std::move(operands);
  reduction.function = "_egg_welford";
  return kir::Statement::Reduce(0, std::move(reduction));
}

kir::Statement PairReduce(const std::string& tag, std::vector<std::string> operands, std::string reducer) {
  kir::Reduction reduction;
  reduction.results = {"redv" + tag, "redi" + tag};
  reduction.operands = std::move(operands);
  reduction.function = std::move(reducer);
  return kir::Statement::Reduce(0, std::move(reduction));
}

std::string ArgReducer(bool is_max) { return is_max ? "_egg_argmax" : "_egg_argmin"; }

kir::Statement RowReduce(std::string result, std::string operand, ReductionKind kind) {
  kir::Reduction reduction;
  reduction.results = {std::move(result)};
  reduction.operands = {std::move(operand)};
  reduction.combine = RowCombine(kind);
  reduction.keep_dims = true;
  return kir::Statement::Reduce(0, std::move(reduction));
}

DType AccumulatorType(ReductionKind kind, DType input) {
  if (IsLogical(kind)) {
    return DType::kInt32;
  }
  if (IsFloating(input)) {
    return input == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  }
  if (kind == ReductionKind::kSum || kind == ReductionKind::kProd || kind == ReductionKind::kMean) {
    return DType::kInt64;
  }
  return input;
}

void KernelWriter::StoreIfNeeded(int value, const std::vector<Index>& index, const Operand& operand,
                                 const std::string& mask) {
  if (Stored(value)) {
    emitter_.Store(value, index, operand, layouts_.at(value), mask);
  }
}

std::string KernelWriter::PointerParams(const KernelEmitter& emitter) {
  std::string params;
  for (size_t i = 0; i < emitter.PointerValues().size(); ++i) {
    params += "ptr" + std::to_string(i) + ", ";
  }
  return params;
}

std::string KernelWriter::Indented(const std::vector<std::string>& lines, int depth) {
  std::string code;
  for (const std::string& line : lines) {
    code += (code.empty() ? "" : "\n") + std::string(static_cast<size_t>(4 * depth), ' ') + line;
  }
  return code;
}

std::vector<kir::Statement> KernelWriter::TextLines(const std::vector<std::string>& lines, int depth) {
  std::vector<kir::Statement> statements;
  statements.reserve(lines.size());
  for (const std::string& line : lines) {
    statements.push_back(kir::Statement::Text(depth, line));
  }
  return statements;
}

KernelSource KernelWriter::Finish(const std::string& template_name, templates::Values values,
                                  const std::string& grid, std::map<std::string, int64_t> constexprs,
                                  const std::string& function) {
  KernelSource source;
  source.name = kernel_.name;
  source.int64_indexing =
      NeedsInt64(graph_, std::max(emitter_.MaxAddress(), kernel_.rows * kernel_.length)) || wide_scratch_;
  values.text["name"] = function.empty() ? kernel_.name : function;
  values.text["params"] = PointerParams(emitter_);
  values.text["summary"] = Summary(graph_, kernel_);
  values.flags["int64"] = source.int64_indexing;
  source.code = templates::Render(template_name, values);
  source.launches.push_back({function.empty() ? kernel_.name : function,
                             emitter_.PointerValues(),
                             grid,
                             std::move(constexprs),
                             {}});
  source.helpers = emitter_.Helpers();
  source.loaded = emitter_.Loaded();
  source.computed = ComputedNodes();
  return source;
}

std::set<int> KernelWriter::ComputedNodes() const {
  std::set<int> computed = emitter_.Computed();
  for (const ReductionSpec& spec : kernel_.reductions) {
    computed.insert(spec.node);
  }
  for (const std::optional<int> node :
       {kernel_.pool ? std::optional<int>(kernel_.pool->node) : std::nullopt,
        kernel_.scan ? std::optional<int>(kernel_.scan->node) : std::nullopt,
        kernel_.matmul ? std::optional<int>(kernel_.matmul->node) : std::nullopt}) {
    if (node) {
      computed.insert(*node);
    }
  }
  return computed;
}

kir::Kernel KernelWriter::FinishRows(const std::string& comment) {
  kir::Kernel program = FinishFlat(comment, kernel_.rows);
  kir::Function& function = program.functions.front();
  function.constexprs.push_back("RBLOCK");
  function.domain.kind = kir::Domain::Kind::kRows;
  program.launches.front().constexprs["RBLOCK"] = kernel_.design.rblock;
  return program;
}

kir::Kernel KernelWriter::FinishFlat(const std::string& comment, int64_t numel) {
  kir::Kernel program = FlatProgram(kernel_, numel, emitter_, comment);
  program.computed = ComputedNodes();
  return program;
}

void KernelWriter::WriteEpilogues(const Index& flat, int producer) {
  for (int root : kernel_.roots) {
    if (root == producer) {
      continue;
    }
    const auto index = Delinearize(flat, MetaOf(graph_, root).shape);
    const Operand value = emitter_.Emit(root, index);
    const char* mask = kernel_.kind == KernelKind::kScan ? "mask" : (DotTiles(kernel_) ? "omask" : "xmask");
    StoreIfNeeded(root, index, value, mask);
  }
}

Operand KernelWriter::EmitUnder(int value, const std::vector<Index>& index, const std::string& valid,
                                const std::string& name) {
  if (valid.empty()) {
    return emitter_.Emit(value, index);
  }
  emitter_.Line(name + " = " + valid);
  emitter_.PushCondition(name);
  const Operand operand = emitter_.Emit(value, index);
  emitter_.PopCondition();
  return operand;
}

}  // namespace egg::expert::writer

namespace egg::expert {

std::vector<Index> AnchorIndex(const std::vector<int64_t>& shape, const std::vector<int64_t>& reduced,
                               const Index& x, const Index& r) {
  std::vector<int64_t> kept_shape;
  std::vector<int64_t> reduced_shape;
  std::vector<bool> is_reduced(shape.size(), false);
  for (int64_t d : reduced) {
    is_reduced[static_cast<size_t>(d)] = true;
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    (is_reduced[d] ? reduced_shape : kept_shape).push_back(shape[d]);
  }
  const auto kept_index = Delinearize(x, kept_shape);
  const auto reduced_index = Delinearize(r, reduced_shape);
  std::vector<Index> index(shape.size());
  size_t k = 0;
  size_t j = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    index[d] = is_reduced[d] ? reduced_index[j++] : kept_index[k++];
  }
  return index;
}

KernelSource GenerateKernel(const Graph& graph, const KernelPlan& kernel,
                            const std::map<int, TensorMeta>& memory,
                            const std::map<int, TensorMeta>& layouts) {
  RequireLegalDesign(kernel);  // a matmul design with a tile side of 0 would divide by it
  return FamilyOf(kernel.kind).Lower(graph, kernel, memory, layouts);
}

KernelSource SourceOf(const kir::Kernel& kernel) {
  KernelSource source;
  source.name = kernel.name;
  source.code = kir::Print(kernel);
  source.launches = kernel.launches;
  source.scratch = kernel.scratch;
  source.helpers = kernel.helpers;
  source.loaded = kir::Reads(kernel);
  source.computed = kernel.computed;
  source.int64_indexing = kernel.int64_indexing;
  const kir::StagedTiles tiles = kir::StagedTileLoads(kernel);
  source.a_tile_loads = tiles.a;
  source.b_tile_loads = tiles.b;
  return source;
}

std::vector<std::string> PrecompileCalls(const Graph& graph, const KernelPlan& kernel,
                                         const KernelSource& source) {
  std::vector<std::string> calls;
  for (const KernelLaunch& launch : source.launches) {
    std::string call = launch.function + ".warmup(";
    for (int pointer : launch.pointers) {
      const DType dtype = IsScratch(pointer) ? source.scratch.at(ScratchIndex(pointer)).dtype
                                             : ValueAt(graph, pointer).meta->dtype;
      call += TorchDType(dtype) + ", ";
    }
    for (const auto& scalar : launch.scalars) {  // a runtime integer: its value only picks specializations
      call += std::to_string(scalar.second) + ", ";
    }
    for (const auto& [key, number] : launch.constexprs) {
      call += fmt::format("{}={}, ", key, number);
    }
    calls.push_back(call + fmt::format("num_warps={}, num_stages={}, grid=(1,))", kernel.design.num_warps,
                                       kernel.design.num_stages));
  }
  return calls;
}

kir::Kernel FlatProgram(const KernelPlan& kernel, int64_t numel, KernelEmitter& emitter,
                        const std::string& comment) {
  kir::Kernel program;
  program.name = kernel.name;
  program.int64_indexing =
      writer::NeedsInt64(emitter.GraphRef(), std::max(emitter.MaxAddress(), kernel.rows * kernel.length));
  kir::Function function;
  function.name = kernel.name;
  function.pointers = emitter.PointerValues().size();
  function.constexprs = {"XBLOCK"};
  function.comment = comment;
  function.domain = {kir::Domain::Kind::kFlat, numel, program.int64_indexing, 0, {}, {}};
  function.body = emitter.CloseStatements();
  program.functions.push_back(std::move(function));
  program.launches.push_back({kernel.name,
                              emitter.PointerValues(),
                              fmt::format("(triton.cdiv({}, {}),)", numel, kernel.design.xblock),
                              {{"XBLOCK", kernel.design.xblock}},
                              {}});
  program.helpers = emitter.Helpers();
  program.computed = emitter.Computed();
  return program;
}

kir::Kernel PointwiseProgram(const Graph& graph, const KernelPlan& kernel,
                             const std::map<int, TensorMeta>& memory,
                             const std::map<int, TensorMeta>& layouts) {
  KernelEmitter emitter(graph, memory, MaskSet::Flat());
  const int64_t numel = Product(kernel.shape);
  const Index x = Index::Var("xindex", numel);
  for (int root : kernel.roots) {
    const auto index = Delinearize(x, writer::MetaOf(graph, root).shape);
    const Operand value = emitter.Emit(root, index);
    if (writer::Contains(kernel.stores, root)) {
      emitter.Store(root, index, value, layouts.at(root), "xmask");
    }
  }
  return FlatProgram(kernel, numel, emitter,
                     fmt::format("pointwise over {} elements: {}", numel, writer::Summary(graph, kernel)));
}

kir::Kernel ReductionProgram(const Graph& graph, const KernelPlan& kernel,
                             const std::map<int, TensorMeta>& memory,
                             const std::map<int, TensorMeta>& layouts) {
  writer::KernelWriter writer(graph, kernel, memory, layouts, MaskSet::Rows());
  return kernel.design.algorithm == Algorithm::kSplit ? writer.SplitReductionProgram()
                                                      : writer.ReductionProgram();
}

kir::Kernel PoolProgram(const Graph& graph, const KernelPlan& kernel, const std::map<int, TensorMeta>& memory,
                        const std::map<int, TensorMeta>& layouts) {
  return writer::KernelWriter(graph, kernel, memory, layouts, MaskSet::Flat()).PoolProgram();
}

kir::Kernel ScanProgram(const Graph& graph, const KernelPlan& kernel, const std::map<int, TensorMeta>& memory,
                        const std::map<int, TensorMeta>& layouts) {
  return writer::KernelWriter(graph, kernel, memory, layouts, MaskSet::Rows()).ScanProgram();
}

kir::Kernel MatmulProgram(const Graph& graph, const KernelPlan& kernel,
                          const std::map<int, TensorMeta>& memory, const std::map<int, TensorMeta>& layouts) {
  const MaskSet masks = DotTiles(kernel) ? MaskSet::Tiles() : MaskSet::Flat();
  return writer::KernelWriter(graph, kernel, memory, layouts, masks).MatmulProgram();
}
}  // namespace egg::expert
