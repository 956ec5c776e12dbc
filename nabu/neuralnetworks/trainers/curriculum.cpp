#include "nabu/neuralnetworks/trainers/curriculum.h"

#include <cmath>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include "nabu/core/error.h"
#include "nabu/core/experiment_layout.h"
#include "nabu/core/fs.h"
#include "nabu/core/training_summary.h"
#include "nabu/neuralnetworks/trainers/checkpoint.h"
#include "nabu/neuralnetworks/trainers/trainer.h"

namespace nabu {

namespace {

// <stage>/trainer.cfg with the per-segment values replaced by this stage's, and
// <stage>/database.cfg with every store_dir pointing at the stage's stores (docs/trainer.md).
void write_stage_configs(const Recipe& recipe, const TrainerOptions& options,
                         const StageSettings& stage, const fs::path& stage_dir) {
  ConfigFile trainer = recipe.get("trainer.cfg");
  auto& section = trainer.section("trainer");
  Origin origin{"stage " + stage.segment_length, 0};
  section.set("batch_size", std::to_string(stage.batch_size), origin);
  section.set("numbatches_to_aggregate",
              std::to_string(options.data.numbatches_to_aggregate.at(stage.index)), origin);
  section.set("initial_learning_rate", fmt::format("{}", stage.initial_learning_rate), origin);
  section.set("learning_rate_decay", fmt::format("{}", stage.learning_rate_decay), origin);
  trainer.save(StageLayout{stage_dir}.trainer_cfg());
  ConfigFile database = recipe.get("database.conf");
  for (auto section_name : database.section_names()) {
    auto& db_section = database.section(section_name);
    if (db_section.has("store_dir"))
      db_section.set("store_dir",
                     (fs::path(db_section.get_string("store_dir")) / stage.segment_length).string(),
                     origin);
  }
  database.save(StageLayout{stage_dir}.database_cfg());
}

nlohmann::json read_val_sum(const fs::path& path) {
  if (!fs::exists(path)) return nlohmann::json::object();
  try {
    return nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception&) {
    return nlohmann::json::object();  // rewritten after the next stage
  }
}

// What stage i starts from without a checkpoint of its own: the first, trainer.cfg's init_file
// (if set); a later one, the stage before's model; empty: a fresh initialisation.
fs::path stage_init(const Recipe& recipe, const TrainerOptions& options,
                    const ExperimentLayout& experiment, const std::vector<StageSettings>& stages,
                    std::size_t i) {
  if (i == 0 && !options.init_file.empty()) {
    if (!fs::exists(options.init_file))
      throw ConfigError(recipe.get("trainer.cfg").section("trainer").where("init_file") + ": '" +
                        options.init_file + "' does not exist");
    return options.init_file;
  }
  if (i == 0) return {};
  fs::path previous = experiment.stage(stages[i - 1].segment_length).model();
  return fs::exists(previous) ? previous : fs::path();
}

}  // namespace

void run_curriculum(const Recipe& recipe, const fs::path& expdir,
                    const CurriculumSettings& settings, Communicator& communicator) {
  const TrainerOptions options = read_trainer_options(recipe.get("trainer.cfg"));
  const auto stages = resolve_stages(options, settings.max_steps);
  const bool chief = communicator.is_chief();
  const ExperimentLayout experiment{expdir};
  nlohmann::json val_sum =
      settings.resume ? read_val_sum(experiment.val_sum()) : nlohmann::json::object();
  // A skipped stage keeps what it handed back when it was trained.
  const TrainingSummary earlier =
      settings.resume ? read_training_summary(expdir) : TrainingSummary{};
  TrainingSummary summary;
  summary.final_model = experiment.final_model().string();
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const StageSettings& stage = stages[i];
    const StageLayout layout = experiment.stage(stage.segment_length);
    const fs::path& stage_dir = layout.dir;
    if (chief) {
      ensure_directory(stage_dir);
      write_stage_configs(recipe, options, stage, stage_dir);
    }
    // Every rank decides on skipping, resuming and initialising from the same files.
    communicator.barrier();
    auto checkpoint = resumable_checkpoint(layout);
    bool has_checkpoint = checkpoint.has_value();
    if (stage.segment_length != "full" && fs::exists(layout.model()) &&
        has_checkpoint && load_checkpoint(*checkpoint, {}).finished) {
      if (chief)
        logger().info("[{}] stage already trained ({}), skipped", stage.segment_length,
                     layout.model().string());
      // An experiment trained before training_summary.json existed: the stage's step unknown.
      StageOutcome skipped;
      skipped.stage = stage.segment_length;
      for (const auto& outcome : earlier.stages)
        if (outcome.stage == stage.segment_length) skipped = outcome;
      summary.stages.push_back(skipped);
      continue;
    }
    const fs::path init =
        has_checkpoint ? fs::path() : stage_init(recipe, options, experiment, stages, i);
    RunSettings run;
    run.seed = settings.seed + i;
    run.resume = settings.resume || has_checkpoint;
    run.device = settings.device;
    run.stop = settings.stop;
    // Each stage starts from the same seed, so a resumed run rebuilds the same models.
    torch::manual_seed(run.seed);
    StageContext context{recipe, options, stage, stage_dir, init, communicator, run};
    auto trainer = trainer_registry().create(options.trainer, context);
    StageResult result = trainer->run();
    summary.stages.push_back(result.outcome);
    if (result.validated) {
      if (options.optimizer.validate_per_task) {
        nlohmann::json per_task;
        for (const auto& [task, value] : result.best_per_task)
          per_task[task] = std::round(value * 1e5) / 1e5;
        val_sum[stage.segment_length] = per_task;
      } else {
        val_sum[stage.segment_length] = std::round(result.best_validation * 1e5) / 1e5;
      }
    }
    if (chief) {
      write_file_atomic(experiment.val_sum(), val_sum.dump(2) + "\n");
      write_training_summary(expdir, summary);
    }
  }
  if (!chief) return;
  logger().info("training done; the final model is {}", experiment.final_model().string());
  // Repeated at the end, where a user looks (the stages' lines may have scrolled away); nabu
  // test and nabu separate --expdir repeat them from training_summary.json.
  for (const auto& warning : summary.warnings()) logger().warn("{}", warning);
}

}  // namespace nabu
