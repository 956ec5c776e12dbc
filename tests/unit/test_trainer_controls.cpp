// trainer.cfg controls that observe a run: profile_steps (a Chrome trace and a phase table) and
// log_norms (per-model norms in metrics.jsonl, plotted by tools/plot_metrics).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "nabu/neuralnetworks/trainers/step_profile.h"
#include "test_helpers.h"
#include "training_fixture.h"

using namespace nabu;
using namespace nabu::testing;

namespace {

std::vector<nlohmann::json> train_records(const fs::path& metrics) {
  std::vector<nlohmann::json> records;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    auto record = nlohmann::json::parse(line);
    if (record["type"] == "train") records.push_back(record);
  }
  return records;
}

}  // namespace

TEST(StepProfile, ParsesARangeOfUpdates) {
  EXPECT_EQ(parse_profile_steps(""), (std::pair<int64_t, int64_t>{0, 0}));
  EXPECT_EQ(parse_profile_steps("3-7"), (std::pair<int64_t, int64_t>{3, 7}));
  EXPECT_EQ(parse_profile_steps("5"), (std::pair<int64_t, int64_t>{5, 5}));
  EXPECT_THROW(parse_profile_steps("7-3"), std::invalid_argument);
  EXPECT_THROW(parse_profile_steps("0-3"), std::invalid_argument);
  EXPECT_THROW(parse_profile_steps("a-b"), std::invalid_argument);
}

TEST_F(TrainingRun, ProfileStepsAndLogNorms) {
  auto result = train("exp_profile", "--max-steps=4 --set trainer.cfg:trainer:valid_frequency=2"
                                     " --set trainer.cfg:trainer:profile_steps=2-3"
                                     " --set trainer.cfg:trainer:log_norms=True");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const fs::path stage = dir_ / "exp_profile/100";
  // The trace: Chrome's traceEvents, with our phases among LibTorch's operators.
  auto trace = nlohmann::json::parse(read_text(stage / "profile/trace_2-3.json"));
  ASSERT_TRUE(trace["traceEvents"].is_array());
  std::set<std::string> names;
  for (const auto& event : trace["traceEvents"]) names.insert(event.value("name", ""));
  for (const std::string phase : {"nabu::forward", "nabu::backward", "nabu::optimizer"})
    EXPECT_TRUE(names.count(phase)) << phase;
  EXPECT_GT(names.size(), 10u);
  EXPECT_NE(result.output.find("profile of updates 2-3 (2 updates"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("backward"), std::string::npos);

  // Every update's phases and, with log_norms, the norms of both models.
  auto records = train_records(stage / "metrics.jsonl");
  ASSERT_EQ(records.size(), 4u);
  for (const auto& record : records) {
    ASSERT_TRUE(record.contains("phases")) << record.dump();
    EXPECT_GT(record["phases"]["forward"].get<double>(), 0.0);
    EXPECT_GT(record["phases"]["backward"].get<double>(), 0.0);
    for (const std::string model : {"main", "outlayer"}) {
      EXPECT_GT(record["norms"][model]["parameters"].get<double>(), 0.0) << model;
      EXPECT_GT(record["norms"][model]["gradients"].get<double>(), 0.0) << model;
    }
  }
  // Validation before update 3 (valid_frequency 2) is counted in that update's phases.
  EXPECT_GT(records[2]["phases"]["validation"].get<double>(), 0.0);
  EXPECT_EQ(records[1]["phases"]["validation"].get<double>(), 0.0);

  auto plotted = run_shell(source_dir().string() + "/tools/plot_metrics exp_profile --out curves.png",
                           dir_.path());
  EXPECT_EQ(plotted.exit_code, 0) << plotted.output;
  EXPECT_TRUE(fs::exists(dir_ / "curves.png"));

  auto bad = train("exp_profile_bad", "--set trainer.cfg:trainer:profile_steps=9-3");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("profile_steps: expected A-B"), std::string::npos) << bad.output;
}
