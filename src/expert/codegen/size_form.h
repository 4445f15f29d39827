// The sizes of a dynamic candidate as polynomials of its dynamic sizes (docs/expert.md, "Dynamic batch"): a
// literal that differs between the files generated at several sizes is fitted as a polynomial of degree 2 at
// most in each size, with integer coefficients, and written back as Python (and Triton) source over egg_B,
// egg_C, ... One dynamic size: a*B + d, or q*B*B + a*B + d for a size that grows with the square (an
// attention's scores over a dynamic sequence); two: B*S*32 rows, B*H*S*S scores, ...
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace egg::expert {

// A term's powers of each size, and the polynomial: its coefficient per term.
using Powers = std::vector<int>;
using SizeForm = std::map<Powers, int64_t>;

int64_t FormAt(const SizeForm& form, const std::vector<int64_t>& x);

// The form as source over `names`: terms of higher degree first, each size's powers as repeated factors
// ("(egg_B * egg_B * 5 - egg_B * 3 + 7)", "(egg_B * 2)", "egg_B", "(egg_B * egg_C * 32)").
std::string FormExpression(const SizeForm& form, const std::vector<std::string>& names);

// The polynomial through `values` at `points`, fitted at the tops + 0, 1 or 2 steps of each size (Newton's
// forward differences there, written out in the sizes; exact in 128-bit integers), with integer coefficients,
// that every point's value fits; nullopt, with *off the first point it misses, when there is none.
std::optional<SizeForm> FitSizeForm(const std::vector<std::vector<int64_t>>& points,
                                    const std::vector<int64_t>& values, const std::vector<int64_t>& tops,
                                    size_t* off);

}  // namespace egg::expert
