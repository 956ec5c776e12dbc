#include "nabu/neuralnetworks/trainers/multi_task_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <limits>
#include <thread>

#include <ATen/record_function.h>
#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include "nabu/core/clock.h"
#include "nabu/core/error.h"
#include "nabu/core/interrupted.h"
#include "nabu/core/fs.h"
#include "nabu/core/strings.h"
#include "nabu/neuralnetworks/trainers/learning_rate.h"

namespace nabu {


TrainerRegistry& trainer_registry() {
  static TrainerRegistry registry("trainer");
  return registry;
}

NABU_REGISTER_DOCUMENTED(trainer_registry, "multi_task",
                         [](const StageContext& context) -> StageTrainerPtr {
                           return std::make_unique<MultiTaskTrainer>(context);
                         },
                         TrainerOptions,
                         "the original's trainer: tasks over shared models, accumulated "
                         "minibatches, validation-driven learning rate and early stopping");

namespace {

// Gradients (undefined -> zeros) as one buffer and back, so a rank all-reduces one buffer per
// task instead of one call per parameter.
torch::Tensor flatten(const std::vector<torch::Tensor>& gradients,
                      const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> pieces;
  for (std::size_t i = 0; i < parameters.size(); ++i)
    pieces.push_back(gradients[i].defined() ? gradients[i].reshape({-1})
                                            : torch::zeros({parameters[i].numel()},
                                                           parameters[i].options()));
  return pieces.empty() ? torch::zeros({0}) : torch::cat(pieces);
}

void unflatten(const torch::Tensor& flat, std::vector<torch::Tensor>& gradients,
               const std::vector<torch::Tensor>& parameters) {
  int64_t offset = 0;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    int64_t count = parameters[i].numel();
    gradients[i] = flat.slice(0, offset, offset + count).view_as(parameters[i]).clone();
    offset += count;
  }
}

}  // namespace

MultiTaskTrainer::MultiTaskTrainer(const StageContext& context)
    : recipe_(context.recipe), options_(context.options), stage_(context.stage),
      stage_dir_(context.stage_dir), init_model_(context.init_model),
      communicator_(context.communicator), settings_(context.settings),
      faults_(context.communicator.rank()) {}

MultiTaskTrainer::~MultiTaskTrainer() = default;

void MultiTaskTrainer::build() {
  const ConfigFile& trainer_cfg = recipe_.get("trainer.cfg");
  const ConfigFile* loss_cfg = recipe_.find("loss.cfg");
  bank_ = std::make_unique<ModelBank>(recipe_.get("model.cfg"));
  // The stores this experiment reads stay the ones it first read (a resume, a later stage).
  const std::filesystem::path expdir = stage_dir_.parent_path();
  stores_.bind(std::make_shared<StoreRecord>(ExperimentLayout{expdir}.stores_record(),
                                             expdir.string(), communicator_.is_chief()));
  for (std::size_t t = 0; t < options_.tasks.size(); ++t) {
    const ConfigSection& section = trainer_cfg.section(options_.tasks[t]);
    tasks_.push_back(std::make_unique<TaskGradients>(
        section, loss_cfg, recipe_, options_.data, stage_, *bank_, stores_, communicator_.rank(),
        communicator_.world_size(), settings_.seed, settings_.device.is_cuda()));
    task_weights_.push_back(options_.task_weight(t));
  }
  for (auto& task : tasks_) task->materialize();
  if (!init_model_.empty()) {
    auto report = bank_->load(init_model_, /*strict=*/false);
    logger().info("initialised from {}: {}", init_model_.string(), report.summary());
  }
  // Every rank starts from the chief's weights.
  if (communicator_.world_size() > 1) {
    std::vector<torch::Tensor> weights;
    for (const auto& [name, parameter] : bank_->named_parameters())
      weights.push_back(parameter.detach());
    communicator_.broadcast(weights, 0);
  }
  // Built and initialised on the CPU (the same numbers on every device), then moved: the
  // optimizers below keep their state where the parameters are.
  bank_->to(settings_.device);
  count_steps();
  build_update(trainer_cfg.section("trainer"));
  validation_ = StageValidation::build({recipe_, options_, stage_, *bank_, stores_});
}

void MultiTaskTrainer::count_steps() {
  num_steps_ = -1;
  for (auto& task : tasks_) {
    int64_t steps = steps_for_task(options_.schedule.num_epochs, task->num_examples(),
                                   stage_.batch_size, stage_.numbatches_to_aggregate,
                                   communicator_.world_size());
    logger().info("task {}: {} examples per epoch, {} steps for {} epochs", task->name(),
                 task->num_examples(), steps, options_.schedule.num_epochs);
    num_steps_ = num_steps_ < 0 ? steps : std::min(num_steps_, steps);
  }
  if (num_steps_ <= 0)
    throw ConfigError("trainer.cfg: " + std::to_string(options_.schedule.num_epochs) +
                      " epochs give no update with batch_size " +
                      std::to_string(stage_.batch_size) + " x numbatches_to_aggregate " +
                      std::to_string(stage_.numbatches_to_aggregate) +
                      "; lower them or add data");
  const auto schedule = LearningRateSchedule::from(options_.learning_rate, stage_);
  if (schedule.kind == LearningRateSchedule::Kind::kCosine)
    logger().info("learning rate: cosine from {} to {} over {} updates", schedule.initial,
                 schedule.min, schedule.span(num_steps_));
}

void MultiTaskTrainer::build_update(const ConfigSection& trainer_section) {
  precision_ = parse_precision(options_.compute.precision, "precision");
  check_precision(precision_, settings_.device, "trainer.cfg [trainer] precision");
  for (auto& task : tasks_) {
    task->set_precision(precision_);
    if (options_.optimizer.clip_grad_value_per_minibatch)
      task->set_minibatch_clip(options_.optimizer.clip_grad_value);
  }
  scaler_ = LossScaler(precision_ == Precision::kFp16);
  if (precision_ != Precision::kFp32)
    logger().info("precision: {} autocast{}", precision_name(precision_),
                 scaler_.enabled() ? fmt::format(", loss scale {}", scaler_.scale()) : "");
  // Frozen parameters get no gradient and no optimizer state.
  auto named = bank_->named_parameters();
  auto frozen = frozen_parameter_names(options_.optimizer, trainer_section, named);
  if (!frozen.empty()) {
    std::vector<torch::Tensor> tensors;
    for (const auto& [name, parameter] : named)
      if (std::find(frozen.begin(), frozen.end(), name) != frozen.end())
        tensors.push_back(parameter);
    for (auto& task : tasks_) task->exclude(tensors);
    logger().info("frozen: {} parameter tensor(s): {}", frozen.size(), join(frozen, " "));
  }
  std::vector<ParameterUpdate::Task> update_tasks;
  for (std::size_t t = 0; t < tasks_.size(); ++t)
    update_tasks.push_back({tasks_[t]->name(), task_weights_[t], tasks_[t]->parameters()});
  update_ = std::make_unique<ParameterUpdate>(options_.optimizer, options_.profiling,
                                              trainer_section, stage_.initial_learning_rate,
                                              named, std::move(update_tasks));
}

StageScheduleSettings MultiTaskTrainer::schedule_settings() const {
  StageScheduleSettings settings;
  settings.schedule = options_.schedule;
  settings.epoch_steps = num_steps_;
  settings.max_steps = stage_.max_steps;
  settings.max_steps_reason = stage_.max_steps_reason;
  settings.validates = validation_ != nullptr;
  settings.chief = communicator_.is_chief();
  settings.profile = options_.profiling.profile_range();
  return settings;
}

double MultiTaskTrainer::current_learning_rate() const {
  const auto schedule = LearningRateSchedule::from(options_.learning_rate, stage_);
  return schedule(state_.step, num_steps_, state_.validation.lr_factor);
}

void MultiTaskTrainer::all_reduce_sums() {
  auto start = Clock::now();
  // The signal flag rides with the first task's sums: no collective of its own.
  const double signalled = stop_signal() ? 1 : 0;
  for (std::size_t t = 0; t < tasks_.size(); ++t) {
    auto& task = tasks_[t];
    std::vector<double> sums{task->loss_sum(), task->norm_sum()};
    if (t == 0) sums.push_back(signalled);
    std::vector<torch::Tensor> buffers{flatten(task->gradients(), task->parameters()),
                                       torch::tensor(sums, torch::kFloat64)};
    communicator_.all_reduce_sum(buffers);
    unflatten(buffers[0], task->gradients(), task->parameters());
    task->set_sums(buffers[1][0].item<double>(), buffers[1][1].item<double>());
    if (t == 0) interrupt_agreed_ = buffers[1][2].item<double>() > 0;
  }
  last_allreduce_seconds_ = seconds_since(start);
}

bool MultiTaskTrainer::gradients_finite() {
  faults_.corrupt_gradients(state_.step + 1, tasks_.front()->gradients());
  if (!scaler_.enabled()) return true;
  bool finite = true;
  // Every task's gradients are unscaled, whatever an earlier one held.
  for (auto& task : tasks_)
    finite = scaler_.unscale(task->gradients()) && std::isfinite(task->loss_sum()) && finite;
  const double scale = scaler_.scale();
  scaler_.update(finite);
  if (!finite) {
    for (auto& task : tasks_)
      for (auto& gradient : task->gradients()) gradient = torch::Tensor();
    logger().warn("step {}: fp16 loss or gradients overflowed at loss scale {}: update skipped, "
                 "scale now {}", state_.step + 1, scale, scaler_.scale());
  }
  return finite;
}

void MultiTaskTrainer::training_step() {
  auto start = Clock::now();
  for (auto& task : tasks_) task->reset_accumulators();
  for (int round = 0; round < stage_.numbatches_to_aggregate; ++round) {
    for (auto& task : tasks_) task->run_minibatch(scaler_.scale());
    communicator_.tick();
  }
  last_allreduce_seconds_ = 0;
  if (communicator_.world_size() > 1) all_reduce_sums();
  std::vector<ParameterUpdate::TaskSums> sums;
  for (auto& task : tasks_) sums.push_back({task->loss_sum(), task->norm_sum(), &task->gradients()});
  auto optimizer_start = Clock::now();
  last_learning_rate_ = current_learning_rate();
  if (gradients_finite()) {
    RECORD_USER_SCOPE("nabu::optimizer");
    update_->apply(sums, last_learning_rate_, state_.step,
                   "the best validated model is kept in " + layout().validated().string());
  }
  last_phases_ = PhaseTimes{};
  for (auto& task : tasks_) last_phases_ += task->times();
  last_phases_.allreduce = last_allreduce_seconds_;
  last_phases_.optimizer = seconds_since(optimizer_start);
  last_phases_.validation = pending_validation_seconds_;
  pending_validation_seconds_ = 0;
  last_step_seconds_ = seconds_since(start);
  // Every rank must agree on when a validation is due and when the time budget ends the stage:
  // they all count the chief's time.
  double counted = last_step_seconds_;
  if (schedule_->counts_time() && communicator_.world_size() > 1)
    counted = broadcast_values(communicator_, {counted}).at(0);
  StageSchedule::updated(state_, counted);
}

bool MultiTaskTrainer::validate() {
  auto start = Clock::now();
  auto outcome = validation_->run(state_, communicator_);
  const double seconds = seconds_since(start);
  outcome.record["seconds"] = seconds;
  progress_->validation(outcome.record, fmt::format("{} in {:.1f} s", outcome.text, seconds));
  progress_->audio(state_.step, outcome.audio);
  // log_norms: a histogram at every validation, unless histogram_steps wrote this step's.
  const int every = options_.profiling.histogram_steps;
  if (options_.profiling.log_norms && !(every > 0 && state_.step > 0 && state_.step % every == 0))
    write_histograms();
  if (!follow(outcome.decision, outcome.total)) return false;
  pending_validation_seconds_ += seconds_since(start);
  return true;
}

void MultiTaskTrainer::write_histograms() {
  if (!progress_->enabled()) return;
  auto start = Clock::now();
  // The distribution of every parameter tensor, as TensorBoard histograms.
  std::vector<std::pair<std::string, std::vector<double>>> values;
  for (const auto& [name, tensor] : bank_->named_parameters()) {
    auto flat = tensor.detach().to(torch::kCPU, torch::kFloat64).contiguous().view(-1);
    values.emplace_back("parameters/" + name,
                        std::vector<double>(flat.data_ptr<double>(),
                                            flat.data_ptr<double>() + flat.numel()));
  }
  progress_->histograms(state_.step, values);
  logger().debug("[{}] histograms of {} parameter tensor(s) at step {} in {:.4f} s",
                stage_.segment_length, values.size(), state_.step, seconds_since(start));
}

bool MultiTaskTrainer::follow(const ValidationDecision& decision, double total) {
  const bool chief = communicator_.is_chief();
  if (decision.halve_lr && chief)
    logger().info("[{}] halving the learning rate (factor {})", stage_.segment_length,
                 state_.validation.lr_factor);
  if (decision.save_validated && chief) checkpointer_->write_validated(snapshot_now(false));
  if (auto* snapshots = checkpointer_->snapshots())
    snapshots->validated(total, state_.step, *bank_);
  if (decision.terminate) {
    stop_reason_ = decision.reason;
    if (chief) logger().info("[{}] stopping: {}", stage_.segment_length, decision.reason);
    return false;
  }
  if (decision.go_back) go_back(decision.halve_lr);
  if (chief) checkpointer_->write_latest(state_, snapshot_now(false));
  return true;
}

void MultiTaskTrainer::go_back(bool halve_lr) {
  // Back to the validated weights, optimizer state, learning-rate factor and step; the data
  // order and the random state move on, so the next updates see new data (docs/trainer.md).
  communicator_.barrier();
  auto validated = checkpointer_->read_validated();
  if (communicator_.is_chief())
    logger().info("[{}] going back to the model validated at step {}; the data moves on",
                 stage_.segment_length, validated.state.step);
  restore_weights(validated);
  StageSchedule::went_back(state_, validated.state, halve_lr);
}

void MultiTaskTrainer::stop_if_interrupted() {
  // One process reads its own flag; ranks read the flag they all-reduced with the last update,
  // so they all stop after the same one (a signal that came later is seen after the next).
  const bool stop = communicator_.world_size() > 1 ? interrupt_agreed_ : stop_signal() != 0;
  if (!stop) return;
  const int signal_number = stop_signal();
  const std::string cause = signal_number ? signal_name(signal_number) : "a signal to another rank";
  const int status = signal_number == SIGINT ? kExitInterrupted : kExitPreempted;
  // A signal during the write only sets the flag again; the write is atomic either way.
  if (communicator_.is_chief()) checkpointer_->write_latest(state_, snapshot_now(false));
  communicator_.barrier();  // every rank leaves once the checkpoint is there
  std::string message = fmt::format(
      "stopped by {} after step {} of stage {}: {}; rerun the command with --resume to continue",
      cause, state_.step, stage_.segment_length,
      communicator_.is_chief() ? "checkpoint written to " + layout().latest().string()
                               : std::string("rank 0 wrote the checkpoint"));
  logger().warn("{} (exit status {})", message, status);
  throw Interrupted(message, status);
}

void MultiTaskTrainer::after_update() {
  if (!communicator_.is_chief()) return;
  if (schedule_->export_now(state_))
    checkpointer_->snapshots()->export_model(state_.step, *bank_);
  TrainingProgress::Step report;
  report.step = state_.step;
  for (std::size_t t = 0; t < tasks_.size(); ++t) {
    const auto& task = *tasks_[t];
    double value = task.norm_sum() != 0 ? task.loss_sum() / task.norm_sum() : 0;
    report.task_losses.emplace_back(task.name(), value);
    report.loss += task_weights_[t] * value;
    report.examples += task.examples_seen();
    report.frames += task.frames_seen();
  }
  report.learning_rate = last_learning_rate_;
  report.seconds = last_step_seconds_;
  report.allreduce_seconds = last_allreduce_seconds_;
  report.extra["phases"] = last_phases_.to_json();
  if (options_.profiling.log_norms) report.extra["norms"] = model_norms();
  progress_->step(report, schedule_->log_progress_now(state_));
  const int every = options_.profiling.histogram_steps;
  if (every > 0 && state_.step % every == 0) write_histograms();
  if (schedule_->checkpoint_now(state_)) checkpointer_->write_latest(state_, snapshot_now(false));
}

StageResult MultiTaskTrainer::run() {
  build();
  schedule_ = std::make_unique<StageSchedule>(schedule_settings());
  checkpointer_ = std::make_unique<Checkpointer>(layout(), communicator_, *schedule_,
                                                 update_->optimizers(), settings_.device,
                                                 options_.schedule.average_checkpoints);
  progress_ = std::make_unique<TrainingProgress>(
      stage_.segment_length,
      communicator_.is_chief() ? layout().metrics() : std::filesystem::path(),
      layout().tensorboard_dir());
  StageSchedule::started(state_, schedule_->initial_validation(
                                     validation_ ? validation_->initial_state() : ValidationState{}));
  profiler_ = std::make_unique<StepProfiler>(stage_dir_, options_.profiling.profile_range(),
                                             communicator_.is_chief());
  bool finished = resume();
  const int64_t limit = schedule_->options().limit();
  logger().info("[{}] training {} task(s) for {} steps{}: batch {} x {} minibatch(es), lr {} "
               "decay {}",
               stage_.segment_length, tasks_.size(), limit,
               limit < num_steps_ ? fmt::format(" (of {} for the epochs)", num_steps_) : "",
               stage_.batch_size, stage_.numbatches_to_aggregate, stage_.initial_learning_rate,
               stage_.learning_rate_decay);
  progress_->start(state_.step, limit);

  // Every "when" is the schedule's (docs/trainer.md, "Schedule").
  while (!finished) {
    // Before a due validation: a preempted run has seconds; the resumed run validates first.
    stop_if_interrupted();
    if (schedule_->validate_now(state_) && !validate()) break;
    if (auto reason = schedule_->stop_reason(state_)) {
      stop_reason_ = *reason;
      break;
    }
    faults_.before_update(state_.step + 1);
    if (schedule_->profile_starts(state_.step + 1)) profiler_->start();
    training_step();
    profiler_->add(last_phases_);
    if (schedule_->profile_ends(state_.step)) profiler_->finish();
    after_update();
  }
  return finish();
}

StageOutcome MultiTaskTrainer::outcome(int64_t best_step) const {
  StageOutcome outcome;
  outcome.stage = stage_.segment_length;
  outcome.steps = state_.step;
  outcome.best_step = best_step;
  outcome.validations = state_.validation.count;
  outcome.fresh_start = init_model_.empty();
  outcome.started_from = init_model_.empty() ? "a fresh initialisation" : init_model_.string();
  return outcome;
}

// A stage whose best validation is step 0's hands back what it started from: said loudly on the
// console and counted in metrics.jsonl's stage_end record.
void MultiTaskTrainer::report_outcome(const StageOutcome& outcome) {
  const std::string warning = stage_warning(outcome);
  if (!warning.empty()) logger().warn("[{}] {}", stage_.segment_length, warning);
  progress_->record({{"type", "stage_end"},
                     {"step", outcome.steps},
                     {"best_step", outcome.best_step},
                     {"validations", outcome.validations},
                     {"returned_its_start", outcome.returned_its_start()},
                     {"warnings", warning.empty() ? 0 : 1}});
}

StageResult MultiTaskTrainer::finish() {
  // Every rank reads the chief's last save: without the barrier another rank could find the
  // file between its rotation to .prev and the new one's rename (and fail), or read the previous
  // validation's weights.
  communicator_.barrier();
  // The best validated model becomes the stage's model, also when the step limit ended the
  // stage (the original writes nothing then; docs/trainer.md). Its weights only: the optimizer
  // state stays the last update's.
  int64_t best_step = -1;
  if (validation_ && checkpointer_->has_validated()) {
    auto best = checkpointer_->read_validated(/*with_optimizer_state=*/false);
    best_step = best.state.step;
    torch::NoGradGuard no_grad;
    for (const auto& [name, tensor] : bank_->named_parameters())
      tensor.copy_(best.parameters.at(name));
  }
  if (communicator_.is_chief()) {
    checkpointer_->write_latest(state_, snapshot_now(true));
    bank_->save(layout().model());
    if (int averaged = checkpointer_->snapshots()->write_average())
      logger().info("[{}] {}: the average of the {} best validated models", stage_.segment_length,
                   layout().average_model().string(), averaged);
  }
  communicator_.barrier();
  StageResult result;
  result.steps = state_.step;
  result.outcome = outcome(best_step);
  result.stop_reason = stop_reason_;
  if (validation_) validation_->report_best(state_.validation, result);
  if (communicator_.is_chief()) {
    logger().info("[{}] stage done after {} steps ({}); model written to {}{}",
                 stage_.segment_length, state_.step,
                 stop_reason_.empty() ? "finished" : stop_reason_, layout().model().string(),
                 best_step >= 0 ? fmt::format(" (the model of step {})", best_step) : "");
    report_outcome(result.outcome);
  }
  return result;
}

}  // namespace nabu
