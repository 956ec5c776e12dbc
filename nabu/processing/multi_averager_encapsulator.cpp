// multi_averager_encapsulator, of the original's Journal_of_Neural_Engineering_2020 recipes: runs
// another processor on every channel wav of a line and averages the results, optionally
// normalised with the statistics of files named after 'mvn_from_files' on the line.
#include <algorithm>

#include "nabu/core/error.h"
#include "nabu/processing/feature_processor.h"

namespace nabu {

namespace {

const char kMvnKeyword[] = "mvn_from_files";

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

// Registered by hand: its checker also checks the encapsulated processor's keys.
[[maybe_unused]] const bool encapsulator_registered = processor_registry().add(
    "multi_averager_encapsulator", make_encapsulator,
    "runs encapsulated_processor on each of n_channels channel wavs and averages the results "
    "(optionally normalised with mvn_from_files)",
    check_encapsulator, options_documenter<EncapsulatorOptions>());

}  // namespace

}  // namespace nabu
