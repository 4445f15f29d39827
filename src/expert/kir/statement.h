// The kernel IR's statements: one line of a kernel body at its depth. Loads, stores, loops and register tiles
// are typed (the buffer, the address as an Index, the mask, the form of the load; a loop's variable and
// iteration space; a tile's shape, fill and type), so that analyses read them as data (kir/analysis.h); every
// other line is Triton text the emitter formed (expressions, updates) and prints as it is.
#pragma once

#include <string>
#include <vector>

#include "expert/ir/graph.h"
#include "expert/ir/index_expr.h"

namespace egg::expert {

// A pointer a kernel's launches pass: a graph value in memory (its index), or scratch buffer i as
// ScratchId(i).
inline int ScratchId(size_t index) { return -1 - static_cast<int>(index); }
inline bool IsScratch(int pointer) { return pointer < 0; }
inline size_t ScratchIndex(int pointer) { return static_cast<size_t>(-1 - pointer); }

}  // namespace egg::expert

namespace egg::expert::kir {

// How a load's value comes out of memory.
enum class LoadForm {
  kPlain,              // tl.load(p + (a)): no mask (every lane inside its tensor)
  kMasked,             // tl.load(p + (a), mask, other=...)
  kHalfKept,           // a half type read as it is (a tl.dot operand), masked lanes 0.0 where masked
  kHalfWidened,        // a half type widened to float32, no mask
  kHalfWidenedMasked,  // widened, masked lanes forced to 0.0 after the widening (no half constant exists)
};

// The operand tile of a matrix product's K step a load spans: the A side's BLOCK_M rows, the B side's BLOCK_N
// columns (or both). Each such load is staged in shared memory once per software-pipeline stage.
enum class TileSide { kNone = 0, kA = 1, kB = 2, kBoth = 3 };

// A loop's iteration space as Triton writes it: range(stop), range(start, stop), range(start, stop, step), or
// tl.static_range(stop), unrolled when the kernel compiles. Bounds are Triton expressions: a constant, a
// constexpr (BLOCK_K), a runtime size or a program's own offset.
struct LoopRange {
  std::string start;      // "" for range(stop)
  std::string stop;       // "" for no loop at all (a DotLoop without taps)
  std::string step;       // "" for a step of 1
  bool unrolled = false;  // tl.static_range(stop)

  static LoopRange Upto(std::string stop);  // range(stop)
  static LoopRange Stepped(std::string start, std::string stop, std::string step);
  static LoopRange Unrolled(std::string stop);
  bool empty() const { return stop.empty(); }
};

// `range(0, 1600, BLOCK_K)`, `tl.static_range(5)`...
std::string Code(const LoopRange& range);

struct Statement {
  enum class Kind { kText, kLoad, kStore, kLoop, kTile };
  Kind kind = Kind::kText;
  int depth = 0;     // levels of four spaces
  std::string text;  // kText: the line (after its indentation)

  // kLoad: `name = <load of buffer at address>`; kStore: `tl.store(<buffer at address>, data, mask)`.
  int buffer = -1;
  std::string pointer;  // the buffer's parameter in the function (ptr3)
  Index address;        // element offset into the buffer
  std::string mask;     // "" when none
  std::string name;     // kLoad: the temporary it defines; kLoop: the loop variable; kTile: the tile
  LoadForm form = LoadForm::kPlain;
  std::string other;      // kLoad kMasked: the masked lanes' value ("0.0", "0")
  std::string data;       // kStore: the stored value's code (cast already applied)
  std::string broadcast;  // kStore: a tile variable the address is widened to (a fixed or partial address)
  TileSide side = TileSide::kNone;  // kLoad in a K step: the operand tile it spans

  // kLoop: `for name in <range>:`; its body is the statements after it that are deeper than it, up to the
  // next one that is not.
  LoopRange range;

  // kTile: `name = tl.zeros([shape], dtype=type)`, or `tl.full([shape], fill, type)` with a fill: a register
  // tile (an accumulator, an online softmax's running max) set before the loop that updates it.
  std::vector<std::string> shape;  // its sides: XBLOCK, RBLOCK, BLOCK_M...
  std::string fill;                // "" for zeros
  std::string type;                // tl.float32, tl.int64

  static Statement Text(int depth, std::string text);
  static Statement Loop(int depth, std::string variable, LoopRange range);
  static Statement Tile(int depth, std::string name, std::vector<std::string> shape, std::string type,
                        std::string fill = "");
};

// The statement as Triton source, indented.
std::string Print(const Statement& statement);
std::vector<std::string> Print(const std::vector<Statement>& statements);

}  // namespace egg::expert::kir
