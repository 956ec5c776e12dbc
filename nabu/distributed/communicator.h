// What training needs from a process group: sums over ranks, broadcasts from the chief and the
// waiting-workers barrier. World size 1 (LocalCommunicator) makes every call a no-op, so the
// trainer has one code path for one process and for many.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

namespace nabu {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  bool is_chief() const { return rank() == 0; }
  // In place: every tensor becomes the sum over ranks (same shapes on every rank).
  virtual void all_reduce_sum(std::vector<torch::Tensor>& tensors) = 0;
  // In place: every rank receives the root's tensors.
  virtual void broadcast(std::vector<torch::Tensor>& tensors, int root = 0) = 0;
  // The waiting-workers barrier: returns when every rank has arrived.
  virtual void barrier() = 0;
  // This rank made progress (a minibatch, a validation batch, a checkpoint write): what the
  // liveness check of a distributed run watches, besides the process's CPU time.
  virtual void tick() {}
};

class LocalCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void all_reduce_sum(std::vector<torch::Tensor>&) override {}
  void broadcast(std::vector<torch::Tensor>&, int) override {}
  void barrier() override {}
};

// Sums scalars over ranks (helper for losses and norms).
std::vector<double> all_reduce_sum(Communicator& communicator, const std::vector<double>& values);
// Broadcasts doubles from the chief.
std::vector<double> broadcast_values(Communicator& communicator, const std::vector<double>& values);

}  // namespace nabu
