#include "nabu/pipeline/example_set.h"

#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include <unordered_map>

#include "nabu/core/error.h"
#include "nabu/processing/database_section.h"

namespace nabu {

std::shared_ptr<StoreReader> StoreCache::open(const std::filesystem::path& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string key = std::filesystem::absolute(path).lexically_normal().string();
  auto it = readers_.find(key);
  if (it != readers_.end()) return it->second;
  auto reader = std::make_shared<StoreReader>(path);
  if (record_) record_->check(path, StoreIdentity::of(reader->metadata(), reader->size()));
  readers_.emplace(key, reader);
  return reader;
}

ExampleSet::ExampleSet(const std::vector<DataBinding>& inputs,
                       const std::vector<DataBinding>& targets, const ConfigFile& database,
                       const std::string& segment_length, StoreCache& stores,
                       const std::string& what) {
  std::vector<DataBinding> bindings = inputs;
  bindings.insert(bindings.end(), targets.begin(), targets.end());
  // Per data name: "<example>-<k>" -> (store, row), k = the section's position in the list.
  std::vector<std::unordered_map<std::string, Part>> maps(bindings.size());
  for (std::size_t b = 0; b < bindings.size(); ++b) {
    data_names_.push_back(bindings[b].name);
    for (std::size_t k = 0; k < bindings[b].sections.size(); ++k) {
      const std::string& section_name = bindings[b].sections[k];
      const ConfigSection& section = database.section(section_name);
      auto options = read_database_section(section, database);
      if (!options.preprocess)
        section.fail("preprocess", "section [" + section_name + "] feeds '" + bindings[b].name +
                                       "' of " + what + " but is not preprocessed into a store");
      require_stored_segment_length(section, options, segment_length,
                                    "'" + bindings[b].name + "' of " + what);
      auto reader = stores.open(store_path(options.store_dir, segment_length));
      int store_index = static_cast<int>(stores_.size());
      stores_.push_back(reader);
      for (int64_t row = 0; row < reader->size(); ++row)
        maps[b].emplace(reader->name(row) + "-" + std::to_string(k), Part{store_index, row});
    }
  }
  // The first input's order (its sections in list order, rows in store order); an example
  // must exist under every name.
  const DataBinding& first = bindings.front();
  int first_stores = static_cast<int>(first.sections.size());
  for (int s = 0; s < first_stores; ++s) {
    const auto& reader = stores_[s];
    for (int64_t row = 0; row < reader->size(); ++row) {
      std::string key = reader->name(row) + "-" + std::to_string(s);
      Example example{reader->name(row), reader->length(row), {Part{s, row}}};
      bool complete = true;
      for (std::size_t b = 1; b < bindings.size() && complete; ++b) {
        auto it = maps[b].find(key);
        if (it == maps[b].end()) {
          complete = false;
          break;
        }
        example.parts.push_back(it->second);
      }
      if (complete) {
        examples_.push_back(std::move(example));
      } else {
        ++skipped_;
      }
    }
  }
  if (skipped_ > 0)
    logger().warn("{}: {} of {} examples are missing from some input or target and are skipped",
                 what, skipped_, skipped_ + size());
  if (examples_.empty())
    throw DataError(what + ": no example is present in every input and target store (stage " +
                    segment_length + ")");
}

std::vector<int64_t> ExampleSet::lengths() const {
  std::vector<int64_t> out;
  out.reserve(examples_.size());
  for (const auto& example : examples_) out.push_back(example.length);
  return out;
}

void ExampleSet::truncate(int64_t count) {
  if (count < size()) examples_.resize(std::max<int64_t>(0, count));
}

Batch pad_batch(const std::vector<std::string>& data_names,
                const std::vector<std::string>& example_names,
                const std::vector<ExampleTensors>& examples) {
  Batch batch;
  batch.names = example_names;
  int64_t count = static_cast<int64_t>(examples.size());
  for (std::size_t b = 0; b < data_names.size(); ++b) {
    std::vector<int64_t> lengths;
    int64_t max_length = 0;
    for (const auto& example : examples) {
      lengths.push_back(example[b].size(0));
      max_length = std::max(max_length, lengths.back());
    }
    const torch::Tensor& first = examples.front()[b];
    auto shape = first.sizes().vec();
    shape[0] = max_length;
    shape.insert(shape.begin(), count);
    auto padded = torch::zeros(shape, first.options());
    for (int64_t i = 0; i < count; ++i) {
      if (examples[i][b].sizes().slice(1) != first.sizes().slice(1))
        throw DataError("example '" + example_names[i] + "' of '" + data_names[b] +
                        "' has other dimensions than the rest of the batch");
      padded[i].slice(0, 0, lengths[i]).copy_(examples[i][b]);
    }
    batch.data[data_names[b]] = padded;
    batch.lengths[data_names[b]] = torch::tensor(lengths, torch::kLong);
    if (b == 0) {
      for (auto length : lengths) batch.real_frames += length;
      batch.padded_frames = max_length * count;
    }
  }
  return batch;
}

Batch ExampleSet::load(const std::vector<int64_t>& indices) const {
  std::vector<std::string> names;
  std::vector<ExampleTensors> tensors;
  for (auto index : indices) {
    const Example& example = examples_.at(index);
    names.push_back(example.name);
    ExampleTensors parts;
    for (const Part& part : example.parts) {
      const auto& reader = *stores_[part.store];
      try {
        parts.push_back(reader.read(part.row).slice(0, 0, reader.length(part.row)));
      } catch (const Error& e) {
        throw DataError(std::string(e.what()) + " (example '" + example.name + "')");
      }
    }
    tensors.push_back(std::move(parts));
  }
  return pad_batch(data_names_, names, tensors);
}

}  // namespace nabu
