#include "expert/codegen/recurrent_functions.h"

#include <fmt/format.h>

#include "expert/codegen/kernel_writer.h"

namespace egg::expert::recurrent {
namespace {

// The signature's continuation lines, indented as the functions always printed them.
constexpr std::string_view kContinuation = "                  ";

// `names` as constexpr parameters, comma-separated.
std::string Constexprs(const std::vector<std::string>& names) {
  std::string params;
  for (const std::string& name : names) {
    params += (params.empty() ? "" : ", ") + name + ": tl.constexpr";
  }
  return params;
}

// The names comma-separated (a signature's first line).
std::string Names(const PointerParams& pointers) {
  std::string text;
  for (const std::string& name : pointers.names) {
    text += (text.empty() ? "" : ", ") + name;
  }
  return text;
}

// One text line of a function body at `depth`.
void Line(std::vector<kir::Statement>& body, int depth, std::string text) {
  body.push_back(kir::Statement::Text(depth, std::move(text)));
}

// Writes the functions of one planned recurrent kernel.
class FunctionWriter {
 public:
  explicit FunctionWriter(const KernelPlan& kernel) : kernel_(kernel), spec_(*kernel.recurrent) {}

  // Half layers: the stores cast to their tensor's type.
  std::string StoreCast(const std::string& pointer) const {
    return IsHalf(spec_.dtype) ? ".to(" + pointer + ".dtype.element_ty)" : "";
  }

  std::string PrecisionName() const { return NameText(kernel_.design.precision); }

  // `_proj`: rows (time, batch) of a layer's input @ W_ih^T (+ b_ih) in tl.dot tiles, into the projection.
  kir::Function Projection(const PointerParams& pointers) const {
    kir::Function function;
    function.name = kernel_.name + "_proj";
    function.pointers = pointers.names.size();
    const std::vector<std::vector<std::string>> lines = {{"M", "N", "K"},
                                                         {"BATCH", "X_ST", "X_SB", "X_SK"},
                                                         {"W_SN", "W_SK", "B_S"},
                                                         {"BLOCK_M", "BLOCK_N", "BLOCK_K"}};
    for (const std::vector<std::string>& line : lines) {
      function.constexprs.insert(function.constexprs.end(), line.begin(), line.end());
    }
    const std::string next(kContinuation);
    function.signature = {Names(pointers) + ", " + Constexprs(lines[0]) + ",",
                          next + Constexprs(lines[1]) + ",", next + Constexprs(lines[2]) + ",",
                          next + Constexprs(lines[3])};
    function.comment = fmt::format(
        "{} input projection of every time step at once: rows (time, batch) of the layer's input @ W_ih^T\n"
        "[K x N]{}, tl.dot input_precision {}",
        NameText(spec_.cell), spec_.has_biases ? " + b_ih" : "", PrecisionName());
    function.domain.kind = kir::Domain::Kind::kOwnLanes;
    function.text_loads = pointers.loads;
    function.text_stores = pointers.stores;
    std::vector<kir::Statement>& body = function.body;
    Line(body, 1, "mindex = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]");
    Line(body, 1, "nindex = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]");
    Line(body, 1, "mmask = mindex < M");
    Line(body, 1, "nmask = nindex < N");
    Line(body, 1, "xrow = (mindex // BATCH) * X_ST + (mindex % BATCH) * X_SB");
    body.push_back(kir::Statement::Tile(1, "acc", {"BLOCK_M", "BLOCK_N"}, "tl.float32"));
    body.push_back(kir::Statement::Loop(1, "k0", kir::LoopRange::Stepped("0", "K", "BLOCK_K")));
    Line(body, 2, "kaindex = k0 + tl.arange(0, BLOCK_K)[None, :]");
    Line(body, 2, "kbindex = k0 + tl.arange(0, BLOCK_K)[:, None]");
    Line(body, 2, "a = tl.load(x_ptr + xrow + kaindex * X_SK, mask=mmask & (kaindex < K), other=0.0)");
    Line(body, 2,
         "b = tl.load(w_ptr + nindex * W_SN + kbindex * W_SK, mask=(kbindex < K) & nmask, other=0.0)");
    body.push_back(kir::Statement::Accumulate(2, "acc", {"a", "b", DotCast(), kernel_.design.precision}));
    if (spec_.has_biases) {
      body.push_back(kir::Statement::Sum(1, "acc", "tl.load(b_ptr + nindex * B_S, mask=nmask, other=0.0)"));
    }
    Line(body, 1,
         fmt::format("tl.store(out_ptr + mindex * N + nindex, acc{}, mask=mmask & nmask)",
                     StoreCast("out_ptr")));
    return function;
  }

  // `_step`: the time loop of one layer and direction.
  kir::Function Step(const PointerParams& pointers,
                     const std::vector<std::pair<std::string, int64_t>>& scalar_names) const {
    const bool lstm = spec_.cell == RecurrentCell::kLstm;
    kir::Function function;
    function.name = kernel_.name + "_step";
    function.pointers = pointers.names.size();
    std::vector<std::string> states = {"H0_SB", "H0_SH"};
    if (lstm) {
      states.insert(states.end(), {"C0_SB", "C0_SH"});
    }
    const std::vector<std::vector<std::string>> lines = {{"SEQ", "BATCH", "HIDDEN", "O_ST", "O_SB"},
                                                         states,
                                                         {"W_SN", "W_SK", "B_S"},
                                                         {"BLOCK_B", "BLOCK_H", "BLOCK_K"}};
    for (const std::vector<std::string>& line : lines) {
      function.constexprs.insert(function.constexprs.end(), line.begin(), line.end());
    }
    std::string scalars;
    for (const auto& scalar : scalar_names) {
      scalars += (scalars.empty() ? "" : ", ") + scalar.first;
    }
    // the line of the initial states' strides keeps the trailing separator it always had
    const std::string next(kContinuation);
    function.signature = {Names(pointers) + ",",
                          next + scalars + ",",
                          next + Constexprs(lines[0]) + ",",
                          next + Constexprs(lines[1]) + ", ",
                          next + Constexprs(lines[2]) + ",",
                          next + Constexprs(lines[3])};
    function.comment = fmt::format(
        "{} time loop of one layer and direction (reverse: from the last step back). Programs along axis 0 "
        "own\n"
        "BLOCK_B batch rows; those along axis 1 share out their hidden units, BLOCK_H at a time. Per step "
        "and "
        "block of\n"
        "units, h_prev @ W_hh^T by tl.dot (input_precision {}; a program's rows of W_hh stay in its L1),\n"
        "the gates and the new state, stored for every step. Every program needs all of h_prev: it is read "
        "back "
        "from\n"
        "the layer's output through L2 after a barrier of the batch block's programs ends each step (an "
        "atomic "
        "counter:\n"
        "release add, acquire spin; the grid never exceeds the SMs, so they are all resident, and the "
        "interpreter,\n"
        "which runs programs one after another, launches one program along axis 1).",
        NameText(spec_.cell), PrecisionName());
    function.domain.kind = kir::Domain::Kind::kOwnLanes;
    function.text_loads = pointers.loads;
    function.text_stores = pointers.stores;
    StepLoopLines(function.body);
    HiddenProductLines(function.body);
    PreactivationLines(function.body);
    CellLines(function.body);
    Line(function.body, 3,
         fmt::format("tl.store(out_ptr + t * O_ST + bindex * O_SB + out_column + jindex, hnew{}, mask=omask)",
                     StoreCast("out_ptr")));
    Line(function.body, 3,
         fmt::format("tl.store(hn_ptr + hn_offset + bindex * HIDDEN + jindex, hnew{}, mask=omask & last)",
                     StoreCast("hn_ptr")));
    BarrierLines(function.body);
    return function;
  }

  // The step's lanes and loops: a batch block's rows, the steps in order (or reversed), the blocks of hidden
  // units this program owns, and a gate accumulator each.
  void StepLoopLines(std::vector<kir::Statement>& body) const {
    Line(body, 1, "bindex = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)[:, None]");
    Line(body, 1, "bmask = bindex < BATCH");
    Line(body, 1, "programs = tl.num_programs(1)");
    Line(body, 1, "sync = sync_ptr + sync_offset + tl.program_id(0)");
    body.push_back(kir::Statement::Loop(1, "s", kir::LoopRange::Upto("SEQ")));
    Line(body, 2, "t = s + reverse * (SEQ - 1 - 2 * s)");
    Line(body, 2, "tp = t - 1 + 2 * reverse");
    Line(body, 2, "first = s == 0");
    Line(body, 2, "later = s > 0");
    Line(body, 2, "last = s == SEQ - 1");
    body.push_back(kir::Statement::Loop(
        2, "j0", kir::LoopRange::Stepped("tl.program_id(1) * BLOCK_H", "HIDDEN", "programs * BLOCK_H")));
    Line(body, 3, "jindex = j0 + tl.arange(0, BLOCK_H)[None, :]");
    Line(body, 3, "jmask = jindex < HIDDEN");
    Line(body, 3, "omask = bmask & jmask");
    for (int64_t g = 0; g < spec_.Gates(); ++g) {
      body.push_back(kir::Statement::Tile(3, fmt::format("acc{}", g), {"BLOCK_B", "BLOCK_H"}, "tl.float32"));
    }
  }

  // h_prev @ W_hh^T per gate in BLOCK_K steps: h_prev the initial state at the first step, else read back
  // from the layer's output (.cg: through L2, where the other programs' stores are).
  void HiddenProductLines(std::vector<kir::Statement>& body) const {
    body.push_back(kir::Statement::Loop(3, "k0", kir::LoopRange::Stepped("0", "HIDDEN", "BLOCK_K")));
    Line(body, 4, "kaindex = k0 + tl.arange(0, BLOCK_K)[None, :]");
    Line(body, 4, "kbindex = k0 + tl.arange(0, BLOCK_K)[:, None]");
    Line(body, 4, "hmask = bmask & (kaindex < HIDDEN)");
    Line(body, 4,
         "h = tl.load(h0_ptr + h0_offset + bindex * H0_SB + kaindex * H0_SH, mask=hmask & first, other=0.0)");
    Line(body, 4,
         "h += tl.load(out_ptr + tp * O_ST + bindex * O_SB + out_column + kaindex, mask=hmask & later, "
         "other=0.0,");
    Line(body, 4, "             cache_modifier=\".cg\")");  // the call's continuation
    Line(body, 4, "wmask = (kbindex < HIDDEN) & jmask");
    Line(body, 4, "wpointer = w_ptr + jindex * W_SN + kbindex * W_SK");
    for (int64_t g = 0; g < spec_.Gates(); ++g) {
      const std::string offset = g == 0 ? "" : fmt::format(" + {} * HIDDEN * W_SN", g);
      body.push_back(
          kir::Statement::Accumulate(4, fmt::format("acc{}", g),
                                     {"h", fmt::format("tl.load(wpointer{}, mask=wmask, other=0.0)", offset),
                                      DotCast(), kernel_.design.precision}));
    }
  }

  // Each gate's pre-activation: its projection read back, its hidden product and b_hh.
  void PreactivationLines(std::vector<kir::Statement>& body) const {
    Line(body, 3,
         fmt::format("xpointer = xp_ptr + (t * BATCH + bindex) * {} + jindex", spec_.Gates() * spec_.hidden));
    for (int64_t g = 0; g < spec_.Gates(); ++g) {
      const std::string x = fmt::format("tl.load(xpointer{}, mask=omask, other=0.0)",
                                        g == 0 ? "" : fmt::format(" + {} * HIDDEN", g));
      std::string hh = fmt::format("acc{}", g);
      if (spec_.has_biases) {
        hh += fmt::format(" + tl.load(b_ptr + ({}jindex) * B_S, mask=jmask, other=0.0)",
                          g == 0 ? "" : fmt::format("{} * HIDDEN + ", g));
      }
      if (spec_.cell == RecurrentCell::kGru) {  // n = tanh(x_n + r * (W_hn h + b_hn)): the hidden side apart
        Line(body, 3, fmt::format("x{} = {}", g, x));
        Line(body, 3, fmt::format("pre{} = {}", g, hh));
      } else {
        Line(body, 3, fmt::format("pre{} = {} + {}", g, x, hh));
      }
    }
  }

  // The cell: the new hidden state hnew from the gates (an LSTM's cell state double-buffered in scratch, its
  // last stored into c_n; a GRU's h_prev read again for z's blend).
  void CellLines(std::vector<kir::Statement>& body) const {
    switch (spec_.cell) {
      case RecurrentCell::kLstm:
        Line(body, 3, "cpointer = cbuf_ptr + bindex * HIDDEN + jindex");
        Line(body, 3,
             "c = tl.load(c0_ptr + c0_offset + bindex * C0_SB + jindex * C0_SH, mask=omask & first, "
             "other=0.0)");
        Line(body, 3,
             "c += tl.load(cpointer + (1 - s % 2) * (BATCH * HIDDEN), mask=omask & later, other=0.0, "
             "cache_modifier=\".cg\")");
        Line(body, 3, "c = tl.sigmoid(pre1) * c + tl.sigmoid(pre0) * _egg_tanh(pre2)");
        Line(body, 3, "hnew = tl.sigmoid(pre3) * _egg_tanh(c)");
        Line(body, 3, "tl.store(cpointer + (s % 2) * (BATCH * HIDDEN), c, mask=omask)");
        Line(body, 3,
             fmt::format("tl.store(cn_ptr + hn_offset + bindex * HIDDEN + jindex, c{}, mask=omask & last)",
                         StoreCast("cn_ptr")));
        return;
      case RecurrentCell::kGru:
        Line(body, 3, "r = tl.sigmoid(x0 + pre0)");
        Line(body, 3, "z = tl.sigmoid(x1 + pre1)");
        Line(body, 3, "n = _egg_tanh(x2 + r * pre2)");
        Line(body, 3,
             "hprev = tl.load(h0_ptr + h0_offset + bindex * H0_SB + jindex * H0_SH, mask=omask & first, "
             "other=0.0)");
        Line(
            body, 3,
            "hprev += tl.load(out_ptr + tp * O_ST + bindex * O_SB + out_column + jindex, mask=omask & later, "
            "other=0.0,");
        Line(body, 3, "                 cache_modifier=\".cg\")");  // the call's continuation
        Line(body, 3, "hnew = (1.0 - z) * n + z * hprev");
        return;
      case RecurrentCell::kRnnTanh:
        Line(body, 3, "hnew = _egg_tanh(pre0)");
        return;
      case RecurrentCell::kRnnRelu:
        Line(body, 3, "hnew = tl.where(pre0 < 0, 0.0, pre0)");  // relu: a nan stays nan
        return;
    }
  }

  // The step's end: every program of the batch block arrives at the step counter (release) and waits for the
  // others (acquire) before the next step reads h_prev.
  static void BarrierLines(std::vector<kir::Statement>& body) {
    Line(body, 2, "tl.debug_barrier()");
    Line(body, 2, "tl.atomic_add(sync, 1, sem=\"release\", scope=\"gpu\")");
    Line(body, 2, "while tl.atomic_add(sync, 0, sem=\"acquire\", scope=\"gpu\") < (s + 1) * programs:");
    Line(body, 3, "pass");
    Line(body, 2, "tl.debug_barrier()");
  }

 private:
  // Half layers: tl.dot's operands to the tensor cores in their type (EGG_BF16_DOT: float32 in the
  // interpreter).
  std::string DotCast() const { return writer::DotOperandCast(spec_.dtype); }

  const KernelPlan& kernel_;
  const RecurrentSpec& spec_;
};

}  // namespace

void PointerParams::Add(std::string name, int value, Access access) {
  if (access != Access::kNone) {
    (access == Access::kLoad ? loads : stores).push_back(names.size());
  }
  names.push_back(std::move(name));
  values.push_back(value);
}

kir::Function ProjectionFunction(const KernelPlan& kernel, const PointerParams& pointers) {
  return FunctionWriter(kernel).Projection(pointers);
}

kir::Function StepFunction(const KernelPlan& kernel, const PointerParams& pointers,
                           const std::vector<std::pair<std::string, int64_t>>& scalars) {
  return FunctionWriter(kernel).Step(pointers, scalars);
}

}  // namespace egg::expert::recurrent
