// Questions asked of a kernel in the kernel IR, answered from its statements (no text is read): what it reads
// and writes in memory, the bytes that moves, its loop nest, its register tiles, the updates that fold values
// into them and its matrix products.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "expert/ir/graph.h"
#include "expert/kir/kernel.h"

namespace egg::expert::kir {

// The graph values its loads read (scratch buffers left out).
std::set<int> Reads(const Kernel& kernel);
// The graph values its stores write.
std::set<int> Writes(const Kernel& kernel);
// Every value read or written, whole, in its type's bytes (a static estimate: a value read at several
// addresses counts once).
int64_t BytesMoved(const Kernel& kernel, const Graph& graph);

// A matrix product's loads in one K step, by the operand tile they span (Statement::side): what one software
// pipeline stage holds in shared memory (legality.h, FittingStages).
struct StagedTiles {
  int a = 0;  // [BLOCK_M, BLOCK_K] tiles
  int b = 0;  // [BLOCK_K, BLOCK_N] tiles
};
StagedTiles StagedTileLoads(const Kernel& kernel);

// A loop of a function: its variable, its iteration space, and the variables of the loops around it,
// outermost first.
struct LoopNest {
  std::string variable;
  LoopRange range;
  std::vector<std::string> enclosing;
};
// The function's loops in the order they open.
std::vector<LoopNest> Loops(const Function& function);

// The register tiles a function sets (accumulators, running maxima and sums), in order: their kTile
// statements.
std::vector<Statement> RegisterTiles(const Function& function);

// An update of a register tile (kUpdate), a product into a fresh tile (kProduct) or a reduction (kReduce),
// and the variables of the loops it runs in, outermost first.
struct UpdateSite {
  Statement statement;
  std::vector<std::string> loops;
};
// The function's updates of register tiles, in order.
std::vector<UpdateSite> Updates(const Function& function);
// Its matrix products (tl.dot), in order: accumulated into a tile or into a fresh one.
std::vector<UpdateSite> Products(const Function& function);
// Its reductions of tiles along an axis (kReduce), in order: the finishing sums of a looped reduction, a
// persistent one's reduction of its row, an argmax's pair.
std::vector<UpdateSite> Reductions(const Function& function);

}  // namespace egg::expert::kir
