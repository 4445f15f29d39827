#include "expert/codegen/size_form.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>

namespace egg::expert {
namespace {

// Polynomials with 128-bit integer coefficients, for the exact fit (FitSizeForm): the expansion multiplies
// differences by powers of the tops.
__extension__ using Wide = __int128;
using WidePoly = std::map<Powers, Wide>;

WidePoly Multiply(const WidePoly& a, const WidePoly& b) {
  WidePoly product;
  for (const auto& [pa, ca] : a) {
    for (const auto& [pb, cb] : b) {
      Powers powers(pa.size());
      for (size_t i = 0; i < pa.size(); ++i) {
        powers[i] = pa[i] + pb[i];
      }
      product[powers] += ca * cb;
    }
  }
  return product;
}

// Twice the binomial C(x - base, e) (e = 0, 1, 2) as a polynomial in size i of n: 2, 2(x - b), (x - b)^2 - (x
// - b).
WidePoly TwiceBinomial(size_t i, size_t n, int64_t base, int e) {
  const auto term = [&](int power) {
    Powers powers(n, 0);
    powers[i] = power;
    return powers;
  };
  const Wide b = base;
  if (e == 0) {
    return {{term(0), 2}};
  }
  if (e == 1) {
    return {{term(1), 2}, {term(0), -2 * b}};
  }
  return {{term(2), 1}, {term(1), -(2 * b + 1)}, {term(0), b * b + b}};
}

// The point at the tops + `steps` along each size, if there is one.
std::optional<size_t> PointAt(const std::vector<std::vector<int64_t>>& points,
                              const std::vector<int64_t>& tops, const std::vector<int64_t>& steps) {
  for (size_t s = 0; s < points.size(); ++s) {
    bool match = true;
    for (size_t i = 0; i < steps.size(); ++i) {
      match = match && points[s][i] == tops[i] + steps[i];
    }
    if (match) {
      return s;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<SizeForm> FitSizeForm(const std::vector<std::vector<int64_t>>& points,
                                    const std::vector<int64_t>& values, const std::vector<int64_t>& tops,
                                    size_t* off) {
  const size_t n = tops.size();
  size_t grid = 1;
  for (size_t i = 0; i < n; ++i) {
    grid *= 3;
  }
  WidePoly twice;  // 2^n times the polynomial
  for (size_t code = 0; code < grid; ++code) {
    Powers order(n);  // the difference's order in each size: the digits of `code` in base 3
    for (size_t i = 0, rest = code; i < n; ++i, rest /= 3) {
      order[i] = static_cast<int>(rest % 3);
    }
    // the mixed forward difference of that order at the tops: a signed sum over the grid below it
    Wide difference = 0;
    for (size_t corner = 0; corner < grid; ++corner) {
      std::vector<int64_t> steps(n);
      Wide sign = 1;
      bool inside = true;
      for (size_t i = 0, rest = corner; i < n; ++i, rest /= 3) {
        steps[i] = static_cast<int64_t>(rest % 3);
        inside = inside && steps[i] <= order[i];
        const int64_t binomial = order[i] == 2 && steps[i] == 1 ? 2 : 1;
        sign *= ((order[i] - steps[i]) % 2 == 0 ? 1 : -1) * binomial;
      }
      const std::optional<size_t> sample = inside ? PointAt(points, tops, steps) : std::nullopt;
      if (inside && !sample) {
        return std::nullopt;
      }
      difference += inside ? sign * values[*sample] : 0;
    }
    WidePoly term = {{Powers(n, 0), difference}};
    for (size_t i = 0; i < n; ++i) {
      term = Multiply(term, TwiceBinomial(i, n, tops[i], order[i]));
    }
    for (const auto& [powers, c] : term) {
      twice[powers] += c;
    }
  }
  SizeForm form;
  const Wide scale = Wide{1} << n;
  *off = points.size() - 1;
  for (const auto& [powers, c] : twice) {
    if (c % scale != 0) {
      return std::nullopt;  // not integer coefficients
    }
    if (c != 0) {
      form[powers] = static_cast<int64_t>(c / scale);
    }
  }
  for (size_t s = 0; s < points.size(); ++s) {
    if (FormAt(form, points[s]) != values[s]) {
      *off = s;
      return std::nullopt;
    }
  }
  return form;
}

int64_t FormAt(const SizeForm& form, const std::vector<int64_t>& x) {
  int64_t value = 0;
  for (const auto& [powers, c] : form) {
    int64_t term = c;
    for (size_t i = 0; i < powers.size(); ++i) {
      for (int e = 0; e < powers[i]; ++e) {
        term *= x[i];
      }
    }
    value += term;
  }
  return value;
}

// The form as Python (and Triton) source over `names`: terms of higher degree first, each size's powers
// as repeated factors ("(egg_B * egg_B * 5 - egg_B * 3 + 7)", "(egg_B * 2)", "egg_B", "(egg_B * egg_C *
// 32)").
std::string FormExpression(const SizeForm& form, const std::vector<std::string>& names) {
  std::vector<std::pair<Powers, int64_t>> terms(form.begin(), form.end());
  const auto degree = [](const Powers& powers) { return std::accumulate(powers.begin(), powers.end(), 0); };
  std::stable_sort(terms.begin(), terms.end(), [&](const auto& a, const auto& b) {
    return degree(a.first) != degree(b.first) ? degree(a.first) > degree(b.first) : a.first > b.first;
  });
  std::string text;
  int64_t constant = 0;
  int count = 0;
  bool bare = false;  // the one term is a lone name
  for (const auto& [powers, c] : terms) {
    if (c == 0) {
      continue;
    }
    std::vector<std::string> factors;
    for (size_t i = 0; i < powers.size(); ++i) {
      factors.insert(factors.end(), static_cast<size_t>(powers[i]), names[i]);
    }
    if (factors.empty()) {
      constant = c;
      continue;
    }
    std::string power = fmt::format("{}", fmt::join(factors, " * "));
    bare = ++count == 1 && c == 1 && factors.size() == 1;
    power = std::llabs(c) == 1 ? power : fmt::format("{} * {}", power, std::llabs(c));
    text += text.empty() ? (c < 0 ? "-" : "") + power : fmt::format(" {} {}", c < 0 ? "-" : "+", power);
  }
  if (count == 1 && bare && constant == 0) {
    return text;
  }
  if (constant != 0 || text.empty()) {
    text += text.empty() ? std::to_string(constant)
                         : fmt::format(" {} {}", constant < 0 ? "-" : "+", std::llabs(constant));
  }
  return "(" + text + ")";
}

}  // namespace egg::expert
