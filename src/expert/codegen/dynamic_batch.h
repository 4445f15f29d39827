// Dynamic batch (docs/expert.md, "Dynamic batch"): one candidate file for every batch in a range. The
// compiler writes the file at a few concrete batches at and above the range's top, from one design; the files
// must then agree token for token except for integer literals, and each literal that differs must be one
// linear function a*B + d of the batch at every sample. Those literals become expressions of egg_B: a runtime
// argument of every kernel that holds one, a local of forward and of the guard in Python. Any other
// difference is a problem (the code's form, a float literal, a size that is not linear in the batch), never a
// guess.
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
  int64_t batch = 0;
  std::string source;
};

struct MergedSource {
  std::optional<std::string> source;
  std::string problem;        // when there is no source
  bool form_changed = false;  // the problem: the samples' code differs in more than integer literals
};

// The batches a dynamic candidate is generated at: max first, then max + 1 (the two that fix each line), then
// the ones that check it.
std::vector<int64_t> BatchSamplePoints(int64_t max);

// One file for every batch up to `max` from `samples` (samples[0] at max, samples[1] at max + 1).
MergedSource MergeBatchSamples(const std::vector<BatchSample>& samples, int64_t max);

}  // namespace egg::expert
