// Recurrent layer stacks (aten.lstm/gru/rnn_tanh/rnn_relu) as Triton kernels: per layer and direction, the input
// projection of every time step as one GEMM into a scratch buffer, then a time loop (templates/triton/
// recurrent.py.mustache). Layer l reads layer l - 1's output; a bidirectional layer's directions write the two
// halves of its output's last dimension.
#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "expert/codegen/kernel_codegen.h"
#include "expert/codegen/templates.h"
#include "expert/plan/plan.h"

namespace egg::expert {
namespace {


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

  KernelSource Write() {
    source_.name = kernel_.name;
    const int64_t directions = spec_.Directions();
    const int64_t hidden = spec_.hidden;
    const int64_t width = directions * hidden;  // a layer's output features
    const int64_t rows = spec_.seq * spec_.batch;
    const int projection = AddScratch(rows * spec_.Gates() * hidden);
    // Layer outputs alternate between two buffers [seq, batch, width]; the last layer writes the graph's output.
    const int layer_buffers[2] = {spec_.layers > 1 ? AddScratch(rows * width) : 0,
                                  spec_.layers > 2 ? AddScratch(rows * width) : 0};
    const int output = Output(0, rows * width);
    const int hn = Output(1, spec_.layers * directions * spec_.batch * hidden);
    const bool lstm = spec_.cell == RecurrentCell::kLstm;
    const int cn = lstm ? Output(2, spec_.layers * directions * spec_.batch * hidden) : 0;
    const int cell_buffer = lstm ? AddScratch(2 * spec_.batch * hidden) : 0;
    const TensorMeta& h0 = Layout(spec_.h0);
    const KernelDesign& design = kernel_.design;
    // The time loop's grid: batch blocks x programs sharing the hidden units, at most kMaxResidentPrograms
    // in all (the step barrier needs every program resident); a step counter per batch block, layer and
    // direction.
    const int64_t batch_blocks = (spec_.batch + design.xblock - 1) / design.xblock;
    const int64_t most_programs = std::max<int64_t>(1, kMaxResidentPrograms / batch_blocks);
    const int64_t unit_blocks = (hidden + design.yblock - 1) / design.yblock;
    const int64_t unit_programs = std::clamp<int64_t>(unit_blocks, 1, most_programs);
    const int sync = AddScratch(spec_.layers * directions * batch_blocks, DType::kInt32, /*zeroed=*/true);
    int layer_input = spec_.input;
    for (int64_t layer = 0; layer < spec_.layers; ++layer) {
      const bool last = layer + 1 == spec_.layers;
      const int layer_output = last ? output : layer_buffers[layer % 2];
      // strides (time, batch) of the layer's input and output
      const auto [x_st, x_sb, x_sk] = layer == 0 ? InputStrides() : std::make_tuple(spec_.batch * width, width, int64_t{1});
      const bool output_batch_first = last && spec_.batch_first && IsValue(output);
      const int64_t o_st = output_batch_first ? width : spec_.batch * width;
      const int64_t o_sb = output_batch_first ? spec_.seq * width : width;
      const int64_t in = layer == 0 ? spec_.input_size : width;
      for (int64_t direction = 0; direction < directions; ++direction) {
        const std::vector<int> params = spec_.LayerParams(layer, direction);
        const TensorMeta& w_ih = Layout(params[0]);
        const TensorMeta& w_hh = Layout(params[1]);
        const int64_t bias_stride = spec_.has_biases ? Layout(params[2]).stride[0] : 0;
        const int64_t bias_hh_stride = spec_.has_biases ? Layout(params[3]).stride[0] : 0;
        const int64_t gates = spec_.Gates() * hidden;
        KernelLaunch proj;
        proj.function = kernel_.name + "_proj";
        proj.pointers = {layer_input, params[0]};
        if (spec_.has_biases) {
          proj.pointers.push_back(params[2]);
        }
        proj.pointers.push_back(projection);
        const int64_t block_m = DotSide(rows, kProjectionRows);
        const int64_t block_n = DotSide(gates, kProjectionColumns);
        proj.grid = fmt::format("(triton.cdiv({}, {}), triton.cdiv({}, {}))", rows, block_m, gates, block_n);
        proj.constexprs = {{"M", rows},           {"N", gates},         {"K", in},
                           {"BATCH", spec_.batch}, {"X_ST", x_st},       {"X_SB", x_sb},
                           {"X_SK", x_sk},        {"W_SN", w_ih.stride[0]}, {"W_SK", w_ih.stride[1]},
                           {"B_S", bias_stride},  {"BLOCK_M", block_m},  {"BLOCK_N", block_n},
                           {"BLOCK_K", DotSide(in, kProjectionStep)}};
        source_.launches.push_back(std::move(proj));

        KernelLaunch step;
        step.function = kernel_.name + "_step";
        step.pointers = {projection, params[1]};
        if (spec_.has_biases) {
          step.pointers.push_back(params[3]);
        }
        step.pointers.push_back(spec_.h0);
        if (lstm) {
          step.pointers.push_back(spec_.c0);
        }
        step.pointers.push_back(layer_output);
        step.pointers.push_back(hn);
        if (lstm) {
          step.pointers.push_back(cn);
          step.pointers.push_back(cell_buffer);
        }
        step.pointers.push_back(sync);
        const int64_t state = layer * directions + direction;
        step.grid = fmt::format("({}, 1 if EGG_INTERPRET.value else {})", batch_blocks, unit_programs);
        step.scalars = {{"reverse", direction}, {"h0_offset", state * h0.stride[0]}};
        if (lstm) {
          step.scalars.emplace_back("c0_offset", state * Layout(spec_.c0).stride[0]);
        }
        step.scalars.emplace_back("out_column", direction * hidden);
        step.scalars.emplace_back("hn_offset", state * spec_.batch * hidden);
        step.scalars.emplace_back("sync_offset", state * batch_blocks);
        step.constexprs = {{"SEQ", spec_.seq},    {"BATCH", spec_.batch},     {"HIDDEN", hidden},
                           {"O_ST", o_st},        {"O_SB", o_sb},             {"H0_SB", h0.stride[1]},
                           {"H0_SH", h0.stride[2]}, {"W_SN", w_hh.stride[0]},  {"W_SK", w_hh.stride[1]},
                           {"B_S", bias_hh_stride}, {"BLOCK_B", design.xblock}, {"BLOCK_H", design.yblock},
                           {"BLOCK_K", design.rblock}};
        if (lstm) {
          const TensorMeta& c0 = Layout(spec_.c0);
          step.constexprs["C0_SB"] = c0.stride[1];
          step.constexprs["C0_SH"] = c0.stride[2];
        }
        source_.launches.push_back(std::move(step));
      }
      layer_input = layer_output;
    }
    source_.code = Code();
    source_.helpers = {Helper::kTanh};
    source_.computed.insert(spec_.node);
    return source_;
  }

 private:
  const TensorMeta& Layout(int value) {
    const auto found = memory_.find(value);
    if (found == memory_.end()) {
      throw NotFusable(fmt::format("{} is not in memory", ValueAt(graph_, value).name));
    }
    source_.loaded.insert(value);
    return found->second;
  }

  std::tuple<int64_t, int64_t, int64_t> InputStrides() {
    const std::vector<int64_t>& stride = Layout(spec_.input).stride;
    return spec_.batch_first ? std::make_tuple(stride[1], stride[0], stride[2])
                             : std::make_tuple(stride[0], stride[1], stride[2]);
  }

  int AddScratch(int64_t numel, DType dtype = DType::kFloat32, bool zeroed = false) {
    source_.scratch.push_back({numel, dtype, zeroed});
    return ScratchId(source_.scratch.size() - 1);
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

  std::string Code() const {
    const bool gru = spec_.cell == RecurrentCell::kGru;
    std::vector<std::string> accumulators, products, preactivations;
    for (int64_t g = 0; g < spec_.Gates(); ++g) {
      accumulators.push_back(fmt::format("            acc{} = tl.zeros([BLOCK_B, BLOCK_H], dtype=tl.float32)", g));
      const std::string offset = g == 0 ? "" : fmt::format(" + {} * HIDDEN * W_SN", g);
      products.push_back(
          fmt::format("                acc{} += tl.dot(h, tl.load(wpointer{}, mask=wmask, other=0.0), "
                      "input_precision=\"{}\")",
                      g, offset, NameOf(kernel_.design.precision)));
      const std::string x = fmt::format("tl.load(xpointer{}, mask=omask, other=0.0)",
                                        g == 0 ? "" : fmt::format(" + {} * HIDDEN", g));
      std::string hh = fmt::format("acc{}", g);
      if (spec_.has_biases) {
        hh += fmt::format(" + tl.load(b_ptr + ({}jindex) * B_S, mask=jmask, other=0.0)",
                          g == 0 ? "" : fmt::format("{} * HIDDEN + ", g));
      }
      if (gru) {  // n = tanh(x_n + r * (W_hn h + b_hn)): the hidden side stays apart
        preactivations.push_back(fmt::format("            x{} = {}", g, x));
        preactivations.push_back(fmt::format("            pre{} = {}", g, hh));
      } else {
        preactivations.push_back(fmt::format("            pre{} = {} + {}", g, x, hh));
      }
    }
    auto join = [](const std::vector<std::string>& lines) {
      std::string text;
      for (const std::string& line : lines) {
        text += (text.empty() ? "" : "\n") + line;
      }
      return text;
    };
    templates::Values values;
    values.text["name"] = kernel_.name;
    values.text["cell"] = NameText(spec_.cell);
    values.text["precision"] = NameText(kernel_.design.precision);
    values.text["gate_width"] = std::to_string(spec_.Gates() * spec_.hidden);
    values.text["accumulators"] = join(accumulators);
    values.text["products"] = join(products);
    values.text["preactivations"] = join(preactivations);
    values.flags["bias"] = spec_.has_biases;
    values.flags[NameText(spec_.cell)] = true;
    return templates::Render("triton/recurrent.py.mustache", values);
  }

  const Graph& graph_;
  const KernelPlan& kernel_;
  const RecurrentSpec& spec_;
  const std::map<int, TensorMeta>& memory_;
  const std::map<int, TensorMeta>& layouts_;
  KernelSource source_;
};

}  // namespace

KernelSource GenerateRecurrentKernel(const Graph& graph, const KernelPlan& kernel,
                                     const std::map<int, TensorMeta>& memory, const std::map<int, TensorMeta>& layouts) {
  if (!kernel.recurrent) {
    throw NotFusable("a recurrent kernel without its layer stack");
  }
  return RecurrentWriter(graph, kernel, memory, layouts).Write();
}

}  // namespace egg::expert
