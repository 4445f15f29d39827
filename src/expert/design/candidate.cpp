#include "expert/design/candidate.h"

namespace egg::expert {

Json Candidate::ReportJson() const {
  Json kernels_json = Json::array();
  for (const KernelReport& kernel : kernels) {
    kernels_json.push_back(Json{{"name", kernel.name},
                                {"kind", kernel.kind},
                                {"ops", kernel.ops},
                                {"design", kernel.design.ToJson()},
                                {"fusion", kernel.reasons}});
  }
  return Json{{"kernels", kernels_json},
              {"pytorch_ops", pytorch_ops},
              {"planner_notes", plan.notes},
              {"design", design.ToJson()}};
}
}  // namespace egg::expert
