// Dynamic batch (docs/expert.md, "Dynamic batch"): one candidate file for every batch in a range. The
// compiler writes the file at a few concrete batches at and above the range's top, from one design; the files
// must then agree token for token except for integer literals, and each literal that differs must be one
// linear function a*B + d of the batch at every sample (or quadratic, q*B*B + a*B + d; with several dynamic
// sizes, egg_B, egg_C..., a polynomial of degree 2 at most in them). Those literals become expressions of
// egg_B: a runtime argument of every kernel that holds one, a local of forward and of the guard in Python.
// Any other difference is a problem (the code's form, a float literal, a size that is not linear in the
// batch), never a guess.
//
// Why samples at and above the top: every range the index algebra simplifies with (x // 64 is 0 when x < 64)
// and every choice made by size (int64 indexing) then holds for all smaller batches too. Why a sample 1024
// above: a size computed with a floor division by a tile (cdiv(M, BLOCK_M)) is linear between neighbouring
// batches only by accident, and a sample 1024 batches away tells it apart for every divisor of 1024.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace egg::expert {

struct BatchSample {
  std::vector<int64_t> sizes;  // one per dynamic size: {batch} for a dynamic batch
  std::string source;
};

struct MergedSource {
  std::optional<std::string> source;
  std::string problem;        // when there is no source
  bool form_changed = false;  // the problem: the samples' code differs in more than integer literals
};

// The sizes a dynamic candidate is generated at (`tops`, the range's top of each dynamic size): the 3^n grid
// of the tops + 0, 1 or 2 steps of each (which fixes each literal's polynomial: size_form.h), then 3 and 1024
// steps along each size, then for each pair 3 and 2 steps, and 1024 of each. One size: max, max + 1, max + 2,
// max + 3, max + 1024.
std::vector<std::vector<int64_t>> SamplePoints(const std::vector<int64_t>& tops);

// egg_B for the first dynamic size, egg_C for the second, ...
std::string DynamicSizeName(size_t index);

// One file for every size up to `tops` from `samples` (SamplePoints(tops)'s, samples[0] at the tops), each
// integer literal that differs a polynomial of degree 2 at most in the sizes.
MergedSource MergeBatchSamples(const std::vector<BatchSample>& samples, const std::vector<int64_t>& tops);

}  // namespace egg::expert
