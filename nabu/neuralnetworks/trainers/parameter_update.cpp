#include "nabu/neuralnetworks/trainers/parameter_update.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <regex>
#include <sstream>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include "nabu/core/error.h"
#include "nabu/core/strings.h"

namespace nabu {

std::vector<std::string> frozen_parameter_names(
    const OptimizerOptions& options, const ConfigSection& trainer_section,
    const std::vector<std::pair<std::string, torch::Tensor>>& named) {
  std::vector<std::string> frozen;
  for (const auto& pattern : options.freeze_parameters) {
    std::regex expression(pattern);
    bool matched = false;
    for (const auto& [name, parameter] : named) {
      if (!std::regex_search(name, expression)) continue;
      matched = true;
      if (std::find(frozen.begin(), frozen.end(), name) == frozen.end()) frozen.push_back(name);
    }
    if (!matched) {
      std::vector<std::string> names;
      for (const auto& entry : named) names.push_back(entry.first);
      trainer_section.fail("freeze_parameters",
                           "'" + pattern + "' matches no parameter; the parameters are: " +
                               shorten(join(names, " "), 400));
    }
  }
  return frozen;
}

std::unique_ptr<torch::optim::Optimizer> ParameterUpdate::make_optimizer(
    const OptimizerOptions& options, std::vector<torch::Tensor> parameters, double learning_rate) {
  namespace optim = torch::optim;
  if (options.optimizer == "adamw")
    return std::make_unique<optim::AdamW>(
        parameters, optim::AdamWOptions(learning_rate)
                        .betas({options.adam_beta1, options.adam_beta2})
                        .eps(options.adam_epsilon)
                        .weight_decay(options.weight_decay));
  if (options.optimizer == "sgd")
    return std::make_unique<optim::SGD>(parameters, optim::SGDOptions(learning_rate)
                                                        .momentum(options.momentum)
                                                        .weight_decay(options.weight_decay));
  if (options.optimizer == "rmsprop")
    return std::make_unique<optim::RMSprop>(parameters, optim::RMSpropOptions(learning_rate)
                                                            .alpha(options.rmsprop_decay)
                                                            .eps(options.rmsprop_epsilon)
                                                            .momentum(options.momentum)
                                                            .weight_decay(options.weight_decay));
  // TF Adam's defaults (beta1 0.9, beta2 0.999, epsilon 1e-8); epsilon where LibTorch adds it
  // unless adam_epsilon_placement = tensorflow.
  auto adam_options = optim::AdamOptions(learning_rate)
                          .betas({options.adam_beta1, options.adam_beta2})
                          .eps(options.adam_epsilon)
                          .weight_decay(options.weight_decay);
  auto adam = std::make_unique<MultiTensorAdam>(parameters, adam_options);
  adam->set_tensorflow_epsilon(options.adam_epsilon_placement == "tensorflow");
  return adam;
}

namespace {

// Which of `named` some task updates; a task parameter not among them is an Error.
std::vector<bool> used_parameters(const std::vector<std::pair<std::string, torch::Tensor>>& named,
                                  const std::vector<ParameterUpdate::Task>& tasks) {
  std::unordered_map<const void*, std::size_t> position;  // tensor -> index in `named`
  for (std::size_t k = 0; k < named.size(); ++k)
    position[named[k].second.unsafeGetTensorImpl()] = k;
  std::vector<bool> used(named.size(), false);
  for (const auto& task : tasks)
    for (const auto& parameter : task.parameters) {
      auto it = position.find(parameter.unsafeGetTensorImpl());
      if (it == position.end())
        throw Error("task " + task.name + " updates a parameter that is not in the model bank");
      used[it->second] = true;
    }
  return used;
}

// Frozen parameters are taken out of the tasks by the trainer (no gradient is computed for
// them); one still listed would be updated, so that is an error here, not a silent update.
void check_none_frozen(const OptimizerOptions& options, const ConfigSection& trainer_section,
                       const std::vector<std::pair<std::string, torch::Tensor>>& named,
                       const std::vector<bool>& used) {
  auto frozen = frozen_parameter_names(options, trainer_section, named);
  for (std::size_t k = 0; k < named.size(); ++k)
    if (used[k] && std::find(frozen.begin(), frozen.end(), named[k].first) != frozen.end())
      throw Error("parameter update: " + named[k].first +
                  " is frozen (freeze_parameters) but a task updates it");
}

}  // namespace

ParameterUpdate::ParameterUpdate(const OptimizerOptions& options,
                                 const ProfilingOptions& reports,
                                 const ConfigSection& trainer_section,
                                 double initial_learning_rate,
                                 const std::vector<std::pair<std::string, torch::Tensor>>& named,
                                 std::vector<Task> tasks)
    : options_(options), reports_(reports), tasks_(std::move(tasks)) {
  // Every parameter some task updates, in the order of `named`.
  const std::vector<bool> used = used_parameters(named, tasks_);
  check_none_frozen(options_, trainer_section, named, used);
  index_parameters(named, used);
  set_multipliers(trainer_section, named, used);
  make_slots(initial_learning_rate);
}

void ParameterUpdate::index_parameters(
    const std::vector<std::pair<std::string, torch::Tensor>>& named,
    const std::vector<bool>& used) {
  std::unordered_map<const void*, std::size_t> joint;  // tensor -> index in parameters_
  for (std::size_t k = 0; k < named.size(); ++k)
    if (used[k]) {
      joint[named[k].second.unsafeGetTensorImpl()] = parameters_.size();
      parameters_.push_back(named[k].second);
      parameter_names_.push_back(named[k].first);
    }
  for (const auto& task : tasks_) {
    std::vector<std::size_t> indices;
    for (const auto& parameter : task.parameters)
      indices.push_back(joint.at(parameter.unsafeGetTensorImpl()));
    joint_index_.push_back(indices);
  }
}

void ParameterUpdate::set_multipliers(
    const ConfigSection& trainer_section,
    const std::vector<std::pair<std::string, torch::Tensor>>& named,
    const std::vector<bool>& used) {
  // Gradient multipliers per task parameter: the first matching pattern wins. A pattern that
  // matches a trained parameter is used even where an earlier one took precedence.
  auto pairs = options_.multipliers();
  if (pairs.empty()) return;
  std::vector<std::regex> expressions;
  std::vector<bool> matched(pairs.size(), false);
  for (const auto& pair : pairs) expressions.emplace_back(pair.first);
  std::vector<double> by_joint(parameters_.size(), 1.0);
  for (std::size_t k = 0, j = 0; k < named.size(); ++k) {
    if (!used[k]) continue;
    bool assigned = false;
    for (std::size_t p = 0; p < pairs.size(); ++p)
      if (std::regex_search(named[k].first, expressions[p])) {
        if (!assigned) by_joint[j] = pairs[p].second;
        assigned = matched[p] = true;
      }
    ++j;
  }
  for (std::size_t p = 0; p < pairs.size(); ++p)
    if (!matched[p])
      trainer_section.fail("gradient_multipliers",
                           "'" + pairs[p].first + "' matches no parameter that is trained");
  for (std::size_t t = 0; t < tasks_.size(); ++t) {
    std::vector<double> factors;
    for (std::size_t index : joint_index_[t]) factors.push_back(by_joint[index]);
    multipliers_.push_back(factors);
  }
}

void ParameterUpdate::make_slots(double initial_learning_rate) {
  if (!options_.update_per_task) {
    slots_.push_back({make_optimizer(options_, parameters_, initial_learning_rate), -1, 1.0,
                      parameters_, {}});
    return;
  }
  // update_per_task: one optimizer per task with lr x task_weight; normalize_weights_acc_steps
  // the weight of a parameter is divided by the summed weights of the tasks that use it, and
  // parameters are grouped by that factor (docs/trainer.md).
  std::vector<double> total_weight(parameters_.size(), 0.0);
  for (std::size_t t = 0; t < tasks_.size(); ++t)
    for (std::size_t index : joint_index_[t]) total_weight[index] += tasks_[t].weight;
  for (std::size_t t = 0; t < tasks_.size(); ++t) {
    std::map<double, std::vector<std::size_t>> groups;
    for (std::size_t i = 0; i < tasks_[t].parameters.size(); ++i) {
      double factor = tasks_[t].weight;
      if (options_.normalize_weights_acc_steps) factor /= total_weight[joint_index_[t][i]];
      groups[factor].push_back(i);
    }
    for (auto& [factor, indices] : groups) {
      std::vector<torch::Tensor> parameters;
      for (std::size_t i : indices) parameters.push_back(tasks_[t].parameters[i]);
      slots_.push_back({make_optimizer(options_, parameters, initial_learning_rate),
                        static_cast<int>(t), factor, parameters, indices});
    }
  }
}

std::vector<torch::optim::Optimizer*> ParameterUpdate::optimizers() const {
  std::vector<torch::optim::Optimizer*> out;
  for (const auto& slot : slots_) out.push_back(slot.optimizer.get());
  return out;
}

void ParameterUpdate::prepare_gradients(const Task& task, const TaskSums& sums, int64_t step,
                                        const std::string& failure_hint) const {
  double norm = sums.norm;
  if (!std::isfinite(sums.loss) || !std::isfinite(norm))
    throw Error("task " + task.name + ": the loss is " +
                (std::isnan(sums.loss) ? "NaN" : "not finite") + " at step " +
                std::to_string(step) + "; " + failure_hint);
  const std::vector<double>* factors =
      multipliers_.empty() ? nullptr : &multipliers_[&task - tasks_.data()];
  // Multi-tensor kernels where one pass serves all gradients: on a GPU a kernel per gradient
  // costs more than the arithmetic (docs/results.md, "GPUs"); on
  // the CPU they run the per-tensor operations, so the results there are the same.
  std::vector<torch::Tensor> present;
  for (const auto& gradient : *sums.gradients)
    if (gradient.defined()) present.push_back(gradient);
  if (present.empty()) return;
  if (options_.normalize_gradients && norm != 0) at::_foreach_div_(present, norm);
  if (factors)
    for (std::size_t i = 0; i < sums.gradients->size(); ++i)
      if ((*factors)[i] != 1.0 && (*sums.gradients)[i].defined())
        (*sums.gradients)[i].mul_((*factors)[i]);
  // Element-wise clipping and the NaN check from one norm per gradient, copied to the host
  // together: no element of a gradient exceeds its norm, so a gradient whose norm is within
  // clip_grad_value (with a margin for the norm's rounding) is left as clamping would leave it.
  // The others are clamped, and a NaN then still makes their sum NaN (clamp keeps NaN; an
  // infinity is clipped, as before).
  auto norms = torch::stack(at::_foreach_norm(present)).to(torch::kCPU, torch::kFloat64);
  const double* gradient_norm = norms.data_ptr<double>();
  auto not_finite = [&] {
    return Error("task " + task.name + ": a gradient is NaN or infinite at step " +
                 std::to_string(step) + "; " + failure_hint);
  };
  if (options_.clip_grad_value_per_minibatch) {
    // Each minibatch was clamped before it was summed (TaskGradients): the sum is only checked.
    for (std::size_t k = 0; k < present.size(); ++k)
      if (!std::isfinite(gradient_norm[k])) throw not_finite();
    return;
  }
  const double untouched = options_.clip_grad_value * (1 - 1e-3);
  std::vector<torch::Tensor> checks;
  for (std::size_t k = 0; k < present.size(); ++k) {
    if (gradient_norm[k] <= untouched) continue;  // false for NaN
    present[k].clamp_(-options_.clip_grad_value, options_.clip_grad_value);
    checks.push_back(present[k].sum(torch::kDouble));
  }
  if (!checks.empty() && !std::isfinite(torch::stack(checks).sum().item<double>()))
    throw not_finite();
}

void ParameterUpdate::clip_norm(std::vector<torch::Tensor>& gradients) const {
  if (options_.clip_grad_norm <= 0) return;
  std::vector<torch::Tensor> present;
  for (const auto& gradient : gradients)
    if (gradient.defined()) present.push_back(gradient);
  if (present.empty()) return;
  if (options_.clip_grad_norm_per_tensor) {
    // Each tensor times min(1, clip_grad_norm / its norm), on its device (no copy to the host).
    for (auto& gradient : present)
      gradient.mul_((options_.clip_grad_norm / gradient.norm()).clamp_max(1.0));
    return;
  }
  // In place: every gradient here is owned by its parameter (TaskGradients::run_minibatch).
#if TORCH_VERSION_MAJOR >= 2
  if (present.front().is_cuda()) {
    // On a GPU the norm stays there, as the factor min(1, clip_grad_norm / norm): a copy to
    // the host would wait for every kernel queued before it. A factor of 1 changes nothing.
    auto total = torch::stack(at::_foreach_norm(present)).square().sum().sqrt();
    at::_foreach_mul_(present, (options_.clip_grad_norm / total).clamp_max(1.0));
    return;
  }
#endif
  // One copy to the host for all the squared norms, added in double in parameter order.
  std::vector<torch::Tensor> squares;
  for (const auto& gradient : present) squares.push_back(gradient.square().sum());
  auto on_host = torch::stack(squares).to(torch::kCPU, torch::kFloat64);
  const double* square = on_host.data_ptr<double>();
  double total = 0;
  for (std::size_t i = 0; i < present.size(); ++i) total += square[i];
  total = std::sqrt(total);
  if (total > options_.clip_grad_norm)
    at::_foreach_mul_(present, options_.clip_grad_norm / total);
}

void ParameterUpdate::apply(const std::vector<TaskSums>& sums, double learning_rate,
                            int64_t step, const std::string& failure_hint) {
  if (sums.size() != tasks_.size())
    throw Error("parameter update: " + std::to_string(sums.size()) + " task sums for " +
                std::to_string(tasks_.size()) + " tasks");
  for (std::size_t t = 0; t < tasks_.size(); ++t)
    prepare_gradients(tasks_[t], sums[t], step, failure_hint);
  auto set_learning_rate = [&](Slot& slot) {
    for (auto& group : slot.optimizer->param_groups())
      group.options().set_lr(learning_rate * slot.lr_scale);
  };
  std::vector<torch::Tensor> before;
  if (reports_.print_var_updates)
    for (const auto& parameter : parameters_) before.push_back(parameter.detach().clone());
  std::vector<std::pair<std::size_t, torch::Tensor>> applied;  // (index in parameters_, gradient)
  if (!options_.update_per_task) {
    // One update with the sum over tasks of task_weight * gradient.
    Slot& slot = slots_.front();
    std::vector<torch::Tensor> combined(parameters_.size());
    for (std::size_t t = 0; t < tasks_.size(); ++t) {
      const auto& gradients = *sums[t].gradients;
      double weight = tasks_[t].weight;
      for (std::size_t i = 0; i < gradients.size(); ++i) {
        if (!gradients[i].defined()) continue;
        auto weighted = weight == 1.0 ? gradients[i] : gradients[i] * weight;
        auto& target = combined[joint_index_[t][i]];
        target = target.defined() ? target + weighted : weighted;
      }
    }
    clip_norm(combined);
    for (std::size_t j = 0; j < parameters_.size(); ++j) parameters_[j].mutable_grad() = combined[j];
    if (reports_.log_norms) {
      gradient_squares_.assign(parameters_.size(), 0.0);
      for (std::size_t j = 0; j < parameters_.size(); ++j)
        if (combined[j].defined()) gradient_squares_[j] = combined[j].pow(2).sum().item<double>();
    }
    if (reports_.print_grads_stats)
      for (std::size_t j = 0; j < parameters_.size(); ++j)
        if (combined[j].defined()) applied.emplace_back(j, combined[j]);
    set_learning_rate(slot);
    slot.optimizer->step();
  } else {
    // One optimizer per task (and weight group), applied in task order; all gradients were
    // computed before the first update.
    for (std::size_t t = 0; t < tasks_.size(); ++t) clip_norm(*sums[t].gradients);
    if (reports_.log_norms) {
      // A parameter several tasks update counts the squares of every task's gradient.
      gradient_squares_.assign(parameters_.size(), 0.0);
      for (std::size_t t = 0; t < tasks_.size(); ++t) {
        const auto& gradients = *sums[t].gradients;
        for (std::size_t i = 0; i < gradients.size(); ++i)
          if (gradients[i].defined())
            gradient_squares_[joint_index_[t][i]] += gradients[i].pow(2).sum().item<double>();
      }
    }
    if (reports_.print_grads_stats)
      for (std::size_t t = 0; t < tasks_.size(); ++t)
        for (std::size_t i = 0; i < sums[t].gradients->size(); ++i)
          if ((*sums[t].gradients)[i].defined())
            applied.emplace_back(joint_index_[t][i], (*sums[t].gradients)[i]);
    for (auto& slot : slots_) {
      const auto& gradients = *sums[slot.task].gradients;
      for (std::size_t k = 0; k < slot.parameters.size(); ++k)
        slot.parameters[k].mutable_grad() = gradients[slot.task_indices[k]];
      set_learning_rate(slot);
      slot.optimizer->step();
    }
  }
  for (auto& parameter : parameters_) parameter.mutable_grad() = torch::Tensor();
  if (reports_.print_grads_stats) log_gradient_stats(applied, step);
  if (reports_.print_var_updates) log_variable_updates(before, step);
}

namespace {

struct AbsoluteStats {
  double min = 0, max = 0, mean = 0, std = 0;
  int64_t count = 0;
};

// Of |values| (the original's get_grad_stats): population standard deviation.
AbsoluteStats absolute_stats(const torch::Tensor& values) {
  auto magnitudes = values.detach().abs().to(torch::kCPU, torch::kFloat64).reshape({-1});
  AbsoluteStats stats;
  stats.count = magnitudes.numel();
  if (stats.count == 0) return stats;
  stats.min = magnitudes.min().item<double>();
  stats.max = magnitudes.max().item<double>();
  stats.mean = magnitudes.mean().item<double>();
  stats.std = magnitudes.std(/*unbiased=*/false).item<double>();
  return stats;
}

std::string stats_text(const AbsoluteStats& stats) {
  return fmt::format("min {:.3g} max {:.3g} mean {:.3g} std {:.3g}", stats.min, stats.max,
                     stats.mean, stats.std);
}

}  // namespace

void ParameterUpdate::log_gradient_stats(
    const std::vector<std::pair<std::size_t, torch::Tensor>>& applied, int64_t step) const {
  if (applied.empty()) return;
  std::vector<torch::Tensor> flat;
  for (const auto& entry : applied) flat.push_back(entry.second.reshape({-1}));
  logger().info("update {}: |gradient| over {} tensor(s): {}", step + 1, applied.size(),
               stats_text(absolute_stats(torch::cat(flat))));
  for (const auto& [index, gradient] : applied)
    logger().info("  |gradient| {}: {}", parameter_names_[index],
                 stats_text(absolute_stats(gradient)));
}

void ParameterUpdate::log_variable_updates(const std::vector<torch::Tensor>& before,
                                           int64_t step) const {
  // The original's "Av param upd (*10000)": per tensor the mean absolute change x 1e4, and the
  // mean of those.
  std::vector<double> changes;
  for (std::size_t j = 0; j < parameters_.size(); ++j)
    changes.push_back(1e4 * (parameters_[j].detach() - before[j])
                                .abs()
                                .mean()
                                .to(torch::kFloat64)
                                .item<double>());
  double mean = 0;
  for (double change : changes) mean += change / static_cast<double>(changes.size());
  logger().info("update {}: mean |parameter change| x 1e4 over {} tensor(s): {:.3f}", step + 1,
               changes.size(), mean);
  for (std::size_t j = 0; j < changes.size(); ++j)
    logger().info("  change x 1e4 {}: {:.3f}", parameter_names_[j], changes[j]);
}

std::map<std::string, double> ParameterUpdate::last_gradient_norms() const {
  std::map<std::string, double> squares;
  for (std::size_t j = 0; j < gradient_squares_.size(); ++j)
    squares[parameter_names_[j].substr(0, parameter_names_[j].find('.'))] += gradient_squares_[j];
  for (auto& [model, value] : squares) value = std::sqrt(value);
  return squares;
}

}  // namespace nabu
