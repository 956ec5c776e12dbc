// The one base of the processors that compute features from audio, single- and multi-microphone
// alike (processors.cpp, multichannel_processors.cpp): their options, their feature computer, the
// global mean/variance statistics where the options have mvn_type, and the pieces of target and
// mask computation both kinds share. Internal to processing/.
#pragma once

#include <string>
#include <type_traits>
#include <vector>

#include "nabu/processing/audio.h"
#include "nabu/processing/processor.h"

namespace nabu {

// spk_select, or every source 0..nrs-1 when it is empty.
std::vector<int> selected_sources(const std::vector<int>& spk_select, int nrs);

template <class Options>
class FeatureProcessor : public Processor {
 public:
  explicit FeatureProcessor(const Options& options)
      : options_(options), computer_(make_feature_computer(options)) {}
  const FeatureOptions* feature_options() const override { return &options_; }
  std::vector<int64_t> nontime_dims() const override { return {computer_->dim()}; }
  // Options with mvn_type (FeatOptions) normalise with global statistics when it says so.
  bool needs_statistics() const override {
    if constexpr (std::is_base_of_v<FeatOptions, Options>) return options_.mvn_type == "global";
    return false;
  }
  void set_statistics(const MvnStatistics& statistics) override { statistics_ = statistics; }

 protected:
  Options options_;
  FeatureComputerPtr computer_;
  MvnStatistics statistics_;
};

// A processor whose line is one mixture wav: process() reads it and hands it to process_audio,
// which `nabu separate` and dynamic mixing call directly.
template <class Options>
class MixtureProcessor : public FeatureProcessor<Options> {
 public:
  using FeatureProcessor<Options>::FeatureProcessor;
  torch::Tensor process(const DataLine& line, int* sample_rate) const override {
    Audio audio = read_audio_fields(line.fields);
    if (sample_rate) *sample_rate = audio.sample_rate;
    return this->process_audio(audio.samples, audio.sample_rate);
  }
  SignalRole signal_role() const override { return SignalRole::kMixture; }
};

// Deep clustering targets (the dominant source of every bin) on top of `Base`, a FeatureProcessor
// whose options have nrs and spk_select (empty: every source): bool [T, F*S'].
template <class Base>
class DominantSourceTargets : public Base {
 public:
  template <class Options>
  explicit DominantSourceTargets(const Options& options) : Base(options) {
    this->options_.spk_select = selected_sources(this->options_.spk_select, this->options_.nrs);
  }
  StoredType stored_type() const override { return StoredType::kBool; }
  std::vector<int64_t> nontime_dims() const override {
    return {this->computer_->dim() * static_cast<int64_t>(this->options_.spk_select.size())};
  }
};

// One wav of a channel or source; `rate` is the rate of the wavs read so far (0: none yet), and a
// different rate is a DataError naming the file.
torch::Tensor read_same_rate(const std::string& path, int& rate);

// "[2, 3]".
std::string shape_text(const torch::Tensor& tensor);

// Deep clustering targets from per-source features [T, F, S]: bool [T, F*S'], column f*S'+i true
// where source spk_select[i] dominates bin f (the first maximum on ties, as numpy).
torch::Tensor dominant_source_columns(const torch::Tensor& features,
                                      const std::vector<int>& spk_select);

// usedbins: the bins of `features` [T, F] above its maximum / mag_thres; with a line, warns naming
// the utterance when fewer than 1% are.
torch::Tensor bins_above_peak(const torch::Tensor& features, double mag_thres,
                              const DataLine* line = nullptr);

// The key spk_select of the deep clustering target processors: source indices below nrs.
void declare_spk_select(OptionsReader& r, std::vector<int>& spk_select, int nrs);

}  // namespace nabu
