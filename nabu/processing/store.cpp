#include "nabu/processing/store.h"

#include <H5Cpp.h>

#include <numeric>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"

namespace nabu {

namespace {

constexpr int kFormatVersion = 1;
// A training batch reads examples at random, each whole chunk it touches: small chunks keep a
// 100-frame segment from pulling several times its size (256 KB chunks cost the loader 2.5 ms
// of CPU per batch of 16 on the DC recipe; tools/bench/bench_pipeline).
constexpr int64_t kChunkBytes = 1 << 15;
constexpr int64_t kFlushRows = 1 << 14;

const H5::PredType& h5_type(StoredType type) {
  switch (type) {
    case StoredType::kFloat32: return H5::PredType::NATIVE_FLOAT;
    case StoredType::kBool: return H5::PredType::NATIVE_UINT8;
    case StoredType::kInt32: return H5::PredType::NATIVE_INT32;
  }
  return H5::PredType::NATIVE_FLOAT;
}

int64_t element_size(StoredType type) { return type == StoredType::kFloat32 ? 4 : type == StoredType::kBool ? 1 : 4; }

void write_string_attribute(H5::H5Object& object, const std::string& name,
                            const std::string& value) {
  H5::StrType type(H5::PredType::C_S1, H5T_VARIABLE);
  H5::Attribute attribute = object.createAttribute(name, type, H5::DataSpace(H5S_SCALAR));
  const char* text = value.c_str();
  attribute.write(type, &text);
}

std::string read_string_attribute(const H5::H5Object& object, const std::string& name) {
  H5::Attribute attribute = object.openAttribute(name);
  H5::StrType type = attribute.getStrType();
  std::string value;
  attribute.read(type, value);
  return value;
}

void write_int_attribute(H5::H5Object& object, const std::string& name, int64_t value) {
  H5::Attribute attribute =
      object.createAttribute(name, H5::PredType::NATIVE_INT64, H5::DataSpace(H5S_SCALAR));
  attribute.write(H5::PredType::NATIVE_INT64, &value);
}

int64_t read_int_attribute(const H5::H5Object& object, const std::string& name) {
  int64_t value = 0;
  object.openAttribute(name).read(H5::PredType::NATIVE_INT64, &value);
  return value;
}

void write_int64_dataset(H5::H5File& file, const std::string& name,
                         const std::vector<int64_t>& values) {
  hsize_t size = values.size();
  H5::DataSpace space(1, &size);
  auto dataset = file.createDataSet(name, H5::PredType::NATIVE_INT64, space);
  if (size) dataset.write(values.data(), H5::PredType::NATIVE_INT64);
}

std::vector<int64_t> read_int64_dataset(const H5::H5File& file, const std::string& name) {
  auto dataset = file.openDataSet(name);
  hsize_t size = 0;
  dataset.getSpace().getSimpleExtentDims(&size);
  std::vector<int64_t> values(size);
  if (size) dataset.read(values.data(), H5::PredType::NATIVE_INT64);
  return values;
}

StoreMetadata read_metadata(const H5::H5File& file) {
  StoreMetadata metadata;
  if (read_int_attribute(file, "format_version") != kFormatVersion)
    throw DataError("unsupported store format version");
  metadata.stored_type = stored_type_from_name(read_string_attribute(file, "stored_type"));
  auto attribute = file.openAttribute("nontime_dims");
  hsize_t count = 0;
  attribute.getSpace().getSimpleExtentDims(&count);
  metadata.nontime_dims.resize(count);
  if (count) attribute.read(H5::PredType::NATIVE_INT64, metadata.nontime_dims.data());
  metadata.section = read_string_attribute(file, "section");
  metadata.segment_length = read_string_attribute(file, "segment_length");
  metadata.writer_style = read_string_attribute(file, "writer_style");
  metadata.processor_config = read_string_attribute(file, "processor_config");
  if (file.attrExists("source_lines"))
    metadata.source_lines = read_string_attribute(file, "source_lines");
  if (file.attrExists("recipe")) metadata.recipe = read_string_attribute(file, "recipe");
  metadata.utterances = read_int_attribute(file, "utterances");
  if (read_int_attribute(file, "complete") != 1) throw DataError("store is incomplete");
  return metadata;
}

}  // namespace

std::recursive_mutex& hdf5_mutex() {
  static std::recursive_mutex mutex;
  return mutex;
}

std::filesystem::path store_path(const std::filesystem::path& store_dir,
                                 const std::string& segment_length) {
  return store_dir / segment_length / "store.h5";
}

// ---------------------------------------------------------------------------------------------

struct StoreWriter::Impl {
  explicit Impl(const std::string& path) : file(path, H5F_ACC_TRUNC) {}
  H5::H5File file;
  H5::DataSet data;
};

StoreWriter::StoreWriter(const std::filesystem::path& final_path, StoreMetadata metadata)
    : final_path_(final_path), temporary_path_(temporary_sibling(final_path)),
      metadata_(std::move(metadata)) {
  row_size_ = std::accumulate(metadata_.nontime_dims.begin(), metadata_.nontime_dims.end(),
                              int64_t{1}, std::multiplies<int64_t>());
  if (row_size_ <= 0) throw DataError("store " + final_path.string() + ": empty data dimensions");
  ensure_directory(final_path.parent_path());
  std::lock_guard<std::recursive_mutex> lock(hdf5_mutex());
  try {
    H5::Exception::dontPrint();
    impl_ = std::make_unique<Impl>(temporary_path_.string());
    hsize_t dims[2] = {0, static_cast<hsize_t>(row_size_)};
    hsize_t max_dims[2] = {H5S_UNLIMITED, static_cast<hsize_t>(row_size_)};
    H5::DataSpace space(2, dims, max_dims);
    H5::DSetCreatPropList properties;
    hsize_t chunk[2] = {static_cast<hsize_t>(std::max<int64_t>(
                            1, kChunkBytes / (row_size_ * element_size(metadata_.stored_type)))),
                        static_cast<hsize_t>(row_size_)};
    properties.setChunk(2, chunk);
    impl_->data = impl_->file.createDataSet("data", h5_type(metadata_.stored_type), space,
                                            properties);
  } catch (const H5::Exception& e) {
    throw DataError("cannot create store " + temporary_path_.string() + ": " + e.getDetailMsg());
  }
}

StoreWriter::~StoreWriter() {
  if (committed_) return;
  std::lock_guard<std::recursive_mutex> lock(hdf5_mutex());
  try {
    impl_.reset();
  } catch (...) {
  }
  std::error_code ec;
  std::filesystem::remove(temporary_path_, ec);
}

void StoreWriter::append(const std::string& name, const torch::Tensor& data, int64_t length) {
  if (data.is_complex())
    throw DataError("complex data (feature = spec) cannot be stored; such sections are computed "
                    "on the fly (preprocess = False)");
  if (data.dim() < 1 || data.numel() != data.size(0) * row_size_)
    throw DataError("example '" + name + "' has shape " + std::to_string(data.numel()) +
                    " elements where rows of " + std::to_string(row_size_) + " were expected");
  auto rows = data.reshape({data.size(0), row_size_})
                  .to(stored_scalar_type(metadata_.stored_type))
                  .contiguous();
  names_.push_back(name);
  offsets_.push_back(rows_ + pending_rows_);
  lengths_.push_back(length);
  pending_.push_back(rows);
  pending_rows_ += rows.size(0);
  if (pending_rows_ >= kFlushRows) flush();
}

void StoreWriter::flush() {
  if (pending_rows_ == 0) return;
  auto block = torch::cat(pending_, 0).contiguous();
  std::lock_guard<std::recursive_mutex> lock(hdf5_mutex());
  try {
    hsize_t new_dims[2] = {static_cast<hsize_t>(rows_ + pending_rows_),
                           static_cast<hsize_t>(row_size_)};
    impl_->data.extend(new_dims);
    H5::DataSpace file_space = impl_->data.getSpace();
    hsize_t offset[2] = {static_cast<hsize_t>(rows_), 0};
    hsize_t count[2] = {static_cast<hsize_t>(pending_rows_), static_cast<hsize_t>(row_size_)};
    file_space.selectHyperslab(H5S_SELECT_SET, count, offset);
    H5::DataSpace memory_space(2, count);
    impl_->data.write(block.data_ptr(), h5_type(metadata_.stored_type), memory_space, file_space);
  } catch (const H5::Exception& e) {
    throw DataError("cannot write store " + temporary_path_.string() + ": " + e.getDetailMsg());
  }
  rows_ += pending_rows_;
  bytes_ += block.numel() * element_size(metadata_.stored_type);
  pending_.clear();
  pending_rows_ = 0;
}

void StoreWriter::commit() {
  flush();
  {
    std::lock_guard<std::recursive_mutex> lock(hdf5_mutex());
    try {
      auto& file = impl_->file;
      std::vector<const char*> names;
      for (const auto& name : names_) names.push_back(name.c_str());
      hsize_t count = names.size();
      H5::StrType string_type(H5::PredType::C_S1, H5T_VARIABLE);
      auto names_set = file.createDataSet("names", string_type, H5::DataSpace(1, &count));
      if (count) names_set.write(names.data(), string_type);
      write_int64_dataset(file, "offsets", offsets_);
      write_int64_dataset(file, "lengths", lengths_);
      write_int_attribute(file, "format_version", kFormatVersion);
      write_string_attribute(file, "stored_type", stored_type_name(metadata_.stored_type));
      hsize_t dims = metadata_.nontime_dims.size();
      auto attribute =
          file.createAttribute("nontime_dims", H5::PredType::NATIVE_INT64, H5::DataSpace(1, &dims));
      // A 0-D sequence (labels) has no non-time dimensions: an empty attribute, nothing to write.
      if (dims) attribute.write(H5::PredType::NATIVE_INT64, metadata_.nontime_dims.data());
      write_string_attribute(file, "section", metadata_.section);
      write_string_attribute(file, "segment_length", metadata_.segment_length);
      write_string_attribute(file, "writer_style", metadata_.writer_style);
      write_string_attribute(file, "processor_config", metadata_.processor_config);
      write_string_attribute(file, "source_lines", metadata_.source_lines);
      write_string_attribute(file, "recipe", metadata_.recipe);
      write_int_attribute(file, "utterances", metadata_.utterances);
      write_int_attribute(file, "complete", 1);
      impl_->data.close();
      file.close();
    } catch (const H5::Exception& e) {
      throw DataError("cannot finish store " + temporary_path_.string() + ": " +
                      e.getDetailMsg());
    }
  }
  rename_replace(temporary_path_, final_path_);
  committed_ = true;
}

// ---------------------------------------------------------------------------------------------

struct StoreReader::Impl {
  explicit Impl(const std::string& path) : file(path, H5F_ACC_RDONLY) {}
  H5::H5File file;
  H5::DataSet data;
};

StoreReader::StoreReader(const std::filesystem::path& path) : path_(path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw DataError("store " + path.string() + " does not exist (run `nabu data` first?)");
  std::lock_guard<std::recursive_mutex> lock(hdf5_mutex());
  try {
    H5::Exception::dontPrint();
    impl_ = std::make_unique<Impl>(path.string());
    metadata_ = read_metadata(impl_->file);
    impl_->data = impl_->file.openDataSet("data");
    auto names_set = impl_->file.openDataSet("names");
    hsize_t count = 0;
    names_set.getSpace().getSimpleExtentDims(&count);
    std::vector<char*> names(count, nullptr);
    H5::StrType string_type(H5::PredType::C_S1, H5T_VARIABLE);
    if (count) names_set.read(names.data(), string_type);
    for (char* name : names) names_.emplace_back(name ? name : "");
    if (count) {
      H5::DataSpace space = names_set.getSpace();
      H5::DataSet::vlenReclaim(names.data(), string_type, space);
    }
    offsets_ = read_int64_dataset(impl_->file, "offsets");
    lengths_ = read_int64_dataset(impl_->file, "lengths");
    if (offsets_.size() != names_.size() || lengths_.size() != names_.size())
      throw DataError("index sizes differ");
  } catch (const H5::Exception& e) {
    throw DataError("store " + path.string() + " is not a readable nabu store: " +
                    e.getDetailMsg());
  } catch (const DataError& e) {
    throw DataError("store " + path.string() + ": " + e.what());
  }
}

StoreReader::~StoreReader() {
  std::lock_guard<std::recursive_mutex> lock(hdf5_mutex());
  impl_.reset();
}

torch::Tensor StoreReader::read(int64_t index) const {
  int64_t row_size = std::accumulate(metadata_.nontime_dims.begin(), metadata_.nontime_dims.end(),
                                     int64_t{1}, std::multiplies<int64_t>());
  int64_t offset = offsets_.at(index);
  // Rows stored for the example: its padded segment length can exceed the real length.
  int64_t rows = (index + 1 < size() ? offsets_[index + 1] : -1) - offset;
  std::lock_guard<std::recursive_mutex> lock(hdf5_mutex());
  try {
    if (rows < 0) {
      hsize_t dims[2];
      impl_->data.getSpace().getSimpleExtentDims(dims);
      rows = static_cast<int64_t>(dims[0]) - offset;
    }
    auto tensor = torch::empty({rows, row_size}, stored_scalar_type(metadata_.stored_type));
    if (rows > 0) {
      H5::DataSpace file_space = impl_->data.getSpace();
      hsize_t start[2] = {static_cast<hsize_t>(offset), 0};
      hsize_t count[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(row_size)};
      file_space.selectHyperslab(H5S_SELECT_SET, count, start);
      H5::DataSpace memory_space(2, count);
      impl_->data.read(tensor.data_ptr(), h5_type(metadata_.stored_type), memory_space,
                       file_space);
    }
    std::vector<int64_t> shape{rows};
    shape.insert(shape.end(), metadata_.nontime_dims.begin(), metadata_.nontime_dims.end());
    return tensor.reshape(shape);
  } catch (const H5::Exception& e) {
    throw DataError("store " + path_.string() + ": cannot read example '" + names_.at(index) +
                    "': " + e.getDetailMsg());
  }
}

bool read_store_metadata(const std::filesystem::path& path, StoreMetadata& metadata) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::lock_guard<std::recursive_mutex> lock(hdf5_mutex());
  try {
    H5::Exception::dontPrint();
    H5::H5File file(path.string(), H5F_ACC_RDONLY);
    metadata = read_metadata(file);
    return true;
  } catch (const H5::Exception&) {
    return false;
  } catch (const DataError&) {
    return false;
  }
}

// ---------------------------------------------------------------------------------------------
// Global MVN statistics

void MvnAccumulator::add(const torch::Tensor& observations) {
  auto x = observations.to(torch::kFloat64).reshape({observations.size(0), -1});
  int64_t n = x.size(0);
  if (n == 0) return;
  auto batch_mean = x.mean(0);
  auto batch_m2 = (x - batch_mean).square().sum(0);
  if (count_ == 0) {
    mean_ = batch_mean;
    m2_ = batch_m2;
    count_ = n;
    return;
  }
  if (batch_mean.size(0) != mean_.size(0))
    throw DataError("feature dimension changed from " + std::to_string(mean_.size(0)) + " to " +
                    std::to_string(batch_mean.size(0)));
  int64_t total = count_ + n;
  auto delta = batch_mean - mean_;
  mean_ = mean_ + delta * (static_cast<double>(n) / total);
  m2_ = m2_ + batch_m2 + delta.square() * (static_cast<double>(count_) * n / total);
  count_ = total;
}

MvnStatistics MvnAccumulator::finish() const {
  if (count_ == 0) throw DataError("no observations to compute mean and variance from");
  MvnStatistics statistics;
  statistics.mean = mean_;
  statistics.std = (m2_ / static_cast<double>(count_)).sqrt();
  statistics.count = count_;
  return statistics;
}

void MvnStatistics::save(const std::filesystem::path& path) const {
  ensure_directory(path.parent_path());
  AtomicPath target(path);
  {
    std::lock_guard<std::recursive_mutex> lock(hdf5_mutex());
    try {
      H5::Exception::dontPrint();
      H5::H5File file(target.temporary().string(), H5F_ACC_TRUNC);
      for (auto [name, tensor] : {std::pair<const char*, torch::Tensor>{"mean", mean},
                                  std::pair<const char*, torch::Tensor>{"std", std}}) {
        auto values = tensor.to(torch::kFloat64).contiguous();
        hsize_t size = values.numel();
        auto dataset = file.createDataSet(name, H5::PredType::NATIVE_DOUBLE, H5::DataSpace(1, &size));
        dataset.write(values.data_ptr<double>(), H5::PredType::NATIVE_DOUBLE);
      }
      write_int_attribute(file, "count", count);
    } catch (const H5::Exception& e) {
      throw DataError("cannot write statistics " + path.string() + ": " + e.getDetailMsg());
    }
  }
  target.commit();
}

MvnStatistics MvnStatistics::load(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw DataError("mean/variance statistics " + path.string() +
                    " do not exist: prepare the section whose store_dir is meanandvar_dir first");
  std::lock_guard<std::recursive_mutex> lock(hdf5_mutex());
  try {
    H5::Exception::dontPrint();
    H5::H5File file(path.string(), H5F_ACC_RDONLY);
    MvnStatistics statistics;
    for (auto* target : {&statistics.mean, &statistics.std}) {
      auto dataset = file.openDataSet(target == &statistics.mean ? "mean" : "std");
      hsize_t size = 0;
      dataset.getSpace().getSimpleExtentDims(&size);
      *target = torch::empty({static_cast<int64_t>(size)}, torch::kFloat64);
      dataset.read(target->data_ptr<double>(), H5::PredType::NATIVE_DOUBLE);
    }
    statistics.count = read_int_attribute(file, "count");
    return statistics;
  } catch (const H5::Exception& e) {
    throw DataError("cannot read statistics " + path.string() + ": " + e.getDetailMsg());
  }
}

}  // namespace nabu
