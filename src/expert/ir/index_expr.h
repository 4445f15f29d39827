// Integer index arithmetic over a kernel's loop variables, the way a kernel engineer writes it: a canonical
// linear form (constant + sum of coefficient x atom) whose atoms are variables, runtime values, floor divisions
// and remainders. Every operation simplifies with the variables' ranges (x // 64 with x < 64 is 0,
// 64*(x // 64) + x % 64 is x), so views, reshapes and broadcasts compose into plain pointer arithmetic.
// Division and remainder follow floor semantics and are only generated over non-negative operands.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace egg::expert {

class Index;

struct IndexAtom {
  enum class Kind { kVar, kRuntime, kDiv, kMod };
  Kind kind = Kind::kVar;
  std::string name;  // kVar, kRuntime: the code name
  int64_t lo = 0;    // value range, inclusive
  int64_t hi = 0;
  std::shared_ptr<const Index> inner;  // kDiv, kMod
  int64_t divisor = 1;                 // kDiv: divisor; kMod: modulus
  std::string key;                     // canonical text, for equality and ordering
};

using AtomPtr = std::shared_ptr<const IndexAtom>;

class Index {
 public:
  Index() = default;
  explicit Index(int64_t constant) : constant_(constant), key_(std::to_string(constant)) {}

  // A loop variable ranging over [0, extent).
  static Index Var(const std::string& name, int64_t extent);
  // A value known only at run time (a loaded index), within [lo, hi].
  static Index Runtime(const std::string& name, int64_t lo, int64_t hi);

  Index operator+(const Index& other) const;
  Index operator-(const Index& other) const;
  Index operator*(int64_t factor) const;
  Index FloorDiv(int64_t divisor) const;
  Index Mod(int64_t modulus) const;

  bool IsConstant() const { return terms_.empty(); }
  int64_t Constant() const { return constant_; }
  int64_t Lo() const;
  int64_t Hi() const;
  // Whether any term names a variable or runtime value called `name` (at any depth).
  bool Uses(const std::string& name) const;
  // The coefficient of a plain variable term `name` (0 when it only appears inside div/mod or not at all).
  int64_t CoefficientOf(const std::string& name) const;
  // This expression with every term that mentions `name` removed (constant kept).
  Index Without(const std::string& name) const;
  const std::string& Key() const { return key_; }
  bool operator==(const Index& other) const { return key_ == other.key_; }
  // Python/Triton source text.
  std::string Code() const;

  const std::vector<std::pair<int64_t, AtomPtr>>& Terms() const { return terms_; }

 private:
  static Index FromTerms(int64_t constant, std::vector<std::pair<int64_t, AtomPtr>> terms);
  // gcd of `number`, the constant and every coefficient; this expression divided exactly by a common factor.
  int64_t CommonFactor(int64_t number) const;
  Index DividedBy(int64_t factor) const;
  // (A, c) with this == c*A + rest, c dividing `divisor` and 0 <= rest < c, for the largest such c.
  std::optional<std::pair<Index, int64_t>> SplitByFactor(int64_t divisor) const;
  void Normalize();
  bool Recombine();

  int64_t constant_ = 0;
  std::vector<std::pair<int64_t, AtomPtr>> terms_;  // sorted by atom key, no zero coefficients
  std::string key_ = "0";
};

// The multi-index of a row-major flat index `flat` over `shape` (outermost first).
std::vector<Index> Delinearize(const Index& flat, const std::vector<int64_t>& shape);
// The row-major flat index of `index` over `shape`.
Index Linearize(const std::vector<Index>& index, const std::vector<int64_t>& shape);
// sum(index[d] * strides[d]) + offset
Index Offset(const std::vector<Index>& index, const std::vector<int64_t>& strides, int64_t offset);

}  // namespace egg::expert
