// The multi-microphone processors of the original's Journal_of_Neural_Engineering_2020 recipes
// (binaural hearing-aid mixtures, several wavs per mixture), each registered under the original's
// name. List lines name one mono wav per token: per channel, and for the targets per source then
// per channel (source-major: src0 ch0..chC-1, src1 ch0..chC-1, ...). Channels must share their
// sample rate and give features of one shape (the original stacks them with numpy).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <optional>

#include "nabu/core/error.h"
#include "nabu/core/strings.h"
#include "nabu/processing/audio.h"
#include "nabu/processing/processor.h"

namespace nabu {

namespace {

const char kMvnKeyword[] = "mvn_from_files";

std::string shape_text(const torch::Tensor& tensor) {
  std::string text = "[";
  for (int64_t i = 0; i < tensor.dim(); ++i)
    text += (i ? ", " : "") + std::to_string(tensor.size(i));
  return text + "]";
}

// One channel's wav; `rate` is the rate of the channels read so far (0: none yet).
torch::Tensor read_channel(const std::string& path, int& rate) {
  Audio audio = read_audio(path);
  if (rate != 0 && audio.sample_rate != rate)
    throw DataError("sample rate " + std::to_string(audio.sample_rate) + " Hz of '" + path +
                    "' differs from " + std::to_string(rate) + " Hz of the other channels");
  rate = audio.sample_rate;
  return audio.samples;
}

// Features of every file in `paths`, stacked on a new last axis: [T, F, K].
torch::Tensor file_features(const FeatureComputer& computer, const std::vector<std::string>& paths,
                            int& rate) {
  std::vector<torch::Tensor> features;
  for (const auto& path : paths) {
    auto samples = read_channel(path, rate);
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

// ---------------------------------------------------------------------------------------------
// multi_averager_encapsulator

bool any_key(const std::string&) { return true; }

// Whether processor `name` reads mvn_type itself.
bool declares_mvn(const std::string& name) {
  for (const auto& doc : processor_registry().options(name))
    if (doc.key == "mvn_type") return true;
  return false;
}

struct EncapsulatorOptions {
  std::string encapsulated_processor;
  int n_channels = 0;
  std::string mvn_type = "None";
  void declare(OptionsReader& r) {
    r.accepted("processor", "the processor type");
    r("n_channels", n_channels,
      "number of channels: the line's wavs are split into this many channel lines (field i goes "
      "to channel i mod n_channels), each processed by encapsulated_processor, and the results "
      "averaged");
    r("encapsulated_processor", encapsulated_processor,
      "the processor run on every channel (it reads the other keys of this section)");
    r.choice("mvn_type", mvn_type, {"global", "local", "none", "None", "from_files"},
             "from_files: normalise the average with the mean and standard deviation over time "
             "of the average of the encapsulated processor's output on the files after "
             "'mvn_from_files' in the line; other values are passed on to the encapsulated "
             "processor (local/global need one that normalises, such as audio_feat_processor)");
    r.accept_if(any_key, "<key of the encapsulated processor>",
                "every other key is the encapsulated processor's (feature, winlen, ...)");
    r.require(n_channels >= 1, "n_channels", "must be at least 1");
    r.require(!encapsulated_processor.empty(), "encapsulated_processor",
              "required: the processor to run on every channel");
    r.require(encapsulated_processor != "multi_averager_encapsulator", "encapsulated_processor",
              "cannot be multi_averager_encapsulator itself");
    r.require(processor_registry().contains(encapsulated_processor), "encapsulated_processor",
              processor_registry().unknown_message(encapsulated_processor));
    bool inner_normalises = declares_mvn(encapsulated_processor);
    r.require(inner_normalises || (mvn_type != "local" && mvn_type != "global"), "mvn_type",
              "'" + mvn_type + "' is done by the encapsulated processor, and " +
                  encapsulated_processor + " has no mvn_type");
  }
};

// The section the encapsulated processor is built from: this one with `processor` replaced and
// the encapsulator's own keys removed (mvn_type stays when the encapsulated processor reads it).
ConfigSection encapsulated_section(const ConfigSection& section,
                                   const EncapsulatorOptions& options) {
  ConfigSection inner = section;
  const ConfigValue* chosen = section.find("encapsulated_processor");
  inner.set("processor", options.encapsulated_processor, chosen ? chosen->origin : Origin{});
  inner.erase("encapsulated_processor");
  inner.erase("n_channels");
  if (!declares_mvn(options.encapsulated_processor)) inner.erase("mvn_type");
  return inner;
}

class MultiAveragerEncapsulator : public Processor {
 public:
  MultiAveragerEncapsulator(const EncapsulatorOptions& options, ProcessorPtr encapsulated)
      : options_(options), encapsulated_(std::move(encapsulated)) {}

  torch::Tensor process(const DataLine& line, int* sample_rate) const override {
    std::vector<std::string> mvn_files;
    auto channels = channel_lines(line, &mvn_files);
    int rate = 0;
    torch::Tensor sum;
    torch::Tensor first;
    for (std::size_t c = 0; c < channels.size(); ++c) {
      int channel_rate = 0;
      auto data = averagable(encapsulated_->process(channels[c], &channel_rate));
      if (rate != 0 && channel_rate != rate)
        throw DataError("channel " + std::to_string(c + 1) + " ('" + channels[c].fields[0] +
                        "') has sample rate " + std::to_string(channel_rate) + " Hz, channel 1 " +
                        std::to_string(rate) + " Hz");
      if (rate == 0) rate = channel_rate;
      if (first.defined() && data.sizes() != first.sizes())
        throw DataError("channel " + std::to_string(c + 1) + " ('" + channels[c].fields[0] +
                        "') gives data of shape " + shape_text(data) + " but channel 1 ('" +
                        channels[0].fields[0] + "') gives " + shape_text(first) +
                        " (the channels must have the same length)");
      if (!first.defined()) first = data;
      sum = sum.defined() ? sum + data : data.clone();
    }
    if (sample_rate) *sample_rate = rate;
    auto average = sum / static_cast<double>(channels.size());
    if (options_.mvn_type == "from_files") average = normalise_from_files(line, mvn_files, average);
    return average;
  }

  // Segments as the encapsulated processor cuts its own data.
  std::vector<std::pair<torch::Tensor, int64_t>> segment(
      const torch::Tensor& data, const std::string& segment_length) const override {
    return encapsulated_->segment(data, segment_length);
  }
  bool storable() const override { return encapsulated_->storable(); }
  const FeatureOptions* feature_options() const override {
    return encapsulated_->feature_options();
  }
  StoredType stored_type() const override { return StoredType::kFloat32; }  // an average
  std::vector<int64_t> nontime_dims() const override { return encapsulated_->nontime_dims(); }
  // Global MVN of the encapsulated processor: statistics over the frames of every channel (each
  // channel is normalised with them before the average).
  bool needs_statistics() const override { return encapsulated_->needs_statistics(); }
  torch::Tensor statistics_observations(const DataLine& line) const override {
    std::vector<torch::Tensor> observations;
    for (const auto& channel : channel_lines(line, nullptr))
      observations.push_back(encapsulated_->statistics_observations(channel));
    return torch::cat(observations, 0);
  }
  void set_statistics(const MvnStatistics& statistics) override {
    encapsulated_->set_statistics(statistics);
  }

 private:
  // The encapsulated processor's line for every channel; `mvn_files` receives the files after
  // the keyword (nullptr: they are dropped).
  std::vector<DataLine> channel_lines(const DataLine& line,
                                      std::vector<std::string>* mvn_files) const {
    std::vector<std::string> fields = line.fields;
    auto keyword = std::find(fields.begin(), fields.end(), kMvnKeyword);
    if (options_.mvn_type == "from_files") {
      if (keyword == fields.end())
        throw DataError(std::string("mvn_type = from_files expects '") + kMvnKeyword +
                        "' followed by the files that give the mean and variance at the end of "
                        "the line");
      std::vector<std::string> files(keyword + 1, fields.end());
      if (files.empty())
        throw DataError(std::string("mvn_type = from_files: no file after '") + kMvnKeyword + "'");
      if (mvn_files) *mvn_files = files;
      fields.erase(keyword, fields.end());
    } else if (keyword != fields.end()) {
      throw DataError(std::string("the line has '") + kMvnKeyword + "' but mvn_type is " +
                      options_.mvn_type + " (set mvn_type = from_files)");
    }
    std::size_t n = static_cast<std::size_t>(options_.n_channels);
    if (fields.size() < n || fields.size() % n != 0)
      throw DataError("expected n_channels = " + std::to_string(n) +
                      " wavs, or a multiple of it (field i belongs to channel i mod " +
                      std::to_string(n) + "), got " + std::to_string(fields.size()) + " fields");
    std::vector<DataLine> channels(n);
    for (std::size_t c = 0; c < n; ++c) {
      channels[c].utterance = line.utterance;
      channels[c].origin = line.origin;
      for (std::size_t i = c; i < fields.size(); i += n) channels[c].fields.push_back(fields[i]);
    }
    return channels;
  }

  // numpy averages booleans and integers as floats.
  static torch::Tensor averagable(const torch::Tensor& data) {
    if (data.is_floating_point() || data.is_complex()) return data;
    return data.to(torch::kFloat64);
  }

  // (x - mean) / (std + 1e-12), mean and std over time of the average of the encapsulated
  // processor's output on every mvn file.
  torch::Tensor normalise_from_files(const DataLine& line, const std::vector<std::string>& files,
                                     const torch::Tensor& average) const {
    torch::Tensor combined;
    for (const auto& file : files) {
      auto data =
          averagable(encapsulated_->process(DataLine{line.utterance, {file}, line.origin}));
      if (combined.defined() && data.sizes() != combined.sizes())
        throw DataError("mvn file '" + file + "' gives data of shape " + shape_text(data) +
                        " but '" + files.front() + "' gives " + shape_text(combined) +
                        " (the mvn files must have the same length)");
      combined = combined.defined() ? combined + data : data.clone();
    }
    combined = combined / static_cast<double>(files.size());
    auto mean = combined.mean(0, true);
    auto std = (combined - mean).square().mean(0, true).sqrt();
    return (average - mean) / (std + 1e-12);
  }

  EncapsulatorOptions options_;
  ProcessorPtr encapsulated_;
};

ProcessorPtr make_encapsulator(const ConfigSection& section) {
  auto options =
      read_options<EncapsulatorOptions>(section, "processor multi_averager_encapsulator");
  auto encapsulated = processor_registry().create(options.encapsulated_processor,
                                                  encapsulated_section(section, options));
  return std::make_shared<MultiAveragerEncapsulator>(options, std::move(encapsulated));
}

// The encapsulator's own keys, then the encapsulated processor's checker on its section.
std::vector<std::string> check_encapsulator(const ConfigSection& section) {
  auto problems = options_checker<EncapsulatorOptions>("multi_averager_encapsulator")(section);
  if (!problems.empty()) return problems;
  auto options =
      read_options<EncapsulatorOptions>(section, "processor multi_averager_encapsulator");
  return processor_registry().check(options.encapsulated_processor,
                                    encapsulated_section(section, options));
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
class SpatialFeatProcessor : public Processor {
 public:
  explicit SpatialFeatProcessor(const SpatialOptions& options)
      : options_(options), computer_(make_feature_computer(options)) {}
  torch::Tensor process(const DataLine& line, int* sample_rate) const override {
    int rate = 0;
    auto features = spatial_features(line, rate);
    if (sample_rate) *sample_rate = rate;
    return normalise_features(features, options_.mvn_type, statistics_);
  }
  std::vector<int64_t> nontime_dims() const override {
    return {computer_->dim() * 2 * static_cast<int64_t>(options_.pairs.size())};
  }
  bool needs_statistics() const override { return options_.mvn_type == "global"; }
  torch::Tensor statistics_observations(const DataLine& line) const override {
    int rate = 0;
    return spatial_features(line, rate);
  }
  void set_statistics(const MvnStatistics& statistics) override { statistics_ = statistics; }
  const FeatureOptions* feature_options() const override { return &options_; }

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
          auto samples = read_channel(path, rate);  // sets rate before it is used
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

  SpatialOptions options_;
  FeatureComputerPtr computer_;
  MvnStatistics statistics_;
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
class IdealRatioMultimicProcessor : public Processor {
 public:
  explicit IdealRatioMultimicProcessor(const IdealRatioMultimicOptions& options)
      : options_(options), computer_(make_feature_computer(options)) {}
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
  std::vector<int64_t> nontime_dims() const override { return {computer_->dim()}; }
  const FeatureOptions* feature_options() const override { return &options_; }

 private:
  IdealRatioMultimicOptions options_;
  FeatureComputerPtr computer_;
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

struct OneHotMultimicOptions : MultimicTargetOptions {
  std::vector<int> spk_select;
  void declare(OptionsReader& r) {
    MultimicTargetOptions::declare(r);
    r("spk_select", spk_select, "which sources get a target column (default: all)");
    for (int s : spk_select)
      r.require(s >= 0 && s < nrs, "spk_select",
                std::to_string(s) + " is not a source index (0.." + std::to_string(nrs - 1) + ")");
  }
};

// Deep clustering targets from the channel-averaged magnitudes: bool [T, F*S'], column f*S'+i
// true where source spk_select[i] dominates bin f.
class OneHotPerFeatureTargetMultimicProcessor : public Processor {
 public:
  explicit OneHotPerFeatureTargetMultimicProcessor(const OneHotMultimicOptions& options)
      : options_(options), computer_(make_feature_computer(options)) {
    if (options_.spk_select.empty())
      for (int s = 0; s < options_.nrs; ++s) options_.spk_select.push_back(s);
  }
  torch::Tensor process(const DataLine& line, int* sample_rate) const override {
    int rate = 0;
    auto means = source_channel_means(*computer_, line, options_.nrs, options_.nr_channels, rate);
    if (sample_rate) *sample_rate = rate;
    auto winner = means.argmax(-1);  // first maximum on ties, as numpy
    std::vector<torch::Tensor> columns;
    for (int s : options_.spk_select) columns.push_back(winner == s);
    return torch::stack(columns, -1).reshape({means.size(0), -1});
  }
  StoredType stored_type() const override { return StoredType::kBool; }
  std::vector<int64_t> nontime_dims() const override {
    return {computer_->dim() * static_cast<int64_t>(options_.spk_select.size())};
  }
  const FeatureOptions* feature_options() const override { return &options_; }

 private:
  OneHotMultimicOptions options_;
  FeatureComputerPtr computer_;
};

// PIT / DANet targets from the channel-averaged feature of every source: [T, F, S].
class MultiTargetMultimicProcessor : public Processor {
 public:
  explicit MultiTargetMultimicProcessor(const MultimicTargetOptions& options)
      : options_(options), computer_(make_feature_computer(options)) {}
  torch::Tensor process(const DataLine& line, int* sample_rate) const override {
    int rate = 0;
    auto means = source_channel_means(*computer_, line, options_.nrs, options_.nr_channels, rate);
    if (sample_rate) *sample_rate = rate;
    return means;
  }
  std::vector<int64_t> nontime_dims() const override { return {computer_->dim(), options_.nrs}; }
  const FeatureOptions* feature_options() const override { return &options_; }

 private:
  MultimicTargetOptions options_;
  FeatureComputerPtr computer_;
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
class ScoreLabelPerFeatureMultimicProcessor : public Processor {
 public:
  explicit ScoreLabelPerFeatureMultimicProcessor(const ScoreLabelMultimicOptions& options)
      : options_(options), computer_(make_feature_computer(options)) {}
  torch::Tensor process(const DataLine& line, int* sample_rate) const override {
    if (line.fields.empty()) throw DataError("expected one wav per microphone, got none");
    int rate = 0;
    auto features = file_features(*computer_, line.fields, rate).mean(-1);
    if (sample_rate) *sample_rate = rate;
    auto used = features > features.max() / options_.mag_thres;
    if (used.to(torch::kFloat64).mean().item<double>() < 0.01)
      spdlog::warn("{}: utterance '{}': less than 1% of the time-frequency bins are active",
                   line.origin, line.utterance);
    return used;
  }
  StoredType stored_type() const override { return StoredType::kBool; }
  std::vector<int64_t> nontime_dims() const override { return {computer_->dim()}; }
  const FeatureOptions* feature_options() const override { return &options_; }

 private:
  ScoreLabelMultimicOptions options_;
  FeatureComputerPtr computer_;
};

// ---------------------------------------------------------------------------------------------
// one_processor and zero_processor

// A constant mask [T, dim] with the frames and dimension of the feature of one wav.
template <int kValue>
class ConstantProcessor : public Processor {
 public:
  explicit ConstantProcessor(const SignalOptions& options)
      : options_(options), computer_(make_feature_computer(options)) {}
  torch::Tensor process(const DataLine& line, int* sample_rate) const override {
    Audio audio = read_audio_fields(line.fields);
    if (sample_rate) *sample_rate = audio.sample_rate;
    return process_audio(audio.samples, audio.sample_rate);
  }
  torch::Tensor process_audio(const torch::Tensor& samples, int sample_rate) const override {
    int64_t frames = computer_->compute(samples, sample_rate).size(0);
    return torch::full({frames, computer_->dim()}, static_cast<double>(kValue), torch::kFloat32);
  }
  SignalRole signal_role() const override { return SignalRole::kMixture; }
  std::vector<int64_t> nontime_dims() const override { return {computer_->dim()}; }
  const FeatureOptions* feature_options() const override { return &options_; }

 private:
  SignalOptions options_;
  FeatureComputerPtr computer_;
};

// Registered by hand: its checker also checks the encapsulated processor's keys.
[[maybe_unused]] const bool encapsulator_registered = processor_registry().add(
    "multi_averager_encapsulator", make_encapsulator,
    "runs encapsulated_processor on each of n_channels channel wavs and averages the results "
    "(optionally normalised with mvn_from_files)",
    check_encapsulator, options_documenter<EncapsulatorOptions>());

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
