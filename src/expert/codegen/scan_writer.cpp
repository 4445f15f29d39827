// Scan kernels (cumsum, cumprod) along one dimension.
#include <fmt/format.h>

#include <algorithm>

#include "expert/codegen/kernel_writer.h"

namespace egg::expert::writer {

KernelSource KernelWriter::WriteScan() {
  const ScanSpec& scan = *kernel_.scan;
  const TensorMeta& meta = MetaOf(graph_, scan.input);
  const int output = graph_.nodes.at(static_cast<size_t>(scan.node)).value;
  const DType out_type = ComputeDType(MetaOf(graph_, output).dtype);
  const Index x = Index::Var("xindex", kernel_.rows);
  const Index r = Index::Var("rindex", kernel_.length);
  const auto index = AnchorIndex(meta.shape, {scan.dim}, x, r);
  const bool looped = kernel_.design.algorithm != Algorithm::kSingle;
  const bool sum = scan.kind == ScanKind::kSum;
  const std::string tl_acc = TritonDType(IsFloating(out_type) ? DType::kFloat32 : DType::kInt64);
  emitter_.Line(fmt::format("carry = tl.full([XBLOCK, 1], {}, {})", sum ? "0" : "1", tl_acc));
  if (looped) {
    emitter_.OpenScope(2);
  }
  const Operand input = emitter_.Emit(scan.input, index);
  emitter_.Line(
      fmt::format("element = tl.where(mask, ({}).to({}), {})", input.code, tl_acc, sum ? "0" : "1"));
  if (sum) {
    emitter_.Line("scanned = tl.cumsum(element, 1) + carry");
    emitter_.Line("carry = carry + tl.sum(element, 1)[:, None]");
  } else {
    emitter_.Line("scanned = tl.cumprod(element, 1) * carry");
    emitter_.Line("carry = carry * tl.reduce(element, 1, _egg_prod)[:, None]");
  }
  const Operand scanned{"scanned", out_type, false};
  emitter_.DefineRow(output, scanned, Linearize(index, meta.shape));
  StoreIfNeeded(output, index, scanned, "mask");
  WriteEpilogues(Linearize(index, meta.shape), output);
  if (looped) {
    const std::vector<std::string> body = emitter_.CloseScope();
    emitter_.Line(LoopHeader());
    emitter_.Line(TileLines(true));
    emitter_.Append(body);
  } else {
    // single tile: the tile lines go first
    std::vector<std::string> body = emitter_.CloseScope();
    emitter_.Line(TileLines(false));
    emitter_.Append(body);
  }
  templates::Values values;
  values.text["rows"] = std::to_string(kernel_.rows);
  values.text["length"] = std::to_string(kernel_.length);
  values.text["kind"] = NameText(scan.kind);
  values.text["algorithm"] = NameText(kernel_.design.algorithm);
  values.text["body"] = Join(emitter_.CloseScope());
  const int64_t xblock = kernel_.design.xblock;
  return Finish("triton/scan.py.mustache", values,
                fmt::format("(triton.cdiv({}, {}),)", kernel_.rows, xblock),
                {{"XBLOCK", xblock}, {"RBLOCK", kernel_.design.rblock}});
}

}  // namespace egg::expert::writer
