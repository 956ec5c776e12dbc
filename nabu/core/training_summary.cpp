#include "nabu/core/training_summary.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "nabu/core/error.h"
#include "nabu/core/experiment_layout.h"
#include "nabu/core/fs.h"

namespace nabu {

namespace {

// Whether every stage returned what it started from (so the last model is the first start).
bool every_stage_returned_its_start(const std::vector<StageOutcome>& stages) {
  if (stages.empty()) return false;
  for (const auto& stage : stages)
    if (!stage.returned_its_start()) return false;
  return true;
}

}  // namespace

bool TrainingSummary::final_model_untrained() const {
  return every_stage_returned_its_start(stages) && stages.front().fresh_start;
}

std::string stage_warning(const StageOutcome& outcome) {
  if (!outcome.returned_its_start()) return "";
  return fmt::format(
      "stage {}: validation never improved on the model the stage started from ({}) in {} "
      "validation(s): its model is that of step 0, and its {} update(s) were discarded",
      outcome.stage, outcome.started_from, outcome.validations, outcome.steps);
}

std::vector<std::string> TrainingSummary::warnings() const {
  std::vector<std::string> out;
  for (const auto& stage : stages)
    if (auto line = stage_warning(stage); !line.empty()) out.push_back(line);
  if (final_model_untrained())
    out.push_back("the final model " + final_model +
                  " is UNTRAINED: no stage's validation improved on a fresh initialisation "
                  "(docs/own_data.md, \"What can go wrong\": more speakers, a lower learning "
                  "rate, more validation mixtures)");
  else if (every_stage_returned_its_start(stages))
    out.push_back("the final model " + final_model + " is unchanged from " +
                  stages.front().started_from + ": no stage's validation improved on it");
  return out;
}

std::vector<std::string> TrainingSummary::final_model_warnings() const {
  if (stages.empty() || !stages.back().returned_its_start()) return {};
  if (every_stage_returned_its_start(stages)) return {warnings().back()};
  return {stage_warning(stages.back())};
}

TrainingSummary read_training_summary(const std::filesystem::path& expdir) {
  const auto path = ExperimentLayout{expdir}.training_summary();
  TrainingSummary summary;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return summary;
  try {
    const auto json = nlohmann::json::parse(read_file(path));
    summary.final_model = json.value("final_model", "");
    for (const auto& entry : json.at("stages")) {
      StageOutcome stage;
      stage.stage = entry.at("stage").get<std::string>();
      stage.steps = entry.at("steps").get<int64_t>();
      stage.best_step = entry.at("best_step").get<int64_t>();
      stage.validations = entry.at("validations").get<int64_t>();
      stage.started_from = entry.at("started_from").get<std::string>();
      stage.fresh_start = entry.at("fresh_start").get<bool>();
      summary.stages.push_back(stage);
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(path.string() + ": unreadable (" + std::string(e.what()) + ")");
  }
  return summary;
}

void write_training_summary(const std::filesystem::path& expdir, const TrainingSummary& summary) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& stage : summary.stages)
    stages.push_back({{"stage", stage.stage},
                      {"steps", stage.steps},
                      {"best_step", stage.best_step},
                      {"validations", stage.validations},
                      {"started_from", stage.started_from},
                      {"fresh_start", stage.fresh_start},
                      {"returned_its_start", stage.returned_its_start()}});
  nlohmann::json json = {{"final_model", summary.final_model},
                         {"final_model_untrained", summary.final_model_untrained()},
                         {"stages", stages},
                         {"warnings", summary.warnings()}};
  write_file_atomic(ExperimentLayout{expdir}.training_summary(), json.dump(2) + "\n");
}

}  // namespace nabu
