// The kernel IR: a planned kernel lowered to data before any text (issue 22). A kernel is its jitted
// functions (each a domain its programs cover and a body of statements, kir/statement.h), the launches that
// run them and the scratch buffers the launches share. Analyses ask it (kir/analysis.h); one printer turns it
// into Triton (Print). Families lower to it where they have moved off text templates (families/).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "expert/ir/ops.h"
#include "expert/kir/statement.h"

namespace egg::expert {

// One launch of a jitted function. Pointer arguments are values, or scratch buffers as ScratchId(i).
struct KernelLaunch {
  std::string function;
  std::vector<int> pointers;
  std::string grid;                           // Python expression of the launch grid
  std::map<std::string, int64_t> constexprs;  // XBLOCK, RBLOCK...
  // Runtime integer arguments after the pointers, in the function's parameter order: one compiled variant
  // serves every value (a recurrent layer's direction and offsets).
  std::vector<std::pair<std::string, int64_t>> scalars;
  // The scratch buffer this launch fills from module parameters and buffers alone (a weight repacked into
  // rows), or -1: the candidate file keeps its result while those tensors keep their version (`_egg_kept`)
  // instead of repacking at every call, except in a CUDA-graph forward (which replays the pack).
  int packs = -1;
};

struct Scratch {
  int64_t numel = 0;
  DType dtype = DType::kFloat32;
  bool zeroed = false;  // torch.zeros (counters), not torch.empty
};

}  // namespace egg::expert

namespace egg::expert::kir {

// The lanes a function's programs cover. kFlat: XBLOCK lanes a program over `size` elements (xindex, xmask).
// kRows: XBLOCK rows a program of `size` rows (xindex as a column, xmask) and an RBLOCK tile along them
// (rbase, a row); the body walks the row. kRowBlock: the same rows with no RBLOCK tile, for a body that lays
// out its own tile along them (a split reduction's combine: the SBLOCK partials of each row). kTiles: a
// matrix product's BLOCK_M x BLOCK_N output tile a program (mindex a column of `size` rows M, nindex a row of
// `columns` N, their masks and omask), in the grouped order of `tiles`, the batch along the grid's second
// axis. kPanels: a BLOCK_P x BLOCK_C tile of a `size` x `columns` matrix a program (pindex, cindex, mask): a
// copy into another layout. kQueryBlocks: a flash attention's BLOCK_M query rows of `size` a program (mindex,
// mmask), the batch along the grid's second axis (bindex), and the head dims' lanes padded to `heads`'
// blocks: Q's a row (dqindex), K^T's a column (dkindex), V's and the output's a row (dvindex), omask the
// output tile's. kOwnLanes: nothing printed, the body lays out its lanes itself (the recurrent layers'
// projection and time loop, whose sizes are constexpr parameters shared by every launch). 64-bit program
// offsets where the addresses pass int32.
struct TileOrder {
  bool batched = false;       // bindex, the batch (or group) of the program
  int64_t grid_m = 0;         // tiles along M
  bool runtime_rows = false;  // M is a runtime size (dynamic batch): tl.cdiv(M, BLOCK_M) tiles instead
  int64_t group_m = 0;        // tile rows that sweep N together (L2 reuse)
  int64_t group_size = 0;     // programs of one group: group_m x the tiles along N
  // > 0: the batch varies fastest along program_id(0) over this many entries (a one-axis grid of tiles x
  // batch): a transposed convolution's output phases of one tile run side by side, so their stores, which
  // interleave along the output rows, fill the same 32-byte sectors while L2 holds them, and they read the
  // same input rows. 0: the batch is program_id(1).
  int64_t batch_inner = 0;
};

// An attention's head dims and the tile sides they are padded to (tl.dot's smallest side at least).
struct HeadDims {
  int64_t d = 0;  // Q's and K's
  int64_t block_d = 0;
  int64_t dv = 0;  // V's and the output's
  int64_t block_dv = 0;
};

struct Domain {
  enum class Kind { kFlat, kRows, kRowBlock, kTiles, kPanels, kQueryBlocks, kOwnLanes };
  Kind kind = Kind::kFlat;
  int64_t size = 0;
  bool int64 = false;
  int64_t columns = 0;  // kTiles, kPanels
  TileOrder tiles;      // kTiles
  HeadDims heads;       // kQueryBlocks
};

struct Function {
  std::string name;
  size_t pointers = 0;                  // ptr0, ptr1, ... in launch order
  std::vector<std::string> constexprs;  // XBLOCK, ...
  std::string comment;                  // what its programs compute, in words (a line each)
  // A function that names its own parameters (the recurrent layers': x_ptr, runtime offsets, constexpr
  // strides): the signature's lines after `def name(`, as written, continuations indented already. Empty:
  // ptr0, ptr1, ... and the constexprs on one line.
  std::vector<std::string> signature;
  Domain domain;
  std::vector<Statement> body;
  // Pointer parameters (by position) that text lines of the body load the kernel's inputs from, and store
  // into: hand-written accesses whose addresses are not Index expressions (the recurrent layers', over
  // constexpr strides). kir::Reads and kir::Writes take the value each launch of the function passes there
  // (scratch left out). A read back of what the kernel itself stored is no input.
  std::vector<size_t> text_loads;
  std::vector<size_t> text_stores;
};

struct Kernel {
  std::string name;
  std::vector<Function> functions;
  std::vector<KernelLaunch> launches;
  std::vector<Scratch> scratch;
  std::vector<Helper> helpers;
  std::set<int> computed;  // graph nodes computed here
  bool int64_indexing = false;
};

// The function as Triton source: `@triton.jit`, its signature, the domain's lane variables, the body.
std::string Print(const Function& function);
// Every function of the kernel, in order, two blank lines apart.
std::string Print(const Kernel& kernel);

}  // namespace egg::expert::kir
