// Matrix-product kernels in tl.dot tiles (tiled, splitk, aligned, gemv) and their epilogues.
#include <fmt/format.h>

#include <algorithm>

#include "expert/codegen/kernel_writer.h"
#include "expert/design/legality.h"

namespace egg::expert::writer {

// The launch grid of a tiled product, open for the split-K axis: "(tiles, batch" or, with the batch fastest
// along one axis (a transposed convolution's phases), "(tiles * batch,"; with a dynamic batch the tile count
// is computed where M is known.
std::string KernelWriter::TileGrid(bool dynamic, bool batch_inner, int64_t grid_m, int64_t grid_n) const {
  const MatmulSpec& mm = *kernel_.matmul;
  const std::string tiles = dynamic
                                ? fmt::format("triton.cdiv({}, {}) * {}", mm.m, kernel_.design.xblock, grid_n)
                                : std::to_string(grid_m * grid_n);
  return batch_inner ? fmt::format("({} * {},", tiles, mm.batch) : fmt::format("({}, {}", tiles, mm.batch);
}

kir::Kernel KernelWriter::MatmulProgram() {
  const MatmulSpec& mm = *kernel_.matmul;
  if (mm.conv) {
    return ConvolutionProgram();
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
  // aligned and kmajor: both operands read from copies (kmajor's B transposed, K-contiguous)
  const bool aligned =
      kernel_.design.algorithm == Algorithm::kAligned || kernel_.design.algorithm == Algorithm::kKMajor;
  DotLoop loop;
  if (kernel_.design.algorithm == Algorithm::kTiled || aligned) {
    loop.prologue = DroppedTilePrologue(out, operand_index(m, n));
  }
  emitter_.OpenScope(2);
  const OperandCopies copies = CopiesOf(mm);
  if (aligned) {
    LoadAlignedOperands(copies, b, m, n, ka, kb);
  }
  const bool a_copied = aligned && copies.a_copied;  // else A is read in place, as tiled reads it
  const Operand a =
      a_copied ? Operand{"a", DType::kFloat32, false} : EmitDotOperand(mm.a, operand_index(m, ka));
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
  const bool loaded = (a_copied || emitter_.ZeroWhereMasked(a, {"mmask", "kamask"})) &&
                      (aligned || emitter_.ZeroWhereMasked(bt, {"kbmask", "nmask"}));
  if (!a_copied) {
    emitter_.Line(loaded ? "a = " + a.code
                         : fmt::format("a = tl.where(mmask & kamask, ({}).to(tl.float32), 0.0)", a.code));
  }
  if (!aligned) {
    emitter_.Line(loaded ? "b = " + bt.code
                         : fmt::format("b = tl.where(kbmask & nmask, ({}).to(tl.float32), 0.0)", bt.code));
  }
  loop.step = emitter_.CloseStatements();
  MarkStagedTiles(loop.step);
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
  kir::Kernel program = FinishMatmul(std::move(loop), out, out_index, flat);
  if (aligned) {
    AddAlignedCopies(copies, program);
  }
  return program;
}

std::vector<kir::Statement> KernelWriter::DroppedTilePrologue(int out, const std::vector<Index>& out_index) {
  // A product whose only reader is where(cond, product, other) with cond computed from indices alone
  // (torch.triu / tril of a product: 1_14, 1_15) needs no K loop in a tile where cond holds nowhere.
  const auto masked = IndexMaskedReader(out);
  if (!masked) {
    return {};
  }
  emitter_.OpenScope(1);
  const Operand cond = emitter_.Emit(
      masked->cond, BroadcastIndex(out_index, MetaOf(graph_, out).shape, MetaOf(graph_, masked->cond).shape));
  const std::string taken = masked->product_when_true ? cond.code : "~(" + cond.code + ")";
  emitter_.Line("# no K loop for a tile whose every product lane the where drops");
  emitter_.Line(fmt::format("k_end = tl.where(tl.max(tl.where(omask & ({}), 1, 0)) > 0, {}, 0)", taken,
                            kernel_.matmul->k));
  skip_dropped_tiles_ = true;
  return emitter_.CloseStatements();
}

void KernelWriter::LoadAlignedOperands(const OperandCopies& copies, const Index& b, const Index& m,
                                       const Index& n, const Index& ka, const Index& kb) {
  // The operands from their copies (written by the first launches): A's rows at the aligned stride (unless A
  // is read in place), B's K rows at it (aligned) or, transposed, its N rows along K (kmajor).
  const MatmulSpec& mm = *kernel_.matmul;
  // A copy past int32 offsets: the rows' K index in int64 too (mindex and bindex are by the template)
  wide_scratch_ =
      NeedsInt64(graph_, std::max(copies.a_rows * copies.a_stride, copies.b_rows * copies.b_stride));
  if (wide_scratch_) {
    emitter_.Line("kbwide = kbindex.to(tl.int64)");
  }
  const Index k_rows = wide_scratch_ ? Index::Var("kbwide", mm.k) : kb;
  if (copies.a_copied) {
    emitter_.Append({ScratchTileLoad("a", ScratchId(0), (b * mm.m + m) * copies.a_stride + ka,
                                     "mmask & kamask", kir::TileSide::kA)});
  }
  emitter_.Append({ScratchTileLoad(
      "b", copies.b_scratch,
      copies.kmajor ? (b * mm.n + n) * copies.b_stride + k_rows : (b * mm.k + k_rows) * copies.b_stride + n,
      "kbmask & nmask", kir::TileSide::kB)});
}

KernelWriter::OperandCopies KernelWriter::CopiesOf(const MatmulSpec& mm) const {
  OperandCopies copies;
  copies.kmajor = kernel_.design.algorithm == Algorithm::kKMajor;
  copies.a_copied = !(mm.a_k_major && AlignedStride(mm.k) == mm.k);
  copies.b_scratch = ScratchId(copies.a_copied ? 1 : 0);
  copies.a_rows = copies.a_copied ? mm.batch * mm.m : 0;
  copies.a_stride = AlignedStride(mm.k);
  copies.b_rows = mm.batch * (copies.kmajor ? mm.n : mm.k);
  copies.b_columns = copies.kmajor ? mm.k : mm.n;
  copies.b_stride = AlignedStride(copies.b_columns);
  return copies;
}

kir::Statement KernelWriter::ScratchTileLoad(const std::string& name, int scratch, const Index& address,
                                             const std::string& mask, kir::TileSide side) {
  kir::Statement load;
  load.kind = kir::Statement::Kind::kLoad;
  load.depth = emitter_.Depth();
  load.buffer = scratch;
  load.pointer = emitter_.PointerName(scratch);
  load.address = address;
  load.mask = mask;
  load.name = name;
  load.form = kir::LoadForm::kMasked;
  load.other = "0.0";
  load.side = side;
  return load;
}

void KernelWriter::MarkStagedTiles(std::vector<kir::Statement>& step) {
  for (kir::Statement& statement : step) {
    if (statement.kind != kir::Statement::Kind::kLoad || statement.side != kir::TileSide::kNone) {
      continue;
    }
    // the masks are the lanes' (MaskSet::Tiles): a load over the M rows is an A tile, over N columns a B one
    const bool rows = statement.mask.find("mmask") != std::string::npos;
    const bool columns = statement.mask.find("nmask") != std::string::npos;
    statement.side = static_cast<kir::TileSide>((rows ? 1 : 0) | (columns ? 2 : 0));
  }
}

void KernelWriter::AddAlignedCopies(const OperandCopies& copies, kir::Kernel& program) {
  // The copies, A as [batch * m, k] and B as [batch * k, n] rows (kmajor: [batch * n, k], transposed) at the
  // aligned strides: read through the emitter, so a transposed view or a computed operand is copied in the
  // product's own orientation.
  const MatmulSpec& mm = *kernel_.matmul;
  const bool kmajor = copies.kmajor;
  auto rows_of = [&](int64_t rows) {
    return mm.batched ? Delinearize(Index::Var("pindex", mm.batch * rows), {mm.batch, rows})
                      : std::vector<Index>{Index::Var("pindex", rows)};
  };
  std::vector<Index> a_index = rows_of(mm.m);
  a_index.push_back(Index::Var("cindex", mm.k));
  std::vector<Index> b_index = rows_of(kmajor ? mm.n : mm.k);
  const Index b_column = Index::Var("cindex", copies.b_columns);
  // B[.., k, n]: kmajor's rows are n, its columns k
  b_index.insert(kmajor ? b_index.end() - 1 : b_index.end(), b_column);
  if (copies.a_copied) {
    program.scratch.push_back({copies.a_rows * copies.a_stride, DType::kFloat32});
  }
  program.scratch.push_back({copies.b_rows * copies.b_stride, DType::kFloat32});
  PrependRepack(program, mm.b, b_index, copies.b_rows, copies.b_columns, copies.b_stride, copies.b_scratch,
                kmajor ? "_kmajor_b" : "_aligned_b",
                kmajor ? "B transposed into K-contiguous rows of a 32-float stride (what tf32 MMA reads)"
                       : "B copied into rows of a 32-float stride");
  if (copies.a_copied) {
    PrependRepack(program, mm.a, a_index, copies.a_rows, mm.k, copies.a_stride, ScratchId(0), "_aligned_a",
                  "A copied into rows of a 32-float stride");
  }
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

void KernelWriter::WriteMatmulEpilogues(const Index& flat, int producer) {
  if (kernel_.reductions.empty()) {
    WriteEpilogues(flat, producer);
    return;
  }
  const std::vector<int64_t>& shape = MetaOf(graph_, producer).shape;
  const std::vector<Index> full = Delinearize(flat, shape);
  const auto axis = static_cast<size_t>(ColumnAxis(*kernel_.matmul, shape.size()));
  std::vector<Index> kept = full;
  kept[axis] = Index(0);
  std::vector<int64_t> kept_shape = shape;
  kept_shape[axis] = 1;
  const Index row = Linearize(kept, kept_shape);
  // the reductions' lanes are the product's (Accumulate masks by `mask`); a row's results are stored under
  // the rows' mask (every tiled form's omask is mmask & nmask)
  emitter_.Line("mask = omask");
  int number = 0;
  for (int root : kernel_.roots) {
    if (root == producer) {
      continue;
    }
    if (const ReductionSpec* spec = ReductionOf(root)) {  // its value may be a tuple (min.dim)
      const auto at = Delinearize(flat, MetaOf(graph_, spec->input).shape);  // the product's shape, or viewed
      const Accumulator acc = ReduceColumns(*spec, emitter_.Emit(spec->input, at), number++);
      for (const auto& [value, operand] : acc.results) {
        if (value >= 0) {
          emitter_.DefineRow(value, operand, row);
          StoreIfNeeded(value, RowIndexOf(MetaOf(graph_, value).shape, kept, kept_shape, axis, row), operand,
                        "mmask");
        }
      }
      continue;
    }
    const std::vector<int64_t>& root_shape = MetaOf(graph_, root).shape;
    if (Product(root_shape) == Product(shape)) {
      const auto index = Delinearize(flat, root_shape);
      StoreIfNeeded(root, index, emitter_.Emit(root, index), "omask");
    } else {
      const auto index = RowIndexOf(root_shape, kept, kept_shape, axis, row);
      StoreIfNeeded(root, index, emitter_.Emit(root, index), "mmask");
    }
  }
}

KernelWriter::Accumulator KernelWriter::ReduceColumns(const ReductionSpec& spec, const Operand& input,
                                                      int number) {
  const std::string tag = "c" + std::to_string(number);
  const auto AddAll = [this](const std::vector<kir::Statement>& statements) {
    for (const kir::Statement& statement : statements) {
      emitter_.Add(statement);
    }
  };
  if (!IsVariance(spec)) {
    Accumulator acc = Accumulate(spec, input, /*looped=*/false, tag, "");
    AddAll(acc.update);
    return acc;
  }
  // two passes over the tile in registers: the mean, then the squares about it
  ReductionSpec sum_spec = spec;
  sum_spec.kind = ReductionKind::kSum;
  Accumulator sum = Accumulate(sum_spec, input, /*looped=*/false, tag + "m", "");
  AddAll(sum.update);
  const std::string mean = "mean" + tag;
  emitter_.Line(fmt::format("{} = {} / {}", mean, sum.results.back().second.code, spec.Length()));
  Accumulator squares = Accumulate(spec, input, /*looped=*/false, tag, mean);
  AddAll(squares.update);
  Accumulator acc;
  WelfordResults(spec, mean, squares.results.back().second.code, &acc);
  return acc;
}

std::vector<Index> KernelWriter::RowIndexOf(const std::vector<int64_t>& shape, const std::vector<Index>& kept,
                                            const std::vector<int64_t>& kept_shape, size_t axis,
                                            const Index& row) const {
  if (shape == kept_shape) {
    return kept;
  }
  std::vector<int64_t> squeezed = kept_shape;
  squeezed.erase(squeezed.begin() + static_cast<std::ptrdiff_t>(axis));
  if (shape == squeezed) {
    std::vector<Index> index = kept;
    index.erase(index.begin() + static_cast<std::ptrdiff_t>(axis));
    return index;
  }
  return Delinearize(row, shape);
}

kir::Kernel KernelWriter::FinishMatmul(DotLoop loop, int out, const std::vector<Index>& out_index,
                                       const Index& flat) {
  const MatmulSpec& mm = *kernel_.matmul;
  const KernelDesign& design = kernel_.design;
  const Operand product{"product", DType::kFloat32, false};
  emitter_.DefineRow(out, product, flat);
  StoreIfNeeded(out, out_index, product, "omask");
  WriteMatmulEpilogues(flat, out);
  const std::vector<kir::Statement> epilogue = emitter_.CloseStatements();
  const int64_t grid_n = (mm.n + design.yblock - 1) / design.yblock;
  const int64_t grid_m = (mm.m + design.xblock - 1) / design.xblock;
  // With a dynamic batch M may be a runtime size: its tile count is computed where M is known (a count
  // computed here would be a floor of the batch, which dynamic_batch.h refuses), and groups are always
  // kMatmulGroupRows high (the last group's rows are clipped either way).
  const bool dynamic = graph_.dynamic.has_value();
  const int64_t group_m = dynamic ? kMatmulGroupRows : std::min<int64_t>(kMatmulGroupRows, grid_m);
  DotSplit split;
  const bool split_k =
      design.algorithm == Algorithm::kSplitK || (design.algorithm == Algorithm::kGemv && design.split >= 2);
  if (split_k) {
    // Split-K: programs (tile, batch, split) write partial products into a scratch buffer; a second function
    // per (tile, batch) sums them in order and runs the epilogue. For few output tiles over a deep K.
    split.chunk = (mm.k + design.split - 1) / design.split;
    split.chunk = (split.chunk + design.rblock - 1) / design.rblock * design.rblock;
    split.splits = (mm.k + split.chunk - 1) / split.chunk;
    split.partials = emitter_.PointerName(ScratchId(0));
    const std::string slice = mm.batched ? fmt::format("(split * {} + bindex)", mm.batch) : "split";
    // the offset as written, not as an Index: mindex is int64 where the partials pass int32 offsets, and the
    // product must be taken after that widening
    split.offset = fmt::format("(mindex + {} * {}) * {} + nindex", slice, mm.m, mm.n);
    wide_scratch_ = NeedsInt64(graph_, split.splits * mm.batch * mm.m * mm.n);
  }
  kir::Kernel program;
  program.name = kernel_.name;
  program.int64_indexing =
      NeedsInt64(graph_, std::max(emitter_.MaxAddress(), kernel_.rows * kernel_.length)) || wide_scratch_;
  program.helpers = emitter_.Helpers();
  program.computed = ComputedNodes();
  kir::Function function;
  function.pointers = emitter_.PointerValues().size();
  function.constexprs = {"BLOCK_M", "BLOCK_N", "BLOCK_K"};
  function.comment =
      fmt::format("{} x [{} x {}] @ [{} x {}], {}: {}", mm.batch, mm.m, mm.k, mm.k, mm.n,
                  design.algorithm == Algorithm::kGemv
                      ? "fp32 FMA products"
                      : "tl.dot input_precision " + std::string(NameText(DotPrecision(design.precision))),
                  Summary(graph_, kernel_));
  if (!loop.tap_range.empty()) {
    function.comment +=
        "\nchannels-last implicit GEMM: the input read from its NHWC copy, K ordered (kernel tap, channel of "
        "the group)";
  }
  function.domain.kind = kir::Domain::Kind::kTiles;
  function.domain.size = mm.m;
  function.domain.columns = mm.n;
  function.domain.int64 = program.int64_indexing;
  // a transposed convolution's output phases side by side (kir::TileOrder::batch_inner): one grid axis
  const bool phases_inner =
      mm.conv && mm.conv->transposed && mm.batched && Product(mm.conv->stride) > 1 && !split_k;
  function.domain.tiles = {mm.batched, grid_m,           dynamic,
                           group_m,    group_m * grid_n, phases_inner ? mm.batch : 0};
  const std::map<std::string, int64_t> blocks = {
      {"BLOCK_M", design.xblock}, {"BLOCK_N", design.yblock}, {"BLOCK_K", design.rblock}};
  const std::string grid = TileGrid(dynamic, phases_inner, grid_m, grid_n);
  const std::vector<int> pointers = emitter_.PointerValues();
  if (split_k) {
    function.name = kernel_.name + "_partial";
    function.body = DotBody(loop, DotPart::kPartial, split, epilogue);
    program.functions.push_back(function);
    program.launches.push_back(
        {function.name, pointers, fmt::format("{}, {})", grid, split.splits), blocks, {}});
    program.scratch.push_back({split.splits * mm.batch * mm.m * mm.n, DType::kFloat32});
  }
  function.name = kernel_.name;
  function.body = DotBody(loop, split_k ? DotPart::kCombine : DotPart::kWhole, split, epilogue);
  program.functions.push_back(std::move(function));
  program.launches.push_back({kernel_.name, pointers, grid + ")", blocks, {}});
  return program;
}

std::vector<kir::Statement> KernelWriter::DotBody(const DotLoop& loop, DotPart part, const DotSplit& split,
                                                  const std::vector<kir::Statement>& epilogue) const {
  const bool gemv = kernel_.design.algorithm == Algorithm::kGemv;
  std::vector<kir::Statement> body = loop.prologue;
  auto line = [&body](int depth, std::string text) {
    body.push_back(kir::Statement::Text(depth, std::move(text)));
  };
  if (gemv && part != DotPart::kCombine) {
    line(1,
         "# mat-vec: a row of BLOCK_K products per output row, summed once after the K loop (fp32 FMAs, no "
         "tl.dot)");
  }
  body.push_back(kir::Statement::Tile(
      1, "acc", {"BLOCK_M", gemv && part != DotPart::kCombine ? "BLOCK_K" : "BLOCK_N"}, "tl.float32"));
  if (part == DotPart::kCombine) {
    line(1, fmt::format("# split-K: the {} partial products of this tile, summed in a fixed order",
                        split.splits));
    body.push_back(kir::Statement::Loop(1, "split", kir::LoopRange::Upto(std::to_string(split.splits))));
    body.push_back(kir::Statement::Sum(
        2, "acc", fmt::format("tl.load({} + ({}), omask, other=0.0)", split.partials, split.offset)));
  } else {
    KLoopLines(loop, part, split, body);
    const int depth = loop.StepDepth();
    body.insert(body.end(), loop.step.begin(), loop.step.end());
    if (gemv) {
      body.push_back(kir::Statement::Sum(depth, "acc", "a * tl.trans(b)"));
      kir::Reduction row;  // the K lanes of the product summed
      row.results = {"acc"};
      row.operands = {"acc"};
      row.keep_dims = true;
      body.push_back(kir::Statement::Reduce(1, std::move(row)));
    } else {
      const std::string cast = DotOperandCast(MetaOf(graph_, kernel_.matmul->a).dtype);
      body.push_back(
          kir::Statement::Accumulate(depth, "acc", {"a", "b", cast, DotPrecision(kernel_.design.precision)}));
    }
  }
  if (part == DotPart::kPartial) {
    line(1, fmt::format("tl.store({} + ({}), acc, omask)", split.partials, split.offset));
  } else {
    body.insert(body.end(), epilogue.begin(), epilogue.end());
  }
  return body;
}

void KernelWriter::KLoopLines(const DotLoop& loop, DotPart part, const DotSplit& split,
                              std::vector<kir::Statement>& body) const {
  const MatmulSpec& mm = *kernel_.matmul;
  auto line = [&body](int depth, std::string text) {
    body.push_back(kir::Statement::Text(depth, std::move(text)));
  };
  int depth = 2;
  int64_t k = mm.k;
  if (!loop.tap_range.empty() && loop.one_k_loop) {
    // (tap, channel step) pairs in one loop, so the pipeliner keeps the next tap's tiles in flight
    const int64_t steps = (loop.channels + kernel_.design.rblock - 1) / kernel_.design.rblock;
    line(1, fmt::format("# one K loop over {} taps x {} channel step(s) of BLOCK_K", loop.taps, steps));
    body.push_back(kir::Statement::Loop(1, "kstep", kir::LoopRange::Upto(std::to_string(loop.taps * steps))));
    line(2, steps == 1 ? "tap = kstep" : fmt::format("tap = kstep // {}", steps));
    body.insert(body.end(), loop.tap_lines.begin(), loop.tap_lines.end());
    line(2, steps == 1 ? "k0 = 0" : fmt::format("k0 = (kstep % {}) * BLOCK_K", steps));
    line(depth, "kaindex = k0 + tl.arange(0, BLOCK_K)[None, :]");
    line(depth, "kbindex = k0 + tl.arange(0, BLOCK_K)[:, None]");
    const std::string stop = loop.channels_stop.empty() ? std::to_string(loop.channels) : loop.channels_stop;
    line(depth, fmt::format("kamask = kaindex < {}", stop));
    line(depth, fmt::format("kbmask = kbindex < {}", stop));
    return;
  }
  if (!loop.tap_range.empty()) {
    body.push_back(kir::Statement::Loop(1, "tap", loop.tap_range));
    body.insert(body.end(), loop.tap_lines.begin(), loop.tap_lines.end());
    body.push_back(kir::Statement::Loop(
        2, "k0",
        kir::LoopRange::Stepped(
            "0", loop.channels_stop.empty() ? std::to_string(loop.channels) : loop.channels_stop,
            "BLOCK_K")));
    depth = 3;
    k = loop.channels;
  } else if (part == DotPart::kPartial) {
    line(1,
         fmt::format("# split-K: this program's slice of K, [{0} * split, {0} * (split + 1))", split.chunk));
    line(1, "split = tl.program_id(2)");
    body.push_back(kir::Statement::Loop(
        1, "k0",
        kir::LoopRange::Stepped(fmt::format("split * {}", split.chunk),
                                fmt::format("tl.minimum(split * {0} + {0}, {1})", split.chunk, mm.k),
                                "BLOCK_K")));
  } else {
    body.push_back(kir::Statement::Loop(
        1, "k0",
        kir::LoopRange::Stepped("0", skip_dropped_tiles_ ? "k_end" : std::to_string(mm.k), "BLOCK_K")));
  }
  line(depth, "kaindex = k0 + tl.arange(0, BLOCK_K)[None, :]");
  line(depth, "kbindex = k0 + tl.arange(0, BLOCK_K)[:, None]");
  line(depth, fmt::format("kamask = kaindex < {}", k));
  line(depth, fmt::format("kbmask = kbindex < {}", k));
}

}  // namespace egg::expert::writer
