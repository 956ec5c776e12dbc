// strlabel2index_processor: a speaker-info line (`utt mix.wav spk1 gender1 spk2 gender2 ...`) ->
// the speakers' indices, int32 [S] per segment: the targets of speaker identification
// (crossentropy_multi in the DANet-Drude2018 recipes). Labels are numbered in the order the
// section's lines meet them, continuing the numbering of label2index_dir when given, and the
// map is written to <store_dir>/label2index.json (docs/data_layout.md).
#include <unordered_map>

#include "nabu/core/error.h"
#include "nabu/processing/audio.h"
#include "nabu/processing/processor.h"

namespace nabu {

namespace {

struct LabelIndexOptions : SignalOptions {
  int nrs = 0;
  void declare(OptionsReader& r) {
    SignalOptions::declare(r);
    r("nrs", nrs, "number of speakers per line (labels at fields 2, 4, ...; genders between)");
    r.require(nrs > 0, "nrs", "required: the number of speakers, > 0");
  }
};

class Strlabel2IndexProcessor : public Processor {
 public:
  explicit Strlabel2IndexProcessor(const LabelIndexOptions& options)
      : options_(options), computer_(make_feature_computer(options)) {}

  bool numbers_labels() const override { return true; }
  void number_labels(const std::vector<DataLine>& lines,
                     const std::vector<std::string>& known) override {
    labels_.clear();
    index_.clear();
    for (const auto& label : known) add(label);
    for (const auto& line : lines) {
      try {
        for (const auto& label : speaker_labels(line)) add(label);
      } catch (const DataError& e) {
        throw DataError("utterance '" + line.utterance + "' (" + line.origin + "): " + e.what());
      }
    }
  }
  const std::vector<std::string>* alphabet() const override { return &labels_; }

  // [T, S]: the indices repeated on every frame of the mixture's features, so that segmenting
  // gives as many segments as the features have.
  torch::Tensor process(const DataLine& line, int* sample_rate) const override {
    std::vector<int32_t> indices;
    for (const auto& label : speaker_labels(line)) {
      auto it = index_.find(label);
      if (it == index_.end())
        throw DataError("speaker label '" + label + "' was not numbered (internal: "
                        "number_labels was not called with this line)");
      indices.push_back(it->second);
    }
    Audio audio = read_audio(line.fields[0]);
    if (sample_rate) *sample_rate = audio.sample_rate;
    int64_t frames = computer_->compute(audio.samples, audio.sample_rate).size(0);
    return torch::tensor(indices, torch::kInt32).unsqueeze(0).repeat({frames, 1});
  }
  // Each segment of the features gets the utterance's indices once: [S].
  std::vector<std::pair<torch::Tensor, int64_t>> segment(
      const torch::Tensor& data, const std::string& segment_length) const override {
    std::size_t count = segment_frames(data, segment_length).size();
    return std::vector<std::pair<torch::Tensor, int64_t>>(count, {data[0].clone(), data.size(1)});
  }
  StoredType stored_type() const override { return StoredType::kInt32; }
  std::vector<int64_t> nontime_dims() const override { return {}; }
  const FeatureOptions* feature_options() const override { return &options_; }

 private:
  std::vector<std::string> speaker_labels(const DataLine& line) const {
    std::vector<std::string> labels;
    for (std::size_t i = 1; i < line.fields.size(); i += 2) labels.push_back(line.fields[i]);
    if (static_cast<int>(labels.size()) != options_.nrs)
      throw DataError("has " + std::to_string(labels.size()) +
                      " speaker label(s) after the wav ('wav spk gender spk gender ...'), but the "
                      "processor's nrs = " + std::to_string(options_.nrs));
    return labels;
  }
  void add(const std::string& label) {
    if (index_.emplace(label, static_cast<int>(labels_.size())).second) labels_.push_back(label);
  }

  LabelIndexOptions options_;
  FeatureComputerPtr computer_;
  std::vector<std::string> labels_;
  std::unordered_map<std::string, int> index_;
};

}  // namespace

NABU_REGISTER_WITH_OPTIONS(processor_registry, "strlabel2index_processor",
                           (make_processor_with<Strlabel2IndexProcessor, LabelIndexOptions>),
                           LabelIndexOptions,
                           "speaker labels of a 'wav spk gender ...' line -> indices numbered in "
                           "list order, int32 [S] per segment")

}  // namespace nabu
