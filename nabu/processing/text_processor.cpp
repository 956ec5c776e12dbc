// text_processor: a transcription line (`utt label1 label2 ...`) -> the labels' indices in the
// alphabet, int32 [L]. The targets of sequence losses (ctc) and the references of the error_rate
// scorer; the decoders map indices back through the same alphabet (docs/recognition.md).
#include <filesystem>
#include <unordered_map>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/strings.h"
#include "nabu/processing/processor.h"

namespace nabu {

namespace {

struct TextOptions {
  std::vector<std::string> alphabet;
  std::string alphabet_file;
  std::string normalizer = "none";
  void declare(OptionsReader& r) {
    r.accepted("processor", "the processor type");
    r("alphabet", alphabet, "the labels, space-separated (or alphabet_file)");
    r("alphabet_file", alphabet_file, "a file listing the labels, separated by white space");
    r.choice("normalizer", normalizer, {"none", "None", ""},
             "none: the line's fields are the labels (text normalisers of the original are not "
             "built)");
    r.require(alphabet.empty() != alphabet_file.empty(), alphabet.empty() ? "alphabet" : "alphabet_file",
              "give exactly one of alphabet and alphabet_file");
    // Here, so that `nabu check` finds a missing file before data preparation reads it.
    std::error_code ec;
    r.require(alphabet_file.empty() || std::filesystem::is_regular_file(alphabet_file, ec),
              "alphabet_file", "'" + alphabet_file + "' does not exist");
  }
};

class TextProcessor : public Processor {
 public:
  explicit TextProcessor(std::vector<std::string> alphabet) : alphabet_(std::move(alphabet)) {
    for (std::size_t i = 0; i < alphabet_.size(); ++i) index_[alphabet_[i]] = static_cast<int>(i);
  }
  torch::Tensor process(const DataLine& line, int* sample_rate) const override {
    if (sample_rate) *sample_rate = 0;
    if (line.fields.empty()) throw DataError("empty transcription");
    std::vector<int32_t> labels;
    for (const auto& label : line.fields) {
      auto it = index_.find(label);
      if (it == index_.end())
        throw DataError("label '" + label + "' is not in the alphabet" +
                        did_you_mean(label, alphabet_));
      labels.push_back(it->second);
    }
    return torch::tensor(labels, torch::kInt32);
  }
  StoredType stored_type() const override { return StoredType::kInt32; }
  std::vector<int64_t> nontime_dims() const override { return {}; }
  const std::vector<std::string>* alphabet() const override { return &alphabet_; }
  // A label sequence has no frames to cut: only whole utterances.
  std::vector<std::pair<torch::Tensor, int64_t>> segment(
      const torch::Tensor& data, const std::string& segment_length) const override {
    if (segment_length != "full")
      throw DataError("a label sequence cannot be cut into segments of " + segment_length +
                      " frames: train sequence tasks with segment_lengths = full");
    return {{data, data.size(0)}};
  }

 private:
  std::vector<std::string> alphabet_;
  std::unordered_map<std::string, int> index_;
};

ProcessorPtr make_text_processor(const ConfigSection& section) {
  auto options = read_options<TextOptions>(section, "processor text_processor");
  std::vector<std::string> alphabet = options.alphabet;
  if (!options.alphabet_file.empty()) {
    try {
      alphabet = split_whitespace(read_file(options.alphabet_file));
    } catch (const Error& e) {
      section.fail("alphabet_file", e.what());
    }
    if (alphabet.empty()) section.fail("alphabet_file", options.alphabet_file + " lists no label");
  }
  std::unordered_map<std::string, int> seen;
  for (const auto& label : alphabet)
    if (seen[label]++ == 1)
      section.fail(options.alphabet_file.empty() ? "alphabet" : "alphabet_file",
                   "label '" + label + "' appears twice");
  return std::make_shared<TextProcessor>(alphabet);
}

}  // namespace

NABU_REGISTER_WITH_OPTIONS(processor_registry, "text_processor", make_text_processor, TextOptions,
                           "transcription labels -> their indices in the alphabet, int32 [L]")

}  // namespace nabu
