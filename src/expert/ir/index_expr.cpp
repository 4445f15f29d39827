#include "expert/ir/index_expr.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace egg::expert {
namespace {

int64_t FloorDivInt(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) {
    --q;
  }
  return q;
}

int64_t FloorModInt(int64_t a, int64_t b) { return a - FloorDivInt(a, b) * b; }

AtomPtr MakeAtom(IndexAtom atom) {
  switch (atom.kind) {
    case IndexAtom::Kind::kVar:
    case IndexAtom::Kind::kRuntime:
      atom.key = atom.name;
      break;
    case IndexAtom::Kind::kDiv:
      atom.key = "(" + atom.inner->Key() + ")//" + std::to_string(atom.divisor);
      break;
    case IndexAtom::Kind::kMod:
      atom.key = "(" + atom.inner->Key() + ")%" + std::to_string(atom.divisor);
      break;
  }
  return std::make_shared<const IndexAtom>(std::move(atom));
}

bool SameInner(const IndexAtom& a, const IndexAtom& b) { return a.inner->Key() == b.inner->Key(); }

// If `index` is exactly one atom with coefficient 1 and no constant, that atom.
const IndexAtom* SoleAtom(const Index& index) {
  if (index.Constant() != 0 || index.Terms().size() != 1 || index.Terms()[0].first != 1) {
    return nullptr;
  }
  return index.Terms()[0].second.get();
}

}  // namespace

Index Index::Var(const std::string& name, int64_t extent) {
  IndexAtom atom;
  atom.kind = IndexAtom::Kind::kVar;
  atom.name = name;
  atom.lo = 0;
  atom.hi = std::max<int64_t>(extent - 1, 0);
  return FromTerms(0, {{1, MakeAtom(std::move(atom))}});
}

Index Index::Runtime(const std::string& name, int64_t lo, int64_t hi) {
  IndexAtom atom;
  atom.kind = IndexAtom::Kind::kRuntime;
  atom.name = name;
  atom.lo = lo;
  atom.hi = hi;
  return FromTerms(0, {{1, MakeAtom(std::move(atom))}});
}

Index Index::FromTerms(int64_t constant, std::vector<std::pair<int64_t, AtomPtr>> terms) {
  Index index;
  index.constant_ = constant;
  index.terms_ = std::move(terms);
  index.Normalize();
  return index;
}

void Index::Normalize() {
  std::sort(terms_.begin(), terms_.end(),
            [](const auto& a, const auto& b) { return a.second->key < b.second->key; });
  std::vector<std::pair<int64_t, AtomPtr>> merged;
  for (auto& term : terms_) {
    if (!merged.empty() && merged.back().second->key == term.second->key) {
      merged.back().first += term.first;
    } else {
      merged.push_back(term);
    }
  }
  merged.erase(std::remove_if(merged.begin(), merged.end(), [](const auto& t) { return t.first == 0; }),
               merged.end());
  terms_ = std::move(merged);
  if (Recombine()) {
    Normalize();
    return;
  }
  key_ = std::to_string(constant_);
  for (const auto& [coef, atom] : terms_) {
    key_ += "+" + std::to_string(coef) + "*" + atom->key;
  }
}

// c*a*(e//a) + c*(e%a) -> c*e ;  c*a*((e//a)%b) + c*(e%a) -> c*(e%(a*b)).
bool Index::Recombine() {
  for (size_t i = 0; i < terms_.size(); ++i) {
    const IndexAtom& mod = *terms_[i].second;
    if (mod.kind != IndexAtom::Kind::kMod) {
      continue;
    }
    const int64_t c = terms_[i].first;
    const int64_t a = mod.divisor;
    for (size_t j = 0; j < terms_.size(); ++j) {
      if (j == i || terms_[j].first != c * a) {
        continue;
      }
      const IndexAtom& other = *terms_[j].second;
      Index replacement;
      bool matched = false;
      if (other.kind == IndexAtom::Kind::kDiv && other.divisor == a && SameInner(other, mod)) {
        replacement = *mod.inner * c;
        matched = true;
      } else if (other.kind == IndexAtom::Kind::kMod) {
        const IndexAtom* div = SoleAtom(*other.inner);
        if (div != nullptr && div->kind == IndexAtom::Kind::kDiv && div->divisor == a && SameInner(*div, mod)) {
          replacement = mod.inner->Mod(a * other.divisor) * c;
          matched = true;
        }
      }
      if (!matched) {
        continue;
      }
      std::vector<std::pair<int64_t, AtomPtr>> rest;
      for (size_t k = 0; k < terms_.size(); ++k) {
        if (k != i && k != j) {
          rest.push_back(terms_[k]);
        }
      }
      for (const auto& term : replacement.terms_) {
        rest.push_back(term);
      }
      constant_ += replacement.constant_;
      terms_ = std::move(rest);
      return true;
    }
  }
  return false;
}

Index Index::operator+(const Index& other) const {
  auto terms = terms_;
  terms.insert(terms.end(), other.terms_.begin(), other.terms_.end());
  return FromTerms(constant_ + other.constant_, std::move(terms));
}

Index Index::operator-(const Index& other) const { return *this + other * -1; }

Index Index::operator*(int64_t factor) const {
  if (factor == 0) {
    return Index(0);
  }
  auto terms = terms_;
  for (auto& term : terms) {
    term.first *= factor;
  }
  return FromTerms(constant_ * factor, std::move(terms));
}

int64_t Index::Lo() const {
  int64_t lo = constant_;
  for (const auto& [coef, atom] : terms_) {
    lo += coef > 0 ? coef * atom->lo : coef * atom->hi;
  }
  return lo;
}

int64_t Index::Hi() const {
  int64_t hi = constant_;
  for (const auto& [coef, atom] : terms_) {
    hi += coef > 0 ? coef * atom->hi : coef * atom->lo;
  }
  return hi;
}

int64_t Index::CommonFactor(int64_t number) const {
  int64_t g = std::gcd(number, constant_);
  for (const auto& term : terms_) {
    g = std::gcd(g, term.first);
  }
  return g;
}

Index Index::DividedBy(int64_t factor) const {
  auto scaled = terms_;
  for (auto& term : scaled) {
    term.first /= factor;
  }
  return FromTerms(constant_ / factor, scaled);
}

std::optional<std::pair<Index, int64_t>> Index::SplitByFactor(int64_t divisor) const {
  std::vector<int64_t> factors;
  for (const auto& [coef, atom] : terms_) {
    if (coef > 1 && divisor % coef == 0 && divisor != coef) {
      factors.push_back(coef);
    }
  }
  std::sort(factors.rbegin(), factors.rend());
  for (int64_t c : factors) {
    std::vector<std::pair<int64_t, AtomPtr>> whole;
    std::vector<std::pair<int64_t, AtomPtr>> rest;
    for (const auto& term : terms_) {
      if (term.first % c == 0) {
        whole.push_back({term.first / c, term.second});
      } else {
        rest.push_back(term);
      }
    }
    const Index remainder = FromTerms(FloorModInt(constant_, c), rest);
    if (remainder.Lo() >= 0 && remainder.Hi() < c) {
      return std::make_pair(FromTerms(FloorDivInt(constant_, c), whole), c);
    }
  }
  return std::nullopt;
}

Index Index::FloorDiv(int64_t divisor) const {
  if (divisor <= 0) {
    throw std::logic_error("FloorDiv by a non-positive divisor");
  }
  if (divisor == 1) {
    return *this;
  }
  if (IsConstant()) {
    return Index(FloorDivInt(constant_, divisor));
  }
  const int64_t lo = Lo();
  const int64_t hi = Hi();
  if (FloorDivInt(lo, divisor) == FloorDivInt(hi, divisor)) {
    return Index(FloorDivInt(lo, divisor));
  }
  // Split off the terms whose coefficients are multiples of the divisor.
  std::vector<std::pair<int64_t, AtomPtr>> whole;
  std::vector<std::pair<int64_t, AtomPtr>> rest;
  for (const auto& term : terms_) {
    (term.first % divisor == 0 ? whole : rest).push_back(term);
  }
  const int64_t constant_whole = FloorDivInt(constant_, divisor);
  const Index remainder = FromTerms(FloorModInt(constant_, divisor), rest);
  if (!whole.empty() || constant_whole != 0) {
    for (auto& term : whole) {
      term.first /= divisor;
    }
    const Index quotient = FromTerms(constant_whole, whole);
    const int64_t rlo = remainder.Lo();
    const int64_t rhi = remainder.Hi();
    if (rlo >= 0 && rhi < divisor) {
      return quotient;
    }
    if (rlo >= 0) {
      return quotient + remainder.FloorDiv(divisor);
    }
  }
  // (c*A + rest) // d with c | d and 0 <= rest < c -> A // (d / c)
  if (auto split = SplitByFactor(divisor)) {
    return split->first.FloorDiv(divisor / split->second);
  }
  // (e // a) // b -> e // (a*b) ; (e % m) // d with d | m -> (e // d) % (m / d)
  if (const IndexAtom* atom = SoleAtom(*this)) {
    if (atom->kind == IndexAtom::Kind::kDiv) {
      return atom->inner->FloorDiv(atom->divisor * divisor);
    }
    if (atom->kind == IndexAtom::Kind::kMod && atom->divisor % divisor == 0) {
      return atom->inner->FloorDiv(divisor).Mod(atom->divisor / divisor);
    }
  }
  // Common factor: (g*e) // (g*d) -> e // d
  if (const int64_t g = CommonFactor(divisor); g > 1) {
    return DividedBy(g).FloorDiv(divisor / g);
  }
  IndexAtom atom;
  atom.kind = IndexAtom::Kind::kDiv;
  atom.inner = std::make_shared<const Index>(*this);
  atom.divisor = divisor;
  atom.lo = FloorDivInt(lo, divisor);
  atom.hi = FloorDivInt(hi, divisor);
  return FromTerms(0, {{1, MakeAtom(std::move(atom))}});
}

Index Index::Mod(int64_t modulus) const {
  if (modulus <= 0) {
    throw std::logic_error("Mod by a non-positive modulus");
  }
  if (modulus == 1) {
    return Index(0);
  }
  if (IsConstant()) {
    return Index(FloorModInt(constant_, modulus));
  }
  if (Lo() >= 0 && Hi() < modulus) {
    return *this;
  }
  // Terms whose coefficients are multiples of the modulus vanish (when what stays is non-negative).
  std::vector<std::pair<int64_t, AtomPtr>> rest;
  bool dropped = false;
  for (const auto& term : terms_) {
    if (term.first % modulus == 0) {
      dropped = true;
    } else {
      rest.push_back(term);
    }
  }
  const int64_t constant = FloorModInt(constant_, modulus);
  if (dropped || constant != constant_) {
    const Index reduced = FromTerms(constant, rest);
    if (reduced.Lo() >= 0) {
      return reduced.Mod(modulus);
    }
  }
  if (const IndexAtom* atom = SoleAtom(*this)) {
    if (atom->kind == IndexAtom::Kind::kMod && atom->divisor % modulus == 0) {
      return atom->inner->Mod(modulus);
    }
  }
  // (c*A + rest) % m with c | m and 0 <= rest < c -> c*(A % (m / c)) + rest
  if (auto split = SplitByFactor(modulus)) {
    const int64_t c = split->second;
    const Index below = *this - split->first * c;
    return split->first.Mod(modulus / c) * c + below;
  }
  if (const int64_t g = CommonFactor(modulus); g > 1) {
    return DividedBy(g).Mod(modulus / g) * g;
  }
  IndexAtom atom;
  atom.kind = IndexAtom::Kind::kMod;
  atom.inner = std::make_shared<const Index>(*this);
  atom.divisor = modulus;
  atom.lo = 0;
  atom.hi = Lo() >= 0 ? std::min(modulus - 1, Hi()) : modulus - 1;
  return FromTerms(0, {{1, MakeAtom(std::move(atom))}});
}

bool Index::Uses(const std::string& name) const {
  for (const auto& [coef, atom] : terms_) {
    if ((atom->kind == IndexAtom::Kind::kVar || atom->kind == IndexAtom::Kind::kRuntime) && atom->name == name) {
      return true;
    }
    if (atom->inner && atom->inner->Uses(name)) {
      return true;
    }
  }
  return false;
}

int64_t Index::CoefficientOf(const std::string& name) const {
  for (const auto& [coef, atom] : terms_) {
    if (atom->kind == IndexAtom::Kind::kVar && atom->name == name) {
      return coef;
    }
  }
  return 0;
}

Index Index::Without(const std::string& name) const {
  std::vector<std::pair<int64_t, AtomPtr>> kept;
  for (const auto& term : terms_) {
    const IndexAtom& atom = *term.second;
    const bool mentions = ((atom.kind == IndexAtom::Kind::kVar || atom.kind == IndexAtom::Kind::kRuntime) &&
                           atom.name == name) ||
                          (atom.inner && atom.inner->Uses(name));
    if (!mentions) {
      kept.push_back(term);
    }
  }
  return FromTerms(constant_, kept);
}

namespace {

// The code of `index` as an operand of // or %: parenthesized unless it is a single atom.
std::string Operand(const Index& index) {
  const std::string code = index.Code();
  if (index.Constant() == 0 && index.Terms().size() == 1 && index.Terms()[0].first == 1) {
    return code;
  }
  return "(" + code + ")";
}

std::string AtomCode(const IndexAtom& atom) {
  switch (atom.kind) {
    case IndexAtom::Kind::kVar:
    case IndexAtom::Kind::kRuntime:
      return atom.name;
    case IndexAtom::Kind::kDiv:
      return "(" + Operand(*atom.inner) + " // " + std::to_string(atom.divisor) + ")";
    case IndexAtom::Kind::kMod:
      return "(" + Operand(*atom.inner) + " % " + std::to_string(atom.divisor) + ")";
  }
  return "";
}

}  // namespace

std::string Index::Code() const {
  std::string code;
  for (const auto& [coef, atom] : terms_) {
    const std::string text = AtomCode(*atom);
    const int64_t magnitude = coef < 0 ? -coef : coef;
    const std::string term = magnitude == 1 ? text : std::to_string(magnitude) + "*" + text;
    if (code.empty()) {
      code = coef < 0 ? "-" + term : term;
    } else {
      code += (coef < 0 ? " - " : " + ") + term;
    }
  }
  if (code.empty()) {
    return std::to_string(constant_);
  }
  if (constant_ != 0) {
    code += (constant_ < 0 ? " - " : " + ") + std::to_string(constant_ < 0 ? -constant_ : constant_);
  }
  return code;
}

std::vector<Index> Delinearize(const Index& flat, const std::vector<int64_t>& shape) {
  std::vector<Index> index(shape.size());
  int64_t inner = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) {
      index[d] = Index(0);
    } else {
      Index component = flat.FloorDiv(inner);
      index[d] = d == 0 ? component : component.Mod(shape[d]);
    }
    inner *= std::max<int64_t>(shape[d], 1);
  }
  return index;
}

Index Linearize(const std::vector<Index>& index, const std::vector<int64_t>& shape) {
  Index flat(0);
  int64_t inner = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    flat = flat + index[d] * inner;
    inner *= std::max<int64_t>(shape[d], 1);
  }
  return flat;
}

Index Offset(const std::vector<Index>& index, const std::vector<int64_t>& strides, int64_t offset) {
  Index total(offset);
  for (size_t d = 0; d < index.size(); ++d) {
    total = total + index[d] * strides[d];
  }
  return total;
}

}  // namespace egg::expert
