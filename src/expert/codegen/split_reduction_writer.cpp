// Split reductions: few long rows, partials per row slice, then a kernel combining them. One kernel in the
// kernel IR: a function and a launch for each, the partials in its scratch buffers.
#include <fmt/format.h>

#include <algorithm>

#include "expert/codegen/kernel_writer.h"

namespace egg::expert::writer {

namespace {

// The slot of row xindex and split `split` (a lane variable) in a [rows, splits] scratch buffer, row-major,
// as one atom: an Index orders its terms by name and would print it `split + S*xindex`, another text.
Index ScratchSlot(int64_t rows, int64_t splits, const std::string& split) {
  return Index::Runtime(fmt::format("xindex * {} + {}", splits, split), 0, rows * splits - 1);
}

// A load or store of scratch buffer `scratch` at `slot`, under `mask`, at the function's top level: typed, so
// that the kernel IR knows which launch writes a partial and which reads it.
kir::Statement ScratchAccess(kir::Statement::Kind kind, size_t scratch, KernelEmitter& emitter,
                             const Index& slot, const std::string& mask) {
  kir::Statement access;
  access.kind = kind;
  access.depth = 1;
  access.buffer = ScratchId(scratch);
  access.pointer = emitter.PointerName(access.buffer);
  access.address = slot;
  access.mask = mask;
  return access;
}

}  // namespace

kir::Kernel KernelWriter::SplitReductionProgram() {
  const KernelDesign& design = kernel_.design;
  const int64_t rblock = design.rblock;
  int64_t chunk = (kernel_.length + design.split - 1) / design.split;
  chunk = (chunk + rblock - 1) / rblock * rblock;
  const int64_t splits = (kernel_.length + chunk - 1) / chunk;
  const Index x = Index::Var("xindex", kernel_.rows);
  const Index r = Index::Var("rindex", kernel_.length);
  kir::Kernel program;
  program.name = kernel_.name;
  const std::vector<std::vector<SplitPart>> parts = SplitPartials(x, r, chunk, splits, program);
  SplitCombine(x, splits, parts, program);
  const std::set<int> computed = ComputedNodes();
  program.computed.insert(computed.begin(), computed.end());
  return program;
}

std::vector<std::vector<KernelWriter::SplitPart>> KernelWriter::SplitPartials(const Index& x, const Index& r,
                                                                              int64_t chunk, int64_t splits,
                                                                              kir::Kernel& program) {
  // Partial function: one loop, every reduction of the kernel accumulated together.
  KernelEmitter& partial = emitter_;
  std::vector<kir::Statement> init;
  std::vector<kir::Statement> finish;
  std::vector<std::vector<SplitPart>> parts(kernel_.reductions.size());
  partial.OpenScope(2);
  for (size_t i = 0; i < kernel_.reductions.size(); ++i) {
    const ReductionSpec& spec = kernel_.reductions[i];
    const Operand input = partial.Emit(spec.input, ReductionInputIndex(spec, x, r));
    Accumulator acc = IsVariance(spec) ? WelfordAccumulate(spec, input, std::to_string(i))
                                       : Accumulate(spec, input, true, std::to_string(i), "");
    for (const kir::Statement& statement : acc.update) {
      partial.Add(statement);
    }
    init.insert(init.end(), acc.init.begin(), acc.init.end());
    finish.insert(finish.end(), acc.finish.begin(), acc.finish.end());
    parts[i] = AddSplitParts(spec, i, AccumulatorType(spec.kind, input.dtype), splits, program.scratch);
  }
  std::vector<kir::Statement> body = partial.CloseStatements();
  partial.Line("split = tl.program_id(1)");
  for (const kir::Statement& tile : init) {
    partial.Add(tile);
  }
  partial.Loop("roffset", kir::LoopRange::Stepped("0", std::to_string(chunk), "RBLOCK"));
  partial.Append(TileLines(2, fmt::format("split * {} + roffset + ", chunk)));
  partial.Append(std::move(body));
  for (const kir::Statement& statement : finish) {
    partial.Add(statement);
  }
  const Index slot = ScratchSlot(kernel_.rows, splits, "split");
  for (const auto& list : parts) {
    for (const SplitPart& part : list) {
      kir::Statement store =
          ScratchAccess(kir::Statement::Kind::kStore, part.scratch, partial, slot, "xmask");
      store.data = part.code;
      partial.Append({std::move(store)});
    }
  }
  kir::Function function;
  function.name = kernel_.name + "_partial";
  function.pointers = partial.PointerValues().size();
  function.constexprs = {"XBLOCK", "RBLOCK"};
  function.comment = fmt::format("split ({} programs per row, partials) reduction, {} rows x {}: {}", splits,
                                 kernel_.rows, kernel_.length, Summary(graph_, kernel_));
  program.int64_indexing = NeedsInt64(graph_, std::max(partial.MaxAddress(), kernel_.rows * kernel_.length));
  function.domain = {kir::Domain::Kind::kRows, kernel_.rows, program.int64_indexing, 0, {}, {}};
  function.body = partial.CloseStatements();
  program.functions.push_back(std::move(function));
  const KernelDesign& design = kernel_.design;
  program.launches.push_back({kernel_.name + "_partial",
                              partial.PointerValues(),
                              fmt::format("(triton.cdiv({}, {}), {})", kernel_.rows, design.xblock, splits),
                              {{"XBLOCK", design.xblock}, {"RBLOCK", design.rblock}},
                              {}});
  program.helpers = partial.Helpers();
  return parts;
}

std::vector<KernelWriter::SplitPart> KernelWriter::AddSplitParts(const ReductionSpec& spec, size_t number,
                                                                 DType acc_type, int64_t splits,
                                                                 std::vector<Scratch>& scratch) const {
  const std::string tag = std::to_string(number);
  std::vector<SplitPart> parts;
  if (IsIndexed(spec.kind)) {
    const bool is_max = IsMaxLike(spec.kind);
    parts.push_back({scratch.size(), "redv" + tag + "[:, None]", acc_type,
                     Identity(is_max ? ReductionKind::kMax : ReductionKind::kMin, acc_type)});
    scratch.push_back({kernel_.rows * splits, acc_type});
    parts.push_back({scratch.size(), "redi" + tag + "[:, None]", DType::kInt64, "0"});
    scratch.push_back({kernel_.rows * splits, DType::kInt64});
  } else if (IsVariance(spec)) {
    for (const char* name : {"redm", "reds", "redn"}) {
      parts.push_back({scratch.size(), name + tag + "[:, None]", DType::kFloat32, "0.0"});
      scratch.push_back({kernel_.rows * splits, DType::kFloat32});
    }
  } else {
    const std::string identity = Identity(spec.kind, acc_type);
    parts.push_back({scratch.size(), "red" + tag, acc_type, identity});
    scratch.push_back({kernel_.rows * splits, acc_type});
  }
  return parts;
}

void KernelWriter::SplitCombine(const Index& x, int64_t splits,
                                const std::vector<std::vector<SplitPart>>& parts, kir::Kernel& program) {
  // Combine function: a row block per program, the partials of its rows in one tile.
  MaskSet masks{{{"xindex", "xmask"}}, {}, "xindex"};
  KernelEmitter combine(graph_, memory_, masks);
  const int64_t sblock = NextPowerOfTwo(splits);
  const int64_t xblock =
      std::max<int64_t>(1, std::min<int64_t>(kCombineTile / sblock, NextPowerOfTwo(kernel_.rows)));
  combine.Line(fmt::format("sindex = tl.arange(0, SBLOCK)[None, :]"));
  combine.Line(fmt::format("smask = sindex < {}", splits));
  combine.Line("mask = xmask & smask");
  for (size_t i = 0; i < kernel_.reductions.size(); ++i) {
    const Accumulator results = CombineSplitParts(kernel_.reductions[i], i, parts[i], splits, combine);
    for (const auto& [value, operand] : results.results) {
      combine.DefineRow(value, operand, x);
      if (Stored(value)) {
        combine.Store(value, Delinearize(x, MetaOf(graph_, value).shape), operand, layouts_.at(value),
                      "xmask");
      }
    }
  }
  EmitSplitEpilogues(x, combine);
  kir::Function function;
  function.name = kernel_.name;
  function.pointers = combine.PointerValues().size();
  function.constexprs = {"XBLOCK", "SBLOCK"};
  function.comment = fmt::format("combines {} partial results for each of {} rows: {}", splits, kernel_.rows,
                                 Summary(graph_, kernel_));
  function.domain = {kir::Domain::Kind::kRowBlock, kernel_.rows, false, 0, {}, {}};
  function.body = combine.CloseStatements();
  program.functions.push_back(std::move(function));
  program.launches.push_back({kernel_.name,
                              combine.PointerValues(),
                              fmt::format("(triton.cdiv({}, {}),)", kernel_.rows, xblock),
                              {{"XBLOCK", xblock}, {"SBLOCK", sblock}},
                              {}});
  program.helpers.insert(program.helpers.end(), combine.Helpers().begin(), combine.Helpers().end());
  program.computed.insert(combine.Computed().begin(), combine.Computed().end());
}

KernelWriter::Accumulator KernelWriter::CombineSplitParts(const ReductionSpec& spec, size_t number,
                                                          const std::vector<SplitPart>& parts, int64_t splits,
                                                          KernelEmitter& combine) {
  const std::string tag = std::to_string(number);
  std::vector<std::string> loaded;
  const Index slot = ScratchSlot(kernel_.rows, splits, "sindex");
  for (const SplitPart& part : parts) {
    kir::Statement load = ScratchAccess(kir::Statement::Kind::kLoad, part.scratch, combine, slot, "mask");
    load.name = "p" + tag + "_" + std::to_string(loaded.size());
    load.form = kir::LoadForm::kMasked;
    load.other = part.identity;
    loaded.push_back(load.name);
    combine.Append({std::move(load)});
  }
  const DType out_type =
      ComputeDType(MetaOf(graph_, spec.outputs.at(0) >= 0 ? spec.outputs[0] : spec.outputs.at(1)).dtype);
  Accumulator results;
  const std::string red = "red" + tag;
  if (loaded.size() == 3) {
    combine.Add(WelfordReduce(tag, loaded));
    WelfordResults(spec, "redm" + tag + "[:, None]", "reds" + tag + "[:, None]", &results);
  } else if (loaded.size() == 2) {
    const bool is_max = IsMaxLike(spec.kind);
    combine.Add(PairReduce(tag, loaded, ArgReducer(is_max)));
    if (spec.kind == ReductionKind::kArgmax || spec.kind == ReductionKind::kArgmin) {
      results.results.emplace_back(spec.outputs[0],
                                   Operand{"redi" + tag + "[:, None]", DType::kInt64, false});
    } else {
      if (spec.outputs[0] >= 0) {
        results.results.emplace_back(spec.outputs[0], Operand{"redv" + tag + "[:, None]", out_type, false});
      }
      if (spec.outputs.size() > 1 && spec.outputs[1] >= 0) {
        results.results.emplace_back(spec.outputs[1],
                                     Operand{"redi" + tag + "[:, None]", DType::kInt64, false});
      }
    }
  } else {
    const ReductionKind k = spec.kind;
    combine.Add(RowReduce(red, loaded[0], k));
    std::string value = red;
    if (k == ReductionKind::kMean) {
      value = fmt::format("({} / {})", red, spec.Length());
    } else if (IsLogical(k)) {
      value = "(" + red + " != 0)";
    }
    results.results.emplace_back(spec.outputs[0], Operand{value, out_type, false});
  }
  return results;
}

void KernelWriter::EmitSplitEpilogues(const Index& x, KernelEmitter& combine) {
  for (int root : kernel_.roots) {
    const bool reduction =
        std::any_of(kernel_.reductions.begin(), kernel_.reductions.end(), [&](const ReductionSpec& spec) {
          return graph_.nodes.at(static_cast<size_t>(spec.node)).value == root;
        });
    if (reduction) {
      continue;
    }
    if (MetaOf(graph_, root).Numel() != kernel_.rows) {
      throw NotFusable("a split reduction kernel computes only per-row results");
    }
    const auto index = Delinearize(x, MetaOf(graph_, root).shape);
    const Operand value = combine.Emit(root, index);
    if (Stored(root)) {
      combine.Store(root, index, value, layouts_.at(root), "xmask");
    }
  }
}

}  // namespace egg::expert::writer
