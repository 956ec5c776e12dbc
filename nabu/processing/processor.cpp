// The processor base (processor.h): the registry, stored types, segmentation and the defaults
// of the virtual methods. The registered processors are in processors.cpp.
#include "nabu/processing/processor.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/strings.h"
#include "nabu/processing/feature_processor.h"

namespace nabu {
ProcessorRegistry& processor_registry() {
  static ProcessorRegistry registry("processor");
  return registry;
}

ProcessorPtr make_processor(const ConfigFile& processor_config) {
  const ConfigSection& section = processor_config.section("processor");
  std::string type = section.get_string("processor");
  if (!processor_registry().contains(type))
    section.fail("processor", processor_registry().unknown_message(type));
  return processor_registry().create(type, section);
}

std::string stored_type_name(StoredType type) {
  switch (type) {
    case StoredType::kFloat32: return "float32";
    case StoredType::kBool: return "bool";
    case StoredType::kInt32: return "int32";
  }
  return "?";
}

torch::ScalarType stored_scalar_type(StoredType type) {
  switch (type) {
    case StoredType::kFloat32: return torch::kFloat32;
    case StoredType::kBool: return torch::kBool;
    case StoredType::kInt32: return torch::kInt32;
  }
  return torch::kFloat32;
}

StoredType stored_type_from_name(const std::string& name) {
  if (name == "float32") return StoredType::kFloat32;
  if (name == "bool") return StoredType::kBool;
  if (name == "int32") return StoredType::kInt32;
  throw DataError("unknown stored type '" + name + "'");
}

StoredType stored_type_for_writer_style(const std::string& style) {
  if (style == "numpy_float_array_as_tfrecord" || style == "float_list_as_tfrecord")
    return StoredType::kFloat32;
  if (style == "numpy_bool_array_as_tfrecord") return StoredType::kBool;
  if (style == "index_list_as_tfrecord") return StoredType::kInt32;
  throw ConfigError("unknown writer_style '" + style +
                    "' (known: numpy_float_array_as_tfrecord, numpy_bool_array_as_tfrecord, "
                    "float_list_as_tfrecord, index_list_as_tfrecord)");
}

std::vector<std::pair<torch::Tensor, int64_t>> segment_frames(const torch::Tensor& data,
                                                              const std::string& segment_length) {
  int64_t frames = data.size(0);
  if (segment_length == "full") return {{data, frames}};
  auto length = parse_int(segment_length);
  if (!length || *length <= 0)
    throw ConfigError("segment length '" + segment_length + "' is neither full nor positive");
  int64_t count = frames / *length;
  if (count < 1) {
    // Shorter than one segment: zero-padded to the segment length. The real length is kept so
    // the padding is masked like batch padding (the original reports the padded length).
    auto shape = data.sizes().vec();
    shape[0] = *length;
    auto padded = torch::zeros(shape, data.options());
    padded.slice(0, 0, frames).copy_(data);
    return {{padded, frames}};
  }
  std::vector<std::pair<torch::Tensor, int64_t>> segments;
  for (int64_t i = 0; i < count; ++i)
    segments.emplace_back(data.slice(0, i * *length, (i + 1) * *length), *length);
  return segments;
}

torch::Tensor Processor::process_audio(const torch::Tensor&, int) const {
  throw DataError("this processor needs more than the mixture signal (targets of the sources, "
                  "a second file); it cannot serve a new mixture");
}

torch::Tensor Processor::process_signals(const std::vector<torch::Tensor>& signals,
                                         int sample_rate) const {
  if (signal_role() == SignalRole::kMixture) {
    if (signals.size() != 1)
      throw DataError("expected the mixture signal, got " + std::to_string(signals.size()));
    return process_audio(signals.front(), sample_rate);
  }
  throw DataError("this processor's data is not computed from a mixture or its sources alone (a "
                  "reference signal or a file); it cannot serve a dynamic mixture");
}

std::vector<std::pair<torch::Tensor, int64_t>> Processor::segment(
    const torch::Tensor& data, const std::string& segment_length) const {
  return segment_frames(data, segment_length);
}

void SignalOptions::declare(OptionsReader& r) {
  r.accepted("processor", "the processor type");
  FeatureOptions::declare(r);
}

void FeatOptions::declare(OptionsReader& r) {
  SignalOptions::declare(r);
  r.choice("mvn_type", mvn_type, {"global", "local", "none", "None", "from_files"},
           "global (statistics of the training section), local (per utterance), "
           "none/None/from_files (none)");
}

torch::Tensor normalise_features(const torch::Tensor& features, const std::string& mvn_type,
                                 const MvnStatistics& statistics, double epsilon) {
  if (mvn_type == "global") {
    if (!statistics.mean.defined()) throw Error("global MVN statistics were not loaded");
    return (features - statistics.mean) / (statistics.std + epsilon);
  }
  if (mvn_type == "local") {
    auto mean = features.mean(0, true);
    auto std = (features - mean).square().mean(0, true).sqrt();
    return (features - mean) / (std + epsilon);
  }
  return features;
}

void write_label_index(const std::filesystem::path& dir, const std::vector<std::string>& labels) {
  nlohmann::ordered_json numbering = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < labels.size(); ++i) numbering[labels[i]] = i;
  ensure_directory(dir);
  write_file_atomic(dir / "label2index.json", numbering.dump(1) + "\n");
}

std::vector<std::string> read_label_index(const std::filesystem::path& dir) {
  auto path = dir / "label2index.json";
  if (!std::filesystem::exists(path))
    throw Error(path.string() + " does not exist: prepare the section whose store_dir is " +
                dir.string() + " first");
  nlohmann::json numbering;
  try {
    numbering = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(path.string() + ": not JSON: " + e.what());
  }
  if (!numbering.is_object()) throw Error(path.string() + ": expected {\"label\": index, ...}");
  std::vector<std::string> labels(numbering.size());
  for (const auto& [label, index] : numbering.items()) {
    if (!index.is_number_integer() || index.get<int64_t>() < 0 ||
        index.get<int64_t>() >= static_cast<int64_t>(labels.size()) ||
        !labels[index.get<int64_t>()].empty())
      throw Error(path.string() + ": label '" + label + "' has index " + index.dump() +
                  "; expected the indices 0.." + std::to_string(labels.size() - 1) + " once each");
    labels[index.get<int64_t>()] = label;
  }
  return labels;
}

// ---------------------------------------------------------------------------------------------
// The shared pieces of feature_processor.h.

torch::Tensor read_same_rate(const std::string& path, int& rate) {
  Audio audio = read_audio(path);
  if (rate != 0 && audio.sample_rate != rate)
    throw DataError("sample rate " + std::to_string(audio.sample_rate) + " Hz of '" + path +
                    "' differs from " + std::to_string(rate) + " Hz of the other wavs");
  rate = audio.sample_rate;
  return audio.samples;
}

std::string shape_text(const torch::Tensor& tensor) {
  std::string text = "[";
  for (int64_t i = 0; i < tensor.dim(); ++i)
    text += (i ? ", " : "") + std::to_string(tensor.size(i));
  return text + "]";
}

torch::Tensor dominant_source_columns(const torch::Tensor& features,
                                      const std::vector<int>& spk_select) {
  auto winner = features.argmax(-1);
  std::vector<torch::Tensor> columns;
  for (int s : spk_select) columns.push_back(winner == s);
  return torch::stack(columns, -1).reshape({features.size(0), -1});
}

torch::Tensor bins_above_peak(const torch::Tensor& features, double mag_thres,
                              const DataLine* line) {
  auto used = features > features.max() / mag_thres;
  if (line && used.to(torch::kFloat64).mean().item<double>() < 0.01)
    logger().warn("{}: utterance '{}': less than 1% of the time-frequency bins are active",
                 line->origin, line->utterance);
  return used;
}

void declare_spk_select(OptionsReader& r, std::vector<int>& spk_select, int nrs) {
  r("spk_select", spk_select, "which sources get a target column (default: all)");
  for (int s : spk_select)
    r.require(s >= 0 && s < nrs, "spk_select",
              std::to_string(s) + " is not a source index (0.." + std::to_string(nrs - 1) + ")");
}

std::vector<int> selected_sources(const std::vector<int>& spk_select, int nrs) {
  if (!spk_select.empty()) return spk_select;
  std::vector<int> all;
  for (int s = 0; s < nrs; ++s) all.push_back(s);
  return all;
}

}  // namespace nabu
