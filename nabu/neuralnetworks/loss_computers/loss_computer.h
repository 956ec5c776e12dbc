// Loss computers: (targets, outputs, sequence lengths) -> (loss, norm), both summed over the
// batch (docs/losses.md). Training and validation divide Σloss by Σnorm over all minibatches, so a
// loss never averages itself. Padded frames (t >= seq_length) contribute to neither.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/core/options.h"
#include "nabu/core/registry.h"
#include "nabu/neuralnetworks/tensor_map.h"
#include "nabu/pipeline/batch.h"

namespace nabu {

struct LossResult {
  torch::Tensor loss;  // 0-dim, differentiable w.r.t. the outputs
  torch::Tensor norm;  // 0-dim, no gradient
};

class LossComputer {
 public:
  virtual ~LossComputer() = default;
  // targets/outputs: [B, T, ...] batch-first, zero-padded; seq_lengths: int64 [B] (frames).
  // Targets stored as bool arrive as torch::kBool or kUInt8; losses convert as they need.
  virtual LossResult operator()(const TensorMap& targets, const TensorMap& outputs,
                                const torch::Tensor& seq_lengths) = 0;
  // What losses over label sequences (ctc) need beyond that: each target's own lengths and the
  // example names for errors. The others ignore them.
  struct SequenceInfo {
    const TensorMap& target_lengths;  // int64 [B] per target name
    const std::vector<std::string>& example_names;
  };
  virtual LossResult operator()(const TensorMap& targets, const TensorMap& outputs,
                                const torch::Tensor& seq_lengths, const SequenceInfo& sequences) {
    return (*this)(targets, outputs, seq_lengths);
  }
  // Names this loss reads (for `nabu check` and clear errors before training starts).
  virtual std::vector<std::string> target_names() const = 0;
  virtual std::vector<std::string> output_names() const = 0;
};

using LossPtr = std::shared_ptr<LossComputer>;

// The loss of one batch: its targets (with their lengths and the example names) against the model
// outputs, with the sequence lengths of the first input.
LossResult batch_loss(LossComputer& loss, const Batch& batch, const std::string& first_input,
                      const std::vector<std::string>& target_names, const TensorMap& outputs);
// The factory receives the loss options section (the loss.cfg section named by the task's
// loss_type, without its `loss_type` key; an empty section when there is no loss.cfg).
using LossRegistry = Registry<LossPtr, const ConfigSection&>;
LossRegistry& loss_registry();

// The task's loss, with the original's loss.cfg indirection (docs/trainer.md): with a loss.cfg the
// task's loss_type names a section whose own loss_type picks the class and whose other keys are
// options; without one, loss_type is the class and there are no options (the original crashes).
// `loss_config` may be nullptr. Errors name the task section and key.
LossPtr make_loss(const ConfigSection& task_section, const ConfigFile* loss_config);
// The class name that make_loss would build (for `nabu check`), throwing the same errors.
std::string resolve_loss_type(const ConfigSection& task_section, const ConfigFile* loss_config,
                              ConfigSection* options_out = nullptr);

// The factory shape every loss registers: read its options struct strictly (unknown keys are
// errors naming file:line [section] key) and build the loss from them.
template <class Loss, class Options>
LossPtr make_configured_loss(const ConfigSection& options_section, const std::string& type) {
  return std::make_shared<Loss>(read_options<Options>(options_section, "loss_type " + type));
}

// Options struct of the losses that have no options (as in the original).
struct NoLossOptions {
  void declare(OptionsReader&) {}
};

}  // namespace nabu
