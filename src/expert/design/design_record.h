// The design record: the algorithm and launch shape of every kernel and the fusion options of a candidate. It
// fixes a candidate completely (the same record regenerates the same file) and travels as JSON in candidates
// and the store.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/json.h"
#include "expert/ir/name_table.h"

namespace egg::expert {

// A kernel family, by its place in the family registry (families/family.h): the built-in families hold the
// first places under these constants; a family registered after them takes the next place, and its name (as
// every family's) comes from the registry. Compared as values, never by name.
struct KernelKind {
  int id = 0;
  static const KernelKind kPointwise;
  static const KernelKind kReduction;
  static const KernelKind kPool;
  static const KernelKind kScan;
  static const KernelKind kMatmul;
  static const KernelKind kRecurrent;
  static const KernelKind kAttention;
  constexpr auto operator<=>(const KernelKind& other) const = default;
};
inline constexpr KernelKind KernelKind::kPointwise{0};
inline constexpr KernelKind KernelKind::kReduction{1};
inline constexpr KernelKind KernelKind::kPool{2};
inline constexpr KernelKind KernelKind::kScan{3};
inline constexpr KernelKind KernelKind::kMatmul{4};
inline constexpr KernelKind KernelKind::kRecurrent{5};
inline constexpr KernelKind KernelKind::kAttention{6};
// The registered family's name ("pointwise", "matmul", ...).
std::string KernelKindName(KernelKind kind);

// A kernel's algorithm (see KernelDesign::algorithm). kUnset: none recorded yet (no kernel's algorithm: never
// legal); its name is empty, the form a record without one has always had.
enum class Algorithm {
  kUnset,
  kFlat,
  kPersistent,
  kLooped,
  kOnline,
  kSplit,
  kDirect,
  kSingle,
  kBlocked,
  kTiled,
  kSplitK,
  kNhwc,
  kNhwcK,
  kAligned,
  kKMajor,
  kGemv,
  kFlash,
  kSequential,
};

// tl.dot's input_precision. kUnset: none recorded (kernels without products, and a candidate's default for
// its matrix products, which then means ieee); written as nothing in the design record.
enum class Precision { kUnset, kIeee, kTf32, kTf32x3 };

// A precision for tl.dot: an unset one is ieee.
inline Precision DotPrecision(Precision precision) {
  return precision == Precision::kUnset ? Precision::kIeee : precision;
}
// A flash attention kernel's products from the candidate's precision: tf32 stays, ieee (or unset) maps to
// tf32x3 (float32 accuracy on the tensor cores; never ieee: a flash loop of FMA products is register-bound).
inline Precision FlashPrecision(Precision candidate) {
  return candidate == Precision::kTf32 ? Precision::kTf32 : Precision::kTf32x3;
}
// One of the three precisions a tl.dot kernel may record (not unset).
inline bool IsDotPrecision(Precision precision) { return precision != Precision::kUnset; }
// Row-kernel algorithms that hold the whole row in one tile (reduction persistent, scan single).
inline bool IsSingleTile(Algorithm algorithm) {
  return algorithm == Algorithm::kPersistent || algorithm == Algorithm::kSingle;
}
// The channels-last convolution algorithms (input and weight copied, K ordered (tap, channel)): nhwc's loop
// over the taps around a loop over the channels, nhwck's one K loop over (tap, channel step) pairs.
inline bool IsChannelsLast(Algorithm algorithm) {
  return algorithm == Algorithm::kNhwc || algorithm == Algorithm::kNhwcK;
}

template <>
struct EnumNames<Algorithm> {
  static constexpr std::array<std::pair<Algorithm, std::string_view>, 18> kTable{{
      {Algorithm::kUnset, ""},
      {Algorithm::kFlat, "flat"},
      {Algorithm::kPersistent, "persistent"},
      {Algorithm::kLooped, "looped"},
      {Algorithm::kOnline, "online"},
      {Algorithm::kSplit, "split"},
      {Algorithm::kDirect, "direct"},
      {Algorithm::kSingle, "single"},
      {Algorithm::kBlocked, "blocked"},
      {Algorithm::kTiled, "tiled"},
      {Algorithm::kSplitK, "splitk"},
      {Algorithm::kNhwc, "nhwc"},
      {Algorithm::kNhwcK, "nhwck"},
      {Algorithm::kAligned, "aligned"},
      {Algorithm::kKMajor, "kmajor"},
      {Algorithm::kGemv, "gemv"},
      {Algorithm::kFlash, "flash"},
      {Algorithm::kSequential, "sequential"},
  }};
};

template <>
struct EnumNames<Precision> {
  static constexpr std::array<std::pair<Precision, std::string_view>, 4> kTable{{
      {Precision::kUnset, ""},
      {Precision::kIeee, "ieee"},
      {Precision::kTf32, "tf32"},
      {Precision::kTf32x3, "tf32x3"},
  }};
};

// The algorithm and launch shape of one kernel: the design record's entry for it.
struct KernelDesign {
  // pointwise: flat | reduction: persistent, looped, online, split | pool: direct | scan: single, blocked |
  // matmul: tiled, splitk, direct (small-group convolutions), nhwc (convolutions: channels-last implicit
  // GEMM, a loop over the taps around one over the channels), nhwck (the same GEMM in one K loop over (tap,
  // channel step) pairs, software-pipelined across taps), aligned (matrix products over operand copies with
  // 16-byte-aligned rows) | attention: flash (xblock BLOCK_M query rows, yblock BLOCK_N keys per step) |
  // recurrent: sequential (xblock batch rows per program, yblock hidden units per step tile, rblock the K
  // step of h @ W_hh^T)
  Algorithm algorithm = Algorithm::kUnset;
  int64_t xblock = 0;
  int64_t rblock = 0;
  int64_t split =
      0;  // split reductions: programs per row; splitk: slices of K (partials summed by a 2nd kernel)
  int64_t yblock = 0;     // matmul: BLOCK_N (xblock is BLOCK_M, rblock BLOCK_K)
  Precision precision = Precision::kUnset;  // matmul, attention, recurrent: tl.dot's input_precision
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
  // A concatenation whose every piece a kernel computes is never copied: each piece is stored into its slice
  // of the cat's buffer (Plan::slots). Recorded only when false.
  bool concat_in_place = true;
  // A sum or mean over a matrix product's columns computed from the weights' row sums, one pass over the
  // product's input (FoldSummedProducts, ir/fold.h); seed 1 keeps the product whole. Recorded only when false
  // where the graph has such a sum.
  bool fold_summed_products = true;
  // A sum, mean, max or min over a product's columns finished in the product's tile (ReducesColumns,
  // design/legality.h: one tile spans the columns) with its consumers; false leaves it to a reduction kernel
  // over the stored product (seed 1). Recorded only when false where a reduction was left so.
  bool reduce_in_products = true;
  // Experimental kernel families switched on by name (KernelFamily::Experimental: off unless named here);
  // recorded only when not empty.
  std::vector<std::string> families;
  Json ToJson() const;
  static PlanOptions FromJson(const Json& json);
};

// The design record of a whole candidate: the seed family, the fusion options, the product precision of
// matmul kernels it does not list, and each kernel's design.
struct CandidateDesign {
  int seed = 0;
  PlanOptions plan;
  Precision precision =
      Precision::kUnset;  // tl.dot input_precision for unlisted matmul kernels (unset: ieee)
  std::map<std::string, KernelDesign> kernels;  // by kernel name; missing kernels take DefaultDesign(seed)
  // The precision the graph was captured in (fp32, bf16, fp16): set by GenerateCandidate from the graph, so
  // a record says what its kernels were made for; written only when not fp32.
  std::string dtype = "fp32";
  // A dynamic batch (Graph::dynamic): the range of batches the kernels hold for, set from the graph like
  // dtype; 0 when the shapes are fixed (and then not written).
  struct DynamicRange {
    int dim = 0;  // which dimension of the tensor inputs (0: the batch)
    int64_t min = 0;
    int64_t max = 0;
  };
  std::vector<DynamicRange> dynamic;  // written {"dim", "min", "max"} for one, {"dims": [...]} for several

  Json ToJson() const;
  // UnknownName for an algorithm or precision that does not exist; Json::exception for a malformed record.
  static CandidateDesign FromJson(const Json& json);
};

// The comment line egg writes into every candidate it generates, for people: no code reads it back (the
// design record travels as data, in the agents' messages and the store).
inline constexpr const char* kDesignMarker = "# egg-design: ";

}  // namespace egg::expert
