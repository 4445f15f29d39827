// Matrix-product kernels in tl.dot tiles (tiled, splitk, aligned, gemv) and their epilogues.
#include <fmt/format.h>

#include <algorithm>

#include "expert/codegen/kernel_writer.h"

namespace egg::expert::writer {

KernelSource KernelWriter::WriteMatmul() {
  const MatmulSpec& mm = *kernel_.matmul;
  if (mm.conv) {
    return WriteConvolution();
  }
  const int out = graph_.nodes.at(static_cast<size_t>(mm.node)).value;
  const Index b = mm.batched ? Index::Var("bindex", mm.batch) : Index(0);
  const Index m = Index::Var("mindex", mm.m);
  const Index n = Index::Var("nindex", mm.n);
  const Index ka = Index::Var("kaindex", mm.k);
  const Index kb = Index::Var("kbindex", mm.k);
  auto operand_index = [&](const Index& row, const Index& column) {
    return mm.batched ? std::vector<Index>{b, row, column} : std::vector<Index>{row, column};
  };
  const bool aligned = kernel_.design.algorithm == Algorithm::kAligned;
  const std::string prologue = kernel_.design.algorithm == Algorithm::kTiled || aligned
                                   ? DroppedTilePrologue(out, operand_index(m, n))
                                   : "";
  emitter_.OpenScope(2);
  if (aligned) {
    LoadAlignedOperands(b, m, n, ka, kb);
  }
  const Operand a =
      aligned ? Operand{"a", DType::kFloat32, false} : EmitDotOperand(mm.a, operand_index(m, ka));
  const Operand bt =
      aligned ? Operand{"b", DType::kFloat32, false} : EmitDotOperand(mm.b, operand_index(kb, n));
  if (a.scalar || bt.scalar) {
    throw NotFusable("a constant matrix operand");
  }
  // Masked lanes must contribute zeros whatever the operand's producer computes there. When both operands are
  // float32 loads under those masks (their masked lanes read zeros) they go to tl.dot as loaded, so Triton
  // pipelines both into shared memory: 4096^3 at tol 1e-4 went from 3.28 to 2.47 ms on the H200. With one
  // operand computed in registers, the other is selected too: a loaded V beside a computed P in 1_97's second
  // product measured 18.9 ms against 15.5 ms with both selected (bench/results/h200-expert-tol1e-4).
  const bool loaded = aligned || (emitter_.ZeroWhereMasked(a, {"mmask", "kamask"}) &&
                                  emitter_.ZeroWhereMasked(bt, {"kbmask", "nmask"}));
  if (!aligned) {
    emitter_.Line(loaded ? "a = " + a.code
                         : fmt::format("a = tl.where(mmask & kamask, ({}).to(tl.float32), 0.0)", a.code));
    emitter_.Line(loaded ? "b = " + bt.code
                         : fmt::format("b = tl.where(kbmask & nmask, ({}).to(tl.float32), 0.0)", bt.code));
  }
  const std::string loop = Join(emitter_.CloseScope());
  const Index flat = (b * mm.m + m) * mm.n + n;
  std::string result = "acc";
  if (mm.alpha != 1.0) {
    result = fmt::format("({} * {})", result, FloatLiteral(mm.alpha));
  }
  if (mm.bias >= 0) {
    const auto bias_index = BroadcastIndex({m, n}, {mm.m, mm.n}, MetaOf(graph_, mm.bias).shape);
    const Operand bias = emitter_.Emit(mm.bias, bias_index);
    std::string term = "(" + bias.code + ").to(tl.float32)";
    if (mm.beta != 1.0) {
      term = fmt::format("({} * {})", term, FloatLiteral(mm.beta));
    }
    result = mm.beta == 0.0 ? result : result + " + " + term;
  }
  emitter_.Line("product = " + result);
  const auto out_index = mm.batched ? std::vector<Index>{b, m, n} : std::vector<Index>{m, n};
  KernelSource source = FinishMatmul(loop, out, out_index, flat, prologue);
  if (aligned) {
    AddAlignedCopies(source);
  }
  return source;
}

std::string KernelWriter::DroppedTilePrologue(int out, const std::vector<Index>& out_index) {
  // A product whose only reader is where(cond, product, other) with cond computed from indices alone
  // (torch.triu / tril of a product: 1_14, 1_15) needs no K loop in a tile where cond holds nowhere.
  const auto masked = IndexMaskedReader(out);
  if (!masked) {
    return "";
  }
  emitter_.OpenScope(1);
  const Operand cond = emitter_.Emit(
      masked->cond, BroadcastIndex(out_index, MetaOf(graph_, out).shape, MetaOf(graph_, masked->cond).shape));
  const std::string taken = masked->product_when_true ? cond.code : "~(" + cond.code + ")";
  emitter_.Line("# no K loop for a tile whose every product lane the where drops");
  emitter_.Line(fmt::format("k_end = tl.where(tl.max(tl.where(omask & ({}), 1, 0)) > 0, {}, 0)", taken,
                            kernel_.matmul->k));
  skip_dropped_tiles_ = true;
  return Join(emitter_.CloseScope());
}

void KernelWriter::LoadAlignedOperands(const Index& b, const Index& m, const Index& n, const Index& ka,
                                       const Index& kb) {
  // Both operands from their aligned copies (scratch 0 and 1, written by the first launches).
  const MatmulSpec& mm = *kernel_.matmul;
  const int64_t a_stride = AlignedStride(mm.k);
  const int64_t b_stride = AlignedStride(mm.n);
  // A copy past int32 offsets: the rows' K index in int64 too (mindex and bindex are by the template)
  wide_scratch_ = mm.batch * mm.m * a_stride > kInt32Max || mm.batch * mm.k * b_stride > kInt32Max;
  if (wide_scratch_) {
    emitter_.Line("kbwide = kbindex.to(tl.int64)");
  }
  const Index k_rows = wide_scratch_ ? Index::Var("kbwide", mm.k) : kb;
  emitter_.Line(fmt::format("a = tl.load({} + ({}), mmask & kamask, other=0.0)",
                            emitter_.PointerName(ScratchId(0)), ((b * mm.m + m) * a_stride + ka).Code()));
  emitter_.Line(fmt::format("b = tl.load({} + ({}), kbmask & nmask, other=0.0)",
                            emitter_.PointerName(ScratchId(1)), ((b * mm.k + k_rows) * b_stride + n).Code()));
}

void KernelWriter::AddAlignedCopies(KernelSource& source) {
  // The copies, A as [batch * m, k] and B as [batch * k, n] rows at the aligned strides: read through the
  // emitter, so a transposed view or a computed operand is copied in the product's own orientation.
  const MatmulSpec& mm = *kernel_.matmul;
  const int64_t a_stride = AlignedStride(mm.k);
  const int64_t b_stride = AlignedStride(mm.n);
  auto rows_of = [&](int64_t rows) {
    return mm.batched ? Delinearize(Index::Var("pindex", mm.batch * rows), {mm.batch, rows})
                      : std::vector<Index>{Index::Var("pindex", rows)};
  };
  std::vector<Index> a_index = rows_of(mm.m);
  a_index.push_back(Index::Var("cindex", mm.k));
  std::vector<Index> b_index = rows_of(mm.k);
  b_index.push_back(Index::Var("cindex", mm.n));
  source.scratch.push_back({mm.batch * mm.m * a_stride, DType::kFloat32});
  source.scratch.push_back({mm.batch * mm.k * b_stride, DType::kFloat32});
  PrependRepack(source, mm.b, b_index, mm.batch * mm.k, mm.n, b_stride, ScratchId(1), "_aligned_b",
                "B copied into rows of a 32-float stride");
  PrependRepack(source, mm.a, a_index, mm.batch * mm.m, mm.k, a_stride, ScratchId(0), "_aligned_a",
                "A copied into rows of a 32-float stride");
}

Operand KernelWriter::EmitDotOperand(int value, const std::vector<Index>& index) {
  // A half operand read in place (through views at most) reaches tl.dot in its half type.
  emitter_.KeepHalfLoads(IsHalf(kernel_.matmul->dtype) && emitter_.ReadThroughViews(value));
  const Operand operand = emitter_.Emit(value, index);
  emitter_.KeepHalfLoads(false);
  return operand;
}

std::string DotOperandCast(DType operand) {
  if (operand == DType::kBFloat16) {
    return std::string(".to(") + kBf16Dot + ")";
  }
  return operand == DType::kFloat16 ? ".to(tl.float16)" : "";
}

int64_t KernelWriter::AlignedStride(int64_t columns) {
  constexpr int64_t kAlignFloats = 32;
  return (columns + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
}

std::optional<KernelWriter::IndexMask> KernelWriter::IndexMaskedReader(int out) const {
  const Value& product = graph_.values.at(static_cast<size_t>(out));
  for (const Arg& output : graph_.outputs) {
    if (output.kind == Arg::Kind::kValue && output.value == out) {
      return std::nullopt;
    }
  }
  if (product.users.size() != 1) {
    return std::nullopt;
  }
  const Node& where = graph_.nodes.at(static_cast<size_t>(product.users[0]));
  if (where.op != "aten.where.self" || where.args.size() != 3 || where.args[0].kind != Arg::Kind::kValue) {
    return std::nullopt;
  }
  const bool when_true = where.args[1].kind == Arg::Kind::kValue && where.args[1].value == out;
  const bool when_false = where.args[2].kind == Arg::Kind::kValue && where.args[2].value == out;
  const int cond = where.args[0].value;
  const Value& where_value = graph_.values.at(static_cast<size_t>(where.value));
  if (when_true == when_false || !where_value.meta || where_value.meta->shape != MetaOf(graph_, out).shape ||
      !IndexOnly(cond)) {
    return std::nullopt;
  }
  return IndexMask{cond, when_true};
}

bool KernelWriter::IndexOnly(int value) const {
  const Value& v = graph_.values.at(static_cast<size_t>(value));
  if (v.kind != ValueKind::kNode) {
    return !v.meta;
  }
  const Node& node = graph_.nodes.at(static_cast<size_t>(v.node));
  const OpClass op_class = ClassifyOp(node.op);
  if (op_class != OpClass::kPointwise && op_class != OpClass::kView) {
    return false;
  }
  return std::all_of(node.args.begin(), node.args.end(),
                     [&](const Arg& arg) { return arg.kind != Arg::Kind::kValue || IndexOnly(arg.value); });
}

KernelSource KernelWriter::FinishMatmul(const std::string& loop, int out, const std::vector<Index>& out_index,
                                        const Index& flat, const std::string& prologue,
                                        templates::Values values) {
  const MatmulSpec& mm = *kernel_.matmul;
  const KernelDesign& design = kernel_.design;
  const Operand product{"product", DType::kFloat32, false};
  emitter_.DefineRow(out, product, flat);
  StoreIfNeeded(out, out_index, product, "omask");
  WriteEpilogues(flat, out);
  const int64_t grid_n = (mm.n + design.yblock - 1) / design.yblock;
  const int64_t grid_m = (mm.m + design.xblock - 1) / design.xblock;
  values.text["m"] = std::to_string(mm.m);
  values.text["n"] = std::to_string(mm.n);
  values.text["k"] = std::to_string(mm.k);
  values.text["k_end"] = skip_dropped_tiles_ ? "k_end" : std::to_string(mm.k);
  values.text["batch"] = std::to_string(mm.batch);
  values.text["grid_n"] = std::to_string(grid_n);
  // With a dynamic batch M may be a runtime size: its tile count is computed where M is known (a count
  // computed here would be a floor of the batch, which dynamic_batch.h refuses), and groups are always
  // kMatmulGroupRows high (the last group's rows are clipped either way).
  const bool dynamic = graph_.dynamic.has_value();
  values.text["grid_m"] = dynamic ? fmt::format("tl.cdiv({}, BLOCK_M)", mm.m) : std::to_string(grid_m);
  const int64_t group_m = dynamic ? kMatmulGroupRows : std::min<int64_t>(kMatmulGroupRows, grid_m);
  values.text["group_m"] = std::to_string(group_m);
  values.text["group_size"] = std::to_string(group_m * grid_n);
  values.text["precision"] = NameText(DotPrecision(design.precision));
  values.text["dot_cast"] = DotOperandCast(MetaOf(graph_, mm.a).dtype);
  values.flags["batched"] = mm.batched;
  values.flags["gemv"] = design.algorithm == Algorithm::kGemv;
  values.text["loop"] = loop;
  values.flags["has_prologue"] = !prologue.empty();
  values.text["prologue"] = prologue;
  values.text["body"] = Join(emitter_.CloseScope());
  const std::map<std::string, int64_t> blocks = {
      {"BLOCK_M", design.xblock}, {"BLOCK_N", design.yblock}, {"BLOCK_K", design.rblock}};
  const std::string grid =
      dynamic ? fmt::format("(triton.cdiv({}, {}) * {}, {}", mm.m, design.xblock, grid_n, mm.batch)
              : fmt::format("({}, {}", grid_m * grid_n, mm.batch);
  KernelSource source;
  if (design.algorithm == Algorithm::kSplitK || (design.algorithm == Algorithm::kGemv && design.split >= 2)) {
    // Split-K: programs (tile, batch, split) write partial products into a scratch buffer; a second kernel
    // per (tile, batch) sums them in order and runs the epilogue. For few output tiles over a deep K.
    int64_t chunk = (mm.k + design.split - 1) / design.split;
    chunk = (chunk + design.rblock - 1) / design.rblock * design.rblock;
    const int64_t splits = (mm.k + chunk - 1) / chunk;
    const int64_t partials = splits * mm.batch * mm.m * mm.n;
    values.text["chunk"] = std::to_string(chunk);
    values.text["splits"] = std::to_string(splits);
    values.text["partials"] = emitter_.PointerName(ScratchId(0));
    const std::string slice = mm.batched ? fmt::format("(split * {} + bindex)", mm.batch) : "split";
    values.text["partial_offset"] = fmt::format("(mindex + {} * {}) * {} + nindex", slice, mm.m, mm.n);
    wide_scratch_ = partials > kInt32Max;
    values.flags["partial"] = true;
    KernelSource partial = Finish("triton/matmul.py.mustache", values, fmt::format("{}, {})", grid, splits),
                                  blocks, kernel_.name + "_partial");
    values.flags["partial"] = false;
    values.flags["combine"] = true;
    source = Finish("triton/matmul.py.mustache", values, grid + ")", blocks);
    source.code = partial.code + "\n\n" + source.code;
    source.launches.insert(source.launches.begin(), partial.launches.front());
    source.scratch.push_back({partials, DType::kFloat32});
  } else {
    source = Finish("triton/matmul.py.mustache", values, grid + ")", blocks);
  }
  std::istringstream lines(loop);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("tl.load(") != std::string::npos) {
      source.a_tile_loads += line.find("mmask") != std::string::npos ? 1 : 0;
      source.b_tile_loads += line.find("nmask") != std::string::npos ? 1 : 0;
    }
  }
  return source;
}

}  // namespace egg::expert::writer
