// A file `nabu export` wrote, run as `nabu separate` runs an experiment: the shipped models
// (`nabu separate --model=<name>`, inference/shipped_models.h) and the C++ API's
// Separator::from_exported.
#pragma once

#include <filesystem>
#include <memory>

#include "nabu/inference/chunked_separation.h"

namespace torch::jit {
struct Module;
}

namespace nabu {

class ExportedSeparator {
 public:
  // Loads `file` on the CPU; an Error naming the file when it is missing or is not a TorchScript
  // file with the sample_rate and speakers attributes nabu export writes.
  explicit ExportedSeparator(const std::filesystem::path& file);
  ~ExportedSeparator();
  int sample_rate() const { return sample_rate_; }
  int speakers() const { return speakers_; }
  int64_t frame_length() const { return frame_length_; }
  // One chunk: [N] (int16 scale, the model's rate) -> [S, N] double.
  torch::Tensor separate(const torch::Tensor& samples);
  // What chunked separation (separate_file, the API) needs of it.
  ChunkModel chunk_model();

 private:
  std::unique_ptr<torch::jit::Module> module_;
  int sample_rate_ = 0, speakers_ = 0;
  int64_t frame_length_ = 1;
};

}  // namespace nabu
