// Streaming separation with a trained causal model (`nabu separate --stream`, the C++ API's
// Stream): pieces of a signal in, the separated pieces out, at the input's level. The model keeps
// its history between pieces (Model::stream), so the outputs are the model's whole-signal
// outputs; what `nabu separate` does over a whole file (division by the peak, least-squares
// gains) is replaced by what can be known so far: the gains that rebuild the input heard up to
// each output sample (a causal running least-squares fit).
#pragma once

#include <torch/torch.h>

#include <memory>

namespace nabu {

class ModelStream;
class TaskSeparation;

class SeparationStream {
 public:
  // The task's single waveform model (TaskSeparation::waveform_model). Throws Error naming why
  // it cannot be streamed (a model that looks ahead, a mask model, ...).
  explicit SeparationStream(TaskSeparation& separation);
  ~SeparationStream();

  int sample_rate() const { return sample_rate_; }
  int speakers() const { return speakers_; }
  // Samples each output lags its input by, beyond the piece pushed (the model's lookahead).
  int64_t lookahead() const;
  // samples [n] float (any scale) -> [S, m] float at the input's scale; m: what became final.
  torch::Tensor push(const torch::Tensor& samples);
  // The end of the signal: the rest of the outputs (the total equals the samples pushed).
  torch::Tensor finish();
  // The model's own outputs of the pushes so far, before the gains (tests).
  void keep_model_outputs(bool keep) { keep_model_outputs_ = keep; }
  const std::vector<torch::Tensor>& model_outputs() const { return model_outputs_; }

 private:
  torch::Tensor level(const torch::Tensor& signals);

  std::unique_ptr<ModelStream> stream_;
  int sample_rate_ = 0, speakers_ = 0;
  torch::Tensor heard_;             // [n] double: input samples the outputs have not reached yet
  torch::Tensor gram_, projection_; // [S, S], [S, 1] double: the running least-squares sums
  bool keep_model_outputs_ = false;
  std::vector<torch::Tensor> model_outputs_;
};

}  // namespace nabu
