// Feature computers (docs/data_layout.md): signal -> [frames, dim], with the original's definitions
// (snip, framing, window, nfft, preemphasis, log of the magnitude for logspec, ...), on tensors.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "nabu/core/options.h"
#include "nabu/core/registry.h"
#include "nabu/processing/signal.h"

namespace nabu {

struct FeatureOptions {
  std::string feature;
  double winlen = 0.032;
  double winstep = 0.008;
  std::string winfunc = "cosine";
  int nfft = 256;
  double preemph = 0.0;
  bool include_energy = false;
  // fbank / mfcc
  int nfilt = 40;
  int numcep = 13;
  int lowfreq = 0;
  int highfreq = -1;  // -1: half the sample rate
  double ceplifter = 22.0;
  std::string dynamic = "nodelta";  // nodelta, delta, ddelta

  void declare(OptionsReader& r);
  FrameSettings frames(int sample_rate) const;
  // "" when a winlen frame at `sample_rate` fits nfft; else why not and the nfft that fits. The
  // analysis then cuts every frame to nfft samples, as the original does (python_speech_features
  // warns); the inverse STFT cannot overlap-add such frames. Raw samples: "".
  std::string frame_problem(int sample_rate) const;
  // The smallest power of two that holds a winlen frame at `sample_rate`.
  int fitting_nfft(int sample_rate) const;
};

class FeatureComputer {
 public:
  explicit FeatureComputer(FeatureOptions options) : options_(std::move(options)) {}
  virtual ~FeatureComputer() = default;
  // signal: double [N] (int16 scale); result: [T, dim] double, complex for `spec`,
  // [N, 1] for `raw`.
  virtual torch::Tensor compute(const torch::Tensor& signal, int sample_rate) const = 0;
  virtual int64_t dim() const = 0;
  // Frames (T) are samples for `raw`.
  virtual bool sample_domain() const { return false; }
  const FeatureOptions& options() const { return options_; }

 protected:
  FeatureOptions options_;
};

using FeatureComputerPtr = std::shared_ptr<const FeatureComputer>;
using FeatureRegistry = Registry<FeatureComputerPtr, const FeatureOptions&>;
FeatureRegistry& feature_registry();

// Builds the computer named by options.feature (error listing the known ones).
FeatureComputerPtr make_feature_computer(const FeatureOptions& options);

// The original's pre-emphasis: y[0] = x[0], y[i] = x[i] - c x[i-1].
torch::Tensor preemphasis(const torch::Tensor& signal, double coefficient);
// Mel filterbank [nfilt, nfft/2+1] as python_speech_features' get_filterbanks.
torch::Tensor mel_filterbank(int nfilt, int nfft, int sample_rate, int lowfreq, int highfreq);

}  // namespace nabu
