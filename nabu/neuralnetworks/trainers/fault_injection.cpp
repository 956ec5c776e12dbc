#include "nabu/neuralnetworks/trainers/fault_injection.h"

#include <chrono>
#include <cstdlib>
#include <limits>
#include <thread>

namespace nabu {

namespace {

// The update named by `variable` when this rank is the one NABU_TEST_HANG_RANK names (or
// `default_rank` without it); -1 otherwise.
int64_t update_for_rank(const char* variable, int rank, int default_rank) {
  const char* update = std::getenv(variable);
  const char* chosen = std::getenv("NABU_TEST_HANG_RANK");
  if (!update || (chosen ? std::atoi(chosen) : default_rank) != rank) return -1;
  return std::atoll(update);
}

}  // namespace

FaultInjection::FaultInjection(int rank)
    : hang_update_(update_for_rank("NABU_TEST_HANG_AT_STEP", rank, 1)),
      abort_update_(update_for_rank("NABU_TEST_ABORT_AT_STEP", rank, 0)) {
  const char* inf = std::getenv("NABU_TEST_INF_GRADIENT_AT_STEP");
  inf_update_ = inf ? std::atoll(inf) : -1;
}

void FaultInjection::before_update(int64_t update) const {
  if (update == abort_update_) std::abort();
  if (update - 1 == hang_update_)
    while (true) std::this_thread::sleep_for(std::chrono::seconds(60));
}

void FaultInjection::corrupt_gradients(int64_t update,
                                       std::vector<torch::Tensor>& gradients) const {
  if (update != inf_update_) return;
  for (auto& gradient : gradients)
    if (gradient.defined()) {
      gradient.view(-1)[0] = std::numeric_limits<float>::infinity();
      return;
    }
}

}  // namespace nabu
