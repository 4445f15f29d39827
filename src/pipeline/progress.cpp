#include "pipeline/progress.h"

namespace egg::pipeline {

std::string ProgressKindName(ProgressKind kind) {
  switch (kind) {
    case ProgressKind::kCapture:
      return "capture";
    case ProgressKind::kCaptured:
      return "captured";
    case ProgressKind::kStage:
      return "stage";
    case ProgressKind::kPlan:
      return "plan";
    case ProgressKind::kProfile:
      return "profile";
    case ProgressKind::kScreen:
      return "screen";
    case ProgressKind::kScreened:
      return "screened";
    case ProgressKind::kEvaluate:
      return "evaluate";
    case ProgressKind::kEvaluated:
      return "evaluated";
    case ProgressKind::kDecided:
      return "decided";
    case ProgressKind::kStageDone:
      return "stage-done";
    case ProgressKind::kFinal:
      return "final";
    case ProgressKind::kDone:
      return "done";
  }
  return "event";
}

}  // namespace egg::pipeline
