#include "nabu/neuralnetworks/trainers/multi_task_trainer.h"

#include <chrono>
#include <cmath>
#include <set>

#include <spdlog/spdlog.h>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/strings.h"

namespace nabu {

volatile std::sig_atomic_t interrupt_requested = 0;

namespace {

using Clock = std::chrono::steady_clock;

double now_seconds() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  int64_t total = static_cast<int64_t>(seconds);
  if (total >= 3600) return fmt::format("{}h{:02d}m", total / 3600, (total % 3600) / 60);
  if (total >= 60) return fmt::format("{}m{:02d}s", total / 60, total % 60);
  return fmt::format("{}s", total);
}

bool same_tensor(const torch::Tensor& a, const torch::Tensor& b) {
  return a.unsafeGetTensorImpl() == b.unsafeGetTensorImpl();
}

// Flattens gradients (undefined -> zeros) into one buffer and back, so a rank all-reduces one
// buffer per task instead of one call per parameter.
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

MultiTaskTrainer::MultiTaskTrainer(const Recipe& recipe, const TrainerOptions& options,
                                   const StageSettings& stage, std::filesystem::path stage_dir,
                                   std::filesystem::path init_model, Communicator& communicator,
                                   RunSettings settings)
    : recipe_(recipe), options_(options), stage_(stage), stage_dir_(std::move(stage_dir)),
      init_model_(std::move(init_model)), communicator_(communicator), settings_(settings) {}

MultiTaskTrainer::~MultiTaskTrainer() = default;

void MultiTaskTrainer::build() {
  const ConfigFile& trainer_cfg = recipe_.get("trainer.cfg");
  const ConfigFile& database = recipe_.get("database.conf");
  const ConfigFile* loss_cfg = recipe_.find("loss.cfg");
  bank_ = std::make_unique<ModelBank>(recipe_.get("model.cfg"));
  for (std::size_t t = 0; t < options_.tasks.size(); ++t) {
    const ConfigSection& section = trainer_cfg.section(options_.tasks[t]);
    tasks_.push_back(std::make_unique<TaskTrainer>(
        section, loss_cfg, database, options_, stage_, *bank_, stores_, communicator_.rank(),
        communicator_.world_size(), settings_.seed));
    task_weights_.push_back(options_.task_weight(t));
  }
  for (auto& task : tasks_) task->materialize();
  // Every trainable parameter any task updates, in the bank's order.
  std::vector<torch::Tensor> used;
  for (auto& task : tasks_)
    for (const auto& parameter : task->parameters()) used.push_back(parameter);
  for (const auto& [name, parameter] : bank_->named_parameters()) {
    (void)name;
    for (const auto& candidate : used)
      if (same_tensor(candidate, parameter)) {
        all_parameters_.push_back(parameter);
        break;
      }
  }
  if (!init_model_.empty()) {
    auto report = bank_->load(init_model_, /*strict=*/false);
    spdlog::info("initialised from {}: {}", init_model_.string(), report.summary());
  }
  // Every rank starts from the chief's weights.
  if (communicator_.world_size() > 1) {
    std::vector<torch::Tensor> weights;
    for (const auto& [name, parameter] : bank_->named_parameters()) weights.push_back(parameter.detach());
    communicator_.broadcast(weights, 0);
  }
  num_steps_ = -1;
  for (auto& task : tasks_) {
    int64_t steps = steps_for_task(options_.num_epochs, task->num_examples(), stage_.batch_size,
                                   stage_.numbatches_to_aggregate, communicator_.world_size());
    spdlog::info("task {}: {} examples per epoch, {} steps for {} epochs", task->name(),
                 task->num_examples(), steps, options_.num_epochs);
    num_steps_ = num_steps_ < 0 ? steps : std::min(num_steps_, steps);
  }
  if (num_steps_ <= 0)
    throw ConfigError("trainer.cfg: " + std::to_string(options_.num_epochs) +
                      " epochs give no update with batch_size " +
                      std::to_string(stage_.batch_size) + " x numbatches_to_aggregate " +
                      std::to_string(stage_.numbatches_to_aggregate) +
                      "; lower them or add data");
  build_optimizers();
  build_validation();
}

void MultiTaskTrainer::build_optimizers() {
  auto make_adam = [&](std::vector<torch::Tensor> parameters) {
    // The original's TF Adam defaults: beta1 0.9, beta2 0.999, epsilon 1e-8.
    return std::make_unique<torch::optim::Adam>(
        parameters,
        torch::optim::AdamOptions(stage_.initial_learning_rate).betas({0.9, 0.999}).eps(1e-8));
  };
  if (!options_.acc_steps) {
    optimizers_.push_back({make_adam(all_parameters_), -1, 1.0, all_parameters_});
    return;
  }
  // acc_steps: one optimizer per task with lr x task_weight; with normalize_weights_acc_steps
  // the weight of a parameter is divided by the summed weights of the tasks that use it, and
  // parameters are grouped by that factor (SPEC §2.a step 5).
  for (std::size_t t = 0; t < tasks_.size(); ++t) {
    std::map<double, std::vector<torch::Tensor>> groups;
    for (const auto& parameter : tasks_[t]->parameters()) {
      double factor = task_weights_[t];
      if (options_.normalize_weights_acc_steps) {
        double total = 0;
        for (std::size_t u = 0; u < tasks_.size(); ++u)
          for (const auto& other : tasks_[u]->parameters())
            if (same_tensor(other, parameter)) total += task_weights_[u];
        factor = task_weights_[t] / total;
      }
      groups[factor].push_back(parameter);
    }
    for (auto& [factor, parameters] : groups)
      optimizers_.push_back({make_adam(parameters), static_cast<int>(t), factor, parameters});
  }
}

void MultiTaskTrainer::build_validation() {
  const ConfigFile* validation_cfg = recipe_.find("validation_evaluator.cfg");
  if (!validation_cfg) {
    spdlog::warn("no validation_evaluator.cfg: training without validation (no early stopping)");
    return;
  }
  const ConfigSection& evaluator = validation_cfg->section("evaluator");
  std::string type = evaluator.get_string("evaluator", "task_loss_evaluator");
  if (type == "None") {
    spdlog::warn("validation disabled (evaluator = None)");
    return;
  }
  if (type != "task_loss_evaluator")
    evaluator.fail("evaluator", "unknown evaluator '" + type + "'; known: task_loss_evaluator");
  auto excluded = evaluator.get_list("tasks_excluded_for_val", {});
  const ConfigFile* loss_cfg = recipe_.find("loss.cfg");
  const ConfigFile& trainer_cfg = recipe_.get("trainer.cfg");
  for (const auto& task : options_.tasks) {
    if (std::find(excluded.begin(), excluded.end(), task) != excluded.end()) continue;
    const ConfigSection& section = validation_cfg->section(task);
    // SPEC §2.d: the loss options come from the training task (through loss.cfg); without a
    // loss.cfg the validation section's own loss_type is used.
    LossPtr loss = loss_cfg ? make_loss(trainer_cfg.section(task), loss_cfg)
                            : make_loss(section, nullptr);
    evaluators_.push_back(std::make_unique<TaskLossEvaluator>(
        section, TaskRole::kValidation, &evaluator, recipe_.get("database.conf"),
        stage_.segment_length, *bank_, loss, stores_, options_.prefetch));
    validation_tasks_.push_back(task);
    int64_t batches = evaluators_.back()->num_batches();
    validation_batches_ = validation_batches_ == 0 ? batches : std::min(validation_batches_, batches);
  }
  if (evaluators_.empty()) return;
  ValidationPolicyOptions policy;
  policy.max_tries = options_.max_tries();
  policy.reset_tries = options_.reset_tries;
  policy.valid_adapt = options_.valid_adapt;
  policy.go_back = options_.go_back;
  policy.num_tracks = options_.acc_steps ? static_cast<int>(evaluators_.size()) : 1;
  policy_ = std::make_unique<ValidationPolicy>(policy);
  spdlog::info("validation: {} task(s), {} batch(es) each, every {} updates",
               evaluators_.size(), validation_batches_, options_.valid_frequency);
}

double MultiTaskTrainer::current_learning_rate() const {
  return learning_rate(stage_.initial_learning_rate, stage_.learning_rate_decay, step_, num_steps_,
                       validation_.lr_factor);
}

void MultiTaskTrainer::training_step() {
  auto start = Clock::now();
  for (auto& task : tasks_) task->reset_accumulators();
  for (int round = 0; round < stage_.numbatches_to_aggregate; ++round)
    for (auto& task : tasks_) task->run_minibatch();

  // Sums over ranks: one flat buffer of gradients and the (loss, norm) pair per task.
  last_allreduce_seconds_ = 0;
  if (communicator_.world_size() > 1) {
    auto reduce_start = Clock::now();
    for (auto& task : tasks_) {
      std::vector<torch::Tensor> buffers{
          flatten(task->gradients(), task->parameters()),
          torch::tensor({task->loss_sum(), task->norm_sum()}, torch::kFloat64)};
      communicator_.all_reduce_sum(buffers);
      unflatten(buffers[0], task->gradients(), task->parameters());
      task->set_sums(buffers[1][0].item<double>(), buffers[1][1].item<double>());
    }
    last_allreduce_seconds_ = std::chrono::duration<double>(Clock::now() - reduce_start).count();
  }

  // Normalise by the task's norm (the gradient of Σloss/Σnorm), clip, check for NaN/Inf.
  for (std::size_t t = 0; t < tasks_.size(); ++t) {
    auto& task = *tasks_[t];
    double norm = task.norm_sum();
    if (!std::isfinite(task.loss_sum()) || !std::isfinite(norm))
      throw Error("task " + task.name() + ": the loss is " +
                  (std::isnan(task.loss_sum()) ? "NaN" : "not finite") + " at step " +
                  std::to_string(step_) + "; the best validated model is kept in " +
                  (stage_dir_ / "logdir" / "validated.pt").string());
    // In place and one sum per gradient: each pass over the parameters is a parallel region,
    // and on 2 cores their count showed in the time per update. A NaN or infinity anywhere
    // makes the sum of the sums non-finite (clamp keeps NaN).
    std::vector<torch::Tensor> sums;
    for (auto& gradient : task.gradients()) {
      if (!gradient.defined()) continue;
      if (options_.normalize_gradients && norm != 0) gradient.div_(norm);
      gradient.clamp_(-options_.clip_grad_value, options_.clip_grad_value);
      sums.push_back(gradient.sum(torch::kDouble));
    }
    if (!sums.empty() && !std::isfinite(torch::stack(sums).sum().item<double>()))
      throw Error("task " + task.name() + ": a gradient is NaN or infinite at step " +
                  std::to_string(step_) + "; the best validated model is kept in " +
                  (stage_dir_ / "logdir" / "validated.pt").string());
  }
  auto clip_norm = [&](std::vector<torch::Tensor>& gradients) {
    if (options_.clip_grad_norm <= 0) return;
    double total = 0;
    for (const auto& gradient : gradients)
      if (gradient.defined()) total += gradient.square().sum().item<double>();
    total = std::sqrt(total);
    if (total > options_.clip_grad_norm)
      for (auto& gradient : gradients)
        if (gradient.defined()) gradient = gradient * (options_.clip_grad_norm / total);
  };
  auto set_learning_rate = [&](OptimizerSlot& slot) {
    for (auto& group : slot.optimizer->param_groups())
      static_cast<torch::optim::AdamOptions&>(group.options())
          .lr(current_learning_rate() * slot.lr_scale);
  };

  if (!options_.acc_steps) {
    // One update with Σ_tasks task_weight * gradient.
    auto& slot = optimizers_.front();
    std::vector<torch::Tensor> combined(slot.parameters.size());
    for (std::size_t t = 0; t < tasks_.size(); ++t) {
      const auto& parameters = tasks_[t]->parameters();
      auto& gradients = tasks_[t]->gradients();
      for (std::size_t i = 0; i < parameters.size(); ++i) {
        if (!gradients[i].defined()) continue;
        for (std::size_t j = 0; j < slot.parameters.size(); ++j) {
          if (!same_tensor(slot.parameters[j], parameters[i])) continue;
          auto weighted = task_weights_[t] == 1.0 ? gradients[i] : gradients[i] * task_weights_[t];
          combined[j] = combined[j].defined() ? combined[j] + weighted : weighted;
          break;
        }
      }
    }
    clip_norm(combined);
    for (std::size_t j = 0; j < slot.parameters.size(); ++j)
      slot.parameters[j].mutable_grad() = combined[j];
    set_learning_rate(slot);
    slot.optimizer->step();
  } else {
    // One optimizer per task (and weight group), applied in task order; all gradients were
    // computed before the first update.
    for (std::size_t t = 0; t < tasks_.size(); ++t) clip_norm(tasks_[t]->gradients());
    for (auto& slot : optimizers_) {
      const auto& parameters = tasks_[slot.task]->parameters();
      const auto& gradients = tasks_[slot.task]->gradients();
      for (auto& parameter : slot.parameters) {
        parameter.mutable_grad() = torch::Tensor();
        for (std::size_t i = 0; i < parameters.size(); ++i)
          if (same_tensor(parameters[i], parameter)) parameter.mutable_grad() = gradients[i];
      }
      set_learning_rate(slot);
      slot.optimizer->step();
    }
  }
  for (auto& parameter : all_parameters_) parameter.mutable_grad() = torch::Tensor();
  ++step_;
  last_step_seconds_ = std::chrono::duration<double>(Clock::now() - start).count();
}

bool MultiTaskTrainer::validate() {
  auto start = Clock::now();
  std::vector<double> task_losses;
  std::map<std::string, double> by_task;
  for (std::size_t v = 0; v < evaluators_.size(); ++v) {
    auto result = evaluators_[v]->evaluate(validation_batches_, &communicator_);
    task_losses.push_back(result.value());
    by_task[validation_tasks_[v]] = result.value();
  }
  // The weighted total, each task with its own weight (the original zips by position).
  double total = 0;
  for (std::size_t v = 0; v < validation_tasks_.size(); ++v) {
    auto position = std::find(options_.tasks.begin(), options_.tasks.end(), validation_tasks_[v]) -
                    options_.tasks.begin();
    total += task_losses[v] * options_.task_weight(position);
  }
  std::vector<double> tracks = options_.acc_steps ? task_losses : std::vector<double>{total};
  ValidationDecision decision = policy_->update(tracks, step_, validation_);
  // Every rank computed the same sums; the chief's decision still rules, bit for bit.
  auto flags = broadcast_values(
      communicator_, {static_cast<double>(decision.terminate), static_cast<double>(decision.go_back),
                      static_cast<double>(decision.halve_lr),
                      static_cast<double>(decision.save_validated)});
  decision.terminate = flags[0] != 0;
  decision.go_back = flags[1] != 0;
  decision.halve_lr = flags[2] != 0;
  decision.save_validated = flags[3] != 0;

  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  bool improved = std::all_of(decision.improved.begin(), decision.improved.end(),
                              [](bool value) { return value; });
  if (communicator_.is_chief()) {
    std::string tasks_text;
    if (by_task.size() > 1)
      for (const auto& [name, value] : by_task) tasks_text += fmt::format(", {} {:.6g}", name, value);
    spdlog::info("[{}] validation at step {}: loss {:.6g}{} ({}) in {:.1f} s", stage_.segment_length,
                 step_, total, tasks_text, improved ? "improved" : "worse", seconds);
    nlohmann::json record{{"type", "validation"}, {"stage", stage_.segment_length},
                          {"step", step_},        {"loss", total},
                          {"task_losses", by_task}, {"improved", improved},
                          {"terminate", decision.terminate}, {"halve_lr", decision.halve_lr},
                          {"go_back", decision.go_back}, {"lr_factor", validation_.lr_factor},
                          {"seconds", seconds}};
    if (decision.terminate) record["reason"] = decision.reason;
    metrics_->write(record);
  }
  if (decision.halve_lr)
    spdlog::info("[{}] halving the learning rate (factor {})", stage_.segment_length,
                 validation_.lr_factor);
  auto validated_path = stage_dir_ / "logdir" / "validated.pt";
  if (decision.save_validated && communicator_.is_chief()) save(validated_path, false);
  if (decision.terminate) {
    stop_reason_ = decision.reason;
    spdlog::info("[{}] stopping: {}", stage_.segment_length, decision.reason);
    return false;
  }
  if (decision.go_back) {
    spdlog::info("[{}] going back to the last validated model", stage_.segment_length);
    communicator_.barrier();
    restore(load_checkpoint(validated_path, {}), /*with_validation_state=*/false);
    // The optimizer states go back too.
    std::vector<torch::optim::Optimizer*> optimizers;
    for (auto& slot : optimizers_) optimizers.push_back(slot.optimizer.get());
    load_checkpoint(validated_path, optimizers);
  }
  if (communicator_.is_chief()) save(stage_dir_ / "logdir" / "latest.pt", false);
  return true;
}

TrainingCheckpoint MultiTaskTrainer::snapshot(bool finished) const {
  TrainingCheckpoint checkpoint;
  checkpoint.stage = stage_.segment_length;
  checkpoint.step = step_;
  checkpoint.num_steps = num_steps_;
  checkpoint.finished = finished;
  checkpoint.validation = validation_;
  for (const auto& task : tasks_)
    for (const auto& [name, position] : task->positions()) checkpoint.positions[name] = position;
  for (const auto& [name, tensor] : bank_->named_parameters())
    checkpoint.parameters[name] = tensor.detach().clone();
  checkpoint.rng_state = cpu_rng_state();
  return checkpoint;
}

void MultiTaskTrainer::save(const std::filesystem::path& path, bool finished) {
  std::vector<torch::optim::Optimizer*> optimizers;
  for (auto& slot : optimizers_) optimizers.push_back(slot.optimizer.get());
  save_checkpoint(path, snapshot(finished), optimizers);
}

void MultiTaskTrainer::restore(const TrainingCheckpoint& checkpoint, bool with_validation_state) {
  torch::NoGradGuard no_grad;
  for (const auto& [name, tensor] : bank_->named_parameters()) {
    auto it = checkpoint.parameters.find(name);
    if (it == checkpoint.parameters.end())
      throw Error("checkpoint of stage " + checkpoint.stage + " has no parameter " + name +
                  " (was model.cfg changed?)");
    if (it->second.sizes() != tensor.sizes())
      throw Error("checkpoint parameter " + name + " has another shape (was model.cfg changed?)");
    tensor.copy_(it->second);
  }
  step_ = checkpoint.step;
  if (with_validation_state) validation_ = checkpoint.validation;
  for (auto& task : tasks_) task->seek(checkpoint.positions);
  if (checkpoint.rng_state.defined()) set_cpu_rng_state(checkpoint.rng_state);
}

StageResult MultiTaskTrainer::run() {
  build();
  ensure_directory(stage_dir_ / "logdir");
  ensure_directory(stage_dir_ / "model");
  if (communicator_.is_chief()) metrics_ = std::make_unique<MetricsWriter>(stage_dir_ / "metrics.jsonl");
  validation_ = policy_ ? policy_->initial_state(-options_.valid_frequency) : ValidationState{};
  // SPEC §2.a: validated_step starts at -valid_frequency: the first validation is at step 0.
  validation_.validated_step = -options_.valid_frequency;

  bool finished = false;
  auto latest = stage_dir_ / "logdir" / "latest.pt";
  if (settings_.resume && std::filesystem::exists(latest)) {
    std::vector<torch::optim::Optimizer*> optimizers;
    for (auto& slot : optimizers_) optimizers.push_back(slot.optimizer.get());
    auto checkpoint = load_checkpoint(latest, optimizers);
    restore(checkpoint, /*with_validation_state=*/true);
    finished = checkpoint.finished;
    spdlog::info("[{}] resumed at step {} of {}{}", stage_.segment_length, step_, num_steps_,
                 finished ? " (stage already finished)" : "");
  }
  spdlog::info("[{}] training {} task(s) for {} steps: batch {} x {} minibatch(es), lr {} decay {}",
               stage_.segment_length, tasks_.size(), num_steps_, stage_.batch_size,
               stage_.numbatches_to_aggregate, stage_.initial_learning_rate,
               stage_.learning_rate_decay);

  // --max-steps wins over trainer.cfg's max_steps; either only shortens the stage.
  int64_t cap = settings_.max_steps >= 0 ? settings_.max_steps : stage_.max_steps;
  const char* cap_reason = settings_.max_steps >= 0 ? "--max-steps reached" : "max_steps reached";
  int64_t limit = cap >= 0 ? std::min(num_steps_, cap) : num_steps_;
  double started = now_seconds();
  int64_t first_step = step_;
  checkpoint_clock_ = started;
  while (!finished) {
    if (policy_ && step_ - validation_.validated_step >= options_.valid_frequency) {
      if (!validate()) break;
    }
    if (step_ >= limit) {
      stop_reason_ = step_ >= num_steps_ ? "step limit reached" : cap_reason;
      break;
    }
    if (interrupt_requested) {
      if (communicator_.is_chief()) save(latest, false);
      throw Error("interrupted at step " + std::to_string(step_) + "; checkpoint written to " +
                  latest.string() + "; continue with --resume");
    }
    training_step();
    if (communicator_.is_chief()) {
      int64_t examples = 0, frames = 0;
      nlohmann::json task_losses;
      double total = 0;
      for (std::size_t t = 0; t < tasks_.size(); ++t) {
        double value = tasks_[t]->norm_sum() != 0 ? tasks_[t]->loss_sum() / tasks_[t]->norm_sum() : 0;
        task_losses[tasks_[t]->name()] = value;
        total += task_weights_[t] * value;
        examples += tasks_[t]->examples_seen();
        frames += tasks_[t]->frames_seen();
      }
      double lr = current_learning_rate();
      metrics_->write({{"type", "train"}, {"stage", stage_.segment_length}, {"step", step_},
                      {"loss", total}, {"task_losses", task_losses}, {"lr", lr},
                      {"seconds", last_step_seconds_}, {"examples", examples}, {"frames", frames},
                      {"allreduce_seconds", last_allreduce_seconds_}});
      if (step_ == first_step + 1 || step_ % options_.progress_every == 0 || step_ == limit) {
        double elapsed = now_seconds() - started;
        double per_step = elapsed / std::max<int64_t>(1, step_ - first_step);
        std::string tasks_text;
        if (tasks_.size() > 1)
          for (const auto& [name, value] : task_losses.items())
            tasks_text += fmt::format(" {} {:.4g}", name, value.get<double>());
        spdlog::info("[{}] step {}/{} loss {:.5g}{} lr {:.3g} {:.2f} s/step {:.1f} ex/s ETA {}",
                     stage_.segment_length, step_, num_steps_, total, tasks_text, lr, per_step,
                     examples / std::max(last_step_seconds_, 1e-9),
                     format_duration(per_step * (limit - step_)));
      }
      if (options_.checkpoint_every > 0 &&
          now_seconds() - checkpoint_clock_ >= options_.checkpoint_every * 60) {
        save(latest, false);
        checkpoint_clock_ = now_seconds();
      }
    }
  }

  // The best validated model becomes the stage's model, also when the step limit ended the
  // stage (the original writes nothing then; DESIGN §5).
  auto validated = stage_dir_ / "logdir" / "validated.pt";
  if (policy_ && std::filesystem::exists(validated)) {
    auto best = load_checkpoint(validated, {});
    torch::NoGradGuard no_grad;
    for (const auto& [name, tensor] : bank_->named_parameters()) tensor.copy_(best.parameters.at(name));
  }
  if (communicator_.is_chief()) {
    save(latest, true);
    bank_->save(stage_dir_ / "model" / "model.pt");
  }
  communicator_.barrier();
  StageResult result;
  result.steps = step_;
  result.stop_reason = stop_reason_;
  if (policy_) {
    result.validated = true;
    if (options_.acc_steps) {
      for (std::size_t v = 0; v < validation_tasks_.size(); ++v) {
        result.best_per_task[validation_tasks_[v]] = validation_.tracks[v].best;
        result.best_validation += validation_.tracks[v].best;
      }
    } else {
      result.best_validation = validation_.tracks.front().best;
    }
  }
  spdlog::info("[{}] stage done after {} steps ({}); model written to {}", stage_.segment_length,
               step_, stop_reason_.empty() ? "finished" : stop_reason_,
               (stage_dir_ / "model" / "model.pt").string());
  return result;
}

}  // namespace nabu
