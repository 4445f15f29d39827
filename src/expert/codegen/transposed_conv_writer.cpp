// Transposed convolutions: one dense convolution per output phase.
#include <fmt/format.h>

#include <algorithm>

#include "expert/codegen/kernel_writer.h"

namespace egg::expert::writer {

kir::Kernel KernelWriter::TransposedConvolutionProgram() {
  const MatmulSpec& mm = *kernel_.matmul;
  const ConvShape& conv = *mm.conv;
  const int64_t in_per_group = conv.in_channels / conv.groups;
  ConvTiles tiles;
  const PhaseGrid grid = TransposedGrid(tiles.prologue);
  const Index& g = grid.group;
  const auto& phase = grid.phase;
  std::vector<int64_t> k_shape = {in_per_group};
  for (size_t s = 0; s < conv.kernel.size(); ++s) {
    k_shape.push_back(TransposedMaxTaps(conv, s));
  }
  const Index n = Index::Var("nindex", mm.n);
  const auto row = Delinearize(Index::Var("mindex", mm.m), grid.rows_shape);
  const auto kb = Delinearize(Index::Var("kbindex", mm.k), k_shape);
  const auto rows = NamedRows(row, tiles.prologue);
  const auto ka = NamedTaps(Delinearize(Index::Var("kaindex", mm.k), k_shape), tiles.loop);
  tiles.input = {rows[0], g * in_per_group + ka[0]};
  tiles.weight = {g * in_per_group + kb[0], n};  // weight [in, out / groups, kernel...] read as [k, n]
  tiles.out = {row[0], g * mm.n + n};
  std::string rows_valid;
  std::string has_taps;  // false for a phase that takes no tap along some dim
  for (size_t s = 0; s < conv.kernel.size(); ++s) {
    const PhaseTerms terms = TransposedTerms(conv, s, phase[s], row[s + 1], tiles.prologue);
    if (!terms.count.empty()) {
      And(tiles.input_valid, fmt::format("{} < {}", ka[s + 1].Code(), terms.count));
      And(tiles.weight_valid, fmt::format("{} < {}", kb[s + 1].Code(), terms.count));
      const auto phases_of_dim = TransposedPhases(conv, s);
      if (std::any_of(phases_of_dim.begin(), phases_of_dim.end(),
                      [](const TransposedPhase& taps) { return taps.count == 0; })) {
        And(has_taps, terms.count + " > 0");
      }
    }
    const Index position =
        Named("pos" + std::to_string(s), rows[s + 1] + terms.base - ka[s + 1] * TransposedInputStep(conv, s),
              tiles.loop);
    RequireInside(position, conv.in_size[s], tiles.input_valid);
    tiles.input.push_back(position);
    tiles.weight.push_back(terms.first + kb[s + 1] * TransposedTapStep(conv, s));
    tiles.out.push_back(terms.out);
    if (conv.out_size[s] % conv.stride[s] != 0) {
      And(rows_valid, fmt::format("{} < {}", terms.out.Code(), conv.out_size[s]));
    }
  }
  MaskPhaseRows(rows_valid, tiles.prologue);
  if (!has_taps.empty()) {
    // Where the dilation shares a factor with the stride (1_77: 2 and 2) a phase along that dim takes no tap:
    // its outputs are the bias alone, and its programs (7 of 1_77's 8 phases) run no K step.
    tiles.prologue.push_back(fmt::format("k_end = tl.where({}, {}, 0)", has_taps, mm.k));
    skip_dropped_tiles_ = true;
  }
  return FinishConvolution(tiles, g * mm.n + n);
}

KernelWriter::PhaseGrid KernelWriter::TransposedGrid(std::vector<std::string>& prologue) const {
  const MatmulSpec& mm = *kernel_.matmul;
  const ConvShape& conv = *mm.conv;
  const int64_t phases = Product(conv.stride);
  const Index block = mm.batched ? Index::Var("bindex", mm.batch) : Index(0);
  PhaseGrid grid;
  grid.group = phases > 1 ? Index(0) : block;
  if (phases > 1 && conv.groups > 1) {
    prologue.push_back("gindex = " + block.FloorDiv(phases).Code());
    grid.group = Index::Var("gindex", conv.groups);
  }
  grid.phase = Delinearize(block.Mod(phases), conv.stride);
  grid.rows_shape = {conv.images};
  for (size_t s = 0; s < conv.kernel.size(); ++s) {
    grid.rows_shape.push_back((conv.out_size[s] + conv.stride[s] - 1) / conv.stride[s]);
  }
  return grid;
}

void KernelWriter::MaskPhaseRows(const std::string& rows_valid, std::vector<std::string>& prologue) {
  if (!rows_valid.empty()) {
    prologue.push_back("mmask = mmask & " + rows_valid);
    prologue.push_back("omask = mmask & nmask");
  }
}

KernelWriter::PhaseTerms KernelWriter::TransposedTerms(const ConvShape& conv, size_t s,
                                                       const Index& phase_code, const Index& q,
                                                       std::vector<std::string>& prologue) {
  const std::vector<TransposedPhase> phases = TransposedPhases(conv, s);
  const int64_t stride = conv.stride[s];
  if (stride == 1) {
    return PhaseTerms{Index(phases[0].first), Index(phases[0].base), q, ""};
  }
  const std::string suffix = std::to_string(s);
  auto define = [&prologue](const std::string& name, const Index& value) {
    prologue.push_back(fmt::format("{} = {}", name, value.Code()));
  };
  define("phase" + suffix, phase_code);
  const Index r = Index::Var("phase" + suffix, stride);
  const int64_t step = TransposedTapStep(conv, s);
  const int64_t divisor = stride / step;  // gcd(stride, dilation): phases it does not divide take no tap
  const int64_t padding = conv.padding[s];
  std::set<int64_t> firsts, counts, bases;
  int64_t base_lo = std::numeric_limits<int64_t>::max();
  int64_t base_hi = std::numeric_limits<int64_t>::min();
  for (int64_t p = 0; p < stride; ++p) {
    const TransposedPhase& taps = phases[static_cast<size_t>(p)];
    counts.insert(taps.count);
    if ((p + padding) % divisor == 0) {
      firsts.insert(taps.first);
    }
    if (taps.count > 0) {
      bases.insert(taps.base);
      base_lo = std::min(base_lo, taps.base);
      base_hi = std::max(base_hi, taps.base);
    }
  }
  PhaseTerms terms;
  terms.first = Index(*firsts.begin());
  if (firsts.size() > 1) {
    // first * input_step == (phase + padding) / gcd (mod step), through the inverse of input_step mod step
    const int64_t in_step = TransposedInputStep(conv, s);
    int64_t inverse = 0;
    while ((inverse * in_step) % step != 1) {
      ++inverse;
    }
    define("tap" + suffix, ((r + Index(padding)).FloorDiv(divisor) * inverse).Mod(step));
    terms.first = Index::Runtime("tap" + suffix, 0, step - 1);
  }
  if (counts.size() > 1) {
    std::string count = (Index(conv.kernel[s] + step - 1) - terms.first).FloorDiv(step).Code();
    if (divisor > 1) {
      count = fmt::format("tl.where({} == 0, {}, 0)", (r + Index(padding)).Mod(divisor).Code(), count);
    }
    prologue.push_back(fmt::format("taps{} = {}", suffix, count));
    terms.count = "taps" + suffix;
  }
  terms.base = Index(*bases.begin());
  if (bases.size() > 1) {
    const int64_t shift = ((step - 1) * conv.dilation[s] + stride - 1) / stride;  // keeps the numerator >= 0
    define("base" + suffix,
           (r + Index(padding + shift * stride) - terms.first * conv.dilation[s]).FloorDiv(stride) -
               Index(shift));
    terms.base = Index::Runtime("base" + suffix, base_lo, base_hi);
  }
  // every row's own position, a tile even where all rows share one q
  prologue.push_back(fmt::format("opos{} = {}{}", suffix, (q * stride + r).Code(),
                                 q.Uses("mindex") ? "" : " + tl.zeros_like(mindex)"));
  emitter_.BindRuntime("opos" + suffix, {"mindex"});
  terms.out = Index::Runtime("opos" + suffix, 0, conv.out_size[s] - 1);
  return terms;
}

}  // namespace egg::expert::writer
