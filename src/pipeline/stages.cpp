#include "pipeline/stages.h"

namespace egg::pipeline {

std::vector<StageSpec> DefaultStages(int rounds) {
  return {
      {"stage1.seeds", "K structurally different correct kernels; the fastest measured is kept",
       "algorithm choice: one-pass vs two-pass, persistent vs looped, direct vs im2col, row-per-program vs "
       "tiled",
       1, true},
      {"stage1.algorithm",
       "semantics-preserving restructuring that removes redundant work and memory traffic",
       "operator fusion, dataflow reorganisation, removing redundant loads and stores", rounds, false},
      {"stage2.mapping", "map problem dimensions onto the launch grid so every SM has work",
       "grid shape, programs per dimension, persistent programs, split-K", rounds, false},
      {"stage2.tiling", "tile sizes that balance on-chip reuse against register and shared-memory pressure",
       "BLOCK sizes (BLOCK_M, BLOCK_N, BLOCK_K, BLOCK)", rounds, false},
      {"stage2.memory", "efficient memory access and latency hiding",
       "coalescing, vector width, num_stages, num_warps, cache and eviction hints", rounds, false},
  };
}

}  // namespace egg::pipeline
