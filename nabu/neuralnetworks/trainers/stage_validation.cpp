#include "nabu/neuralnetworks/trainers/stage_validation.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include "nabu/neuralnetworks/loss_computers/loss_computer.h"

namespace nabu {

namespace {

ValidationPolicyOptions policy_options(const TrainerOptions& options, std::size_t tasks) {
  ValidationPolicyOptions policy;
  policy.max_tries = options.schedule.max_tries();
  policy.reset_tries = options.schedule.reset_tries;
  policy.valid_adapt = options.schedule.valid_adapt;
  policy.go_back = options.schedule.go_back;
  policy.num_tracks = options.optimizer.validate_per_task ? static_cast<int>(tasks) : 1;
  return policy;
}

}  // namespace

std::unique_ptr<StageValidation> StageValidation::build(const Context& context) {
  const ConfigFile* validation_cfg = context.recipe.find("validation_evaluator.cfg");
  if (!validation_cfg) {
    logger().warn("no validation_evaluator.cfg: training without validation (no early stopping)");
    return nullptr;
  }
  const ConfigSection& evaluator = validation_cfg->section("evaluator");
  if (evaluator.get_string("evaluator", "") == "None") {
    logger().warn("validation disabled (evaluator = None)");
    return nullptr;
  }
  auto tasks = validated_tasks(evaluator, context.options.tasks);
  if (tasks.empty()) return nullptr;
  std::unique_ptr<StageValidation> validation(
      new StageValidation(context, policy_options(context.options, tasks.size())));
  for (const auto& task : tasks) validation->add_task(context, *validation_cfg, evaluator, task);
  const auto& schedule = context.options.schedule;
  logger().info("validation: {} task(s), {} batch(es) each, every {} updates{}", tasks.size(),
               validation->batches_, schedule.valid_frequency,
               schedule.valid_every_seconds > 0
                   ? fmt::format(" or {} s of training", schedule.valid_every_seconds)
                   : std::string());
  return validation;
}

StageValidation::StageValidation(const Context& context, ValidationPolicyOptions policy)
    : segment_length_(context.stage.segment_length),
      per_task_tracks_(context.options.optimizer.validate_per_task),
      policy_(policy) {}

void StageValidation::add_task(const Context& context, const ConfigFile& validation_cfg,
                               const ConfigSection& evaluator, const std::string& task) {
  const ConfigSection& section = validation_cfg.section(task);
  // The loss options come from the training task (through loss.cfg); without a loss.cfg the
  // validation section's own loss_type is used (docs/trainer.md).
  const ConfigFile* loss_cfg = context.recipe.find("loss.cfg");
  LossPtr loss = loss_cfg ? make_loss(context.recipe.get("trainer.cfg").section(task), loss_cfg)
                          : make_loss(section, nullptr);
  auto make = [&](const ConfigSection& task_section) {
    return make_evaluator({task_section, TaskRole::kValidation, &evaluator, context.recipe,
                           context.stage.segment_length, context.bank, loss, context.stores,
                           context.options.data.prefetch});
  };
  // Each task with its own weight (the original zips weights and validated tasks by position,
  // which pairs them wrongly once a task is excluded).
  const auto& names = context.options.tasks;
  const auto position = std::find(names.begin(), names.end(), task) - names.begin();
  tasks_.push_back({task, context.options.task_weight(position), make(section)});
  for (const auto& name : section.get_list("extra_validation_sets", {})) {
    if (!validation_cfg.has_section(name))
      section.fail("extra_validation_sets",
                   "validation_evaluator.cfg has no section [" + name + "]");
    extra_sets_.push_back({task, name, make(validation_cfg.section(name))});
  }
  const int64_t batches = tasks_.back().evaluator->num_batches();
  batches_ = batches_ == 0 ? batches : std::min(batches_, batches);
}

StageValidation::Outcome StageValidation::run(StageState& state, Communicator& communicator) {
  Evaluated evaluated = evaluate(communicator);
  ValidationDecision decision = decide(evaluated, state, communicator);
  return describe(evaluated, decision, state, communicator);
}

StageValidation::Evaluated StageValidation::evaluate(Communicator& communicator) {
  // What each task's track minimises: its loss, or its validation_metric (negated when higher
  // is better); the loss is logged either way.
  Evaluated out;
  for (auto& task : tasks_) {
    auto result = task.evaluator->evaluate(batches_, &communicator);
    out.selection.push_back(result.selection_value());
    out.losses[task.name] = result.value();
    if (!result.set_values.empty()) out.set_losses[task.name] = result.set_values;
    out.total += result.selection_value() * task.weight;
    for (auto& clip : result.audio) out.audio.push_back(std::move(clip));
    if (result.metric.empty()) continue;
    out.metrics[task.name] = result.metric_value();
    out.metrics_text += fmt::format("{}{}{} {:.4g} (loss {:.6g})",
                                    out.metrics_text.empty() ? "" : ", ",
                                    tasks_.size() > 1 ? task.name + " " : "", result.metric,
                                    result.metric_value(), result.value());
  }
  return out;
}

ValidationDecision StageValidation::decide(const Evaluated& evaluated, StageState& state,
                                           Communicator& communicator) const {
  const std::vector<double> tracks =
      per_task_tracks_ ? evaluated.selection : std::vector<double>{evaluated.total};
  ValidationDecision decision = policy_.update(tracks, state.step, state.validation);
  StageSchedule::validated(state);
  // Every rank computed the same sums; the chief's decision still rules, bit for bit.
  auto flags = broadcast_values(
      communicator, {static_cast<double>(decision.terminate), static_cast<double>(decision.go_back),
                     static_cast<double>(decision.halve_lr),
                     static_cast<double>(decision.save_validated)});
  decision.terminate = flags[0] != 0;
  decision.go_back = flags[1] != 0;
  decision.halve_lr = flags[2] != 0;
  decision.save_validated = flags[3] != 0;
  return decision;
}

nlohmann::json StageValidation::evaluate_extra_sets(Communicator& communicator,
                                                    std::string& text) {
  nlohmann::json sets = nlohmann::json::object();
  for (auto& extra : extra_sets_) {
    auto result = extra.evaluator->evaluate(-1, &communicator);
    nlohmann::json& entry = sets[extra.name];
    entry = {{"task", extra.task}, {"loss", result.value()}};
    std::string value = fmt::format("loss {:.6g}", result.value());
    if (!result.metric.empty()) {
      entry[result.metric] = result.metric_value();
      value = fmt::format("{} {:.4g}", result.metric, result.metric_value());
    }
    text += fmt::format("; {}: {}", extra.name, value);
  }
  return sets;
}

StageValidation::Outcome StageValidation::describe(const Evaluated& evaluated,
                                                   const ValidationDecision& decision,
                                                   const StageState& state,
                                                   Communicator& communicator) {
  const bool improved = std::all_of(decision.improved.begin(), decision.improved.end(),
                                    [](bool value) { return value; });
  // With metrics the selection total is a sum of negated scores: show the scores instead.
  std::string tasks_text;
  if (evaluated.losses.size() > 1 && evaluated.metrics.empty())
    for (const auto& [name, value] : evaluated.losses)
      tasks_text += fmt::format(", {} {:.6g}", name, value);
  // Which linked set moved: the selected total alone cannot say.
  for (const auto& [task, sets] : evaluated.set_losses) {
    tasks_text += evaluated.set_losses.size() > 1 ? "; " + task + " sets" : "; sets";
    for (const auto& [set, value] : sets) tasks_text += fmt::format(" {} {:.6g}", set, value);
  }
  const std::string selected = evaluated.metrics.empty()
                                   ? fmt::format("loss {:.6g}", evaluated.total)
                                   : evaluated.metrics_text;
  nlohmann::json extra_sets = evaluate_extra_sets(communicator, tasks_text);
  Outcome outcome{decision, evaluated.total, {}, {}, evaluated.audio};
  outcome.record = {{"step", state.step},          {"loss", evaluated.total},
                    {"task_losses", evaluated.losses}, {"improved", improved},
                    {"terminate", decision.terminate}, {"halve_lr", decision.halve_lr},
                    {"go_back", decision.go_back},     {"lr_factor", state.validation.lr_factor}};
  if (decision.terminate) outcome.record["reason"] = decision.reason;
  if (!evaluated.metrics.empty()) outcome.record["task_metrics"] = evaluated.metrics;
  if (!extra_sets.empty()) outcome.record["extra_sets"] = extra_sets;
  if (!evaluated.set_losses.empty()) outcome.record["set_losses"] = evaluated.set_losses;
  outcome.text = fmt::format("[{}] validation at step {}: {}{} ({})", segment_length_, state.step,
                             selected, tasks_text, improved ? "improved" : "worse");
  return outcome;
}

void StageValidation::report_best(const ValidationState& state, StageResult& result) const {
  result.validated = true;
  if (!per_task_tracks_) {
    result.best_validation = state.tracks.front().best;
    return;
  }
  for (std::size_t v = 0; v < tasks_.size(); ++v) {
    result.best_per_task[tasks_[v].name] = state.tracks[v].best;
    result.best_validation += state.tracks[v].best;
  }
}

}  // namespace nabu
