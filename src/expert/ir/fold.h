// Algebraic rewrites of a captured graph that a design turns on (PlanOptions): each is exact in real
// arithmetic and rounds differently in float32, so a folded candidate is checked and timed like any other,
// and a mismatch at a tight tolerance sends the search back to the graph as captured.
#pragma once

#include <optional>

#include "expert/ir/graph.h"

namespace egg::expert {

// A sum or mean over the columns of a float32 matrix product (mm, addmm), reached from the product through
// ops linear in it, each the only reader of the one before (a number multiplying or dividing, a negation, a
// bias row or a number added or subtracted):
//     sum_j (alpha * (A @ B)[i, j] + beta_j)  =  alpha * sum_k A[i, k] * (sum_j B[k, j])  +  sum_j beta_j
// B's row sums (from weights alone where B is a parameter: a kernel the candidate file keeps while they are
// unchanged) turn the product into one pass over A, a GEMV in place of a GEMM.
// Likewise a mean or sum over every position of a float32 transposed convolution of one group (keepdim),
// reached through ops affine per channel. With no padding and no output padding every input element meets
// every kernel tap inside the output, so
//     sum_p convT(x, W)[b, o, p]  =  sum_c (sum_i x[b, c, i]) * (sum_k W[c, o, k])  +  P * bias[o]
// (the input's sums over its positions times the kernel-summed weights: one pass over x and a small product
// in place of the convolution). A padding crops border pairs (input position i and tap k meet at
// i * stride - padding + k * dilation, outside the output for the first and last few), so there
//     sum_p convT(x, W)[b, o, p]  =  sum_c sum_k W[c, o, k] * (sum_i x[b, c, i] * window(i, k))  +  P *
//     bias[o]
// with a float32 indicator per cropped dim (window_d(i_d, k_d): the pair lands inside), x contracted with
// each (still one pass over x), the uncropped dims summed as before. Pooled over its leading position dims
// alone (a 3-D convolution's depth), it is a transposed convolution over the dims left, of x contracted with
// the pooled dims' windows (their taps folded into the input channels) and the weight with those taps beside
// its input channels. The per-channel ops, affine, commute with the mean and run after it on one value per
// channel, and a sum is P times that mean (P the pooled positions). The graph with
// every such sum folded, its other nodes as they were, or nullopt when there is none.
std::optional<Graph> FoldSummedProducts(const Graph& graph);

}  // namespace egg::expert
