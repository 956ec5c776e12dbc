// The progress line a stage prints (neuralnetworks/trainers/progress.h): it counts and estimates
// up to the steps the run really takes, a max_steps cap included, not the epochs' total.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <functional>
#include <sstream>

#include "nabu/core/logging.h"
#include "nabu/neuralnetworks/trainers/progress.h"
#include "test_helpers.h"

using namespace nabu;
using namespace nabu::testing;

namespace {

// The lines Nabu's logger prints at level info while `action` runs.
std::string logged(const std::function<void()>& action) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  sink->set_pattern("%v");
  auto& sinks = nabu::logger().sinks();
  const auto level = nabu::logger().level();
  nabu::logger().set_level(spdlog::level::info);
  sinks.push_back(sink);
  action();
  sinks.pop_back();
  nabu::logger().set_level(level);
  return out.str();
}

TrainingProgress::Step step_number(int64_t step) {
  TrainingProgress::Step report;
  report.step = step;
  report.loss = 1.5;
  report.seconds = 0.1;
  report.examples = 4;
  return report;
}

}  // namespace

TEST(TrainingProgress, CountsUpToTheMaxStepsCapNotTheEpochTotal) {
  TempDir dir;
  // 100 epochs would be 73118 updates; --max-steps=3 stops the stage after 3 (the limit).
  TrainingProgress progress("100", dir / "metrics.jsonl");
  progress.start(0, 3);
  std::string lines = logged([&] {
    for (int64_t step = 1; step <= 3; ++step) progress.step(step_number(step), /*line=*/true);
  });
  EXPECT_NE(lines.find("[100] step 1/3 "), std::string::npos) << lines;
  EXPECT_NE(lines.find("[100] step 3/3 "), std::string::npos) << lines;
  EXPECT_EQ(lines.find("73118"), std::string::npos) << lines;
  EXPECT_NE(lines.find("ETA 0s"), std::string::npos) << lines;  // at the last step

  // Resumed at step 10 of an uncapped stage of 20: the ETA is for the 10 steps left.
  TrainingProgress uncapped("full", dir / "metrics_full.jsonl");
  uncapped.start(10, 20);
  lines = logged([&] { uncapped.step(step_number(11), /*line=*/true); });
  EXPECT_NE(lines.find("[full] step 11/20 "), std::string::npos) << lines;
}

// The experiment's log is written line by line, not in 8 KiB blocks: a training's progress is in
// run.log as it is printed (`tail -f`), and a process killed by SIGKILL leaves its last lines.
TEST(RunLog, EachLineIsInTheFileAsItIsLogged) {
  TempDir dir;
  auto& logger = nabu::logger();
  const auto sinks = logger.sinks();
  log_to_file(dir / "run.log");
  logger.warn("the first line");
  std::string first = read_text(dir / "run.log");
  logger.warn("the second line");
  std::string second = read_text(dir / "run.log");
  logger.sinks() = sinks;  // the test binary's console logger again
  logger.flush_on(spdlog::level::off);
  EXPECT_NE(first.find("[warning] the first line"), std::string::npos) << first;
  EXPECT_NE(second.find("the second line"), std::string::npos) << second;
}
