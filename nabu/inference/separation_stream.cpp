#include "nabu/inference/separation_stream.h"

#include "nabu/core/error.h"
#include "nabu/neuralnetworks/models/model.h"
#include "nabu/inference/task_separation.h"

namespace nabu {

SeparationStream::SeparationStream(TaskSeparation& separation)
    : sample_rate_(separation.model_sample_rate()), speakers_(separation.num_speakers()) {
  Model& model = separation.waveform_model("streaming");
  model.eval();
  stream_ = model.stream();
  if (!stream_) throw Error(model.describe() + ": " + model.why_not_streamed());
  heard_ = torch::zeros({0}, torch::kFloat64);
  gram_ = torch::zeros({speakers_, speakers_}, torch::kFloat64);
  projection_ = torch::zeros({speakers_, 1}, torch::kFloat64);
}

SeparationStream::~SeparationStream() = default;

int64_t SeparationStream::lookahead() const { return stream_->lookahead(); }

torch::Tensor SeparationStream::push(const torch::Tensor& samples) {
  auto input = samples.reshape({-1}).to(torch::kFloat64);
  heard_ = torch::cat({heard_, input});
  return level(stream_->push(input.to(torch::kFloat32)));
}

torch::Tensor SeparationStream::finish() { return level(stream_->finish()); }

// Each output sample t is scaled by the gains that best rebuild the input up to t from the
// outputs up to t (the sums are updated sample by sample through cumulative sums, so a piece's
// first samples do not use its later ones).
torch::Tensor SeparationStream::level(const torch::Tensor& separated) {
  auto signals = separated.to(torch::kCPU, torch::kFloat64);  // [S, m]
  if (keep_model_outputs_) model_outputs_.push_back(signals.to(torch::kFloat32));
  const int64_t m = signals.size(1);
  if (m == 0) return signals.to(torch::kFloat32);
  auto heard = heard_.narrow(0, 0, m);
  heard_ = heard_.narrow(0, m, heard_.size(0) - m);
  // [m, S, S] and [m, S, 1]: the sums up to and including each sample.
  auto outer = signals.t().unsqueeze(2) * signals.t().unsqueeze(1);
  auto grams = outer.cumsum(0) + gram_;
  auto projections = (signals.t() * heard.unsqueeze(1)).unsqueeze(2).cumsum(0) + projection_;
  gram_ = grams[m - 1];
  projection_ = projections[m - 1];
  // The ridge of mixture_gains: a silent start gives zero gains, not a singular solve.
  auto ridge = 1e-9 * torch::diagonal(grams, 0, 1, 2).mean(1).clamp_min(1e-12);
  auto eye = torch::eye(speakers_, torch::kFloat64);
  auto gains = torch::linalg_solve(grams + ridge.view({-1, 1, 1}) * eye, projections);  // [m, S, 1]
  return (signals * gains.squeeze(2).t()).to(torch::kFloat32);
}

}  // namespace nabu
