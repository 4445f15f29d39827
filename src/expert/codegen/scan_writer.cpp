// Scan kernels (cumsum, cumprod) and sorts (sort, topk) along one dimension.
#include <fmt/format.h>

#include <algorithm>

#include "expert/codegen/kernel_writer.h"

namespace egg::expert::writer {

kir::Kernel KernelWriter::ScanProgram() {
  const ScanSpec& scan = *kernel_.scan;
  if (scan.kind == ScanKind::kSort) {
    return SortProgram();
  }
  const TensorMeta& meta = MetaOf(graph_, scan.input);
  const int output = graph_.nodes.at(static_cast<size_t>(scan.node)).value;
  const DType out_type = ComputeDType(MetaOf(graph_, output).dtype);
  const Index x = Index::Var("xindex", kernel_.rows);
  const Index r = Index::Var("rindex", kernel_.length);
  const auto index = AnchorIndex(meta.shape, {scan.dim}, x, r);
  const bool looped = kernel_.design.algorithm != Algorithm::kSingle;
  const bool sum = scan.kind == ScanKind::kSum;
  const std::string tl_acc = TritonDType(IsFloating(out_type) ? DType::kFloat32 : DType::kInt64);
  emitter_.Add(kir::Statement::Tile(0, "carry", {"XBLOCK", "1"}, tl_acc, sum ? "0" : "1"));
  if (looped) {
    emitter_.OpenScope(2);
  }
  const Operand input = emitter_.Emit(scan.input, index);
  emitter_.Line(
      fmt::format("element = tl.where(mask, ({}).to({}), {})", input.code, tl_acc, sum ? "0" : "1"));
  if (sum) {
    emitter_.Line("scanned = tl.cumsum(element, 1) + carry");
    emitter_.Add(kir::Statement::Fold(0, "carry", kir::Combine::kAdd, "tl.sum(element, 1)[:, None]"));
  } else {
    emitter_.Line("scanned = tl.cumprod(element, 1) * carry");
    emitter_.Add(
        kir::Statement::Fold(0, "carry", kir::Combine::kMul, "tl.reduce(element, 1, _egg_prod)[:, None]"));
  }
  const Operand scanned{"scanned", out_type, false};
  emitter_.DefineRow(output, scanned, Linearize(index, meta.shape));
  StoreIfNeeded(output, index, scanned, "mask");
  WriteEpilogues(Linearize(index, meta.shape), output);
  PlaceRowBody(looped);
  return FinishScanKernel("cumulative " + NameText(scan.kind));
}

// Each row sorted in one tile: a float32 becomes an int32 key in the floats' order (NaN largest, -0.0 as
// 0.0), packed above its position (reversed when largest first, so that equal keys keep the lower position
// first); one tl.sort of the int64s, then values and positions unpacked. topk stores the first k of each row.
kir::Kernel KernelWriter::SortProgram() {
  const ScanSpec& sort = *kernel_.scan;
  const TensorMeta& meta = MetaOf(graph_, sort.input);
  const Index x = Index::Var("xindex", kernel_.rows);
  const auto index = AnchorIndex(meta.shape, {sort.dim}, x, Index::Var("rindex", kernel_.length));
  const Operand input = emitter_.Emit(sort.input, index);
  const int64_t last = kernel_.length - 1;
  const char* pad = sort.descending ? "-9223372036854775808" : "9223372036854775807";
  emitter_.Line(fmt::format("value = ({}).to(tl.float32) + 0.0", input.code));
  emitter_.Line("bits = tl.where(value != value, 0x7FC00000, value.to(tl.int32, bitcast=True))");
  emitter_.Line("key = bits ^ ((bits >> 31) & 0x7FFFFFFF)");
  emitter_.Line(fmt::format("packed = tl.where(mask, (key.to(tl.int64) << 32) | ({}).to(tl.int64), {})",
                            sort.descending ? fmt::format("{} - rindex", last) : "rindex", pad));
  emitter_.Line(
      fmt::format("packed = tl.sort(packed, 1, descending={})", sort.descending ? "True" : "False"));
  emitter_.Line("key = (packed >> 32).to(tl.int32)");
  emitter_.Line("values = (key ^ ((key >> 31) & 0x7FFFFFFF)).to(tl.float32, bitcast=True)");
  emitter_.Line(
      fmt::format("indices = {}(packed & 0xFFFFFFFF)", sort.descending ? fmt::format("{} - ", last) : ""));
  const bool all = sort.keep == kernel_.length;
  std::string store_mask = all ? "mask" : "kmask";
  if (sort.keep == 1 && !all) {
    // The top one: its address has no rindex, so it is stored as a column.
    emitter_.Line("values = tl.sum(tl.where(rindex == 0, values, 0.0), 1)[:, None]");
    emitter_.Line("indices = tl.sum(tl.where(rindex == 0, indices, 0), 1)[:, None]");
    store_mask = "xmask";
  } else if (!all) {
    emitter_.Line(fmt::format("kmask = xmask & (rindex < {})", sort.keep));
  }
  const Operand results[] = {{"values", DType::kFloat32, false}, {"indices", DType::kInt64, false}};
  for (size_t k = 0; k < sort.outputs.size(); ++k) {
    const int output = sort.outputs[k];
    if (output < 0) {
      continue;
    }
    const auto& out_shape = MetaOf(graph_, output).shape;
    const auto out_index = AnchorIndex(out_shape, {sort.dim}, x, Index::Var("rindex", sort.keep));
    emitter_.DefineRow(output, results[k], Linearize(out_index, out_shape));
    StoreIfNeeded(output, out_index, results[k], store_mask);
  }
  WriteEpilogues(Linearize(index, meta.shape), graph_.nodes.at(static_cast<size_t>(sort.node)).value);
  PlaceRowBody(/*looped=*/false);
  return FinishScanKernel(
      all ? std::string(sort.descending ? "sort, largest first" : "sort")
          : fmt::format("top {} ({})", sort.keep, sort.descending ? "largest" : "smallest"));
}

void KernelWriter::PlaceRowBody(bool looped) {
  std::vector<kir::Statement> body = emitter_.CloseStatements();
  if (looped) {
    emitter_.Loop("roffset", RowLoop());
  }
  emitter_.Append(TileLines(looped));
  emitter_.Append(std::move(body));
}

kir::Kernel KernelWriter::FinishScanKernel(const std::string& what) {
  return FinishRows(fmt::format("{}, {} rows x {}, {}: {}", what, kernel_.rows, kernel_.length,
                                NameOf(kernel_.design.algorithm), Summary(graph_, kernel_)));
}

}  // namespace egg::expert::writer
