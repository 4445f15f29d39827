// Convolutions: implicit GEMMs (tiled, nhwc with a channels-last repack) and the direct form.
#include <fmt/format.h>

#include <algorithm>

#include "expert/codegen/kernel_writer.h"

namespace egg::expert::writer {

kir::Kernel KernelWriter::DirectConvolutionProgram() {
  const MatmulSpec& mm = *kernel_.matmul;
  const ConvShape& conv = *mm.conv;
  const int out = graph_.nodes.at(static_cast<size_t>(mm.node)).value;
  const TensorMeta& out_meta = MetaOf(graph_, out);
  const int64_t numel = out_meta.Numel();
  const Index x = Index::Var("xindex", numel);
  std::vector<std::string> lines;
  const auto flat = Delinearize(x, out_meta.shape);
  std::vector<Index> out_index;
  for (size_t d = 0; d < flat.size(); ++d) {
    out_index.push_back(
        Named(d == 0 ? "image" : (d == 1 ? "channel" : "opos" + std::to_string(d - 2)), flat[d], lines));
  }
  const Index channel = out_index[1];
  const Index group = Named("group", channel.FloorDiv(mm.n), lines);
  for (const std::string& line : lines) {
    emitter_.Line(line);
  }
  const int64_t in_per_group = conv.in_channels / conv.groups;
  emitter_.Add(kir::Statement::Tile(0, "acc", {"XBLOCK"}, "tl.float32"));
  emitter_.Loop("ci", kir::LoopRange::Unrolled(std::to_string(in_per_group)));
  int depth = 1;
  emitter_.OpenScope(++depth);
  const Index ci = Index::Var("ci", in_per_group);
  std::vector<Index> input = {out_index[0], group * in_per_group + ci};
  std::vector<Index> weight = {channel, ci};
  std::string valid;
  for (size_t s = 0; s < conv.kernel.size(); ++s) {
    const std::string tap = "t" + std::to_string(s);
    emitter_.Loop(tap, kir::LoopRange::Unrolled(std::to_string(conv.kernel[s])));
    emitter_.OpenScope(++depth);
    const Index offset = Index::Var(tap, conv.kernel[s]);
    const Index position =
        out_index[s + 2] * conv.stride[s] - Index(conv.padding[s]) + offset * conv.dilation[s];
    RequireInside(position, conv.in_size[s], valid);
    input.push_back(position);
    weight.push_back(offset);
  }
  const Operand a = EmitUnder(mm.a, input, valid, "valid");
  const Operand w = emitter_.Emit(mm.b, weight);
  const std::string term = fmt::format("({}).to(tl.float32) * ({}).to(tl.float32)", a.code, w.code);
  emitter_.Add(
      kir::Statement::Sum(0, "acc", valid.empty() ? term : fmt::format("tl.where(valid, {}, 0.0)", term)));
  for (int level = depth; level > 1; --level) {
    emitter_.Append(emitter_.CloseStatements());
  }
  std::string result = "acc";
  if (mm.bias >= 0) {
    result += " + (" + emitter_.Emit(mm.bias, {channel}).code + ").to(tl.float32)";
  }
  emitter_.Line("product = " + result);
  const Operand product{"product", DType::kFloat32, false};
  emitter_.DefineRow(out, product, x);
  StoreIfNeeded(out, flat, product, "xmask");
  WriteEpilogues(x, out);
  std::string window;
  for (int64_t k : conv.kernel) {
    window += (window.empty() ? "" : "x") + std::to_string(k);
  }
  return FinishFlat(fmt::format("convolution (direct) over a {} input channel(s) x {} window, {} outputs: {}",
                                in_per_group, window, numel, Summary(graph_, kernel_)),
                    numel);
}

kir::Kernel KernelWriter::ConvolutionProgram() {
  const MatmulSpec& mm = *kernel_.matmul;
  const ConvShape& conv = *mm.conv;
  if (IsChannelsLast(kernel_.design.algorithm)) {
    return ChannelsLastConvolutionProgram();
  }
  if (conv.transposed) {
    return TransposedConvolutionProgram();
  }
  if (kernel_.design.algorithm == Algorithm::kDirect) {
    return DirectConvolutionProgram();
  }
  const Index g = mm.batched ? Index::Var("bindex", mm.batch) : Index(0);
  const Index m = Index::Var("mindex", mm.m);
  const Index n = Index::Var("nindex", mm.n);
  const int64_t in_per_group = conv.in_channels / conv.groups;
  std::vector<int64_t> rows_shape = {conv.images};
  rows_shape.insert(rows_shape.end(), conv.out_size.begin(), conv.out_size.end());
  std::vector<int64_t> k_shape = {in_per_group};
  k_shape.insert(k_shape.end(), conv.kernel.begin(), conv.kernel.end());
  const auto row = Delinearize(m, rows_shape);
  const auto kb = Delinearize(Index::Var("kbindex", mm.k), k_shape);
  ConvTiles tiles;
  const auto rows = NamedRows(row, tiles.prologue);
  const auto ka = NamedTaps(Delinearize(Index::Var("kaindex", mm.k), k_shape), tiles.loop);
  tiles.input = {rows[0], g * in_per_group + ka[0]};
  for (size_t s = 0; s < conv.kernel.size(); ++s) {
    const Index position = Named(
        "pos" + std::to_string(s),
        rows[s + 1] * conv.stride[s] - Index(conv.padding[s]) + ka[s + 1] * conv.dilation[s], tiles.loop);
    RequireInside(position, conv.in_size[s], tiles.input_valid);
    tiles.input.push_back(position);
  }
  // weight [out, in / groups, kernel...] read as [k, n]
  tiles.weight = {g * mm.n + n, kb[0]};
  tiles.weight.insert(tiles.weight.end(), kb.begin() + 1, kb.end());
  tiles.out = {row[0], g * mm.n + n};
  tiles.out.insert(tiles.out.end(), row.begin() + 1, row.end());
  return FinishConvolution(tiles, g * mm.n + n);
}

KernelWriter::ChannelsLastTaps KernelWriter::ChannelsLastGeometry() {
  const MatmulSpec& mm = *kernel_.matmul;
  const ConvShape& conv = *mm.conv;
  const int64_t in_per_group = conv.in_channels / conv.groups;
  ChannelsLastTaps geometry;
  // A transposed convolution runs one dense convolution per output phase, as its NCHW form does: the batch
  // axis is (group, phase), rows are (image, q) and a phase's taps are j < its count.
  PhaseGrid grid;
  if (conv.transposed) {
    grid = TransposedGrid(geometry.prologue);
  } else {
    grid.group = mm.batched ? Index::Var("bindex", mm.batch) : Index(0);
    grid.rows_shape = {conv.images};
    grid.rows_shape.insert(grid.rows_shape.end(), conv.out_size.begin(), conv.out_size.end());
  }
  geometry.group = grid.group;
  const auto& phase = grid.phase;
  std::vector<int64_t> tap_shape;
  for (size_t s = 0; s < conv.kernel.size(); ++s) {
    tap_shape.push_back(conv.transposed ? TransposedMaxTaps(conv, s) : conv.kernel[s]);
  }
  geometry.taps = Product(tap_shape);
  const auto row = Delinearize(Index::Var("mindex", mm.m), grid.rows_shape);
  const auto rows = NamedRows(row, geometry.prologue);
  // per tap: its offsets, the rows' input positions, their validity and their base in the NHWC copy, and
  // (transposed) the weight's tap it multiplies
  std::vector<std::string>& lines = geometry.tap_lines;
  const auto offsets = Delinearize(Index::Var("tap", geometry.taps), tap_shape);
  geometry.out_index = {row[0], geometry.group * mm.n + Index::Var("nindex", mm.n)};
  Index base = rows[0];
  Index weight_tap(0);  // transposed: the kernel tap (first + j * step per dim) in the weight's tap order
  std::string valid, tap_valid, rows_valid;  // the rows' positions inside, the phase's taps, its rows
  for (size_t s = 0; s < conv.kernel.size(); ++s) {
    const Index offset = Named("ktap" + std::to_string(s), offsets[s], lines);
    const std::string pos = "pos" + std::to_string(s);
    Index position;
    if (conv.transposed) {
      const PhaseTerms terms = TransposedTerms(conv, s, phase[s], row[s + 1], geometry.prologue);
      if (!terms.count.empty()) {
        And(tap_valid, fmt::format("{} < {}", offset.Code(), terms.count));
      }
      position = Named(pos, rows[s + 1] + terms.base - offset * TransposedInputStep(conv, s), lines);
      weight_tap = weight_tap * conv.kernel[s] + terms.first + offset * TransposedTapStep(conv, s);
      geometry.out_index.push_back(terms.out);
      if (conv.out_size[s] % conv.stride[s] != 0) {
        And(rows_valid, fmt::format("{} < {}", terms.out.Code(), conv.out_size[s]));
      }
    } else {
      position = Named(pos, rows[s + 1] * conv.stride[s] - Index(conv.padding[s]) + offset * conv.dilation[s],
                       lines);
      geometry.out_index.push_back(row[s + 1]);
    }
    RequireInside(position, conv.in_size[s], valid);
    base = base * conv.in_size[s] + position;
  }
  MaskPhaseRows(rows_valid, geometry.prologue);
  // A tap past this phase's count runs no K step (a stride-2 3-D kernel of 3 taps a dim: a phase takes 1 or
  // 2 of the loop's 2 per dim, 3.4 of its 8 taps on average), so neither operand is read there.
  if (!tap_valid.empty()) {
    lines.push_back(fmt::format("kend = tl.where({}, {}, 0)", tap_valid, in_per_group));
    geometry.channels_stop = "kend";
  }
  lines.push_back("tvalid = mmask" + (valid.empty() ? "" : " & " + valid));
  lines.push_back("tbase = " + (base * conv.in_channels + geometry.group * in_per_group).Code());
  // with phases (a stride above 1) the loop's tap j is the kernel's first + j * step; else it is the tap
  // itself
  const bool phased = conv.transposed && Product(conv.stride) > 1;
  geometry.weight_tap = phased ? Named("wtap", weight_tap, lines) : Index::Var("tap", geometry.taps);
  return geometry;
}

kir::Kernel KernelWriter::ChannelsLastConvolutionProgram() {
  const MatmulSpec& mm = *kernel_.matmul;
  const ConvShape& conv = *mm.conv;
  const int64_t in_per_group = conv.in_channels / conv.groups;
  const int64_t positions = conv.images * Product(conv.in_size);
  const Index n = Index::Var("nindex", mm.n);
  ChannelsLastTaps geometry = ChannelsLastGeometry();
  const Index& g = geometry.group;
  DotLoop loop;
  // nhwc: a 3x3 window unrolled, a 7x7x7 one a loop; ieee products never unrolled: their tl.dot is FMA code
  // as large as the tile, nine copies of a 128x64x64 one took ptxas over five minutes for sm_90
  constexpr int64_t kUnrolledTaps = 9;
  loop.taps = geometry.taps;
  const bool unrolled =
      loop.taps <= kUnrolledTaps && DotPrecision(kernel_.design.precision) != Precision::kIeee;
  loop.tap_range = unrolled ? kir::LoopRange::Unrolled(std::to_string(loop.taps))
                            : kir::LoopRange::Upto(std::to_string(loop.taps));
  loop.tap_lines = TextLines(geometry.tap_lines, 2);
  loop.one_k_loop = kernel_.design.algorithm == Algorithm::kNhwcK;
  emitter_.OpenScope(loop.StepDepth());
  // the NHWC tile: its rows' mask is the tap's validity (from mmask), its lanes run along K from each base
  const Index tbase = Index::Runtime("tbase", 0, positions * conv.in_channels - 1);
  const int64_t weight_row = Product(conv.kernel) * in_per_group;
  const Index weight_at =
      (g * mm.n + n) * weight_row + geometry.weight_tap * in_per_group + Index::Var("kbindex", in_per_group);
  emitter_.Append({ScratchTileLoad("a", ScratchId(0), tbase + Index::Var("kaindex", in_per_group),
                                   "tvalid & kamask", kir::TileSide::kA),
                   ScratchTileLoad("b", ScratchId(1), weight_at, "kbmask & nmask", kir::TileSide::kB)});
  loop.step = emitter_.CloseStatements();
  std::string result = "acc";
  if (mm.bias >= 0) {
    result += " + (" + emitter_.Emit(mm.bias, {g * mm.n + n}).code + ").to(tl.float32)";
  }
  emitter_.Line("product = " + result);
  loop.prologue = TextLines(geometry.prologue, 1);
  loop.channels = in_per_group;
  loop.channels_stop = geometry.channels_stop;
  wide_scratch_ = NeedsInt64(graph_, positions * conv.in_channels);
  const int out = graph_.nodes.at(static_cast<size_t>(mm.node)).value;
  kir::Kernel program = FinishMatmul(std::move(loop), out, geometry.out_index,
                                     Linearize(geometry.out_index, MetaOf(graph_, out).shape));
  PrependChannelsLastCopies(program);
  return program;
}

void KernelWriter::PrependChannelsLastCopies(kir::Kernel& program) {
  const MatmulSpec& mm = *kernel_.matmul;
  const ConvShape& conv = *mm.conv;
  const int64_t in_per_group = conv.in_channels / conv.groups;
  const int64_t positions = conv.images * Product(conv.in_size);
  const int64_t weight_row = Product(conv.kernel) * in_per_group;
  std::vector<int64_t> image_shape = {conv.images};
  image_shape.insert(image_shape.end(), conv.in_size.begin(), conv.in_size.end());
  const auto at = Delinearize(Index::Var("pindex", positions), image_shape);
  std::vector<Index> input = {at[0], Index::Var("cindex", conv.in_channels)};
  input.insert(input.end(), at.begin() + 1, at.end());
  program.scratch.push_back({positions * conv.in_channels, DType::kFloat32});
  // (image, position) x channel tiles: the NCHW read runs along positions, the NHWC write along channels
  PrependRepack(program, mm.a, input, positions, conv.in_channels, conv.in_channels, ScratchId(0), "_nhwc",
                "channels-last repack of a convolution input, read along positions, written along channels");
  // the weight [out, in / groups, kernel...] (transposed: [in, out / groups, kernel...]) as rows
  // [out, (tap, channel)]
  const Index column = Index::Var("cindex", weight_row);
  const Index channel_out = Index::Var("pindex", conv.out_channels);
  std::vector<Index> weight_index =
      conv.transposed
          ? std::vector<Index>{channel_out.FloorDiv(mm.n) * in_per_group + column.Mod(in_per_group),
                               channel_out.Mod(mm.n)}
          : std::vector<Index>{channel_out, column.Mod(in_per_group)};
  const auto tap_offsets = Delinearize(column.FloorDiv(in_per_group), conv.kernel);
  weight_index.insert(weight_index.end(), tap_offsets.begin(), tap_offsets.end());
  program.scratch.push_back({conv.out_channels * weight_row, DType::kFloat32});
  PrependRepack(program, mm.b, weight_index, conv.out_channels, weight_row, weight_row, ScratchId(1),
                "_weight", "convolution weight as rows of (kernel tap, input channel)");
}

void KernelWriter::PrependRepack(kir::Kernel& program, int value, const std::vector<Index>& index,
                                 int64_t rows, int64_t columns, int64_t stride, int scratch,
                                 const std::string& suffix, const std::string& what) {
  KernelEmitter repack(
      graph_, memory_,
      MaskSet{{{"pindex", "pmask"}, {"cindex", "cmask"}}, {{"pmask & cmask", "mask"}}, "mask"});
  repack.OpenScope(1);
  const Operand copied = repack.Emit(value, index);
  if (copied.scalar) {
    throw NotFusable("a constant matrix operand");
  }
  repack.Line(fmt::format("tl.store({} + (pindex * {} + cindex), ({}).to(tl.float32), mask)",
                          repack.PointerName(scratch), stride, copied.code));
  constexpr int64_t kRepackColumns = 32;
  constexpr int64_t kRepackTile = 2048;
  const int64_t block_c = std::min(kRepackColumns, NextPowerOfTwo(columns));
  const int64_t block_p = std::min(kRepackTile / block_c, NextPowerOfTwo(rows));
  kir::Function function;
  function.name = kernel_.name + suffix;
  function.pointers = repack.PointerValues().size();
  function.constexprs = {"BLOCK_P", "BLOCK_C"};
  function.comment = fmt::format("{}: [{} x {}]: {}", what, rows, columns, Summary(graph_, kernel_));
  function.domain.kind = kir::Domain::Kind::kPanels;
  function.domain.size = rows;
  function.domain.columns = columns;
  function.domain.int64 = NeedsInt64(graph_, repack.MaxAddress()) || wide_scratch_;
  function.body = repack.CloseStatements();
  // a copy of parameters and buffers alone (a weight, not an input) is packed once per their version
  const std::vector<int>& sources = repack.PointerValues();
  const bool from_state = std::all_of(sources.begin(), sources.end(), [&](int pointer) {
    const Value* v = IsScratch(pointer) ? nullptr : &ValueAt(graph_, pointer);
    return v == nullptr || (v->kind == ValueKind::kState && v->state_kind != "constant");
  });
  program.launches.insert(
      program.launches.begin(),
      {function.name,
       sources,
       fmt::format("(triton.cdiv({}, {}), triton.cdiv({}, {}))", rows, block_p, columns, block_c),
       {{"BLOCK_P", block_p}, {"BLOCK_C", block_c}},
       {},
       from_state ? static_cast<int>(ScratchIndex(scratch)) : -1});
  program.int64_indexing = program.int64_indexing || function.domain.int64;
  program.functions.insert(program.functions.begin(), std::move(function));
  for (const Helper& helper : repack.Helpers()) {
    program.helpers.push_back(helper);
  }
  const std::set<int> computed = repack.Computed();
  program.computed.insert(computed.begin(), computed.end());
}

Index KernelWriter::Named(const std::string& name, const Index& value, std::vector<std::string>& lines) {
  const auto& terms = value.Terms();
  if (value.IsConstant() || (terms.size() == 1 && terms[0].first == 1 && value.Constant() == 0 &&
                             (terms[0].second->kind == IndexAtom::Kind::kVar ||
                              terms[0].second->kind == IndexAtom::Kind::kRuntime))) {
    return value;
  }
  lines.push_back(name + " = " + value.Code());
  emitter_.BindRuntime(name, emitter_.LanesOf(value));
  return Index::Runtime(name, value.Lo(), value.Hi());
}

std::vector<Index> KernelWriter::NamedRows(const std::vector<Index>& row,
                                           std::vector<std::string>& prologue) {
  std::vector<Index> named;
  for (size_t d = 0; d < row.size(); ++d) {
    named.push_back(Named(d == 0 ? "image" : "row" + std::to_string(d - 1), row[d], prologue));
  }
  return named;
}

std::vector<Index> KernelWriter::NamedTaps(const std::vector<Index>& k, std::vector<std::string>& loop) {
  std::vector<Index> named;
  for (size_t d = 0; d < k.size(); ++d) {
    named.push_back(Named(d == 0 ? "kchannel" : "ktap" + std::to_string(d - 1), k[d], loop));
  }
  return named;
}

void KernelWriter::And(std::string& conjunction, const std::string& condition) {
  conjunction = conjunction.empty() ? "(" + condition + ")" : conjunction + " & (" + condition + ")";
}

void KernelWriter::RequireInside(const Index& position, int64_t size, std::string& valid) {
  if (position.Lo() < 0) {
    And(valid, position.Code() + " >= 0");
  }
  if (position.Hi() >= size) {
    And(valid, fmt::format("{} < {}", position.Code(), size));
  }
}

kir::Kernel KernelWriter::FinishConvolution(const ConvTiles& tiles, const Index& channel) {
  const MatmulSpec& mm = *kernel_.matmul;
  const int out = graph_.nodes.at(static_cast<size_t>(mm.node)).value;
  emitter_.OpenScope(2);
  for (const std::string& line : tiles.loop) {
    emitter_.Line(line);
  }
  // A half operand read from memory stays in its half type (KeepHalfLoads; zero where masked, padding
  // included)
  emitter_.KeepHalfLoads(IsHalf(mm.dtype) && memory_.count(mm.a) != 0);
  const Operand a = EmitUnder(mm.a, tiles.input, tiles.input_valid, "valid");
  emitter_.KeepHalfLoads(IsHalf(mm.dtype) && memory_.count(mm.b) != 0);
  const Operand bt = EmitUnder(mm.b, tiles.weight, tiles.weight_valid, "wvalid");
  emitter_.KeepHalfLoads(false);
  if (a.scalar || bt.scalar) {
    throw NotFusable("a constant convolution operand");
  }
  // A tile loaded straight from memory is already zero where masked (its lanes use every tile variable).
  auto direct = [&](int value, const std::vector<Index>& index, const char* row_mask,
                    const char* column_mask) {
    Index lanes;
    for (const Index& i : index) {
      lanes = lanes + i;
    }
    const std::string mask = emitter_.MaskFor(lanes);
    const DType dtype = MetaOf(graph_, value).dtype;
    return memory_.count(value) != 0 && (dtype == DType::kFloat32 || IsHalf(dtype)) &&
           mask.find(row_mask) != std::string::npos && mask.find(column_mask) != std::string::npos;
  };
  auto extra = [](const std::string& valid, const std::string& name) {
    return valid.empty() ? "" : " & " + name;
  };
  if (direct(mm.a, tiles.input, "mmask", "kamask")) {
    emitter_.Line("a = " + a.code);
  } else {
    emitter_.Line(fmt::format("a = tl.where(mmask & kamask{}, ({}).to(tl.float32), 0.0)",
                              extra(tiles.input_valid, "valid"), a.code));
  }
  if (direct(mm.b, tiles.weight, "kbmask", "nmask")) {
    emitter_.Line("b = " + bt.code);
  } else {
    emitter_.Line(fmt::format("b = tl.where(kbmask & nmask{}, ({}).to(tl.float32), 0.0)",
                              extra(tiles.weight_valid, "wvalid"), bt.code));
  }
  DotLoop loop;
  loop.step = emitter_.CloseStatements();
  MarkStagedTiles(loop.step);
  loop.prologue = TextLines(tiles.prologue, 1);
  std::string result = "acc";
  if (mm.bias >= 0) {
    const Operand bias = emitter_.Emit(mm.bias, {channel});
    result += " + (" + bias.code + ").to(tl.float32)";
  }
  emitter_.Line("product = " + result);
  return FinishMatmul(std::move(loop), out, tiles.out, Linearize(tiles.out, MetaOf(graph_, out).shape));
}

}  // namespace egg::expert::writer
