// Triton source for one planned kernel, from its fusion group and its design record, through the kernel IR
// (kir/). Throws NotFusable when the group cannot be computed as one kernel.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "expert/codegen/emitter.h"
#include "expert/kir/kernel.h"
#include "expert/plan/plan.h"

namespace egg::expert {

struct KernelSource {
  std::string name;
  std::string code;  // the @triton.jit function(s)
  std::vector<KernelLaunch> launches;
  std::vector<Scratch> scratch;  // temporary buffers the launches share (split reductions' partials)
  std::vector<Helper> helpers;
  std::set<int> loaded;    // values read from memory
  std::set<int> computed;  // nodes computed in this kernel
  bool int64_indexing = false;
  // Matrix products: the tile-shaped loads in one K step, of the A side ([BLOCK_M, BLOCK_K]) and of the B
  // side
  // ([BLOCK_K, BLOCK_N]): each is staged in shared memory once per pipeline stage.
  int a_tile_loads = 0;
  int b_tile_loads = 0;
};

// `memory`: values in memory before this kernel runs (with layouts); `layouts`: the layouts of the values
// this kernel stores (plan.stores). Reductions and pooled or scanned results are computed in registers. The
// kernel's family lowers it (families/family.h).
KernelSource GenerateKernel(const Graph& graph, const KernelPlan& kernel,
                            const std::map<int, TensorMeta>& memory,
                            const std::map<int, TensorMeta>& layouts);

// A kernel lowered to the kernel IR as its source: the printed functions, what it reads (kir::Reads).
KernelSource SourceOf(const kir::Kernel& kernel);

// The calls that compile a kernel's launches ahead of the first forward:
// kernel.warmup(torch.float32, ..., XBLOCK=..., grid=(1,)); Triton compiles from dtypes alone.
std::vector<std::string> PrecompileCalls(const Graph& graph, const KernelPlan& kernel,
                                         const KernelSource& source);

// A pointwise kernel in the kernel IR: each root computed by the emitter at the flat index and stored where
// the plan stores it.
kir::Kernel PointwiseProgram(const Graph& graph, const KernelPlan& kernel,
                             const std::map<int, TensorMeta>& memory,
                             const std::map<int, TensorMeta>& layouts);
// A flat kernel's launch and its one function over `numel` elements (xindex, xmask, XBLOCK lanes a program),
// its body what `emitter` wrote, `comment` saying what it computes.
kir::Kernel FlatProgram(const KernelPlan& kernel, int64_t numel, KernelEmitter& emitter,
                        const std::string& comment);

// The lowerings of the families kernel_writer.h writes, one each (the families call them).
// A reduction kernel in the kernel IR: one function, or for a split design two (partials over scratch, then
// their combine), a launch each.
kir::Kernel ReductionProgram(const Graph& graph, const KernelPlan& kernel,
                             const std::map<int, TensorMeta>& memory,
                             const std::map<int, TensorMeta>& layouts);
kir::Kernel PoolProgram(const Graph& graph, const KernelPlan& kernel, const std::map<int, TensorMeta>& memory,
                        const std::map<int, TensorMeta>& layouts);
kir::Kernel ScanProgram(const Graph& graph, const KernelPlan& kernel, const std::map<int, TensorMeta>& memory,
                        const std::map<int, TensorMeta>& layouts);
// A matrix product or convolution: tl.dot tiles, or one output element per lane for a direct convolution.
kir::Kernel MatmulProgram(const Graph& graph, const KernelPlan& kernel,
                          const std::map<int, TensorMeta>& memory, const std::map<int, TensorMeta>& layouts);

// A recurrent kernel (kind kRecurrent): per layer and direction, the input projection of every time step as
// one GEMM, then a time loop computing h @ W_hh^T, the gates and the states (recurrent_codegen.cpp): two
// functions launched per layer and direction, over scratch buffers.
kir::Kernel RecurrentProgram(const Graph& graph, const KernelPlan& kernel,
                             const std::map<int, TensorMeta>& memory,
                             const std::map<int, TensorMeta>& layouts);

// An attention kernel (kind kAttention): the flash loop over key blocks with an online softmax
// (attention_codegen.cpp).
kir::Kernel AttentionProgram(const Graph& graph, const KernelPlan& kernel,
                             const std::map<int, TensorMeta>& memory,
                             const std::map<int, TensorMeta>& layouts);

// The index of the anchor of a reduction kernel for row `x` and reduced position `r`.
std::vector<Index> AnchorIndex(const std::vector<int64_t>& shape, const std::vector<int64_t>& reduced,
                               const Index& x, const Index& r);

}  // namespace egg::expert
