// The design record: the algorithm and launch shape of every kernel and the fusion options of a candidate. It
// fixes a candidate completely (the same record regenerates the same file) and travels as JSON in candidates
// and the store.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "common/json.h"

namespace egg::expert {

enum class KernelKind { kPointwise, kReduction, kPool, kScan, kMatmul, kRecurrent, kAttention };
std::string KernelKindName(KernelKind kind);

// The algorithm and launch shape of one kernel: the design record's entry for it.
struct KernelDesign {
  // pointwise: flat | reduction: persistent, looped, online, split | pool: direct | scan: single, blocked |
  // matmul: tiled, splitk, direct (small-group convolutions), nhwc (convolutions: channels-last implicit
  // GEMM), aligned (matrix products over operand copies with 16-byte-aligned rows) | attention: flash (xblock
  // BLOCK_M query rows, yblock BLOCK_N keys per step) | recurrent: sequential (xblock batch rows per program,
  // yblock hidden units per step tile, rblock the K step of h @ W_hh^T)
  std::string algorithm;
  int64_t xblock = 0;
  int64_t rblock = 0;
  int64_t split =
      0;  // split reductions: programs per row; splitk: slices of K (partials summed by a 2nd kernel)
  int64_t yblock = 0;     // matmul: BLOCK_N (xblock is BLOCK_M, rblock BLOCK_K)
  std::string precision;  // matmul: tl.dot's input_precision (ieee, tf32, tf32x3)
  int num_warps = 4;
  int num_stages = 1;

  Json ToJson() const;
  static KernelDesign FromJson(const Json& json);
  bool operator==(const KernelDesign& other) const { return ToJson() == other.ToJson(); }
};

struct PlanOptions {
  bool fuse_reductions = true;  // same-domain reductions share a kernel (multi-pass or registers)
  bool fuse_epilogues = true;   // pointwise consumers join the kernel that produces their inputs
  // The forward captured once in a CUDA graph over static copies of its inputs, then replayed (one launch for
  // every kernel): stage2.memory's launch-overhead move, for plans with no op left to PyTorch.
  bool cuda_graph = false;
  // Attention patterns (ParseAttention) as one flash kernel each; false keeps the products and the softmax in
  // kernels of their own (seed 1, the unfused path measured against it). Recorded only when false.
  bool fuse_attention = true;
  Json ToJson() const;
  static PlanOptions FromJson(const Json& json);
};

// The design record of a whole candidate: the seed family, the fusion options, the product precision of
// matmul kernels it does not list, and each kernel's design.
struct CandidateDesign {
  int seed = 0;
  PlanOptions plan;
  std::string precision;  // tl.dot input_precision for unlisted matmul kernels: ieee (empty), tf32, tf32x3
  std::map<std::string, KernelDesign> kernels;  // by kernel name; missing kernels take DefaultDesign(seed)

  Json ToJson() const;
  static CandidateDesign FromJson(const Json& json);
};

// The comment line egg writes into every candidate it generates, for people: no code reads it back (the
// design record travels as data, in the agents' messages and the store).
inline constexpr const char* kDesignMarker = "# egg-design: ";

}  // namespace egg::expert
