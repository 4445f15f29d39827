// Recurrent layer stacks (aten.lstm/gru/rnn_tanh/rnn_relu) as Triton kernels in the kernel IR: per layer and
// direction, the input projection of every time step as one GEMM into a scratch buffer (the `_proj`
// function), then a time loop (`_step`; both in recurrent_functions.cpp). Layer l reads layer l - 1's output;
// a bidirectional layer's directions write the two halves of its output's last dimension. Here: the buffers,
// and each layer and direction's launches.
#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "expert/codegen/kernel_codegen.h"
#include "expert/codegen/recurrent_functions.h"
#include "expert/plan/plan.h"

namespace egg::expert {
namespace {

using recurrent::Access;
using recurrent::PointerParams;

constexpr int64_t kMinDot = 16;  // tl.dot's smallest tile side
constexpr int64_t kProjectionRows = 64;
constexpr int64_t kProjectionColumns = 64;
constexpr int64_t kProjectionStep = 32;
// Most programs of a time loop: fewer than an H100/H200's 132 SMs, so all are resident at once.
constexpr int64_t kMaxResidentPrograms = 128;

int64_t DotSide(int64_t size, int64_t most) { return std::clamp<int64_t>(NextPowerOfTwo(size), kMinDot, most); }

}  // namespace

namespace {

class RecurrentWriter {
 public:
  RecurrentWriter(const Graph& graph, const KernelPlan& kernel, const std::map<int, TensorMeta>& memory,
                  const std::map<int, TensorMeta>& layouts)
      : graph_(graph), kernel_(kernel), spec_(*kernel.recurrent), memory_(memory), layouts_(layouts) {}

  kir::Kernel Write() {
    program_.name = kernel_.name;
    const Stack stack = AllocateStack();
    int layer_input = spec_.input;
    PointerParams proj;
    PointerParams step;
    for (int64_t layer = 0; layer < spec_.layers; ++layer) {
      const LayerIo io = LayerIoOf(layer, layer_input, stack);
      for (int64_t direction = 0; direction < spec_.Directions(); ++direction) {
        const std::vector<int> params = spec_.LayerParams(layer, direction);
        const Weights weights = WeightsOf(params);
        proj = ProjectionPointers(io, params, stack);
        step = StepPointers(io, params, stack);
        program_.launches.push_back(ProjectionLaunch(io, proj, weights));
        program_.launches.push_back(StepLaunch(layer, direction, io, step, weights, stack));
      }
      layer_input = io.output;
    }
    // every launch passes its pointers in the same order: the last ones name the functions' parameters
    program_.functions.push_back(recurrent::ProjectionFunction(kernel_, proj));
    program_.functions.push_back(recurrent::StepFunction(kernel_, step, program_.launches.back().scalars));
    program_.helpers = {Helper::kTanh};
    program_.computed.insert(spec_.node);
    return program_;
  }

 private:
  // What every layer's launches share: the buffers and the time loop's grid.
  struct Stack {
    int projection = 0;             // the input projections of every time step
    int layer_outputs[2] = {0, 0};  // the outputs of layers before the last, alternately
    int output = 0;
    int hn = 0;
    int cn = 0;  // LSTM only, as is the cell buffer
    int cell_buffer = 0;
    int sync = 0;  // the step counters
    const TensorMeta* h0 = nullptr;
    int64_t batch_blocks = 0;
    int64_t unit_programs = 0;
  };

  // Where one layer reads and writes: (time, batch, feature) strides of its input, (time, batch) strides of
  // its output, and its input features.
  struct LayerIo {
    int input = 0;
    int output = 0;
    int64_t x_st = 0, x_sb = 0, x_sk = 0;
    int64_t o_st = 0, o_sb = 0;
    int64_t in = 0;
  };

  // One layer and direction's weight layouts and bias strides (0 without biases).
  struct Weights {
    const TensorMeta* w_ih = nullptr;
    const TensorMeta* w_hh = nullptr;
    int64_t bias_stride = 0;
    int64_t bias_hh_stride = 0;
  };

  Stack AllocateStack() {
    const int64_t directions = spec_.Directions();
    const int64_t hidden = spec_.hidden;
    const int64_t width = directions * hidden;  // a layer's output features
    const int64_t rows = spec_.seq * spec_.batch;
    Stack stack;
    stack.projection = AddScratch(rows * spec_.Gates() * hidden);
    // Layer outputs alternate between two buffers [seq, batch, width]; the last layer writes the graph's output.
    stack.layer_outputs[0] = spec_.layers > 1 ? AddScratch(rows * width) : 0;
    stack.layer_outputs[1] = spec_.layers > 2 ? AddScratch(rows * width) : 0;
    stack.output = Output(0, rows * width);
    stack.hn = Output(1, spec_.layers * directions * spec_.batch * hidden);
    const bool lstm = spec_.cell == RecurrentCell::kLstm;
    stack.cn = lstm ? Output(2, spec_.layers * directions * spec_.batch * hidden) : 0;
    stack.cell_buffer = lstm ? AddScratch(2 * spec_.batch * hidden) : 0;
    stack.h0 = &Layout(spec_.h0);
    const KernelDesign& design = kernel_.design;
    // The time loop's grid: batch blocks x programs sharing the hidden units, at most kMaxResidentPrograms
    // in all (the step barrier needs every program resident); a step counter per batch block, layer and
    // direction.
    stack.batch_blocks = (spec_.batch + design.xblock - 1) / design.xblock;
    const int64_t most_programs = std::max<int64_t>(1, kMaxResidentPrograms / stack.batch_blocks);
    const int64_t unit_blocks = (hidden + design.yblock - 1) / design.yblock;
    stack.unit_programs = std::clamp<int64_t>(unit_blocks, 1, most_programs);
    stack.sync = AddScratch(spec_.layers * directions * stack.batch_blocks, DType::kInt32, /*zeroed=*/true);
    return stack;
  }

  LayerIo LayerIoOf(int64_t layer, int input, const Stack& stack) {
    const int64_t width = spec_.Directions() * spec_.hidden;
    const bool last = layer + 1 == spec_.layers;
    LayerIo io;
    io.input = input;
    io.output = last ? stack.output : stack.layer_outputs[layer % 2];
    std::tie(io.x_st, io.x_sb, io.x_sk) =
        layer == 0 ? InputStrides() : std::make_tuple(spec_.batch * width, width, int64_t{1});
    const bool output_batch_first = last && spec_.batch_first && IsValue(stack.output);
    io.o_st = output_batch_first ? width : spec_.batch * width;
    io.o_sb = output_batch_first ? spec_.seq * width : width;
    io.in = layer == 0 ? spec_.input_size : width;
    return io;
  }

  Weights WeightsOf(const std::vector<int>& params) {
    Weights weights;
    weights.w_ih = &Layout(params[0]);
    weights.w_hh = &Layout(params[1]);
    weights.bias_stride = spec_.has_biases ? Layout(params[2]).stride[0] : 0;
    weights.bias_hh_stride = spec_.has_biases ? Layout(params[3]).stride[0] : 0;
    return weights;
  }

  // The projection's pointers: the layer's input and W_ih (and b_ih) read, the projection buffer written.
  PointerParams ProjectionPointers(const LayerIo& io, const std::vector<int>& params,
                                   const Stack& stack) const {
    PointerParams pointers;
    pointers.Add("x_ptr", io.input, Access::kLoad);
    pointers.Add("w_ptr", params[0], Access::kLoad);
    if (spec_.has_biases) {
      pointers.Add("b_ptr", params[2], Access::kLoad);
    }
    pointers.Add("out_ptr", stack.projection, Access::kStore);
    return pointers;
  }

  // The input projection of every time step of a layer and direction: one GEMM into the projection buffer.
  KernelLaunch ProjectionLaunch(const LayerIo& io, const PointerParams& pointers,
                                const Weights& weights) const {
    const int64_t rows = spec_.seq * spec_.batch;
    const int64_t gates = spec_.Gates() * spec_.hidden;
    KernelLaunch proj;
    proj.function = kernel_.name + "_proj";
    proj.pointers = pointers.values;
    const int64_t block_m = DotSide(rows, kProjectionRows);
    const int64_t block_n = DotSide(gates, kProjectionColumns);
    proj.grid = fmt::format("(triton.cdiv({}, {}), triton.cdiv({}, {}))", rows, block_m, gates, block_n);
    proj.constexprs = {{"M", rows},
                       {"N", gates},
                       {"K", io.in},
                       {"BATCH", spec_.batch},
                       {"X_ST", io.x_st},
                       {"X_SB", io.x_sb},
                       {"X_SK", io.x_sk},
                       {"W_SN", weights.w_ih->stride[0]},
                       {"W_SK", weights.w_ih->stride[1]},
                       {"B_S", weights.bias_stride},
                       {"BLOCK_M", block_m},
                       {"BLOCK_N", block_n},
                       {"BLOCK_K", DotSide(io.in, kProjectionStep)}};
    return proj;
  }

  // The time loop's pointers. It reads W_hh (and b_hh) and the initial states, and writes the layer's output,
  // h_n (c_n and the cell state); the projection, the output and the cell state it reads back are its own
  // writes, no inputs of the kernel.
  PointerParams StepPointers(const LayerIo& io, const std::vector<int>& params, const Stack& stack) const {
    const bool lstm = spec_.cell == RecurrentCell::kLstm;
    PointerParams pointers;
    pointers.Add("xp_ptr", stack.projection);
    pointers.Add("w_ptr", params[1], Access::kLoad);
    if (spec_.has_biases) {
      pointers.Add("b_ptr", params[3], Access::kLoad);
    }
    pointers.Add("h0_ptr", spec_.h0, Access::kLoad);
    if (lstm) {
      pointers.Add("c0_ptr", spec_.c0, Access::kLoad);
    }
    pointers.Add("out_ptr", io.output, Access::kStore);
    pointers.Add("hn_ptr", stack.hn, Access::kStore);
    if (lstm) {
      pointers.Add("cn_ptr", stack.cn, Access::kStore);
      pointers.Add("cbuf_ptr", stack.cell_buffer, Access::kStore);
    }
    pointers.Add("sync_ptr", stack.sync);
    return pointers;
  }

  // The time loop of a layer and direction: the hidden state's product with W_hh and the gates per step, the
  // programs of a batch block meeting at a barrier (their step counter) between steps.
  KernelLaunch StepLaunch(int64_t layer, int64_t direction, const LayerIo& io, const PointerParams& pointers,
                          const Weights& weights, const Stack& stack) {
    const bool lstm = spec_.cell == RecurrentCell::kLstm;
    const int64_t hidden = spec_.hidden;
    const KernelDesign& design = kernel_.design;
    KernelLaunch step;
    step.function = kernel_.name + "_step";
    step.pointers = pointers.values;
    const int64_t state = layer * spec_.Directions() + direction;
    step.grid =
        fmt::format("({}, 1 if EGG_INTERPRET.value else {})", stack.batch_blocks, stack.unit_programs);
    step.scalars = {{"reverse", direction}, {"h0_offset", state * stack.h0->stride[0]}};
    if (lstm) {
      step.scalars.emplace_back("c0_offset", state * Layout(spec_.c0).stride[0]);
    }
    step.scalars.emplace_back("out_column", direction * hidden);
    step.scalars.emplace_back("hn_offset", state * spec_.batch * hidden);
    step.scalars.emplace_back("sync_offset", state * stack.batch_blocks);
    step.constexprs = {{"SEQ", spec_.seq},
                       {"BATCH", spec_.batch},
                       {"HIDDEN", hidden},
                       {"O_ST", io.o_st},
                       {"O_SB", io.o_sb},
                       {"H0_SB", stack.h0->stride[1]},
                       {"H0_SH", stack.h0->stride[2]},
                       {"W_SN", weights.w_hh->stride[0]},
                       {"W_SK", weights.w_hh->stride[1]},
                       {"B_S", weights.bias_hh_stride},
                       {"BLOCK_B", design.xblock},
                       {"BLOCK_H", design.yblock},
                       {"BLOCK_K", design.rblock}};
    if (lstm) {
      const TensorMeta& c0 = Layout(spec_.c0);
      step.constexprs["C0_SB"] = c0.stride[1];
      step.constexprs["C0_SH"] = c0.stride[2];
    }
    return step;
  }

  const TensorMeta& Layout(int value) {
    const auto found = memory_.find(value);
    if (found == memory_.end()) {
      throw NotFusable(fmt::format("{} is not in memory", ValueAt(graph_, value).name));
    }
    return found->second;
  }

  std::tuple<int64_t, int64_t, int64_t> InputStrides() {
    const std::vector<int64_t>& stride = Layout(spec_.input).stride;
    return spec_.batch_first ? std::make_tuple(stride[1], stride[0], stride[2])
                             : std::make_tuple(stride[0], stride[1], stride[2]);
  }

  int AddScratch(int64_t numel, DType dtype = DType::kFloat32, bool zeroed = false) {
    program_.scratch.push_back({numel, dtype, zeroed});
    return ScratchId(program_.scratch.size() - 1);
  }

  static bool IsValue(int pointer) { return !IsScratch(pointer); }

  // Where output `index` of the node goes: its value when the plan stores it (dense), else a scratch buffer.
  int Output(size_t index, int64_t numel) {
    const int value = spec_.outputs.at(index);
    if (value >= 0 && Contains(kernel_.stores, value)) {
      const TensorMeta& layout = layouts_.at(value);
      if (!layout.IsContiguous() || layout.offset != 0) {
        throw NotFusable("a recurrent output stored in a non-dense layout");
      }
      return value;
    }
    return AddScratch(numel);
  }

  static bool Contains(const std::vector<int>& values, int value) {
    return std::find(values.begin(), values.end(), value) != values.end();
  }

  const Graph& graph_;
  const KernelPlan& kernel_;
  const RecurrentSpec& spec_;
  const std::map<int, TensorMeta>& memory_;
  const std::map<int, TensorMeta>& layouts_;
  kir::Kernel program_;
};

}  // namespace

kir::Kernel RecurrentProgram(const Graph& graph, const KernelPlan& kernel,
                             const std::map<int, TensorMeta>& memory,
                             const std::map<int, TensorMeta>& layouts) {
  if (!kernel.recurrent) {
    throw NotFusable("a recurrent kernel without its layer stack");
  }
  return RecurrentWriter(graph, kernel, memory, layouts).Write();
}

}  // namespace egg::expert
