// Pooling kernels (max, avg, adaptive max and avg) with their epilogues.
#include <fmt/format.h>

#include <algorithm>

#include "expert/codegen/kernel_writer.h"

namespace egg::expert::writer {

namespace {

// The pooling window: a static loop per spatial dim over its kernel offsets, the input index at the window's
// position, the conditions that keep that position in the input (or in the adaptive window), each dim's
// window start and end (for the average's divisor), and the window's size as text ("3x3").
struct PoolWindow {
  std::vector<Index> index;
  std::vector<std::string> conditions;
  std::vector<std::string> starts;
  std::vector<std::string> ends;
  std::string text;
};

// Opens the window's loops in `emitter` (one scope per spatial dim, left open).
PoolWindow OpenWindowLoops(const PoolSpec& pool, const TensorMeta& in, const TensorMeta& out,
                           const std::vector<Index>& out_index, size_t first_spatial,
                           KernelEmitter& emitter) {
  PoolWindow window;
  window.index.assign(out_index.begin(), out_index.begin() + static_cast<std::ptrdiff_t>(first_spatial));
  int depth = 1;
  for (int s = 0; s < pool.spatial; ++s) {
    const auto sd = static_cast<size_t>(s);
    const size_t d = first_spatial + sd;
    const int64_t in_size = in.shape[d];
    const int64_t out_size = out.shape[d];
    const std::string k = "k" + std::to_string(s);
    Index position;
    if (pool.adaptive) {
      const Index start = (out_index[d] * in_size).FloorDiv(out_size);
      const Index end = ((out_index[d] + Index(1)) * in_size + Index(out_size - 1)).FloorDiv(out_size);
      position = start + Index::Var(k, pool.kernel[sd]);
      window.conditions.push_back(fmt::format("({}) < ({})", position.Code(), end.Code()));
      window.starts.push_back(start.Code());
      window.ends.push_back(end.Code());
    } else {
      position = out_index[d] * pool.stride[sd] - Index(pool.padding[sd]) +
                 Index::Var(k, pool.kernel[sd]) * pool.dilation[sd];
      if (pool.padding[sd] > 0 || pool.ceil_mode) {
        window.conditions.push_back(fmt::format("(({0}) >= 0) & (({0}) < {1})", position.Code(), in_size));
      }
      const Index start = out_index[d] * pool.stride[sd] - Index(pool.padding[sd]);
      window.starts.push_back(start.Code());
      window.ends.push_back(
          fmt::format("tl.minimum({} + {}, {})", start.Code(), pool.kernel[sd], in_size + pool.padding[sd]));
    }
    window.index.push_back(position);
    window.text += (window.text.empty() ? "" : "x") + std::to_string(pool.kernel[sd]);
    emitter.Loop(k, kir::LoopRange::Unrolled(std::to_string(pool.kernel[sd])));
    emitter.OpenScope(++depth);
  }
  return window;
}

}  // namespace

kir::Kernel KernelWriter::PoolProgram() {
  const PoolSpec& pool = *kernel_.pool;
  const TensorMeta& in = MetaOf(graph_, pool.input);
  const TensorMeta& out = MetaOf(graph_, pool.output);
  const int64_t numel = out.Numel();
  const Index x = Index::Var("xindex", numel);
  const auto out_index = Delinearize(x, out.shape);
  const size_t rank = out.shape.size();
  const size_t first_spatial = rank - static_cast<size_t>(pool.spatial);
  const bool is_max = pool.kind == PoolKind::kMax;
  emitter_.Add(kir::Statement::Tile(0, "acc", {"XBLOCK"}, "tl.float32", is_max ? "float('-inf')" : "0.0"));
  const PoolWindow window = OpenWindowLoops(pool, in, out, out_index, first_spatial, emitter_);
  std::string valid;
  for (const std::string& c : window.conditions) {
    valid = valid.empty() ? c : "(" + valid + ") & (" + c + ")";
  }
  if (!valid.empty()) {
    emitter_.Line("valid = " + valid);
    emitter_.PushCondition("valid");
  }
  const Operand value = emitter_.Emit(pool.input, window.index);
  std::string element = "(" + value.code + ").to(tl.float32)";
  if (!valid.empty()) {
    element = fmt::format("tl.where(valid, {}, {})", element, is_max ? "float('-inf')" : "0.0");
    emitter_.PopCondition();
  }
  emitter_.Add(kir::Statement::Fold(0, "acc", is_max ? kir::Combine::kMax : kir::Combine::kAdd, element));
  for (int s = pool.spatial; s-- > 0;) {
    emitter_.Append(emitter_.CloseStatements());
  }
  std::string result = "acc";
  if (!is_max) {
    result = "acc / " + AvgDivisor(pool, in, out, out_index, first_spatial, window.starts, window.ends);
  }
  const Operand pooled{"pooled", ComputeDType(out.dtype), false};
  emitter_.Line("pooled = (" + result + ").to(" + TritonDType(pooled.dtype) + ")");
  emitter_.DefineRow(pool.output, pooled, x);
  StoreIfNeeded(pool.output, out_index, pooled, "xmask");
  WriteEpilogues(x, pool.output);
  return FinishFlat(fmt::format("{} pooling over a {} window, {} outputs: {}", NameOf(pool.kind), window.text,
                                numel, Summary(graph_, kernel_)),
                    numel);
}

std::string KernelWriter::AvgDivisor(const PoolSpec& pool, const TensorMeta& in, const TensorMeta& out,
                                     const std::vector<Index>& out_index, size_t first_spatial,
                                     const std::vector<std::string>& starts,
                                     const std::vector<std::string>& ends) {
  if (pool.divisor_override) {
    return FloatLiteral(static_cast<double>(*pool.divisor_override));
  }
  bool uniform = !pool.adaptive;
  for (int s = 0; s < pool.spatial && uniform; ++s) {
    const auto sd = static_cast<size_t>(s);
    const size_t d = first_spatial + sd;
    const bool no_edge = pool.padding[sd] == 0 && !pool.ceil_mode;
    uniform = no_edge || (pool.count_include_pad && (out.shape[d] - 1) * pool.stride[sd] + pool.kernel[sd] <=
                                                        in.shape[d] + 2 * pool.padding[sd]);
  }
  if (uniform) {
    int64_t size = 1;
    for (int64_t k : pool.kernel) {
      size *= k;
    }
    return FloatLiteral(static_cast<double>(size));
  }
  std::string divisor;
  for (int s = 0; s < pool.spatial; ++s) {
    const auto sd = static_cast<size_t>(s);
    const size_t d = first_spatial + sd;
    std::string extent;
    if (pool.adaptive) {
      extent = fmt::format("(({}) - ({}))", ends[sd], starts[sd]);
    } else if (pool.count_include_pad) {
      extent = fmt::format("({} - ({}))", ends[sd], starts[sd]);
    } else {
      extent = fmt::format("(tl.minimum({}, {}) - tl.maximum({}, 0))", ends[sd], in.shape[d], starts[sd]);
    }
    divisor += (divisor.empty() ? "" : " * ") + extent;
  }
  (void)out_index;
  return "(" + divisor + ").to(tl.float32)";
}

}  // namespace egg::expert::writer
