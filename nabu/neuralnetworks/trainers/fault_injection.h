// The faults the tests inject into a training run (tests/unit/test_faults.cpp,
// test_devices.cpp), read once from the environment when a stage starts; unset, each costs one
// comparison per update.
//   NABU_TEST_HANG_AT_STEP=N   rank NABU_TEST_HANG_RANK (default 1) blocks without computing
//                              once N updates are done, as a rank stuck in a file system
//                              read does;
//   NABU_TEST_ABORT_AT_STEP=N  rank NABU_TEST_HANG_RANK (default 0) aborts (SIGABRT, as a
//                              crash) before update N of every run;
//   NABU_TEST_INF_GRADIENT_AT_STEP=N  an infinity in a gradient of update N, as an fp16
//                              overflow gives.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace nabu {

class FaultInjection {
 public:
  explicit FaultInjection(int rank);
  // Before update `update` (numbered from 1): aborts or hangs where asked to.
  void before_update(int64_t update) const;
  // After the gradients of update `update` were summed: the infinity, where asked for.
  void corrupt_gradients(int64_t update, std::vector<torch::Tensor>& gradients) const;

 private:
  int64_t hang_update_ = -1, abort_update_ = -1, inf_update_ = -1;
};

}  // namespace nabu
