// HDF5 stores: one file per database section and segment length, <store_dir>/<seg>/store.h5.
//
// Layout (format_version 1):
//   /data     [rows, row_size] float32 | uint8 (bool) | int32, chunked; every example's frames
//             are consecutive rows (row_size = product of the non-time dimensions)
//   /names    [N] variable-length strings: example names ("<utt>" for full, "<utt>_part<i>")
//   /offsets  [N] int64: first row of each example
//   /lengths  [N] int64: frames (sequence length) of each example
//   attributes: format_version, stored_type, nontime_dims, section, segment_length, writer_style,
//               processor_config (the config text used), utterances, complete = 1
// The index (names, offsets, lengths) lets the pipeline bucket by length without reading data.
// A store is written to a temporary file and renamed when complete, so an existing store.h5 is
// always a complete store.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nabu/processing/processor.h"

namespace nabu {

// The HDF5 library of Debian is not thread-safe: every HDF5 call in nabu holds this lock.
std::recursive_mutex& hdf5_mutex();

struct StoreMetadata {
  StoredType stored_type = StoredType::kFloat32;
  std::vector<int64_t> nontime_dims;
  std::string section, segment_length, writer_style, processor_config;
  // Fingerprint of the data lines the store was made from ("" in stores of older builds): a
  // regenerated corpus makes the store stale.
  std::string source_lines;
  // The recipe folder whose `nabu data` made the store ("" in stores of older builds): another
  // recipe never makes it again from other lines (docs/data_layout.md).
  std::string recipe;
  int64_t utterances = 0;  // source utterances (examples can be more: segments)
};

std::filesystem::path store_path(const std::filesystem::path& store_dir,
                                 const std::string& segment_length);

class StoreWriter {
 public:
  StoreWriter(const std::filesystem::path& final_path, StoreMetadata metadata);
  ~StoreWriter();  // without commit(): the temporary file is removed
  StoreWriter(const StoreWriter&) = delete;
  StoreWriter& operator=(const StoreWriter&) = delete;

  // data: [length, nontime_dims...]; converted to the stored type.
  void append(const std::string& name, const torch::Tensor& data, int64_t length);
  void set_utterances(int64_t count) { metadata_.utterances = count; }
  int64_t examples() const { return static_cast<int64_t>(names_.size()); }
  int64_t bytes() const { return bytes_; }
  // Writes the index, closes and renames into place.
  void commit();

 private:
  struct Impl;
  void flush();
  std::unique_ptr<Impl> impl_;
  std::filesystem::path final_path_, temporary_path_;
  StoreMetadata metadata_;
  int64_t row_size_ = 1, rows_ = 0, bytes_ = 0;
  std::vector<std::string> names_;
  std::vector<int64_t> offsets_, lengths_;
  std::vector<torch::Tensor> pending_;
  int64_t pending_rows_ = 0;
  bool committed_ = false;
};

class StoreReader {
 public:
  explicit StoreReader(const std::filesystem::path& path);  // throws DataError naming the path
  ~StoreReader();
  int64_t size() const { return static_cast<int64_t>(names_.size()); }
  const std::string& name(int64_t index) const { return names_.at(index); }
  int64_t length(int64_t index) const { return lengths_.at(index); }
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<int64_t>& lengths() const { return lengths_; }
  const StoreMetadata& metadata() const { return metadata_; }
  const std::filesystem::path& path() const { return path_; }
  // [length, nontime_dims...]: float32, bool or int32.
  torch::Tensor read(int64_t index) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::filesystem::path path_;
  StoreMetadata metadata_;
  std::vector<std::string> names_;
  std::vector<int64_t> offsets_, lengths_;
};

// The metadata of a complete store, without opening the data (nullopt-like: false when absent).
bool read_store_metadata(const std::filesystem::path& path, StoreMetadata& metadata);

}  // namespace nabu
