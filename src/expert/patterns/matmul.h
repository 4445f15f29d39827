// Matrix products (mm, bmm, addmm) and convolutions (1-3D, strided, padded, dilated, grouped, transposed) as
// one product shape: an implicit GEMM per group (or per group and output phase when transposed).
#pragma once

#include <optional>
#include <vector>

#include "expert/ir/graph.h"

namespace egg::expert {

// A convolution computed as an implicit GEMM, one product per group: rows are (image, output position),
// columns the group's output channels, the reduction runs over (input channel of the group, kernel position);
// the input operand is gathered at `position * stride - padding + offset * dilation` (zero outside the
// input).
struct ConvShape {
  int spatial = 2;  // 1, 2 or 3
  int64_t images = 1, in_channels = 1, out_channels = 1, groups = 1;
  std::vector<int64_t> in_size, out_size, kernel;  // spatial extents
  std::vector<int64_t> stride, padding, dilation;
  bool transposed =
      false;  // out = (in - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1
};

// A transposed convolution along spatial dim `s`, split by output phase: the output positions q * stride +
// phase take kernel offsets first + j * step (j < count; count 0 where none fits) from input positions q +
// base - j * input_step, with step = stride / gcd(stride, dilation), input_step = dilation / gcd. Each phase
// is a dense convolution; one entry per phase in [0, stride).
struct TransposedPhase {
  int64_t first = 0, count = 0, base = 0;
};
std::vector<TransposedPhase> TransposedPhases(const ConvShape& conv, size_t s);
int64_t TransposedTapStep(const ConvShape& conv, size_t s);    // stride / gcd(stride, dilation)
int64_t TransposedInputStep(const ConvShape& conv, size_t s);  // dilation / gcd(stride, dilation)
int64_t TransposedMaxTaps(const ConvShape& conv, size_t s);    // the largest count over the phases

// A matrix product: out[b] = beta * bias + alpha * (a[b] @ b[b]) (mm, bmm, addmm; b = 1 without a batch), or
// a convolution (`conv` set: a is the input, b the weight, bias the per-channel bias, batch the groups;
// transposed: batch (group, phase) with phases the product of the strides, m (image, q), k (input channel,
// taps of a phase)).
struct MatmulSpec {
  int node = -1;
  int a = -1;
  int b = -1;
  int bias = -1;  // addmm's input, or -1
  double alpha = 1;
  double beta = 1;
  bool batched = false;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  DType dtype = DType::kFloat32;  // the operands' and the result's one type (float32, bfloat16 or float16)
  std::optional<ConvShape> conv;
  // B is known to be N-contiguous in memory: an input, parameter or buffer read as it is (torch.matmul's
  // [K, N]), not a view of one (nn.Linear's weight.T, or a view chain whose order only the lowering knows).
  bool b_n_major = false;
  // A is known to be K-contiguous and dense in memory ([batch, m, k] row-major): an input, parameter or
  // buffer read as it is whose strides say so.
  bool a_k_major = false;
  // B's traced strides are K-contiguous and dense ([batch, n, k] in memory, read as [k, n]: torch.matmul(A,
  // B.T), nn.Linear's weight): its tiles are read along K in place, as `kmajor` reads its copy.
  bool b_k_major = false;
};
std::optional<MatmulSpec> ParseMatmul(const Graph& graph, const Node& node);

}  // namespace egg::expert
