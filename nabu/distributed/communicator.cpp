#include "nabu/distributed/communicator.h"

namespace nabu {

std::vector<double> all_reduce_sum(Communicator& communicator, const std::vector<double>& values) {
  if (communicator.world_size() == 1 || values.empty()) return values;
  std::vector<torch::Tensor> tensors{torch::tensor(values, torch::kFloat64)};
  communicator.all_reduce_sum(tensors);
  auto accessor = tensors[0].accessor<double, 1>();
  std::vector<double> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = accessor[i];
  return out;
}

std::vector<double> broadcast_values(Communicator& communicator, const std::vector<double>& values) {
  if (communicator.world_size() == 1 || values.empty()) return values;
  std::vector<torch::Tensor> tensors{torch::tensor(values, torch::kFloat64)};
  communicator.broadcast(tensors, 0);
  auto accessor = tensors[0].accessor<double, 1>();
  std::vector<double> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = accessor[i];
  return out;
}

}  // namespace nabu
