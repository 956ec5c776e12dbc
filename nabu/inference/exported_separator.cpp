#include "nabu/inference/exported_separator.h"

#include <fstream>

#include <torch/script.h>

#include "nabu/core/error.h"

namespace nabu {

namespace {

// An ONNX model is a protobuf whose first field is ir_version (tag 0x08); a TorchScript file is a
// zip archive ("PK").
bool is_onnx_file(const std::filesystem::path& file) {
  if (file.extension() == ".onnx") return true;
  std::ifstream in(file, std::ios::binary);
  char first = 0;
  return in.get(first) && first == 0x08;
}

}  // namespace

ExportedSeparator::ExportedSeparator(const std::filesystem::path& file) {
  if (!std::filesystem::is_regular_file(file)) throw Error(file.string() + ": no such file");
  if (is_onnx_file(file))
    throw Error(file.string() + ": an ONNX model, which is for onnxruntime in your own program "
                "(docs/api.md); nabu separate and nabu test take the TorchScript file of nabu "
                "export --format=torchscript (a .pt) or a shipped model's name (nabu models)");
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
