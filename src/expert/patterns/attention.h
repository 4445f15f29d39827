// The attention pattern out = bmm(softmax(X(bmm(Q, K^T))), V), found in the captured graph.
#pragma once

#include <optional>
#include <set>

#include "expert/ir/graph.h"

namespace egg::expert {

// elementwise function of S = bmm(Q, K^T) (a scale, a where(mask, -inf, .) of a broadcast mask tensor:
// whatever the graph computes, read through the emitter), with SDPA's _safe_softmax guard (0 for a row of
// -inf) when `safe`. `absorbed`: the nodes the kernel computes (S, the softmax, the guard); none is read
// outside the pattern.
struct AttentionSpec {
  int node = -1;    // bmm(P, V)
  int scores = -1;  // the S = bmm(Q, K^T) node
  int q = -1;       // S's operands: Q [batch, lq, d], K^T [batch, d, lk]
  int kt = -1;
  int v = -1;        // [batch, lk, dv]
  int s_value = -1;  // S's value
  int x = -1;        // the softmax's input X, [.., lq, lk]
  bool safe = false;
  // X = where(mask, -inf, .) (masked_when true) or where(mask, ., -inf) with the mask independent of S: a key
  // block whose tile is masked everywhere contributes nothing and is skipped at run time (-1: no such mask)
  int mask = -1;
  bool masked_when = true;
  int64_t batch = 1, lq = 0, lk = 0, d = 0, dv = 0;
  DType dtype = DType::kFloat32;  // of Q, K, V, the scores and the output alike (float32, bf16 or fp16)
  std::set<int> absorbed;
};
// The attention pattern ending at `node` (a bmm), or nullopt: one type (fp32, bf16 or fp16), head dims at
// most 256, S and P read by nothing else.
std::optional<AttentionSpec> ParseAttention(const Graph& graph, const Node& node);

}  // namespace egg::expert
