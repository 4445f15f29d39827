// The kernel IR's statements: one line of a kernel body at its depth. Loads, stores, loops, register tiles,
// the updates that fold values into those tiles and matrix products are typed (the buffer, the address as an
// Index, the mask, the form of the load; a loop's variable and iteration space; a tile's shape, fill and
// type; an update's tile and combining operation; a product's operands and precision; a reduction's tiles,
// axis and combiner), so that analyses read them as data (kir/analysis.h); every other line is Triton text
// the emitter formed (expressions) and prints as it is.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "expert/design/design_record.h"
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

// How an update folds a value into a register tile: summed, multiplied, the larger or the smaller kept, or
// the value taken in the tile's place (an argmax's pair where the new value wins, a running max set anew).
enum class Combine { kAdd, kMul, kMax, kMin, kTake };

// How the update is written: `acc += v` (a sum); `acc = acc + v`, `acc = acc * v`, `acc = tl.maximum(acc,
// v, propagate_nan=...)` (a nan kept, as torch keeps it), `acc = v`; only the lanes under a mask, the others
// keeping theirs: `acc = tl.where(mask, tl.maximum(acc, v), acc)`; an online softmax's rescale of what the
// tile holds before the sum: `acc = acc * alpha[:, None] + v`. Statement's factories (Sum, Fold, FoldMasked,
// Rescale, Accumulate) make only the pairs that exist.
enum class UpdateForm { kAugmented, kExpanded, kMasked, kRescaled };

// Tiles reduced along an axis: one, by its combine (`tl.sum(acc, 1)`; a max or min through the candidate
// file's `_egg_max(acc, 1)` or `_egg_min`, which keep nan; a product as `tl.reduce(acc, 1, _egg_prod)`), or
// several at once by a reducing function the candidate file defines (`_egg_argmax(accv, acci, 1)`);
// `keep_dims` keeps the axis as 1 (`[:, None]`).
// Operands are code: a tile's name or an expression over tiles.
struct Reduction {
  std::vector<std::string> results;  // the names it defines, one per operand
  std::vector<std::string> operands;
  Combine combine = Combine::kAdd;  // one operand: kAdd, kMul, kMax or kMin
  std::string function;             // several operands: the reducing function
  int axis = 1;
  bool keep_dims = false;
};

// `red0 = tl.sum(acc0, 1)[:, None]`...
std::string Code(const Reduction& reduction);

// A matrix product of two tiles, `tl.dot(a, b, input_precision="...")`, each operand with `cast` after it (a
// half type's `.to(tl.bfloat16)`: the tensor cores in that type; "" for none). Operands are code: a tile's
// name, or a load.
struct Product {
  std::string a;
  std::string b;
  std::string cast;
  Precision precision = Precision::kIeee;
};

// `tl.dot(a, b, input_precision="tf32")`...
std::string Code(const Product& product);

struct Statement {
  enum class Kind { kText, kLoad, kStore, kLoop, kTile, kUpdate, kProduct, kReduce };
  Kind kind = Kind::kText;
  int depth = 0;     // levels of four spaces
  std::string text;  // kText: the line (after its indentation)

  // kLoad: `name = <load of buffer at address>`; kStore: `tl.store(<buffer at address>, data, mask)`.
  int buffer = -1;
  std::string pointer;  // the buffer's parameter in the function (ptr3)
  Index address;        // element offset into the buffer
  std::string mask;     // "" when none
  // kLoad: the temporary it defines; kLoop: the loop variable; kTile, kUpdate: the tile; kProduct: the tile
  // the product defines
  std::string name;
  LoadForm form = LoadForm::kPlain;
  std::string other;      // kLoad kMasked: the masked lanes' value ("0.0", "0")
  std::string data;       // kStore: the stored value's code (cast already applied); kUpdate: the value's
                          // code when it is no product
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

  // kUpdate: `name = name <combine> value` written in `update`'s form (kMasked: under `mask`; kRescaled: the
  // tile times `scale` first), the value `product` or else `data`. kProduct: `name = product`.
  Combine combine = Combine::kAdd;
  UpdateForm update = UpdateForm::kAugmented;
  std::string scale;
  std::optional<Product> product;

  // kReduce: the reduction (its results are the names it defines).
  std::optional<Reduction> reduction;

  // A text line; leading spaces (a continuation's, a line written indented) count as depth, four a level.
  static Statement Text(int depth, std::string text);
  static Statement Loop(int depth, std::string variable, LoopRange range);
  static Statement Tile(int depth, std::string name, std::vector<std::string> shape, std::string type,
                        std::string fill = "");
  // `tile += value`.
  static Statement Sum(int depth, std::string tile, std::string value);
  // `tile = tile <combine> value` (`tile = value` for kTake).
  static Statement Fold(int depth, std::string tile, Combine combine, std::string value);
  // The same under `mask`: `tile = tl.where(mask, <folded>, tile)`.
  static Statement FoldMasked(int depth, std::string tile, Combine combine, std::string value,
                              std::string mask);
  // `tile = tile * scale + value`.
  static Statement Rescale(int depth, std::string tile, std::string scale, std::string value);
  // `tile += product`, or with `scale`: `tile = tile * scale + product`.
  static Statement Accumulate(int depth, std::string tile, Product product, std::string scale = "");
  // `name = product`: a fresh tile each time (a flash loop's scores).
  static Statement Dot(int depth, std::string name, Product product);
  static Statement Reduce(int depth, Reduction reduction);
};

// The statement as Triton source, indented.
std::string Print(const Statement& statement);
std::vector<std::string> Print(const std::vector<Statement>& statements);

}  // namespace egg::expert::kir
