#include "nabu/neuralnetworks/trainers/training_run.h"

#include <algorithm>
#include <csignal>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "nabu/core/cpu_features.h"
#include "nabu/core/device.h"
#include "nabu/core/error.h"
#include "nabu/core/experiment_layout.h"
#include "nabu/core/fs.h"
#include "nabu/core/logging.h"
#include "nabu/core/recipe.h"
#include "nabu/core/strings.h"
#include "nabu/distributed/process_group.h"
#include "nabu/neuralnetworks/evaluators/evaluator.h"
#include "nabu/neuralnetworks/task_definition.h"
#include "nabu/neuralnetworks/trainers/curriculum.h"
#include "nabu/neuralnetworks/kernels/mixed_precision.h"
#include "nabu/neuralnetworks/trainers/trainer.h"
#include "nabu/processing/section_reader.h"

namespace nabu {

namespace {

// The stop request of the run in progress, for the signal handler (which can reach no other).
std::atomic<StopRequest*> signalled_run{nullptr};

void on_interrupt(int signal_number) {
  if (StopRequest* stop = signalled_run.load()) stop->request(signal_number);
}

// The signals reach `stop` while it lives.
struct SignalledRun {
  explicit SignalledRun(StopRequest& stop) { signalled_run.store(&stop); }
  ~SignalledRun() { signalled_run.store(nullptr); }
  SignalledRun(const SignalledRun&) = delete;
  SignalledRun& operator=(const SignalledRun&) = delete;
};

bool has_training(const fs::path& expdir) {
  std::error_code ec;
  if (fs::exists(ExperimentLayout{expdir}.val_sum(), ec)) return true;
  if (!fs::is_directory(expdir, ec)) return false;
  for (const auto& entry : fs::directory_iterator(expdir, ec))
    if (entry.is_directory() && fs::exists(StageLayout{entry.path()}.logdir())) return true;
  return false;
}

std::vector<ConfigOverride> parse_overrides(const std::vector<std::string>& sets) {
  std::vector<ConfigOverride> overrides;
  for (const auto& spec : sets) overrides.push_back(ConfigOverride::parse(spec));
  return overrides;
}

// What a resumed run must repeat to continue the same experiment (the data order follows the
// seed), recorded at the start in <expdir>/train_options.json.
void record_run_options(const fs::path& expdir, const TrainingRunOptions& run) {
  nlohmann::json record = {{"seed", run.seed},
                           {"max_steps", run.max_steps},
                           {"deterministic", run.deterministic}};
  write_file_atomic(ExperimentLayout{expdir}.train_options(), record.dump(2) + "\n");
}

TrainingRunOptions recorded_run_options(const fs::path& expdir, TrainingRunOptions run) {
  fs::path path = ExperimentLayout{expdir}.train_options();
  if (!fs::exists(path)) return run;
  try {
    auto record = nlohmann::json::parse(read_file(path));
    run.seed = record.at("seed").get<std::uint64_t>();
    run.max_steps = record.at("max_steps").get<std::vector<int64_t>>();
    run.deterministic = record.at("deterministic").get<bool>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(path.string() + ": unreadable (" + std::string(e.what()) + ")");
  }
  return run;
}

// The value each FILE:SECTION:KEY of `specs` sets: the last one given, as apply_overrides (and
// the original's ConfigParser) applies them.
std::map<std::string, std::string> effective_overrides(const std::vector<std::string>& specs) {
  std::map<std::string, std::string> values;
  for (const auto& spec : specs) {
    if (trim(spec).empty()) continue;
    auto override_ = ConfigOverride::parse(trim(spec));
    values[override_.file + ":" + override_.section + ":" + override_.key] = trim(override_.value);
  }
  return values;
}

// A resumed run may repeat the --set values it was started with (a rerun of the same command, as
// job schedulers do), in any order; a value that differs, or a key it was not started with, is
// an error naming the key and both values. A key given twice is compared by the value that
// applies, its last.
void check_resumed_overrides(const fs::path& expdir, const std::vector<std::string>& sets) {
  if (sets.empty()) return;
  fs::path record = ExperimentLayout{expdir}.overrides();
  std::map<std::string, std::string> recorded =
      fs::exists(record) ? effective_overrides(split(read_file(record), '\n'))
                         : std::map<std::string, std::string>{};
  for (const auto& [key, value] : effective_overrides(sets)) {
    auto it = recorded.find(key);
    if (it == recorded.end())
      throw Error("--set " + key + "='" + value + "': the experiment in " + expdir.string() +
                  " was started without it (" + record.string() +
                  "); a resumed run cannot change the recipe; start a new --expdir");
    if (it->second != value)
      throw Error("--set " + key + ": the experiment in " + expdir.string() +
                  " was started with '" + it->second + "', now '" + value +
                  "'; a resumed run cannot change the recipe; start a new --expdir");
  }
}

// The chief prepares a fresh experiment directory: the recipe as used, its overrides, the
// options a resume must repeat.
Recipe prepare_experiment(const TrainingRunOptions& run) {
  const fs::path& expdir = run.expdir;
  if (has_training(expdir)) {
    if (!run.overwrite)
      throw Error(expdir.string() + " already holds a training; continue it with --resume, "
                  "start over with --overwrite, or pick another --expdir");
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(expdir, ec))
      if (entry.is_directory() && fs::exists(StageLayout{entry.path()}.logdir()))
        fs::remove_all(entry.path());
    fs::remove(ExperimentLayout{expdir}.val_sum(), ec);
    fs::remove_all(ExperimentLayout{expdir}.tensorboard_dir(), ec);  // the old run's curves
    // The stores the old training read are not this one's (it may read remade ones).
    fs::remove(ExperimentLayout{expdir}.stores_record(), ec);
  }
  Recipe recipe = Recipe::load(run.recipe, parse_overrides(run.sets));
  ensure_directory(expdir);
  log_to_file(ExperimentLayout{expdir}.log());
  recipe.save_copy(expdir, list_sample_rates(recipe));
  std::string overrides;
  for (const auto& spec : run.sets) overrides += spec + "\n";
  write_file_atomic(ExperimentLayout{expdir}.overrides(), overrides);
  record_run_options(expdir, run);
  logger().info("training recipe {} in {}{}", run.recipe.string(), expdir.string(),
               run.sets.empty() ? "" : " with overrides: " + join(run.sets, " "));
  return recipe;
}

}  // namespace

std::string training_position(const fs::path& expdir) {
  // The stages' metrics, newest first; a stage that has not logged an update yet is skipped.
  std::vector<std::pair<fs::file_time_type, fs::path>> stages;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(expdir, ec)) {
    fs::path metrics = StageLayout{entry.path()}.metrics();
    auto time = fs::last_write_time(metrics, ec);
    if (!ec) stages.emplace_back(time, metrics);
  }
  std::sort(stages.begin(), stages.end(), std::greater<>());
  for (const auto& [time, metrics] : stages) {
    std::string last;
    for (const auto& line : split(read_file(metrics), '\n'))
      if (line.find("\"type\":\"train\"") != std::string::npos) last = line;
    try {
      if (!last.empty())
        return "after update " +
               std::to_string(nlohmann::json::parse(last).at("step").get<int64_t>()) +
               " of stage " + metrics.parent_path().filename().string();
    } catch (const nlohmann::json::exception&) {
      // A line cut short by the crash: the stage before tells.
    }
  }
  return "";
}

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

namespace {

// --device, else trainer.cfg's device key; resolved before anything is written, so that a GPU
// that is not there ends the command with one line and an untouched --expdir.
c10::Device training_device(const Recipe& recipe, const std::string& flag) {
  const ConfigFile& trainer_cfg = recipe.get("trainer.cfg");
  auto options = read_trainer_options(trainer_cfg);
  auto device = flag.empty() ? resolve_device(options.compute.device,
                                              trainer_cfg.path() + ": [trainer] device")
                             : resolve_device(flag, "--device");
  const Precision precision = parse_precision(options.compute.precision, "precision");
  check_precision(precision, device, trainer_cfg.path() + ": [trainer] precision");
  const std::string slow = bf16_speed_warning(precision, device, cpu_flags());
  if (!slow.empty()) logger().warn(slow);
  return device;
}

// Every training stage reads its tasks' inputs (and, without dynamic mixing, their targets) from
// stores cut at its segment length, and so does validation with validation_segments = stage; a
// length database.conf does not store ends the command here, with the line `nabu check` gives,
// and an untouched --expdir (docs/ini_semantics.md).
void require_stored_stage_segments(const Recipe& recipe) {
  const ConfigFile& trainer_cfg = recipe.get("trainer.cfg");
  const ConfigFile& database = recipe.get("database.conf");
  auto options = read_trainer_options(trainer_cfg);
  auto require = [&](const TaskSpec& spec) {
    auto problems = unstored_segment_lengths(spec, database, options.segment_lengths,
                                             options.data.dynamic_mixing);
    if (!problems.empty()) throw ConfigError(problems.front());
  };
  for (const auto& task : options.tasks) {
    const ConfigSection* section = trainer_cfg.find_section(task);
    if (!section) continue;  // the task trainer reports it
    require(read_task_spec(*section, TaskRole::kTrain));
  }
  // Sections that are missing or wrong here are left to the trainer, which names them.
  const ConfigFile* validation = recipe.find("validation_evaluator.cfg");
  const ConfigSection* evaluator = validation ? validation->find_section("evaluator") : nullptr;
  if (!evaluator) return;
  for (const auto& task : validated_tasks(*evaluator, options.tasks)) {
    const ConfigSection* section = validation->find_section(task);
    if (!section) continue;
    std::vector<const ConfigSection*> sets = {section};
    for (const auto& name : section->get_list("extra_validation_sets", {}))
      if (const ConfigSection* extra = validation->find_section(name)) sets.push_back(extra);
    for (const ConfigSection* set : sets)
      require(read_task_spec(*set, TaskRole::kValidation, evaluator));
  }
}

// The options the run trains with: the requested ones, or a resumed run's as it was started.
TrainingRunOptions checked_run_options(const TrainingRunOptions& requested) {
  TrainingRunOptions checked = requested;
  // train_options.json is written last when an experiment is prepared: without it nothing was
  // trained yet. A rerun of the command that was killed that early (--resume added, as a job
  // scheduler does) then simply starts it, when it names the recipe.
  if (checked.resume && !fs::exists(ExperimentLayout{checked.expdir}.train_options()) &&
      !checked.recipe.empty()) {
    logger().warn("nothing to resume in {} (no train_options.json): starting the experiment",
                 checked.expdir.string());
    checked.resume = false;
    checked.overwrite = true;
  }
  TrainingRunOptions run = checked.resume ? recorded_run_options(checked.expdir, checked) : checked;
  // A resumed run continues the schedule it was started with (its data order follows it).
  if (checked.resume && checked.max_steps != std::vector<int64_t>{-1} &&
      checked.max_steps != run.max_steps)
    throw Error(fmt::format("--max-steps={}: the experiment in {} was started with --max-steps={}, "
                            "which a resumed run keeps; give that value or none, or train "
                            "further in a new --expdir",
                            fmt::join(checked.max_steps, ","), checked.expdir.string(),
                            fmt::join(run.max_steps, ",")));
  return run;
}

// The seed of a resumed run, the stop signals, deterministic algorithms.
void set_up_process(const TrainingRunOptions& run) {
  if (run.resume) torch::manual_seed(run.seed);
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  std::signal(SIGUSR1, on_interrupt);  // Slurm's warning before the time limit (--signal=USR1@90)
  // warn_only: LibTorch flags a few ops (max_unpool2d of encoder_decoder_cnn) as nondeterministic
  // for CUDA's sake; their CPU kernels write each output once, so they stay reproducible here.
  if (run.deterministic) torch::globalContext().setDeterministicAlgorithms(true, true);
}

// A new run's checks of the recipe as given; returns the training device.
c10::Device check_recipe_as_given(const TrainingRunOptions& run) {
  // The recipe as given is read (and its warnings logged) before the experiment is prepared,
  // so that a bad device or precision leaves no experiment folder behind.
  Recipe source = Recipe::load(run.recipe, parse_overrides(run.sets));
  for (const auto& warning : source.warnings()) logger().warn("{}", warning);
  c10::Device device = training_device(source, run.device);
  require_stored_stage_segments(source);
  resolve_stages(read_trainer_options(source.get("trainer.cfg")), run.max_steps);
  return device;
}

// A resumed run's recipe, the copy in its experiment; sets `device`.
Recipe load_resumed_recipe(const TrainingRunOptions& run, bool chief, c10::Device& device) {
  const fs::path& expdir = run.expdir;
  if (!fs::exists(expdir / "trainer.cfg") ||
      !fs::exists(ExperimentLayout{expdir}.train_options()))
    throw Error(expdir.string() + " holds no experiment to resume (no train_options.json); "
                "start it without --resume, or give --recipe");
  check_resumed_overrides(expdir, run.sets);
  Recipe recipe = Recipe::load(expdir);
  for (const auto& warning : recipe.warnings()) logger().warn("{}", warning);
  device = training_device(recipe, run.device);
  if (chief) log_to_file(ExperimentLayout{expdir}.log());
  logger().info("resuming the experiment in {} (seed {}, max steps {}{})", expdir.string(),
               run.seed, fmt::join(run.max_steps, ","),
               run.deterministic ? ", deterministic" : "");
  return recipe;
}

}  // namespace

void run_training(const TrainingRunOptions& requested) {
  const TrainingRunOptions run = checked_run_options(requested);
  const fs::path& expdir = run.expdir;
  StopRequest stop;
  const SignalledRun signalled(stop);
  set_up_process(run);
  // World size 1 without the torchrun variables: a LocalCommunicator, nothing changes.
  auto environment = DistributedEnvironment::from_environment();
  const bool chief = environment.rank == 0;

  Recipe recipe;
  c10::Device device(c10::kCPU);
  if (!run.resume) device = check_recipe_as_given(run);
  if (run.resume) {
    recipe = load_resumed_recipe(run, chief, device);
  } else if (!chief) {
    // The chief prepares the experiment directory; the others read the recipe as given.
    recipe = Recipe::load(run.recipe, parse_overrides(run.sets));
  } else {
    recipe = prepare_experiment(run);
  }
  // Reading the options here reports a bad trainer.cfg before any process group is formed.
  read_trainer_options(recipe.get("trainer.cfg"));
  logger().info("device: {}, seed: {}{}", describe_device(device), run.seed,
               run.deterministic ? ", deterministic" : "");

  auto communicator =
      make_communicator(environment, std::chrono::seconds(run.dist_timeout_seconds),
                        std::chrono::seconds(run.liveness_timeout_seconds), device);
  if (environment.distributed())
    logger().info("distributed: rank {} of {} ({} variables; rendezvous {}:{})", environment.rank,
                 environment.world_size, environment.source, environment.master_addr,
                 environment.master_port);
  CurriculumSettings settings;
  settings.seed = run.seed;
  settings.resume = run.resume;
  settings.max_steps = run.max_steps;
  settings.device = device;
  settings.stop = &stop;
  run_curriculum(recipe, expdir, settings, *communicator);
}

}  // namespace nabu
