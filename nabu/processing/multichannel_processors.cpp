// The multi-microphone processors of the original's Journal_of_Neural_Engineering_2020 recipes
// (binaural hearing-aid mixtures, several wavs per mixture), each registered under the original's
// name. List lines name one mono wav per token: per channel, and for the targets per source then
// per channel (source-major: src0 ch0..chC-1, src1 ch0..chC-1, ...). Channels must share their
// sample rate and give features of one shape (the original stacks them with numpy).
#include <algorithm>
#include <map>
#include <optional>

#include "nabu/core/error.h"
#include "nabu/core/strings.h"
#include "nabu/processing/audio.h"
#include "nabu/processing/feature_processor.h"

namespace nabu {

namespace {

// Features of every file in `paths`, stacked on a new last axis: [T, F, K].
torch::Tensor file_features(const FeatureComputer& computer, const std::vector<std::string>& paths,
                            int& rate) {
  std::vector<torch::Tensor> features;
  for (const auto& path : paths) {
    auto samples = read_same_rate(path, rate);
    auto computed = computer.compute(samples, rate);
    if (!features.empty() && computed.sizes() != features.front().sizes())
      throw DataError("'" + path + "' gives features of shape " + shape_text(computed) +
                      " but '" + paths.front() + "' gives " + shape_text(features.front()) +
                      " (channels and sources must have the same length)");
    features.push_back(computed);
  }
  return torch::stack(features, -1);
}

// The fields of a source-major line of `sources` x `channels` wavs; `sources` = 0 accepts any
// number of at least `min_sources` complete blocks.
void check_blocks(const DataLine& line, int channels, int sources, int min_sources,
                  const std::string& sources_key) {
  std::size_t count = line.fields.size();
  if (sources > 0) {
    std::size_t expected = static_cast<std::size_t>(sources) * channels;
    if (count != expected)
      throw DataError("expected " + sources_key + " x nr_channels = " + std::to_string(sources) +
                      " x " + std::to_string(channels) + " = " + std::to_string(expected) +
                      " wavs (per source, its channels), got " + std::to_string(count) +
                      " fields");
    return;
  }
  if (count % channels != 0 || count / channels < static_cast<std::size_t>(min_sources))
    throw DataError("expected whole blocks of nr_channels = " + std::to_string(channels) +
                    " wavs (per source, its channels; the last block the reference), at least " +
                    std::to_string(min_sources) + " blocks, got " + std::to_string(count) +
                    " fields");
}

// ---------------------------------------------------------------------------------------------
// spatial_feat_processor

// mvn_type as audio_feat_processor's (the original never reads it; every recipe says None).
struct SpatialOptions : FeatOptions {
  std::string channels_pairs;
  std::vector<std::pair<int, int>> pairs;  // 0-based channel indices, from channels_pairs

  void declare(OptionsReader& r) {
    FeatOptions::declare(r);
    r("channels_pairs", channels_pairs,
      "space-separated channel pairs a-b (channels counted from 1 in the line's wavs): per pair "
      "cos and sin of the feature's difference (angspec: the inter-channel phase difference)");
    pairs.clear();
    r.require(!split_whitespace(channels_pairs).empty(), "channels_pairs",
              "required: e.g. '3-5 4-6 3-4'");
    for (const auto& token : split_whitespace(channels_pairs)) {
      auto ends = split(token, '-');
      std::optional<long long> a, b;
      if (ends.size() == 2) {
        a = parse_int(ends[0]);
        b = parse_int(ends[1]);
      }
      r.require(a && b && *a >= 1 && *b >= 1, "channels_pairs",
                "'" + shorten(token) + "' is not a pair a-b of channel numbers counted from 1");
      if (a && b) pairs.emplace_back(static_cast<int>(*a - 1), static_cast<int>(*b - 1));
    }
  }
};

// [T, 2 F P]: for pair p, columns p*2F + f hold cos(x_a - x_b) and p*2F + F + f sin(x_a - x_b),
// x the feature (angspec: the phase) of channel a and b.
class SpatialFeatProcessor : public FeatureProcessor<SpatialOptions> {
 public:
  using FeatureProcessor::FeatureProcessor;
  torch::Tensor process(const DataLine& line, int* sample_rate) const override {
    int rate = 0;
    auto features = spatial_features(line, rate);
    if (sample_rate) *sample_rate = rate;
    return normalise_features(features, options_.mvn_type, statistics_);
  }
  std::vector<int64_t> nontime_dims() const override {
    return {computer_->dim() * 2 * static_cast<int64_t>(options_.pairs.size())};
  }
  torch::Tensor statistics_observations(const DataLine& line) const override {
    int rate = 0;
    return spatial_features(line, rate);
  }

 private:
  torch::Tensor spatial_features(const DataLine& line, int& rate) const {
    std::map<int, torch::Tensor> channels;
    for (const auto& [a, b] : options_.pairs)
      for (int channel : {a, b})
        if (channel >= static_cast<int>(line.fields.size()))
          throw DataError("channels_pairs '" + options_.channels_pairs + "' names channel " +
                          std::to_string(channel + 1) + " but the line has " +
                          std::to_string(line.fields.size()) + " wavs (one per channel)");
    std::vector<torch::Tensor> per_pair;
    for (const auto& [a, b] : options_.pairs) {
      for (int channel : {a, b})
        if (!channels.count(channel)) {
          const auto& path = line.fields[channel];
          auto samples = read_same_rate(path, rate);  // sets rate before it is used
          channels[channel] = computer_->compute(samples, rate);
        }
      const auto& first = channels[a];
      const auto& second = channels[b];
      if (first.sizes() != second.sizes())
        throw DataError("channel " + std::to_string(a + 1) + " ('" + line.fields[a] +
                        "') gives features of shape " + shape_text(first) + " but channel " +
                        std::to_string(b + 1) + " ('" + line.fields[b] + "') " +
                        shape_text(second));
      auto difference = first - second;
      per_pair.push_back(torch::cat({difference.cos(), difference.sin()}, 1));
    }
    return torch::cat(per_pair, 1);
  }
};

// ---------------------------------------------------------------------------------------------
// ideal_ratio_multimic_processor

struct IdealRatioMultimicOptions : SignalOptions {
  int nr_channels = 0;
  bool apply_sqrt = true;
  void declare(OptionsReader& r) {
    SignalOptions::declare(r);
    r("nr_channels", nr_channels, "wavs per source on the line");
    r("apply_sqrt", apply_sqrt, "take the square root of the power ratio");
    r.require(nr_channels >= 1, "nr_channels", "must be at least 1");
    r.require(feature.find("pow") != std::string::npos, "feature",
              (feature.empty() ? std::string("required") : "'" + feature + "'") +
                  ": the ideal ratio mask needs a feature in the power domain (powspec)");
  }
};

// Line: per speech source its nr_channels wavs, then the reference's (noise) nr_channels wavs.
// P_s = channel mean of source s's power; mask = (sum_s P_s / (sum_s P_s + P_ref + 1e-48)),
// square-rooted with apply_sqrt. [T, F].
class IdealRatioMultimicProcessor : public FeatureProcessor<IdealRatioMultimicOptions> {
 public:
  using FeatureProcessor::FeatureProcessor;
  torch::Tensor process(const DataLine& line, int* sample_rate) const override {
    check_blocks(line, options_.nr_channels, 0, 2, "");
    int rate = 0;
    auto features = file_features(*computer_, line.fields, rate);  // [T, F, B*C]
    if (sample_rate) *sample_rate = rate;
    int64_t blocks = static_cast<int64_t>(line.fields.size()) / options_.nr_channels;
    auto per_source = features.reshape({features.size(0), features.size(1), blocks,
                                        options_.nr_channels})
                          .mean(-1);  // [T, F, B]
    auto speech = per_source.slice(-1, 0, blocks - 1).sum(-1);
    auto reference = per_source.select(-1, blocks - 1);
    auto ratio = speech / (speech + reference + 1e-48);
    return options_.apply_sqrt ? ratio.sqrt() : ratio;
  }
};

// ---------------------------------------------------------------------------------------------
// onehotperfeature_target_multimic_processor and multi_target_multimic_processor

struct MultimicTargetOptions : SignalOptions {
  int nrs = 2;
  int nr_channels = 0;
  void declare(OptionsReader& r) {
    SignalOptions::declare(r);
    r("nrs", nrs, "number of sources on each line");
    r("nr_channels", nr_channels, "wavs per source on the line");
    r.require(nr_channels >= 1, "nr_channels", "must be at least 1");
    r.require(nrs >= 1, "nrs", "must be at least 1");
  }
};

// The channel-averaged feature of every source of a source-major line: [T, F, S].
torch::Tensor source_channel_means(const FeatureComputer& computer, const DataLine& line, int nrs,
                                   int channels, int& rate) {
  check_blocks(line, channels, nrs, nrs, "nrs");
  auto features = file_features(computer, line.fields, rate);  // [T, F, S*C]
  return features.reshape({features.size(0), features.size(1), nrs, channels}).mean(-1);
}

// A target processor of channel-averaged source features: process() averages each source's
// channels ([T, F, S]) and hands them to from_means.
template <class Options>
class ChannelMeansProcessor : public FeatureProcessor<Options> {
 public:
  using FeatureProcessor<Options>::FeatureProcessor;
  torch::Tensor process(const DataLine& line, int* sample_rate) const override {
    int rate = 0;
    auto means = source_channel_means(*this->computer_, line, this->options_.nrs,
                                      this->options_.nr_channels, rate);
    if (sample_rate) *sample_rate = rate;
    return from_means(means);
  }

 protected:
  virtual torch::Tensor from_means(const torch::Tensor& means) const = 0;
};

struct OneHotMultimicOptions : MultimicTargetOptions {
  std::vector<int> spk_select;
  void declare(OptionsReader& r) {
    MultimicTargetOptions::declare(r);
    declare_spk_select(r, spk_select, nrs);
  }
};

// Deep clustering targets from the channel-averaged magnitudes: bool [T, F*S'], column f*S'+i
// true where source spk_select[i] dominates bin f.
class OneHotPerFeatureTargetMultimicProcessor
    : public DominantSourceTargets<ChannelMeansProcessor<OneHotMultimicOptions>> {
 public:
  using DominantSourceTargets::DominantSourceTargets;

 protected:
  torch::Tensor from_means(const torch::Tensor& means) const override {
    return dominant_source_columns(means, options_.spk_select);
  }
};

// PIT / DANet targets from the channel-averaged feature of every source: [T, F, S].
class MultiTargetMultimicProcessor : public ChannelMeansProcessor<MultimicTargetOptions> {
 public:
  using ChannelMeansProcessor::ChannelMeansProcessor;
  std::vector<int64_t> nontime_dims() const override { return {computer_->dim(), options_.nrs}; }

 protected:
  torch::Tensor from_means(const torch::Tensor& means) const override { return means; }
};

// ---------------------------------------------------------------------------------------------
// scorelabelperfeature_multimic_processor

struct ScoreLabelMultimicOptions : SignalOptions {
  double mag_thres = 100.0;
  void declare(OptionsReader& r) {
    SignalOptions::declare(r);
    r("mag_thres", mag_thres,
      "a bin is used when the channel-averaged feature is above its utterance maximum / mag_thres");
    r.require(mag_thres > 0, "mag_thres", "must be positive");
  }
};

// usedbins of a multi-microphone mixture (one wav per microphone, any number): the feature
// averaged over the microphones, above max/mag_thres. bool [T, F].
class ScoreLabelPerFeatureMultimicProcessor : public FeatureProcessor<ScoreLabelMultimicOptions> {
 public:
  using FeatureProcessor::FeatureProcessor;
  torch::Tensor process(const DataLine& line, int* sample_rate) const override {
    if (line.fields.empty()) throw DataError("expected one wav per microphone, got none");
    int rate = 0;
    auto features = file_features(*computer_, line.fields, rate).mean(-1);
    if (sample_rate) *sample_rate = rate;
    return bins_above_peak(features, options_.mag_thres, &line);
  }
  StoredType stored_type() const override { return StoredType::kBool; }
};

// ---------------------------------------------------------------------------------------------
// one_processor and zero_processor

// A constant mask [T, dim] with the frames and dimension of the feature of one wav.
template <int kValue>
class ConstantProcessor : public MixtureProcessor<SignalOptions> {
 public:
  using MixtureProcessor::MixtureProcessor;
  torch::Tensor process_audio(const torch::Tensor& samples, int sample_rate) const override {
    int64_t frames = computer_->compute(samples, sample_rate).size(0);
    return torch::full({frames, computer_->dim()}, static_cast<double>(kValue), torch::kFloat32);
  }
};

}  // namespace

NABU_REGISTER_WITH_OPTIONS(processor_registry, "spatial_feat_processor",
                           (make_processor_with<SpatialFeatProcessor, SpatialOptions>),
                           SpatialOptions,
                           "cos and sin of the feature difference of channel pairs (inter-channel "
                           "phase differences with angspec), [T, 2 F P]")
NABU_REGISTER_WITH_OPTIONS(processor_registry, "ideal_ratio_multimic_processor",
                           (make_processor_with<IdealRatioMultimicProcessor,
                                                IdealRatioMultimicOptions>),
                           IdealRatioMultimicOptions,
                           "ideal ratio mask of the channel-averaged speech power against a "
                           "reference, [T, F]")
NABU_REGISTER_WITH_OPTIONS(
    processor_registry, "onehotperfeature_target_multimic_processor",
    (make_processor_with<OneHotPerFeatureTargetMultimicProcessor, OneHotMultimicOptions>),
    OneHotMultimicOptions,
    "deep clustering targets from channel-averaged features: bool [T, F*S]")
NABU_REGISTER_WITH_OPTIONS(processor_registry, "multi_target_multimic_processor",
                           (make_processor_with<MultiTargetMultimicProcessor,
                                                MultimicTargetOptions>),
                           MultimicTargetOptions,
                           "channel-averaged features of every source, [T, F, S]")
NABU_REGISTER_WITH_OPTIONS(processor_registry, "scorelabelperfeature_multimic_processor",
                           (make_processor_with<ScoreLabelPerFeatureMultimicProcessor,
                                                ScoreLabelMultimicOptions>),
                           ScoreLabelMultimicOptions,
                           "usedbins of the microphone-averaged feature, bool [T, F]")
NABU_REGISTER_WITH_OPTIONS(processor_registry, "one_processor",
                           (make_processor_with<ConstantProcessor<1>, SignalOptions>),
                           SignalOptions,
                           "all ones, [T, F] with the frames and dimension of the feature")
NABU_REGISTER_WITH_OPTIONS(processor_registry, "zero_processor",
                           (make_processor_with<ConstantProcessor<0>, SignalOptions>),
                           SignalOptions,
                           "all zeros, [T, F] with the frames and dimension of the feature")

}  // namespace nabu
