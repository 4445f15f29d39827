// The example family (docs/expert.md, "Kernel families"): x * sigmoid(x), SiLU written out, as a kernel of
// its own computing tl.sigmoid in float32. Experimental: it runs only where a candidate's plan names "silu"
// (`{"plan": {"families": ["silu"]}}`); the pointwise family fuses the same expression otherwise.
#include <fmt/format.h>

#include <algorithm>

#include "expert/codegen/emitter.h"
#include "expert/codegen/kernel_codegen.h"
#include "expert/design/defaults.h"
#include "expert/families/common.h"

namespace egg::expert {
namespace {

// The value `arg` holds when it is a tensor computed by a node of op `op`, else -1 (its node's first argument
// through `input`).
int ProducedBy(const Graph& graph, const Arg& arg, const std::string& op, int* input) {
  if (arg.kind != Arg::Kind::kValue) {
    return -1;
  }
  const Value& value = ValueAt(graph, arg.value);
  if (value.kind != ValueKind::kNode || value.node < 0) {
    return -1;
  }
  const Node& node = graph.nodes.at(static_cast<size_t>(value.node));
  if (node.op != op || node.args.empty() || node.args[0].kind != Arg::Kind::kValue) {
    return -1;
  }
  *input = node.args[0].value;
  return arg.value;
}

class SiluFamily : public FlatFamily {
 public:
  std::string_view Name() const override { return "silu"; }
  bool Experimental() const override { return true; }

  // mul(x, sigmoid(x)) or mul(sigmoid(x), x), of a floating x the same shape as the product.
  std::optional<FamilyClaim> Claim(const Graph& graph, const Node& node) const override {
    if (node.op != "aten.mul.Tensor" || node.args.size() != 2) {
      return std::nullopt;
    }
    for (size_t side = 0; side < 2; ++side) {
      int x = -1;
      const Arg& other = node.args[1 - side];
      if (ProducedBy(graph, node.args[side], "aten.sigmoid.default", &x) < 0 ||
          other.kind != Arg::Kind::kValue || other.value != x) {
        continue;
      }
      const std::optional<TensorMeta>& in = ValueAt(graph, x).meta;
      const std::optional<TensorMeta>& out = ValueAt(graph, node.value).meta;
      if (!in || !out || !IsFloating(in->dtype) || in->shape != out->shape) {
        return std::nullopt;
      }
      FamilyClaim claim;
      claim.operands = {x};
      claim.reason = fmt::format("x * sigmoid(x) {}: SiLU as a kernel of its own ({} elements)", node.name,
                                 Product(out->shape));
      return claim;
    }
    return std::nullopt;
  }

  KernelDesign DefaultDesign(const KernelPlan& kernel, int /*seed*/, Precision /*precision*/) const override {
    KernelDesign design;
    design.algorithm = Algorithm::kFlat;
    design.xblock = std::min(kPointwiseBlock, NextPowerOfTwo(std::max<int64_t>(kernel.rows, 1)));
    return design;
  }

  // One element per lane: x computed through the emitter (views and pointwise producers inlined), then
  // x * sigmoid(x) in float32, stored in the product's type.
  kir::Kernel LowerProgram(const Graph& graph, const KernelPlan& kernel,
                           const std::map<int, TensorMeta>& memory,
                           const std::map<int, TensorMeta>& layouts) const override {
    const int out = kernel.roots.at(0);
    const Index flat = Index::Var("xindex", kernel.rows);
    KernelEmitter emitter(graph, memory, MaskSet::Flat());
    const Operand x = emitter.Emit(kernel.claim->operands.at(0), Delinearize(flat, kernel.shape));
    const std::string silu = emitter.Temp("silu");
    emitter.Line(fmt::format("{} = {}.to(tl.float32) * tl.sigmoid({}.to(tl.float32))", silu, x.code, x.code));
    const auto index = Delinearize(flat, ValueAt(graph, out).meta->shape);
    emitter.Store(out, index, Operand{silu, DType::kFloat32, false}, layouts.at(out), "xmask");
    kir::Kernel program = FlatProgram(kernel, kernel.rows, emitter,
                                      fmt::format("pointwise over {} elements: x * sigmoid(x)", kernel.rows));
    program.computed.insert(kernel.claim->node);
    return program;
  }
};

}  // namespace

std::unique_ptr<KernelFamily> MakeSiluFamily() { return std::make_unique<SiluFamily>(); }

}  // namespace egg::expert
