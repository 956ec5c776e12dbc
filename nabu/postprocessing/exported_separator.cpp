#include "nabu/postprocessing/exported_separator.h"

#include <torch/script.h>

#include "nabu/core/error.h"

namespace nabu {

ExportedSeparator::ExportedSeparator(const std::filesystem::path& file) {
  if (!std::filesystem::is_regular_file(file)) throw Error(file.string() + ": no such file");
  try {
    module_ = std::make_unique<torch::jit::Module>(torch::jit::load(file.string(), c10::kCPU));
  } catch (const c10::Error& e) {
    throw Error(file.string() + ": not a file nabu export wrote (" +
                std::string(e.what_without_backtrace()).substr(0, 120) + ")");
  }
  if (!module_->hasattr("sample_rate") || !module_->hasattr("speakers"))
    throw Error(file.string() +
                ": a TorchScript file without the sample_rate and speakers nabu export writes");
  module_->eval();
  sample_rate_ = static_cast<int>(module_->attr("sample_rate").toInt());
  speakers_ = static_cast<int>(module_->attr("speakers").toInt());
  // Files of the first exports have no frame_length: one sample, so no chunk check is wrong.
  if (module_->hasattr("frame_length")) frame_length_ = module_->attr("frame_length").toInt();
}

ExportedSeparator::~ExportedSeparator() = default;

torch::Tensor ExportedSeparator::separate(const torch::Tensor& samples) {
  torch::NoGradGuard no_grad;
  auto out = module_->forward({samples.to(torch::kFloat32).unsqueeze(0)}).toTensor();
  return out[0].to(torch::kFloat64);
}

ChunkModel ExportedSeparator::chunk_model() {
  ChunkModel model;
  model.separate = [this](const torch::Tensor& samples) { return separate(samples); };
  model.speakers = speakers_;
  model.sample_rate = sample_rate_;
  model.frame_length = frame_length_;
  return model;
}

}  // namespace nabu
