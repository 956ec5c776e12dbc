#include "nabu/cli/commands/training_run.h"

#include <csignal>
#include <cmath>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/logging.h"
#include "nabu/core/recipe.h"
#include "nabu/distributed/communicator.h"
#include "nabu/distributed/process_group.h"
#include "nabu/neuralnetworks/trainers/multi_task_trainer.h"
#include "nabu/neuralnetworks/trainers/trainer_options.h"
#include "nabu/processing/database_section.h"

namespace nabu::cli {

namespace {

void on_interrupt(int) { interrupt_requested = 1; }

// <stage>/trainer.cfg: per-segment values replaced by this stage's (SPEC §2.b).
void write_stage_configs(const Recipe& recipe, const TrainerOptions& options,
                         const StageSettings& stage, const fs::path& stage_dir) {
  ConfigFile trainer = recipe.get("trainer.cfg");
  auto& section = trainer.section("trainer");
  Origin origin{"stage " + stage.segment_length, 0};
  section.set("batch_size", std::to_string(stage.batch_size), origin);
  section.set("numbatches_to_aggregate",
              std::to_string(options.numbatches_to_aggregate.at(stage.index)), origin);
  section.set("initial_learning_rate", fmt::format("{}", stage.initial_learning_rate), origin);
  section.set("learning_rate_decay", fmt::format("{}", stage.learning_rate_decay), origin);
  trainer.save(stage_dir / "trainer.cfg");
  ConfigFile database = recipe.get("database.conf");
  for (auto section_name : database.section_names()) {
    auto& db_section = database.section(section_name);
    if (db_section.has("store_dir"))
      db_section.set("store_dir",
                     (fs::path(db_section.get_string("store_dir")) / stage.segment_length).string(),
                     origin);
  }
  database.save(stage_dir / "database.cfg");
}

bool has_training(const fs::path& expdir) {
  std::error_code ec;
  if (fs::exists(expdir / "val_sum.json", ec)) return true;
  if (!fs::is_directory(expdir, ec)) return false;
  for (const auto& entry : fs::directory_iterator(expdir, ec))
    if (entry.is_directory() && fs::exists(entry.path() / "logdir")) return true;
  return false;
}

// What a resumed run must repeat to continue the same experiment (the data order follows the
// seed), recorded at the start in <expdir>/train_options.json.
void record_run_options(const fs::path& expdir, const TrainingRunOptions& run) {
  nlohmann::json record = {{"seed", run.common.seed},
                           {"max_steps", run.max_steps},
                           {"deterministic", run.deterministic}};
  write_file_atomic(expdir / "train_options.json", record.dump(2) + "\n");
}

TrainingRunOptions recorded_run_options(const fs::path& expdir, TrainingRunOptions run) {
  fs::path path = expdir / "train_options.json";
  if (!fs::exists(path)) return run;
  try {
    auto record = nlohmann::json::parse(read_file(path));
    run.common.seed = record.at("seed").get<std::uint64_t>();
    run.max_steps = record.at("max_steps").get<std::vector<int64_t>>();
    run.deterministic = record.at("deterministic").get<bool>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(path.string() + ": unreadable (" + std::string(e.what()) + ")");
  }
  return run;
}

}  // namespace

std::vector<int64_t> parse_max_steps(const std::string& text) {
  std::vector<int64_t> values;
  for (const auto& field : split(text, ',')) {
    auto value = parse_int(trim(field));
    if (!value || *value < -1)
      throw Error("--max-steps='" + text + "': expected N or N1,N2,... (integers, -1 = no limit)");
    values.push_back(*value);
  }
  if (values.empty()) throw Error("--max-steps is empty");
  return values;
}

int run_training(const TrainingRunOptions& requested) {
  const fs::path requested_expdir = requested.common.expdir;
  const TrainingRunOptions run =
      requested.resume ? recorded_run_options(requested_expdir, requested) : requested;
  const auto& common = run.common;
  if (run.resume) torch::manual_seed(common.seed);
  fs::path expdir = common.expdir;
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  // warn_only: LibTorch flags a few ops (max_unpool2d of encoder_decoder_cnn) as nondeterministic
  // for CUDA's sake; their CPU kernels write each output once, so they stay reproducible here.
  if (run.deterministic) torch::globalContext().setDeterministicAlgorithms(true, true);
  // World size 1 without the torchrun variables: a LocalCommunicator, nothing changes.
  auto environment = DistributedEnvironment::from_environment();
  const bool chief = environment.rank == 0;

  Recipe recipe;
  if (run.resume) {
    if (!fs::exists(expdir / "trainer.cfg"))
      throw Error(expdir.string() + " holds no experiment to resume (no trainer.cfg copy); start "
                  "it without --resume");
    if (!common.sets.empty())
      throw Error("--set cannot change a resumed experiment; edit nothing and resume, or start a "
                  "new --expdir");
    recipe = Recipe::load(expdir);
    if (chief) log_to_file(expdir / "run.log");
    spdlog::info("resuming the experiment in {} (seed {}, max steps {}{})", expdir.string(),
                 common.seed, fmt::join(run.max_steps, ","), run.deterministic ? ", deterministic" : "");
  } else if (!chief) {
    // The chief prepares the experiment directory; the others read the recipe as given.
    recipe = Recipe::load(common.recipe, common.overrides());
  } else {
    if (has_training(expdir)) {
      if (!run.overwrite)
        throw Error(expdir.string() + " already holds a training; continue it with --resume, "
                    "start over with --overwrite, or pick another --expdir");
      std::error_code ec;
      for (const auto& entry : fs::directory_iterator(expdir, ec))
        if (entry.is_directory() && fs::exists(entry.path() / "logdir")) fs::remove_all(entry.path());
      fs::remove(expdir / "val_sum.json", ec);
    }
    recipe = Recipe::load(common.recipe, common.overrides());
    ensure_directory(expdir);
    log_to_file(expdir / "run.log");
    recipe.save_copy(expdir);
    std::string overrides;
    for (const auto& spec : common.sets) overrides += spec + "\n";
    write_file_atomic(expdir / "overrides.txt", overrides);
    record_run_options(expdir, run);
    spdlog::info("training recipe {} in {}{}", common.recipe, expdir.string(),
                 common.sets.empty() ? "" : " with overrides: " + join(common.sets, " "));
  }
  for (const auto& warning : recipe.warnings()) spdlog::warn("{}", warning);
  TrainerOptions options = read_trainer_options(recipe.get("trainer.cfg"));
  spdlog::info("threads: {}, seed: {}{}", torch::get_num_threads(), common.seed,
               run.deterministic ? ", deterministic" : "");

  auto communicator_owner =
      make_communicator(environment, std::chrono::seconds(run.dist_timeout_seconds));
  Communicator& communicator = *communicator_owner;
  if (environment.distributed())
    spdlog::info("distributed: rank {} of {} (rendezvous {}:{})", environment.rank,
                 environment.world_size, environment.master_addr, environment.master_port);
  nlohmann::json val_sum = nlohmann::json::object();
  if (run.resume && fs::exists(expdir / "val_sum.json")) {
    try {
      val_sum = nlohmann::json::parse(read_file(expdir / "val_sum.json"));
    } catch (const nlohmann::json::exception&) {
      val_sum = nlohmann::json::object();  // rewritten below
    }
  }
  for (std::size_t i = 0; i < options.num_stages(); ++i) {
    StageSettings stage = options.stage(i);
    fs::path stage_dir = expdir / stage.segment_length;
    if (chief) {
      ensure_directory(stage_dir);
      write_stage_configs(recipe, options, stage, stage_dir);
    }
    // Every rank decides on skipping, resuming and initialising from the same files.
    communicator.barrier();
    bool has_checkpoint = fs::exists(stage_dir / "logdir" / "latest.pt");
    if (stage.segment_length != "full" && fs::exists(stage_dir / "model" / "model.pt") &&
        has_checkpoint && load_checkpoint(stage_dir / "logdir" / "latest.pt", {}).finished) {
      spdlog::info("[{}] stage already trained ({}), skipped", stage.segment_length,
                   (stage_dir / "model" / "model.pt").string());
      continue;
    }
    fs::path init;
    if (!has_checkpoint) {
      if (i == 0 && !options.init_file.empty()) {
        init = options.init_file;
        if (!fs::exists(init))
          throw ConfigError(recipe.get("trainer.cfg").section("trainer").where("init_file") +
                            ": '" + options.init_file + "' does not exist");
      } else if (i > 0) {
        fs::path previous = expdir / options.stage(i - 1).segment_length / "model" / "model.pt";
        if (fs::exists(previous)) init = previous;
      }
    }
    RunSettings settings;
    settings.seed = common.seed + i;
    settings.resume = run.resume || has_checkpoint;
    settings.max_steps = run.max_steps_of_stage(i);
    // Each stage starts from the same seed, so a resumed run rebuilds the same models.
    torch::manual_seed(settings.seed);
    MultiTaskTrainer trainer(recipe, options, stage, stage_dir, init, communicator, settings);
    StageResult result = trainer.run();
    if (result.validated) {
      if (options.acc_steps) {
        nlohmann::json per_task;
        for (const auto& [task, value] : result.best_per_task)
          per_task[task] = std::round(value * 1e5) / 1e5;
        val_sum[stage.segment_length] = per_task;
      } else {
        val_sum[stage.segment_length] = std::round(result.best_validation * 1e5) / 1e5;
      }
    }
    if (chief) write_file_atomic(expdir / "val_sum.json", val_sum.dump(2) + "\n");
  }
  spdlog::info("training done; the final model is {}", (expdir / "full" / "model" / "model.pt").string());
  return 0;
}

}  // namespace nabu::cli
