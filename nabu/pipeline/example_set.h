// The examples of one task (one linked set): every input and target name joined by example
// name across the HDF5 stores of its database sections (docs/data_layout.md get_filenames): several
// sections for one name concatenate datasets, an example must be present under every name, and
// the order is the first input's.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/pipeline/batch.h"
#include "nabu/pipeline/example_source.h"
#include "nabu/processing/store.h"
#include "nabu/processing/store_record.h"

namespace nabu {

// Opened stores shared by every pipeline of a run (one HDF5 handle per file).
class StoreCache {
 public:
  // Every store opened from now on is checked against (and added to) the experiment's record.
  void bind(std::shared_ptr<StoreRecord> record) { record_ = std::move(record); }
  // Throws DataError naming the store when it is not the one the bound experiment read.
  std::shared_ptr<StoreReader> open(const std::filesystem::path& path);

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<StoreReader>> readers_;
  std::shared_ptr<StoreRecord> record_;
};

class ExampleSet : public ExampleSource {
 public:
  // `segment_length` selects the store of every section ("100", "full", ...).
  ExampleSet(const std::vector<DataBinding>& inputs, const std::vector<DataBinding>& targets,
             const ConfigFile& database, const std::string& segment_length, StoreCache& stores,
             const std::string& what);

  int64_t size() const override { return static_cast<int64_t>(examples_.size()); }
  const std::vector<std::string>& data_names() const override { return data_names_; }
  const std::string& example_name(int64_t index) const { return examples_.at(index).name; }
  // Length (frames) of the first input of an example: what bucketing sorts on.
  int64_t length(int64_t index) const { return examples_.at(index).length; }
  std::vector<int64_t> lengths() const;
  std::vector<int64_t> lengths(int64_t) const override { return lengths(); }
  bool same_every_epoch() const override { return true; }
  int64_t skipped() const { return skipped_; }
  // Keeps only the first `count` examples (trainset_frac, requested_utts).
  void truncate(int64_t count);
  // Reads and pads the examples `indices`; errors name the store and the example.
  Batch load(const std::vector<int64_t>& indices) const;
  Batch load(int64_t, const std::vector<int64_t>& indices) const override { return load(indices); }

 private:
  struct Part {
    int store;  // index into stores_
    int64_t row;
  };
  struct Example {
    std::string name;
    int64_t length;
    std::vector<Part> parts;  // one per data name
  };
  std::vector<std::string> data_names_;
  std::vector<std::shared_ptr<StoreReader>> stores_;
  std::vector<Example> examples_;
  int64_t skipped_ = 0;
};

}  // namespace nabu
