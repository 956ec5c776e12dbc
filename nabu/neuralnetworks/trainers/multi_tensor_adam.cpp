// MultiTensorAdam (parameter_update.h): Adam's update of every parameter in a few multi-tensor
// operations.
#include <map>
#include <sstream>
#include <vector>

#include <torch/version.h>

#include "nabu/neuralnetworks/trainers/parameter_update.h"

namespace nabu {

namespace {

// LibTorch 1.13 keys optimizer state by the printed address of the parameter's TensorImpl,
// LibTorch 2.x by the address itself.
[[maybe_unused]] std::string state_key(const torch::Tensor& parameter, const std::string*) {
  std::ostringstream key;  // as c10::guts::to_string, which LibTorch 2.x no longer has
  key << parameter.unsafeGetTensorImpl();
  return key.str();
}
[[maybe_unused]] void* state_key(const torch::Tensor& parameter, void* const*) {
  return parameter.unsafeGetTensorImpl();
}

}  // namespace

torch::Tensor MultiTensorAdam::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  using Key = std::decay_t<decltype(state_)>::key_type;
  // The parameters of a group that share a step count share the bias corrections.
  struct Lists {
    std::vector<torch::Tensor> parameters, gradients, averages, squares, maxima;
  };
  for (auto& group : param_groups_) {
    const auto& options = static_cast<const torch::optim::AdamOptions&>(group.options());
    std::map<int64_t, Lists> by_step;
    for (auto& parameter : group.params()) {
      if (!parameter.grad().defined()) continue;
      const Key key = state_key(parameter, static_cast<const Key*>(nullptr));
      auto found = state_.find(key);
      if (found == state_.end()) {
        auto state = std::make_unique<torch::optim::AdamParamState>();
        state->step(0);
        state->exp_avg(torch::zeros_like(parameter, torch::MemoryFormat::Preserve));
        state->exp_avg_sq(torch::zeros_like(parameter, torch::MemoryFormat::Preserve));
        if (options.amsgrad())
          state->max_exp_avg_sq(torch::zeros_like(parameter, torch::MemoryFormat::Preserve));
        found = state_.emplace(key, std::move(state)).first;
      }
      auto& state = static_cast<torch::optim::AdamParamState&>(*found->second);
      state.step(state.step() + 1);
      Lists& lists = by_step[state.step()];
      lists.parameters.push_back(parameter);
      lists.gradients.push_back(parameter.grad());
      lists.averages.push_back(state.exp_avg());
      lists.squares.push_back(state.exp_avg_sq());
      if (options.amsgrad()) lists.maxima.push_back(state.max_exp_avg_sq());
    }
    const auto [beta1, beta2] = options.betas();
    for (auto& [step, lists] : by_step) {
      const double correction1 = 1 - std::pow(beta1, step);
      const double correction2 = 1 - std::pow(beta2, step);
      auto& gradients = lists.gradients;
      if (options.weight_decay() != 0)
        gradients = at::_foreach_add(gradients, lists.parameters, options.weight_decay());
      at::_foreach_mul_(lists.averages, beta1);
      at::_foreach_add_(lists.averages, gradients, 1 - beta1);
      at::_foreach_mul_(lists.squares, beta2);
      at::_foreach_addcmul_(lists.squares, gradients, gradients, 1 - beta2);
      if (options.amsgrad())
        for (std::size_t i = 0; i < lists.maxima.size(); ++i)
          torch::max_out(lists.maxima[i], lists.squares[i], lists.maxima[i]);
      auto denominators = at::_foreach_sqrt(options.amsgrad() ? lists.maxima : lists.squares);
      if (tensorflow_epsilon_) {
        // sqrt(v) + eps, then the correction: lr sqrt(c2) / c1 * m / (sqrt(v) + eps), as TF.
        at::_foreach_add_(denominators, options.eps());
        at::_foreach_div_(denominators, std::sqrt(correction2));
      } else {
        at::_foreach_div_(denominators, std::sqrt(correction2));
        at::_foreach_add_(denominators, options.eps());
      }
      at::_foreach_addcdiv_(lists.parameters, lists.averages, denominators,
                            -options.lr() / correction1);
    }
  }
  return loss;
}

}  // namespace nabu
