#include "cli/progress_renderer.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace egg::cli {
namespace {

using pipeline::ProgressEvent;
using pipeline::ProgressKind;

constexpr size_t kDefaultWidth = 100;
constexpr size_t kReasonChars = 100;

std::string Ms(const std::optional<double>& ms) { return ms ? fmt::format("{:.4g} ms", *ms) : "-"; }

std::string Round(const ProgressEvent& event) { return fmt::format("round {}", event.round + 1); }

// At most `limit` bytes, cut on a UTF-8 character boundary.
std::string Cut(std::string text, size_t limit) {
  if (text.size() <= limit) {
    return text;
  }
  size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) {
    --cut;
  }
  text.resize(cut);
  return text;
}

std::string PlanText(const ProgressEvent& event) {
  if (event.total > 0) {
    return fmt::format("{} seeds", event.total);
  }
  return Round(event) + ": asking for proposals";
}

std::string ScreenedText(const ProgressEvent& event) {
  std::string text = fmt::format("{} of {} passed", event.done, event.total);
  if (event.median_ms) {
    text += ", fastest " + Ms(event.median_ms) + " (short timing)";
  }
  return text;
}

std::string DecidedText(const ProgressEvent& event) {
  return fmt::format("{} {}: {}", event.candidate_id, event.accepted ? "accepted" : "rejected",
                     Cut(event.detail, kReasonChars));
}

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

size_t TerminalWidth() {
  winsize size{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    return size.ws_col;
  }
  return kDefaultWidth;
}

}  // namespace

std::string DescribeBest(const std::optional<pipeline::ProgressBest>& best) {
  if (!best) {
    return "no correct kernel yet";
  }
  if (!best->median_ms) {
    return "best " + best->candidate_id + " (untimed)";
  }
  std::string text = "best " + Ms(best->median_ms);
  if (best->speedup_vs_eager) {
    text += fmt::format(", {:.2f}x eager", *best->speedup_vs_eager);
  }
  if (best->speedup_vs_compile) {
    text += fmt::format(", {:.2f}x torch.compile", *best->speedup_vs_compile);
  }
  return text;
}

ProgressRenderer::ProgressRenderer(Mode mode, Writer write, Clock clock, size_t width, bool timed)
    : mode_(mode), write_(std::move(write)), clock_(std::move(clock)), width_(width), timed_(timed) {
  if (!clock_) {
    clock_ = SteadySeconds;
  }
  started_s_ = clock_();
}

std::string ProgressRenderer::Describe(const ProgressEvent& event) {
  switch (event.kind) {
    case ProgressKind::kCapture:
      return "capturing the forward of " + event.detail;
    case ProgressKind::kCaptured:
      return fmt::format("{} ops", event.total);
    case ProgressKind::kStage:
      return "started";
    case ProgressKind::kPlan:
      return PlanText(event);
    case ProgressKind::kProfile:
      return fmt::format("{}: Nsight Compute on {}", Round(event), event.candidate_id);
    case ProgressKind::kScreen:
      return fmt::format("compiling and checking {} candidates in one screening", event.total);
    case ProgressKind::kScreened:
      return ScreenedText(event);
    case ProgressKind::kEvaluate: {
      const char* baselines = evaluated_before_ ? "" : "; this first one also times eager and torch.compile";
      evaluated_before_ = true;
      if (!timed_) {
        return fmt::format("{} ({}): correctness trials (nothing timed without a GPU)", event.candidate_id,
                           event.detail);
      }
      return fmt::format("{} ({}): correctness trials, then the full timing{}", event.candidate_id,
                         event.detail, baselines);
    }
    case ProgressKind::kEvaluated:
      return fmt::format("{} {}, median {}", event.candidate_id, event.detail, Ms(event.median_ms));
    case ProgressKind::kDecided:
      return DecidedText(event);
    case ProgressKind::kStageDone:
      return Cut(event.detail, kReasonChars);
    case ProgressKind::kFinal:
      return fmt::format("{}: {}", event.candidate_id, event.detail);
    case ProgressKind::kDone:
      return event.accepted ? "a verified kernel (" + event.detail + ")"
                            : "no verified kernel (" + event.detail + ")";
  }
  return "";
}

std::string ProgressRenderer::Times(const ProgressEvent& event) const {
  std::string text = fmt::format("{:.1f} s", clock_() - started_s_);
  if (!event.search_elapsed_s) {
    return text;
  }
  const double search_s = *event.search_elapsed_s;
  if (event.budget_s > 0) {
    const double left_s = event.budget_s > search_s ? event.budget_s - search_s : 0;
    return text + fmt::format(", search {:.1f} of {:g} s, {:.1f} s left", search_s, event.budget_s, left_s);
  }
  return text + fmt::format(", search {:.1f} s", search_s);
}

std::string ProgressRenderer::Fit(std::string line) const {
  return width_ > 1 ? Cut(std::move(line), width_ - 1) : line;
}

void ProgressRenderer::OnProgress(const ProgressEvent& event) {
  const std::string where = event.stage.empty() ? "" : " " + event.stage;
  const std::string text = pipeline::ProgressKindName(event.kind) + where + ": " + Describe(event);
  const bool show_best = event.kind == ProgressKind::kStage || event.kind == ProgressKind::kDone ||
                         (event.kind == ProgressKind::kDecided && event.accepted);
  if (mode_ == Mode::kLines) {
    write_("egg: " + text + (show_best ? " | " + DescribeBest(event.best) : "") + " [" + Times(event) +
           "]\n");
    return;
  }
  write_("\r" + Fit("egg [" + Times(event) + " | " + DescribeBest(event.best) + "] " + text) + "\x1b[K");
  line_open_ = true;
  if (event.kind == ProgressKind::kDone) {
    Finish();
  }
}

void ProgressRenderer::Finish() {
  if (line_open_) {
    write_("\n");
    line_open_ = false;
  }
}

std::unique_ptr<ProgressRenderer> MakeStderrProgress(bool quiet, bool timed) {
  if (quiet) {
    return nullptr;
  }
  const bool terminal = isatty(STDERR_FILENO) != 0;
  auto write = [](const std::string& text) {
    std::fputs(text.c_str(), stderr);
    std::fflush(stderr);
  };
  return std::make_unique<ProgressRenderer>(
      terminal ? ProgressRenderer::Mode::kTerminal : ProgressRenderer::Mode::kLines, write, nullptr,
      terminal ? TerminalWidth() : 0, timed);
}

}  // namespace egg::cli
