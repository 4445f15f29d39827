#include "expert/design/design_move.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "expert/design/legality.h"

namespace egg::expert {
namespace {

const std::set<std::string> kIntegerFields = {"xblock", "rblock",    "yblock",
                                              "split",  "num_warps", "num_stages"};
const std::set<std::string> kTextFields = {"algorithm", "precision"};
const std::set<std::string> kPlanFields = {"fuse_reductions",   "fuse_epilogues",  "cuda_graph",
                                           "fuse_attention",    "concat_in_place", "fold_summed_products",
                                           "reduce_in_products"};

std::string Names(const std::set<std::string>& names) {
  std::string out;
  for (const std::string& name : names) {
    out += (out.empty() ? "" : ", ") + name;
  }
  return out;
}

MoveCheck Refuse(std::string rule) { return {std::nullopt, std::move(rule)}; }

MoveCheck CheckPlanMove(const Candidate& incumbent, const std::string& field, const Json& value,
                        const std::string& description) {
  if (kPlanFields.count(field) == 0) {
    return Refuse(
        fmt::format("unknown plan field '{}': the plan's fields are {}", field, Names(kPlanFields)));
  }
  if (!value.is_boolean()) {
    return Refuse(fmt::format("plan.{} takes true or false", field));
  }
  CandidateDesign design = incumbent.design;
  PlanOptions& plan = design.plan;
  bool* target = field == "fuse_reductions"        ? &plan.fuse_reductions
                 : field == "fuse_epilogues"       ? &plan.fuse_epilogues
                 : field == "cuda_graph"           ? &plan.cuda_graph
                 : field == "concat_in_place"      ? &plan.concat_in_place
                 : field == "fold_summed_products" ? &plan.fold_summed_products
                 : field == "reduce_in_products"   ? &plan.reduce_in_products
                                                   : &plan.fuse_attention;
  if (*target == value.get<bool>()) {
    return Refuse(fmt::format("the move changes nothing: plan.{} is already {}", field, value.dump()));
  }
  if (field == "cuda_graph" && value.get<bool>() && !incumbent.pytorch_ops.empty()) {
    return Refuse("plan.cuda_graph needs a plan with no op left to PyTorch");
  }
  *target = value.get<bool>();
  return {DesignMove{design, fmt::format("llm: plan {} {}", field, value.dump()), description}, ""};
}

// `value` set on `design.field`, or the type rule it breaks.
std::string SetField(KernelDesign* design, const std::string& field, const Json& value) {
  if (kIntegerFields.count(field) != 0) {
    if (!value.is_number_integer()) {
      return fmt::format("{} takes an integer", field);
    }
    const int64_t number = value.get<int64_t>();
    if (field == "num_warps" || field == "num_stages") {
      (field == "num_warps" ? design->num_warps : design->num_stages) = static_cast<int>(number);
    } else {
      (field == "xblock"   ? design->xblock
       : field == "rblock" ? design->rblock
       : field == "yblock" ? design->yblock
                           : design->split) = number;
    }
    return "";
  }
  if (!value.is_string()) {
    return fmt::format("{} takes a string", field);
  }
  try {
    if (field == "algorithm") {
      design->algorithm = ParseName<Algorithm>(value.get<std::string>(), "algorithm");
    } else {
      design->precision = ParseName<Precision>(value.get<std::string>(), "precision");
    }
  } catch (const UnknownName& unknown) {
    return unknown.what();
  }
  return "";
}

}  // namespace

MoveCheck CheckDesignMove(const Candidate& incumbent, const Json& request) {
  const Json kernel_name = request.value("kernel", Json());
  const Json field_json = request.value("field", Json());
  if (!kernel_name.is_string() || !field_json.is_string()) {
    return Refuse("a design move names its \"kernel\" and \"field\" as strings");
  }
  const std::string name = kernel_name.get<std::string>();
  const std::string field = field_json.get<std::string>();
  const Json value = request.value("value", Json());
  const std::string description = request.value("description", Json("")).is_string()
                                      ? request.value("description", std::string())
                                      : std::string();
  if (name == kPlanTarget) {
    return CheckPlanMove(incumbent, field, value, description);
  }
  const auto kernel = std::find_if(incumbent.plan.kernels.begin(), incumbent.plan.kernels.end(),
                                   [&](const KernelPlan& k) { return k.name == name; });
  if (kernel == incumbent.plan.kernels.end()) {
    std::set<std::string> names;
    for (const KernelPlan& k : incumbent.plan.kernels) {
      names.insert(k.name);
    }
    return Refuse(fmt::format("unknown kernel '{}': the design record's kernels are {} (or \"plan\")", name,
                              Names(names)));
  }
  if (kIntegerFields.count(field) == 0 && kTextFields.count(field) == 0) {
    std::set<std::string> fields = kIntegerFields;
    fields.insert(kTextFields.begin(), kTextFields.end());
    return Refuse(fmt::format("unknown field '{}': a kernel's fields are {}", field, Names(fields)));
  }
  KernelDesign design = kernel->design;
  if (const std::string rule = SetField(&design, field, value); !rule.empty()) {
    return Refuse(rule);
  }
  if (design == kernel->design) {
    return Refuse(fmt::format("the move changes nothing: {}.{} is already {}", name, field, value.dump()));
  }
  if (!DesignFits(*kernel, design)) {
    return Refuse(fmt::format("DesignFits: {} {} = {} is not a legal design for this kernel ({})", name,
                              field, value.dump(), DesignRule(*kernel)));
  }
  if (!WorthMeasuring(*kernel, design)) {
    return Refuse(
        fmt::format("WorthMeasuring: {} {} = {} does not fit one program's registers or shared memory "
                    "with num_warps {}",
                    name, field, value.dump(), design.num_warps));
  }
  CandidateDesign moved = incumbent.design;
  moved.kernels[name] = design;
  return {DesignMove{moved, fmt::format("llm: {} {} {}", name, field, value.dump()), description}, ""};
}

Json DesignRecordJson(const Candidate& incumbent) {
  Json kernels = Json::array();
  for (const KernelReport& kernel : incumbent.kernels) {
    kernels.push_back(Json{{"name", kernel.name},
                           {"kind", kernel.kind},
                           {"ops", kernel.ops},
                           {"design", kernel.design.ToJson()}});
  }
  return Json{{"kernels", kernels},
              {"plan",
               {{"fuse_reductions", incumbent.design.plan.fuse_reductions},
                {"fuse_epilogues", incumbent.design.plan.fuse_epilogues},
                {"cuda_graph", incumbent.design.plan.cuda_graph},
                {"fuse_attention", incumbent.design.plan.fuse_attention},
                {"concat_in_place", incumbent.design.plan.concat_in_place},
                {"fold_summed_products", incumbent.design.plan.fold_summed_products},
                {"reduce_in_products", incumbent.design.plan.reduce_in_products}}},
              {"pytorch_ops", incumbent.pytorch_ops}};
}

}  // namespace egg::expert
