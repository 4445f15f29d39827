#include "expert/design/design_record.h"

#include <fmt/format.h>

#include "expert/families/family.h"
#include "harness/eval_types.h"

namespace egg::expert {

Json KernelDesign::ToJson() const {
  Json json = {
      {"algorithm", NameOf(algorithm)}, {"xblock", xblock},        {"rblock", rblock}, {"split", split},
      {"num_warps", num_warps},         {"num_stages", num_stages}};
  if (yblock != 0) {
    json["yblock"] = yblock;
  }
  if (precision != Precision::kUnset) {
    json["precision"] = NameOf(precision);
  }
  return json;
}

KernelDesign KernelDesign::FromJson(const Json& json) {
  KernelDesign design;
  design.algorithm = ParseName<Algorithm>(json.value("algorithm", ""), "algorithm");
  design.xblock = json.value("xblock", int64_t{0});
  design.rblock = json.value("rblock", int64_t{0});
  design.split = json.value("split", int64_t{0});
  design.num_warps = json.value("num_warps", 4);
  design.num_stages = json.value("num_stages", 1);
  design.yblock = json.value("yblock", int64_t{0});
  design.precision = ParseName<Precision>(json.value("precision", ""), "precision");
  return design;
}

Json PlanOptions::ToJson() const {
  Json json{{"fuse_reductions", fuse_reductions}, {"fuse_epilogues", fuse_epilogues}};
  if (cuda_graph) {
    json["cuda_graph"] = true;
  }
  if (!fuse_attention) {
    json["fuse_attention"] = false;
  }
  if (!concat_in_place) {
    json["concat_in_place"] = false;
  }
  if (!fold_summed_products) {
    json["fold_summed_products"] = false;
  }
  if (!reduce_in_products) {
    json["reduce_in_products"] = false;
  }
  if (!families.empty()) {
    json["families"] = families;
  }
  return json;
}

PlanOptions PlanOptions::FromJson(const Json& json) {
  PlanOptions options;
  options.fuse_reductions = json.value("fuse_reductions", true);
  options.fuse_epilogues = json.value("fuse_epilogues", true);
  options.cuda_graph = json.value("cuda_graph", false);
  options.fuse_attention = json.value("fuse_attention", true);
  options.concat_in_place = json.value("concat_in_place", true);
  options.fold_summed_products = json.value("fold_summed_products", true);
  options.reduce_in_products = json.value("reduce_in_products", true);
  options.families = json.value("families", std::vector<std::string>{});
  for (const std::string& name : options.families) {
    FamilyNamed(name);  // UnknownName for a family that is not registered
  }
  return options;
}

Json CandidateDesign::ToJson() const {
  Json kernels_json = Json::object();
  for (const auto& [name, design] : kernels) {
    kernels_json[name] = design.ToJson();
  }
  Json json = {{"seed", seed}, {"plan", plan.ToJson()}, {"kernels", kernels_json}};
  if (precision != Precision::kUnset) {
    json["precision"] = NameOf(precision);
  }
  Json ranges = Json::array();
  for (const DynamicRange& range : dynamic) {
    ranges.push_back({{"dim", range.dim == 0 ? std::string("batch") : fmt::format("dim{}", range.dim)},
                      {"min", range.min},
                      {"max", range.max}});
  }
  if (ranges.size() == 1) {
    json["dynamic"] = ranges[0];
  } else if (!ranges.empty()) {
    json["dynamic"] = {{"dims", ranges}};
  }
  if (dtype != "fp32") {
    json["dtype"] = dtype;
  }
  return json;
}

CandidateDesign CandidateDesign::FromJson(const Json& json) {
  CandidateDesign design;
  design.seed = json.value("seed", 0);
  design.plan = PlanOptions::FromJson(json.value("plan", Json::object()));
  design.precision = ParseName<Precision>(json.value("precision", ""), "precision");
  design.dtype = json.value("dtype", "fp32");
  if (json.contains("dynamic")) {
    const Json& dynamic = json.at("dynamic");
    for (const Json& range : dynamic.contains("dims") ? dynamic.at("dims") : Json::array({dynamic})) {
      const std::string dim = range.value("dim", "batch");
      const std::optional<int> parsed = harness::ParseDynamicDim(dim);
      if (!parsed) {
        throw UnknownName(fmt::format("unknown dynamic dimension '{}' (batch or dimN)", dim));
      }
      design.dynamic.push_back({*parsed, range.at("min").get<int64_t>(), range.at("max").get<int64_t>()});
    }
  }
  const Json kernels = json.value("kernels", Json::object());
  for (const auto& [name, kernel] : kernels.items()) {
    design.kernels[name] = KernelDesign::FromJson(kernel);
  }
  return design;
}

}  // namespace egg::expert
