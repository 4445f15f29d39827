// Attention as one flash-style Triton kernel in the kernel IR: the pattern out = bmm(softmax(X(bmm(Q, K^T))),
// V) found in the captured graph (ParseAttention), then per (query block, batch) program (the kQueryBlocks
// domain) the Q tile loaded once and a loop over key blocks: scores by tl.dot, X computed from them by the
// emitter (scales, masks: whatever the graph does), online softmax, acc += tl.dot(p, v).
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>

#include "expert/codegen/kernel_codegen.h"
#include "expert/codegen/kernel_writer.h"
#include "expert/plan/plan.h"

namespace egg::expert {
namespace {

constexpr int64_t kMinDot = 16;  // tl.dot's smallest tile side

// The kernel's index variables: batch, query rows (m), key columns of the scores (n) and rows of V (nv), and
// the head dimensions of Q (dq), K (dk) and V (dv).
struct AttentionIndex {
  Index b, m, n, nv, dq, dk, dv;
};

AttentionIndex IndexOf(const AttentionSpec& at) {
  return {Index::Var("bindex", at.batch), Index::Var("mindex", at.lq), Index::Var("nindex", at.lk),
          Index::Var("nvindex", at.lk),   Index::Var("dqindex", at.d), Index::Var("dkindex", at.d),
          Index::Var("dvindex", at.dv)};
}

MaskSet AttentionMasks() {
  MaskSet masks{{{"mindex", "mmask"},
                 {"nindex", "nmask"},
                 {"nvindex", "nvmask"},
                 {"dqindex", "dqmask"},
                 {"dkindex", "dkmask"},
                 {"dvindex", "dvmask"}},
                {{"mmask & nmask", "smask"}, {"mmask & dvmask", "omask"}},
                "smask"};
  masks.max_concat_pieces = kMaxConcatPiecesInTiles;
  return masks;
}

// The body of the loop over key blocks: the scores s = q kt, X computed from them, the online softmax's
// update and acc += p v; a key block masked for every query row of the program is skipped. `q_scalar`: the
// prologue's Q tile is a constant (no attention to write: NotFusable, once the loop is written).
std::vector<kir::Statement> EmitKeyBlockLoop(const Graph& graph, const AttentionSpec& at,
                                             const AttentionIndex& ix, Precision precision, bool q_scalar,
                                             KernelEmitter& emitter) {
  emitter.OpenScope(2);
  const Index scores_flat = (ix.b * at.lq + ix.m) * at.lk + ix.n;
  const auto x_index = Delinearize(scores_flat, ValueAt(graph, at.x).meta->shape);
  if (at.mask >= 0) {  // a key block masked for every query row of the program contributes nothing
    const Operand mask = emitter.Emit(at.mask, BroadcastIndex(x_index, ValueAt(graph, at.x).meta->shape,
                                                              ValueAt(graph, at.mask).meta->shape));
    emitter.Line(fmt::format("live = tl.max(tl.where(smask & (({}) {} 0), 1, 0))", mask.code,
                             at.masked_when ? "==" : "!="));
    emitter.Line("if live > 0:");
    emitter.OpenScope(3);
  }
  const Operand kt = emitter.Emit(at.kt, {ix.b, ix.dk, ix.n});
  emitter.Line(fmt::format("kt = tl.where(dkmask & nmask, ({}).to(tl.float32), 0.0)", kt.code));
  const std::string cast = writer::DotOperandCast(at.dtype);  // half: the tensor cores in that type
  emitter.Add(kir::Statement::Dot(0, "s", {"q", "kt", cast, precision}));
  emitter.DefineRow(at.s_value, Operand{"s", DType::kFloat32, false}, scores_flat);
  const Operand x = emitter.Emit(at.x, x_index);
  emitter.Line(fmt::format("x = tl.where(nmask, ({}).to(tl.float32), float(\"-inf\"))", x.code));
  const Operand v = emitter.Emit(at.v, {ix.b, ix.nv, ix.dv});
  emitter.Line(fmt::format("v = tl.where(nvmask & dvmask, ({}).to(tl.float32), 0.0)", v.code));
  for (const char* line :
       {"m_new = tl.maximum(m_i, tl.max(x, 1))",
        "# a row with no finite score yet subtracts 0: its exponentials are 0, not nan",
        "m_safe = tl.where(m_new == float(\"-inf\"), 0.0, m_new)", "alpha = tl.exp(m_i - m_safe)",
        "p = tl.exp(x - m_safe[:, None])", "l_i = l_i * alpha + tl.sum(p, 1)"}) {
    emitter.Line(line);
  }
  emitter.Add(kir::Statement::Accumulate(0, "acc", {"p", "v", cast, precision}, "alpha[:, None]"));
  emitter.Line("m_i = m_new");
  if (at.mask >= 0) {
    emitter.Append(emitter.CloseStatements());
  }
  std::vector<kir::Statement> loop = emitter.CloseStatements();
  if (q_scalar || kt.scalar || v.scalar) {
    throw NotFusable("a constant attention operand");
  }
  return loop;
}

// After the loop: the output row block, stored where the plan stores it, and the kernel's other roots (an
// elementwise epilogue of the output) computed and stored at the same positions.
void EmitOutputs(const Graph& graph, const KernelPlan& kernel, const std::map<int, TensorMeta>& layouts,
                 const AttentionIndex& ix, KernelEmitter& emitter) {
  const AttentionSpec& at = *kernel.attention;
  const int out = graph.nodes.at(static_cast<size_t>(at.node)).value;
  const Index out_flat = (ix.b * at.lq + ix.m) * at.dv + ix.dv;
  const Operand result{"out", DType::kFloat32, false};
  emitter.DefineRow(out, result, out_flat);
  for (int root : kernel.roots) {
    const bool stored = std::find(kernel.stores.begin(), kernel.stores.end(), root) != kernel.stores.end();
    if (root == out) {
      if (stored) {
        emitter.Store(out, {ix.b, ix.m, ix.dv}, result, layouts.at(out), "omask");
      }
      continue;
    }
    const auto index = Delinearize(out_flat, ValueAt(graph, root).meta->shape);  // an elementwise epilogue
    const Operand value = emitter.Emit(root, index);
    if (stored) {
      emitter.Store(root, index, value, layouts.at(root), "omask");
    }
  }
}

// The lines around the emitter's: the online softmax's state, the loop over key blocks with its lanes, and
// after it the output row block (a fully masked row 0 under _safe_softmax, nan under a plain softmax).
std::vector<kir::Statement> FlashBody(const AttentionSpec& at, int64_t block_dv,
                                      std::vector<kir::Statement> q, std::vector<kir::Statement> loop,
                                      std::vector<kir::Statement> outputs) {
  std::vector<kir::Statement> body = std::move(q);
  auto line = [&body](int depth, std::string text) {
    body.push_back(kir::Statement::Text(depth, std::move(text)));
  };
  line(1,
       "# online softmax: running row max m_i, running sum l_i, the output accumulator rescaled as the max "
       "grows");
  body.push_back(kir::Statement::Tile(1, "m_i", {"BLOCK_M"}, "tl.float32", "float(\"-inf\")"));
  body.push_back(kir::Statement::Tile(1, "l_i", {"BLOCK_M"}, "tl.float32"));
  body.push_back(kir::Statement::Tile(1, "acc", {"BLOCK_M", std::to_string(block_dv)}, "tl.float32"));
  body.push_back(
      kir::Statement::Loop(1, "n0", kir::LoopRange::Stepped("0", std::to_string(at.lk), "BLOCK_N")));
  line(2, "nindex = n0 + tl.arange(0, BLOCK_N)[None, :]");
  line(2, fmt::format("nmask = nindex < {}", at.lk));
  line(2, "nvindex = n0 + tl.arange(0, BLOCK_N)[:, None]");
  line(2, fmt::format("nvmask = nvindex < {}", at.lk));
  line(2, "smask = mmask & nmask");
  body.insert(body.end(), std::make_move_iterator(loop.begin()), std::make_move_iterator(loop.end()));
  if (at.safe) {
    line(1, "# _safe_softmax: a row of -inf scores gives 0");
    line(1, "out = tl.where(l_i[:, None] == 0.0, 0.0, acc / l_i[:, None])");
  } else {
    line(1, "# a row of -inf scores gives 0 / 0 = nan, as softmax does");
    line(1, "out = acc / l_i[:, None]");
  }
  body.insert(body.end(), std::make_move_iterator(outputs.begin()), std::make_move_iterator(outputs.end()));
  return body;
}

// The flash function: its query-block domain, the comment naming the shapes, the precision and the roots.
kir::Function FlashFunction(const Graph& graph, const KernelPlan& kernel, size_t pointers,
                            std::string_view precision, bool int64) {
  const AttentionSpec& at = *kernel.attention;
  std::string summary;
  for (int root : kernel.roots) {
    summary += (summary.empty() ? "" : ", ") + ValueAt(graph, root).name;
  }
  kir::Function function;
  function.name = kernel.name;
  function.pointers = pointers;
  function.constexprs = {"BLOCK_M", "BLOCK_N"};
  function.comment = fmt::format(
      "flash attention, {} x softmax([{} x {}] @ [{} x {}]) @ [{} x {}], tl.dot input_precision {}{}: {}",
      at.batch, at.lq, at.d, at.d, at.lk, at.lk, at.dv, precision,
      at.safe ? ", a fully masked row gives 0" : "", summary);
  function.domain.kind = kir::Domain::Kind::kQueryBlocks;
  function.domain.size = at.lq;
  function.domain.int64 = int64;
  function.domain.heads = {at.d, std::max(kMinDot, NextPowerOfTwo(at.d)), at.dv,
                           std::max(kMinDot, NextPowerOfTwo(at.dv))};
  return function;
}

}  // namespace

kir::Kernel AttentionProgram(const Graph& graph, const KernelPlan& kernel,
                             const std::map<int, TensorMeta>& memory,
                             const std::map<int, TensorMeta>& layouts) {
  const AttentionSpec& at = *kernel.attention;
  const KernelDesign& design = kernel.design;
  KernelEmitter emitter(graph, memory, AttentionMasks());
  const AttentionIndex ix = IndexOf(at);
  // flash products are never ieee: tf32x3 keeps float32 accuracy on the tensor cores; half ones are the
  // tensor cores' own type, where the precision names nothing (ieee, as the half matrix products write it)
  const Precision precision = IsHalf(at.dtype) ? Precision::kIeee : FlashPrecision(design.precision);
  emitter.OpenScope(1);
  const Operand q = emitter.Emit(at.q, {ix.b, ix.m, ix.dq});
  emitter.Line(fmt::format("q = tl.where(mmask & dqmask, ({}).to(tl.float32), 0.0)", q.code));
  std::vector<kir::Statement> prologue = emitter.CloseStatements();
  std::vector<kir::Statement> loop = EmitKeyBlockLoop(graph, at, ix, precision, q.scalar, emitter);
  EmitOutputs(graph, kernel, layouts, ix, emitter);
  kir::Kernel program;
  program.name = kernel.name;
  program.int64_indexing = writer::NeedsInt64(graph, emitter.MaxAddress());
  kir::Function function =
      FlashFunction(graph, kernel, emitter.PointerValues().size(), NameOf(precision), program.int64_indexing);
  function.body = FlashBody(at, function.domain.heads.block_dv, std::move(prologue), std::move(loop),
                            emitter.CloseStatements());
  program.functions.push_back(std::move(function));
  // With a dynamic size the query length may be a runtime size: its tile count is computed where it is known
  // (dynamic_batch.h refuses a count computed here, a floor of the size).
  const int64_t grid_m = (at.lq + design.xblock - 1) / design.xblock;
  program.launches.push_back({kernel.name,
                              emitter.PointerValues(),
                              graph.dynamic
                                  ? fmt::format("(triton.cdiv({}, {}), {})", at.lq, design.xblock, at.batch)
                                  : fmt::format("({}, {})", grid_m, at.batch),
                              {{"BLOCK_M", design.xblock}, {"BLOCK_N", design.yblock}},
                              {}});
  program.helpers = emitter.Helpers();
  program.computed = emitter.Computed();
  program.computed.insert(at.absorbed.begin(), at.absorbed.end());
  program.computed.insert(at.node);
  return program;
}

}  // namespace egg::expert
