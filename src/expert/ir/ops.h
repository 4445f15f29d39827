// What the expert backend knows about each ATen op: its class (how the planner treats it) and, for pointwise
// ops, the Triton expression that computes it. Ops it does not know run in PyTorch (class kExtern).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "expert/ir/graph.h"

namespace egg::expert {

// A value or kernel that cannot be computed as asked (an unknown view, a read the kernel's index cannot
// make): thrown by view handling and the code generator, a value again at the lowering probe
// (families/lowering_probe.h).
struct NotFusable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The source value of a view node (NotFusable when its first argument is not a tensor).
int ViewSource(const Node& node);

enum class OpClass {
  kView,       // metadata only: view, permute, expand, slice, select, unsqueeze, squeeze, flip, as_strided...
  kPointwise,  // one output element from the same position of each input (broadcasting), or a constant
  kReduction,  // sum, mean, amax, amin, prod, var, argmax, argmin, max.dim, min.dim, any, all
  kPool,       // max/avg pooling windows
  kScan,       // cumsum, cumprod; sort, topk (row kernels)
  kConcat,     // cat: piecewise selection along one dimension
  kGather,     // gather along a dimension with an index tensor
  kGetItem,    // element of a tuple-producing node
  kMatmul,     // mm, bmm, addmm: tl.dot tiles
  kRecurrent,  // lstm, gru, rnn_tanh, rnn_relu: whole layer stacks, a projection GEMM and a time loop per
               // layer
  kExtern,     // anything else: runs in PyTorch (convolution, matmul, ...)
};

OpClass ClassifyOp(const std::string& op);
std::string OpClassName(OpClass op_class);
// full, full_like, zeros_like, fill...: one constant everywhere, a tensor argument read for its shape alone.
bool IsConstantFill(const std::string& op);

// A value inside generated kernel code: an expression (or variable) and its element type.
struct Operand {
  std::string code;
  DType dtype = DType::kFloat32;
  bool scalar = false;  // a Python literal, not a tile
};

// Helper functions a pointwise expression may call; emitted once into the candidate file.
enum class Helper { kTanh, kExpm1, kLog1p, kPow, kTrunc, kRound };

struct PointwiseCode {
  std::optional<std::string> code;  // the Triton expression
  std::string problem;              // why there is none
  std::vector<Helper> helpers;
};

// The expression computing `node` from its tensor operands (in argument order: tensor args first-level and
// list elements, as ValueOf finds them) and its scalar arguments. `out` is the node's result type.
PointwiseCode LowerPointwise(const Node& node, const std::vector<Operand>& tensors, DType out);

// The type bfloat16 tl.dot operands are cast to: tl.bfloat16 (the tensor cores), but float32 under Triton's
// interpreter, whose bf16 products are wrong (triton 3.6). HelperSource defines it where code names it.
inline constexpr const char* kBf16Dot = "EGG_BF16_DOT";

// Source of every helper function (`_egg_*`) that `code` calls: jit functions with a tl-math fallback for the
// interpreter, the combine functions of tl.reduce, and EGG_BF16_DOT.
std::string HelperSource(const std::string& code);

// A Python literal for a double ("1.0", "float('inf')").
std::string FloatLiteral(double value);

}  // namespace egg::expert
