// The processors of docs/data_layout.md / §2.e, each registered under the original's name.
#include <spdlog/spdlog.h>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/strings.h"
#include "nabu/processing/audio.h"
#include "nabu/processing/feature_processor.h"

namespace nabu {

namespace {

// The source wavs of a line (one field each): int16-scale signals of one length and rate.
std::vector<torch::Tensor> read_sources(const DataLine& line, int* sample_rate,
                                        std::size_t expected_sources = 0) {
  if (expected_sources && line.fields.size() != expected_sources)
    throw DataError("expected " + std::to_string(expected_sources) + " source files, got " +
                    std::to_string(line.fields.size()));
  int rate = 0;
  std::vector<torch::Tensor> signals;
  for (const auto& path : line.fields) {
    auto samples = read_same_rate(path, rate);
    if (!signals.empty() && samples.size(0) != signals.front().size(0))
      throw DataError("source '" + path + "' has " + std::to_string(samples.size(0)) +
                      " samples but the first source has " +
                      std::to_string(signals.front().size(0)));
    signals.push_back(samples);
  }
  if (sample_rate) *sample_rate = rate;
  return signals;
}

// Features of each source signal, stacked on a new last axis.
torch::Tensor source_features(const FeatureComputer& computer,
                              const std::vector<torch::Tensor>& signals, int sample_rate,
                              std::size_t expected_sources = 0) {
  if (expected_sources && signals.size() != expected_sources)
    throw DataError("expected " + std::to_string(expected_sources) + " sources, got " +
                    std::to_string(signals.size()));
  std::vector<torch::Tensor> features;
  for (const auto& signal : signals) {
    if (signal.size(0) != signals.front().size(0))
      throw DataError("the sources differ in length");
    features.push_back(computer.compute(signal, sample_rate));
  }
  return torch::stack(features, -1);
}

// A processor whose line names the sources, one wav each: process() reads them and hands them to
// process_signals, which dynamic mixing calls directly.
template <class Options>
class SourcesProcessor : public FeatureProcessor<Options> {
 public:
  using FeatureProcessor<Options>::FeatureProcessor;
  torch::Tensor process(const DataLine& line, int* sample_rate) const override {
    int rate = 0;
    auto signals = read_sources(line, &rate, source_count());
    if (sample_rate) *sample_rate = rate;
    return this->process_signals(signals, rate);
  }
  SignalRole signal_role() const override { return SignalRole::kSources; }

 protected:
  virtual std::size_t source_count() const { return 0; }  // 0: any number
};

// ---------------------------------------------------------------------------------------------

// Feature computer on one wav: audio_signal_processor, and with MVN, audio_feat_processor.
class AudioFeatProcessor : public MixtureProcessor<FeatOptions> {
 public:
  using MixtureProcessor::MixtureProcessor;
  torch::Tensor process_audio(const torch::Tensor& samples, int sample_rate) const override {
    return normalise_features(computer_->compute(samples, sample_rate), options_.mvn_type,
                              statistics_);
  }
  torch::Tensor statistics_observations(const DataLine& line) const override {
    Audio audio = read_audio_fields(line.fields);
    return computer_->compute(audio.samples, audio.sample_rate);
  }
};

class AudioSignalProcessor : public AudioFeatProcessor {
 public:
  explicit AudioSignalProcessor(const SignalOptions& options)
      : AudioFeatProcessor(as_feat(options)) {}
  bool storable() const override { return options_.feature != "spec"; }

 private:
  static FeatOptions as_feat(const SignalOptions& options) {
    FeatOptions feat;
    static_cast<SignalOptions&>(feat) = options;
    return feat;
  }
};

// Raw audio of every source on the line: [S, N] (org_src for scoring; never stored).
class AudioMultiSignalProcessor : public SourcesProcessor<SignalOptions> {
 public:
  using SourcesProcessor::SourcesProcessor;
  torch::Tensor process_signals(const std::vector<torch::Tensor>& signals,
                                int sample_rate) const override {
    return source_features(*computer_, signals, sample_rate).squeeze(1).t().contiguous();
  }
  bool storable() const override { return false; }
  std::vector<int64_t> nontime_dims() const override { return {}; }
};

struct OneHotOptions : SignalOptions {
  int nrs = 2;
  std::vector<int> spk_select;
  void declare(OptionsReader& r) {
    SignalOptions::declare(r);
    r("nrs", nrs, "number of sources on each line");
    r.require(nrs >= 1, "nrs", "must be at least 1");
    declare_spk_select(r, spk_select, nrs);
  }
};

// Deep clustering targets: per bin, which source dominates. bool [T, F*S], column f*S+s.
class OneHotPerFeatureTargetProcessor
    : public DominantSourceTargets<SourcesProcessor<OneHotOptions>> {
 public:
  using DominantSourceTargets::DominantSourceTargets;
  torch::Tensor process_signals(const std::vector<torch::Tensor>& signals,
                                int sample_rate) const override {
    auto features = source_features(*computer_, signals, sample_rate, options_.nrs);  // [T,F,S]
    return dominant_source_columns(features, options_.spk_select);
  }

 protected:
  std::size_t source_count() const override { return options_.nrs; }
};

struct ScoreLabelOptions : SignalOptions {
  double mag_thres = 100.0;
  void declare(OptionsReader& r) {
    SignalOptions::declare(r);
    r("mag_thres", mag_thres, "a bin is used when above the utterance maximum / mag_thres");
    r.require(mag_thres > 0, "mag_thres", "must be positive");
  }
};

// usedbins: bins above max/mag_thres of the mixture (40 dB below the peak for 100).
class ScoreLabelPerFeatureProcessor : public MixtureProcessor<ScoreLabelOptions> {
 public:
  using MixtureProcessor::MixtureProcessor;
  torch::Tensor process(const DataLine& line, int* sample_rate) const override {
    Audio audio = read_audio_fields(line.fields);
    if (sample_rate) *sample_rate = audio.sample_rate;
    return bins_above_peak(computer_->compute(audio.samples, audio.sample_rate),
                           options_.mag_thres, &line);
  }
  torch::Tensor process_audio(const torch::Tensor& samples, int sample_rate) const override {
    return bins_above_peak(computer_->compute(samples, sample_rate), options_.mag_thres);
  }
  StoredType stored_type() const override { return StoredType::kBool; }
};

struct MultiTargetOptions : FeatOptions {
  int nrs = 2;
  void declare(OptionsReader& r) {
    FeatOptions::declare(r);
    r("nrs", nrs, "number of sources on each line");
    r.require(nrs >= 1, "nrs", "must be at least 1");
  }
};

// PIT / DANet targets: the feature of every source, [T, F, S].
class MultiTargetProcessor : public SourcesProcessor<MultiTargetOptions> {
 public:
  using SourcesProcessor::SourcesProcessor;
  torch::Tensor process_signals(const std::vector<torch::Tensor>& signals,
                                int sample_rate) const override {
    auto features = source_features(*computer_, signals, sample_rate, options_.nrs);  // [T,F,S]
    if (options_.mvn_type == "None" || options_.mvn_type == "none") return features;
    // Normalised per source, as the original (statistics over all sources' frames).
    return normalise_features(features.permute({2, 0, 1}), options_.mvn_type, statistics_)
        .permute({1, 2, 0})
        .contiguous();
  }
  std::vector<int64_t> nontime_dims() const override { return {computer_->dim(), options_.nrs}; }
  torch::Tensor statistics_observations(const DataLine& line) const override {
    int rate = 0;
    auto signals = read_sources(line, &rate, options_.nrs);
    auto features = source_features(*computer_, signals, rate, options_.nrs);
    return features.permute({2, 0, 1}).reshape({-1, features.size(1)});
  }

 protected:
  std::size_t source_count() const override { return options_.nrs; }
};

struct MatrixOptions : FeatOptions {
  int nrcol = 10;
  int nrs = 2;
  void declare(OptionsReader& r) {
    FeatOptions::declare(r);
    r("nrcol", nrcol, "values per matrix row");
    r("nrs", nrs, "matrix rows (speakers)");
    r.require(nrcol >= 1, "nrcol", "must be at least 1");
    r.require(nrs >= 1, "nrs", "must be at least 1");
  }
};

// i-vector inputs: line "audio.wav matrixfile"; the matrix (rows separated by ',', values by
// spaces) flattened to one vector per segment, segments counted on the audio's frames.
class Matrix2VectorProcessor : public FeatureProcessor<MatrixOptions> {
 public:
  using FeatureProcessor::FeatureProcessor;
  torch::Tensor process(const DataLine& line, int* sample_rate) const override {
    if (line.fields.size() != 2)
      throw DataError("expected 'audio.wav matrixfile', got " + std::to_string(line.fields.size()) +
                      " fields");
    auto vector = read_vector(line.fields[1]);
    if (options_.mvn_type == "global")
      vector = normalise_features(vector, "global", statistics_, 0.0);
    Audio audio = read_audio(line.fields[0]);
    if (sample_rate) *sample_rate = audio.sample_rate;
    int64_t frames = computer_->compute(audio.samples, audio.sample_rate).size(0);
    // One row per frame so that segment() can count segments like the audio's.
    return vector.to(torch::kFloat32).unsqueeze(0).expand({frames, vector.size(0)}).contiguous();
  }
  std::vector<std::pair<torch::Tensor, int64_t>> segment(
      const torch::Tensor& data, const std::string& segment_length) const override {
    auto vector = data.slice(0, 0, 1).clone();  // [1, dim]
    std::size_t count = 1;
    if (segment_length != "full")
      count = std::max<int64_t>(1, data.size(0) / *parse_int(segment_length));
    return std::vector<std::pair<torch::Tensor, int64_t>>(count, {vector, 1});
  }
  std::vector<int64_t> nontime_dims() const override {
    return {static_cast<int64_t>(options_.nrs) * options_.nrcol};
  }
  torch::Tensor statistics_observations(const DataLine& line) const override {
    return read_vector(line.fields.back()).unsqueeze(0);
  }

 private:
  torch::Tensor read_vector(const std::string& path) const {
    std::string text;
    try {
      text = trim(read_file(path));
    } catch (const Error&) {
      throw DataError("cannot read matrix file '" + path + "'");
    }
    std::vector<double> values;
    auto rows = split(text, ',');
    if (static_cast<int>(rows.size()) != options_.nrs)
      throw DataError("matrix file '" + path + "' has " + std::to_string(rows.size()) +
                      " rows; nrs = " + std::to_string(options_.nrs));
    for (const auto& row : rows) {
      auto tokens = split_whitespace(row);
      if (static_cast<int>(tokens.size()) != options_.nrcol)
        throw DataError("matrix file '" + path + "' has a row of " +
                        std::to_string(tokens.size()) + " values; nrcol = " +
                        std::to_string(options_.nrcol));
      for (const auto& token : tokens) {
        auto value = parse_double(token);
        if (!value) throw DataError("matrix file '" + path + "': '" + token + "' is not a number");
        values.push_back(*value);
      }
    }
    return torch::tensor(values, torch::kFloat64);
  }
};

// Ideal ratio mask of the summed speech sources against a reference (noise) signal:
// sqrt(P_speech / (P_speech + P_ref + 1e-48)); line: speech wavs..., reference wav.
class IdealRatioProcessor : public FeatureProcessor<SignalOptions> {
 public:
  using FeatureProcessor::FeatureProcessor;
  torch::Tensor process(const DataLine& line, int* sample_rate) const override {
    if (line.fields.size() < 2)
      throw DataError("expected speech wavs followed by one reference wav");
    int rate = 0;
    torch::Tensor speech;
    for (std::size_t i = 0; i + 1 < line.fields.size(); ++i) {
      auto samples = read_same_rate(line.fields[i], rate);
      if (speech.defined() && speech.size(0) != samples.size(0))
        throw DataError("speech sources differ in length ('" + line.fields[i] + "')");
      speech = speech.defined() ? speech + samples : samples;
    }
    auto reference = read_same_rate(line.fields.back(), rate);
    if (sample_rate) *sample_rate = rate;
    auto speech_power = computer_->compute(speech, rate);
    auto reference_power = computer_->compute(reference, rate);
    if (speech_power.sizes() != reference_power.sizes())
      throw DataError("reference '" + line.fields.back() + "' differs in length from the speech");
    return (speech_power / (speech_power + reference_power + 1e-48)).sqrt();
  }
};

}  // namespace

NABU_REGISTER_WITH_OPTIONS(processor_registry, "audio_feat_processor",
                           (make_processor_with<AudioFeatProcessor, FeatOptions>), FeatOptions,
                           "features of one wav with mean/variance normalisation")
NABU_REGISTER_WITH_OPTIONS(processor_registry, "audio_signal_processor",
                           (make_processor_with<AudioSignalProcessor, SignalOptions>),
                           SignalOptions,
                           "features of one wav (e.g. the complex spec of the mixture)")
NABU_REGISTER_WITH_OPTIONS(processor_registry, "audio_multi_signal_processor",
                           (make_processor_with<AudioMultiSignalProcessor, SignalOptions>),
                           SignalOptions,
                           "raw audio of every source, for scoring (not stored)")
NABU_REGISTER_WITH_OPTIONS(processor_registry, "onehotperfeature_target_processor",
                           (make_processor_with<OneHotPerFeatureTargetProcessor, OneHotOptions>),
                           OneHotOptions,
                           "deep clustering targets: dominant source per bin, bool [T, F*S]")
NABU_REGISTER_WITH_OPTIONS(processor_registry, "scorelabelperfeature_processor",
                           (make_processor_with<ScoreLabelPerFeatureProcessor, ScoreLabelOptions>),
                           ScoreLabelOptions, "usedbins: bins above max/mag_thres, bool [T, F]")
NABU_REGISTER_WITH_OPTIONS(processor_registry, "multi_target_processor",
                           (make_processor_with<MultiTargetProcessor, MultiTargetOptions>),
                           MultiTargetOptions,
                           "features of every source, [T, F, S] (PIT, DANet)")
NABU_REGISTER_WITH_OPTIONS(processor_registry, "matrix2vector_processor",
                           (make_processor_with<Matrix2VectorProcessor, MatrixOptions>),
                           MatrixOptions,
                           "a matrix file flattened to one vector per segment (i-vectors)")
NABU_REGISTER_WITH_OPTIONS(processor_registry, "ideal_ratio_processor",
                           (make_processor_with<IdealRatioProcessor, SignalOptions>), SignalOptions,
                           "ideal ratio mask of the speech sources against a reference")

}  // namespace nabu
