#include "nabu/postprocessing/model_export.h"

#include <torch/script.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "nabu/core/error.h"
#include "nabu/neuralnetworks/models/model.h"
#include "nabu/postprocessing/separation.h"
#include "nabu/processing/signal.h"

namespace nabu {

namespace {

std::string attribute_name(std::string name) {
  std::replace(name.begin(), name.end(), '.', '_');
  return name;
}

std::string number(double value) { return fmt::format("{:.17g}", value); }

// What separate_samples does around a waveform model for one chunk (separation.cpp): the
// mixture cut to whole analysis frames (snipped_length, signal.cpp) and divided by its peak (the
// raw feature), the model, and the least-squares gains of mixture_gains; zeros after the cut.
std::string separator_source(const FrameSettings& frames) {
  const std::string winlen = number(frames.winlen * frames.sample_rate);
  const std::string winstep = number(frames.winstep * frames.sample_rate);
  return "def forward(self, waveform: Tensor) -> Tensor:\n"
         "    batch = waveform.unsqueeze(0) if waveform.dim() == 1 else waveform\n"
         "    mixture = batch.double()\n"
         "    length = mixture.size(1)\n"
         "    frames = int((float(length) - " + winlen + ") / " + winstep + ")\n"
         "    keep = min(max(int(frames * " + winstep + " + " + winlen + " + 0.5), 0), length)\n"
         "    heard = mixture.narrow(1, 0, keep)\n"
         "    peak = heard.abs().amax(1, True)\n"
         "    normalised = torch.where(peak > 0.0, heard / peak, heard)\n"
         "    signals = self.model.forward(normalised.float())"
         ".transpose(1, 2).double()\n"
         "    gram = torch.matmul(signals, signals.transpose(1, 2))\n"
         "    projection = torch.matmul(signals, heard.unsqueeze(2))\n"
         "    ridge = 1e-09 * torch.clamp_min(torch.diagonal(gram, 0, 1, 2).mean(1), 1e-12)\n"
         "    eye = torch.eye(gram.size(1), dtype=gram.dtype)\n"
         "    gains = torch.linalg_solve(gram + ridge.view([-1, 1, 1]) * eye, projection)\n"
         "    separated = signals * gains\n"
         "    return torch.constant_pad_nd(separated, [0, length - keep], 0.0)"
         ".float()\n";
}

torch::jit::Module script_model_in(const Model& model,
                                   const std::shared_ptr<torch::jit::CompilationUnit>& unit) {
  const std::string source = model.torchscript();
  if (source.empty()) throw Error(model.describe() + ": " + model.why_not_exported());
  torch::jit::Module module(c10::QualifiedName("nabu.Model_" + model.model_name()), unit,
                            /*shouldMangle=*/true);
  for (const auto& item : model.named_parameters(/*recurse=*/true))
    module.register_parameter(attribute_name(item.key()),
                              item.value().detach().to(torch::kCPU).clone(),
                              /*is_buffer=*/false);
  module.define(source);
  module.eval();
  return module;
}

}  // namespace

torch::jit::Module script_model(const Model& model) {
  return script_model_in(model, std::make_shared<torch::jit::CompilationUnit>());
}

void export_experiment(const Recipe& recipe, const std::filesystem::path& expdir,
                       const ExportRequest& request) {
  if (request.format == "onnx")
    throw Error("--format=onnx is not written yet; --format=torchscript is");
  if (request.format != "torchscript")
    throw Error("--format=" + request.format + ": expected torchscript");
  const auto folder = std::filesystem::absolute(request.out).parent_path();
  if (!std::filesystem::is_directory(folder) || ::access(folder.c_str(), W_OK) != 0)
    throw Error("--out=" + request.out.string() + ": cannot write into " + folder.string());
  const ConfigFile& test_cfg = recipe.get("test_evaluator.cfg");
  const std::string task = request.task.empty()
                               ? test_cfg.section("evaluator").get_list("tasks").at(0)
                               : request.task;
  const std::string segment =
      test_cfg.section("evaluator").get_string("segment_length", "full");
  Separator separator(recipe, expdir, segment, request.early, request.model, c10::kCPU);
  auto separation = separator.task(task);
  const Model& model = separation->waveform_model("export");
  const auto* features = separator.input_sections(task).front()->feature_options();

  auto unit = std::make_shared<torch::jit::CompilationUnit>();
  torch::jit::Module top(c10::QualifiedName("nabu.Separator"), unit, /*shouldMangle=*/true);
  top.register_module("model", script_model_in(model, unit));
  top.register_attribute("sample_rate", c10::IntType::get(),
                         static_cast<int64_t>(separation->model_sample_rate()));
  top.register_attribute("speakers", c10::IntType::get(),
                         static_cast<int64_t>(separation->num_speakers()));
  // What chunked separation needs of an exported file (the C++ API's Separator::from_exported).
  top.register_attribute("frame_length", c10::IntType::get(),
                         separation->frame_length(separation->model_sample_rate()));
  top.define(separator_source(features->frames(separation->model_sample_rate())));
  top.eval();
  const auto temporary = std::filesystem::path(request.out.string() + ".tmp." +
                                               std::to_string(::getpid()));
  try {
    top.save(temporary.string());
    std::filesystem::rename(temporary, request.out);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw;
  }
  spdlog::info("exported {} ({}, task {}, {} Hz, {} speakers) to {}", model.describe(),
               request.format, task, separation->model_sample_rate(), separation->num_speakers(),
               request.out.string());
}

}  // namespace nabu
