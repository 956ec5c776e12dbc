// Processors (docs/data_layout.md): one list line -> one utterance of data, time first ([T, ...]),
// plus the original's segmentation. A processor is configured by the [processor] section of its
// processor config (feature options plus its own keys).
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/core/registry.h"
#include "nabu/processing/data_list.h"
#include "nabu/processing/feature_computer.h"

namespace nabu {

enum class StoredType { kFloat32, kBool, kInt32 };

// What the audio of a processor's list line is: one mixture (features, spectra, used bins), the
// sources of a mixture (targets), or something else (a reference signal, a matrix file). Dynamic
// mixing hands each processor the signals of its role.
enum class SignalRole { kMixture, kSources, kOther };
std::string stored_type_name(StoredType type);
torch::ScalarType stored_scalar_type(StoredType type);  // the tensor dtype of a stored type
StoredType stored_type_from_name(const std::string& name);  // throws
// writer_style of database.conf -> the stored type it asks for.
StoredType stored_type_for_writer_style(const std::string& writer_style);  // throws

// Global mean and standard deviation per feature dimension (mvn_type = global).
struct MvnStatistics {
  torch::Tensor mean, std;  // double [dim]
  int64_t count = 0;        // observations (frames or vectors)
  void save(const std::filesystem::path& path) const;  // atomic HDF5 file
  static MvnStatistics load(const std::filesystem::path& path);
};

// Mean/variance normalisation of features [T, dim] (or [.., dim]) by mvn_type: `global` with
// `statistics`, `local` with the utterance's own (population std), anything else none;
// (x - mean) / (std + epsilon).
torch::Tensor normalise_features(const torch::Tensor& features, const std::string& mvn_type,
                                 const MvnStatistics& statistics, double epsilon = 1e-12);

// Streaming accumulation of MvnStatistics (Chan et al.'s parallel update: one pass, exact).
class MvnAccumulator {
 public:
  void add(const torch::Tensor& observations);  // [n, dim]
  MvnStatistics finish() const;                 // population std, as numpy's
  int64_t count() const { return count_; }

 private:
  torch::Tensor mean_, m2_;
  int64_t count_ = 0;
};

class Processor {
 public:
  virtual ~Processor() = default;
  // The whole utterance: [T, ...] (time first) for the stored processors. When `sample_rate` is
  // given it receives the audio's sample rate.
  virtual torch::Tensor process(const DataLine& line, int* sample_rate = nullptr) const = 0;
  // The same from one signal in memory (int16 scale), for processors whose line is one mixture
  // wav (features, spectra, used bins): `nabu separate` computes them chunk by chunk. Others
  // throw DataError saying they need more than a mixture.
  virtual torch::Tensor process_audio(const torch::Tensor& samples, int sample_rate) const;
  virtual SignalRole signal_role() const { return SignalRole::kOther; }
  // The same as process() from the signals its line would name, in memory (int16 scale): the
  // mixture for kMixture, every source for kSources. Others throw DataError.
  virtual torch::Tensor process_signals(const std::vector<torch::Tensor>& signals,
                                        int sample_rate) const;
  // False for processors whose output is not time-first frames (multi-signal raw audio): those
  // are only computed on the fly (reconstruction, scoring), never stored.
  virtual bool storable() const { return true; }
  // The feature options, for processors that compute features (reconstruction needs the STFT
  // settings of org_mix).
  virtual const FeatureOptions* feature_options() const { return nullptr; }
  // The labels of processors whose data are label indices (text_processor): index -> label.
  virtual const std::vector<std::string>* alphabet() const { return nullptr; }
  // Processors that number string labels in the order they meet them (strlabel2index_processor):
  // `nabu data` numbers a section's lines in file order before processing them (so the indices
  // do not depend on the number of workers), continuing `known` (the labels of label2index_dir,
  // index order). alphabet() then returns every label by index.
  virtual bool numbers_labels() const { return false; }
  virtual void number_labels(const std::vector<DataLine>& lines,
                             const std::vector<std::string>& known) {}
  virtual StoredType stored_type() const { return StoredType::kFloat32; }
  // Dimensions after time ([dim], [dim, S], ...).
  virtual std::vector<int64_t> nontime_dims() const = 0;
  // Global MVN: statistics are computed from these observations of the training section.
  virtual bool needs_statistics() const { return false; }
  virtual torch::Tensor statistics_observations(const DataLine& line) const {
    return torch::Tensor();
  }
  virtual void set_statistics(const MvnStatistics& statistics) {}
  // The segments of one utterance for one segment length ("full" or frames), docs/data_layout.md:
  // floor(T/L) segments with the remainder dropped; shorter utterances give one zero-padded
  // segment. Returns (segment, real length) pairs.
  virtual std::vector<std::pair<torch::Tensor, int64_t>> segment(
      const torch::Tensor& data, const std::string& segment_length) const;
};

using ProcessorPtr = std::shared_ptr<Processor>;
using ProcessorRegistry = Registry<ProcessorPtr, const ConfigSection&>;
ProcessorRegistry& processor_registry();

// The processor of a processor config ([processor] section, key `processor`).
ProcessorPtr make_processor(const ConfigFile& processor_config);

// The keys of every processor that computes features from audio: `processor` and the feature
// computer's keys.
struct SignalOptions : FeatureOptions {
  void declare(OptionsReader& r);
};
// The same with the mean/variance normalisation of the features (`mvn_type`).
struct FeatOptions : SignalOptions {
  std::string mvn_type = "None";
  void declare(OptionsReader& r);
};

// Processor P built from its options O read from the [processor] section, so unknown keys and bad
// values are rejected the same way at construction and in `nabu check`.
template <class P, class O>
ProcessorPtr make_processor_with(const ConfigSection& section) {
  return std::make_shared<P>(
      read_options<O>(section, "processor " + section.get_string("processor")));
}

// The label numbering of a store directory, <dir>/label2index.json ({"label": index}), written
// atomically by `nabu data` for processors that number labels and read through label2index_dir.
void write_label_index(const std::filesystem::path& dir, const std::vector<std::string>& labels);
// Labels by index; throws Error naming the file when it is missing or not such a numbering.
std::vector<std::string> read_label_index(const std::filesystem::path& dir);

// Frame-domain segmentation (time axis 0), shared by the processors.
std::vector<std::pair<torch::Tensor, int64_t>> segment_frames(const torch::Tensor& data,
                                                              const std::string& segment_length);

}  // namespace nabu
