#include "cli/progress_renderer.h"

#include <gtest/gtest.h>

namespace egg::cli {
namespace {

using pipeline::ProgressBest;
using pipeline::ProgressEvent;
using pipeline::ProgressKind;

struct Screen {
  std::string text;
  double now_s = 100;
  ProgressRenderer Renderer(ProgressRenderer::Mode mode, size_t width = 0, bool timed = true) {
    return ProgressRenderer(
        mode, [this](const std::string& line) { text += line; }, [this] { return now_s; }, width, timed);
  }
};

ProgressEvent Screened() {
  ProgressEvent event{.kind = ProgressKind::kScreened, .stage = "stage2.tiling", .done = 3, .total = 4};
  event.median_ms = 0.5;
  event.best = ProgressBest{"c1", 2.21, 1.29, 1.4};
  event.search_elapsed_s = 12.0;
  event.budget_s = 60;
  return event;
}

TEST(ProgressRendererTest, LinesModeWritesOneLinePerEventWithItsTimes) {
  Screen screen;
  ProgressRenderer renderer = screen.Renderer(ProgressRenderer::Mode::kLines);
  renderer.OnProgress({.kind = ProgressKind::kCapture, .detail = "task.py"});
  screen.now_s = 104.5;
  renderer.OnProgress(Screened());
  ProgressEvent done{.kind = ProgressKind::kDone, .accepted = true, .detail = "time_budget_used"};
  done.best = ProgressBest{"c1", 2.21, 1.29, 1.4};
  renderer.OnProgress(done);
  renderer.Finish();  // nothing open in lines mode
  EXPECT_EQ(
      screen.text,
      "egg: capture: capturing the forward of task.py [0.0 s]\n"
      "egg: screened stage2.tiling: 3 of 4 passed, fastest 0.5 ms (short timing) "
      "[4.5 s, search 12.0 of 60 s, 48.0 s left]\n"
      "egg: done: a verified kernel (time_budget_used) | best 2.21 ms, 1.29x eager, 1.40x torch.compile "
      "[4.5 s]\n");
}

TEST(ProgressRendererTest, TerminalModeRewritesOneLineCutToTheWidthAndEndsIt) {
  Screen screen;
  ProgressRenderer renderer = screen.Renderer(ProgressRenderer::Mode::kTerminal, 60);
  renderer.OnProgress(Screened());
  ASSERT_EQ(screen.text.front(), '\r');
  EXPECT_EQ(screen.text.find('\n'), std::string::npos) << "one line, rewritten in place";
  const std::string line = screen.text.substr(1, screen.text.size() - 1 - std::string("\x1b[K").size());
  EXPECT_EQ(line.size(), 59U) << line;
  EXPECT_EQ(line.rfind("egg [0.0 s, search 12.0 of 60 s, 48.0 s left | best 2.21 ms", 0), 0U) << line;
  EXPECT_TRUE(screen.text.ends_with("\x1b[K"));
  renderer.Finish();
  EXPECT_TRUE(screen.text.ends_with("\n"));
  renderer.Finish();
  EXPECT_FALSE(screen.text.ends_with("\n\n")) << "a closed line is not ended twice";
  renderer.OnProgress({.kind = ProgressKind::kDone, .detail = "completed"});
  EXPECT_TRUE(screen.text.ends_with("\x1b[K\n")) << "done ends the line";
  EXPECT_NE(screen.text.find("\regg [0.0 s | no correct kernel yet] done: no verified"), std::string::npos);
}

TEST(ProgressRendererTest, TheFirstEvaluationSaysItAlsoTimesTheBaselinesOnAGpu) {
  Screen gpu;
  ProgressRenderer renderer = gpu.Renderer(ProgressRenderer::Mode::kLines);
  const ProgressEvent evaluate{
      .kind = ProgressKind::kEvaluate, .stage = "stage1.seeds", .candidate_id = "c1", .detail = "code"};
  renderer.OnProgress(evaluate);
  renderer.OnProgress(evaluate);
  EXPECT_EQ(gpu.text.find("also times eager and torch.compile"), gpu.text.rfind("also times eager"));
  EXPECT_NE(gpu.text.find("also times eager and torch.compile"), std::string::npos);
  Screen cpu;
  ProgressRenderer untimed = cpu.Renderer(ProgressRenderer::Mode::kLines, 0, false);
  untimed.OnProgress(evaluate);
  EXPECT_NE(cpu.text.find("nothing timed without a GPU"), std::string::npos) << cpu.text;
}

TEST(ProgressRendererTest, BestSoFarNamesAnUntimedKernel) {
  EXPECT_EQ(DescribeBest(std::nullopt), "no correct kernel yet");
  EXPECT_EQ(DescribeBest(ProgressBest{"c9", std::nullopt, std::nullopt, std::nullopt}), "best c9 (untimed)");
  EXPECT_EQ(DescribeBest(ProgressBest{"c9", 1.5, 2.0, std::nullopt}), "best 1.5 ms, 2.00x eager");
}

}  // namespace
}  // namespace egg::cli
