// On-the-fly data of one database section (docs/postprocessing.md): the reconstructor's and
// scorer's side data (org_mix, usedbins, org_src, base) and `nabu separate`'s inputs are computed
// from the list file with the section's processor, matched by utterance name (the original matches
// by line position, which breaks when anything was skipped).
#pragma once

#include <torch/torch.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nabu/core/recipe.h"
#include "nabu/processing/data_list.h"
#include "nabu/processing/processor.h"

namespace nabu {

class SectionReader {
 public:
  // Loads the processor (with its global MVN statistics when it needs them); the list is read
  // when first needed.
  SectionReader(const Recipe& recipe, const std::string& section_name);

  const std::string& section() const { return section_; }
  // Every line of the section's datafiles (read when first needed).
  const std::vector<DataLine>& lines() const;
  bool has(const std::string& utterance) const;
  const DataLine& line(const std::string& utterance) const;
  // The processed data of an utterance of the list; errors name the section and utterance.
  torch::Tensor read(const std::string& utterance, int* sample_rate = nullptr) const;
  // The processed data of any line (e.g. a new mixture for `nabu separate`).
  torch::Tensor process(const DataLine& line, int* sample_rate = nullptr) const;
  // The processed data of one signal in memory (int16 scale; Processor::process_audio).
  torch::Tensor process_audio(const torch::Tensor& samples, int sample_rate) const;
  // The rate the section's data has: its sample_rate key (recorded in an experiment's copy),
  // else the rate of the first audio file of its list.
  int list_sample_rate() const;
  const Processor& processor() const { return *processor_; }
  const FeatureOptions* feature_options() const { return processor_->feature_options(); }
  // The global MVN statistics the processor was given; nullptr when it needs none.
  const MvnStatistics* statistics() const { return statistics_ ? &*statistics_ : nullptr; }

 private:
  void load_list() const;
  std::string section_;
  ProcessorPtr processor_;
  std::optional<MvnStatistics> statistics_;
  std::vector<std::string> datafiles_;
  int recorded_sample_rate_ = 0;
  std::string list_root_;
  std::string datafiles_where_;  // "database.conf:N: [section] datafiles", for list errors
  mutable bool loaded_ = false;
  mutable std::vector<DataLine> lines_;
  mutable std::map<std::string, std::size_t> index_;
};

// The sample rate of every database section whose list names audio (sections whose list cannot
// be read as audio are left out), for Recipe::save_copy.
std::map<std::string, int> list_sample_rates(const Recipe& recipe);

}  // namespace nabu
