#include "nabu/postprocessing/model_export.h"

#include <torch/script.h>
#include <unistd.h>

#include <cctype>
#include <set>

#include <spdlog/spdlog.h>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/onnx.h"
#include "nabu/neuralnetworks/models/model.h"
#include "nabu/neuralnetworks/models/model_graph.h"
#include "nabu/postprocessing/separation.h"
#include "nabu/postprocessing/stft_script.h"
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

// Solves (gram + ridge I) g = projection for each utterance by Gauss-Jordan elimination unrolled
// over the S speakers (ONNX has no solve; the matrix is symmetric positive definite, so no
// pivoting is needed): A [B, S, S + 1] -> g [B, S, 1].
std::string onnx_solve(onnx::Graph& graph, std::string augmented, int64_t speakers) {
  for (int64_t k = 0; k < speakers; ++k) {
    auto k_range = [&](int64_t axis) {
      return std::vector<std::string>{graph.ints({k}), graph.ints({k + 1}), graph.ints({axis})};
    };
    auto slice = [&](const std::string& x, int64_t axis) {
      auto range = k_range(axis);
      return graph.node("Slice", {x, range[0], range[1], range[2]});
    };
    auto row = slice(augmented, 1);  // [B, 1, S + 1]
    auto pivot_row = graph.node("Div", {row, slice(row, 2)});
    std::vector<double> unit(static_cast<std::size_t>(speakers), 0.0);
    unit[static_cast<std::size_t>(k)] = 1.0;
    auto column =
        graph.node("Sub", {slice(augmented, 2), graph.doubles("unit", {1, speakers, 1}, unit)});
    augmented = graph.node("Sub", {augmented, graph.node("Mul", {column, pivot_row})});
  }
  return graph.node(
      "Slice", {augmented, graph.ints({speakers}), graph.ints({speakers + 1}), graph.ints({2})});
}

// The ONNX model: what separator_source computes, node by node, around Model::onnx.
std::string onnx_model(const Model& model, TaskSeparation& separation,
                       const FrameSettings& frames) {
  onnx::Graph graph;
  const int64_t speakers = separation.num_speakers();
  const auto to = [](onnx::ElementType type) {
    return onnx::int_attribute("to", static_cast<int64_t>(type));
  };
  graph.input("waveform", onnx::ElementType::kFloat, {{0, "batch"}, {0, "samples"}});
  auto mixture = graph.node("Cast", {"waveform"}, {to(onnx::ElementType::kDouble)});
  auto length = graph.node("Gather", {graph.node("Shape", {"waveform"}), graph.int_scalar(1)});
  // keep = min(max(round(floor((N - winlen) / winstep) winstep + winlen), 0), N)
  auto winlen = graph.doubles("winlen", {}, {frames.winlen * frames.sample_rate});
  auto winstep = graph.doubles("winstep", {}, {frames.winstep * frames.sample_rate});
  auto count = graph.node(
      "Floor",
      {graph.node(
          "Div", {graph.node("Sub", {graph.node("Cast", {length}, {to(onnx::ElementType::kDouble)}),
                                     winlen}),
                  winstep})});
  auto keep = graph.node(
      "Cast",
      {graph.node(
          "Floor",
          {graph.node("Add", {graph.node("Add", {graph.node("Mul", {count, winstep}), winlen}),
                              graph.doubles("half", {}, {0.5})})})},
      {to(onnx::ElementType::kInt64)});
  keep = graph.node("Min", {graph.node("Max", {keep, graph.int_scalar(0)}), length});
  auto heard = graph.node(
      "Slice",
      {mixture, graph.ints({0}), graph.node("Reshape", {keep, graph.ints({1})}), graph.ints({1})});
  auto peak =
      graph.node("ReduceMax", {graph.node("Abs", {heard})}, {onnx::ints_attribute("axes", {1})});
  auto normalised =
      graph.node("Where", {graph.node("Greater", {peak, graph.doubles("zero", {}, {0.0})}),
                           graph.node("Div", {heard, peak}), heard});
  const std::string network =
      model.onnx(graph, graph.node("Cast", {normalised}, {to(onnx::ElementType::kFloat)}));
  if (network.empty()) throw Error(model.describe() + ": " + model.why_not_onnx());
  auto signals = graph.node("Cast", {network}, {to(onnx::ElementType::kDouble)});
  // The least-squares gains of mixture_gains, with its ridge.
  auto gram = graph.node(
      "MatMul",
      {signals, graph.node("Transpose", {signals}, {onnx::ints_attribute("perm", {0, 2, 1})})});
  auto projection =
      graph.node("MatMul", {signals, graph.node("Unsqueeze", {heard, graph.ints({2})})});
  std::vector<double> identity(static_cast<std::size_t>(speakers * speakers), 0.0);
  for (int64_t s = 0; s < speakers; ++s) identity[static_cast<std::size_t>(s * speakers + s)] = 1.0;
  auto eye = graph.doubles("eye", {speakers, speakers}, identity);
  auto diagonal = graph.node("ReduceSum", {graph.node("Mul", {gram, eye}), graph.ints({2})},
                             {onnx::int_attribute("keepdims", 0)});
  auto ridge = graph.node(
      "Mul",
      {graph.node("Max", {graph.node("ReduceMean", {diagonal}, {onnx::ints_attribute("axes", {1})}),
                          graph.doubles("floor", {}, {1e-12})}),
       graph.doubles("ridge", {}, {1e-9})});
  auto regularised = graph.node(
      "Add", {gram, graph.node("Mul", {graph.node("Unsqueeze", {ridge, graph.ints({2})}), eye})});
  auto gains = onnx_solve(
      graph, graph.node("Concat", {regularised, projection}, {onnx::int_attribute("axis", 2)}),
      speakers);
  auto separated = graph.node("Mul", {signals, gains});
  auto pads =
      graph.node("Concat",
                 {graph.ints({0, 0, 0, 0, 0}),
                  graph.node("Reshape", {graph.node("Sub", {length, keep}), graph.ints({1})})},
                 {onnx::int_attribute("axis", 0)});
  auto padded =
      graph.node("Cast", {graph.node("Pad", {separated, pads})}, {to(onnx::ElementType::kFloat)});
  graph.output(padded, "separated", onnx::ElementType::kFloat,
               {{0, "batch"}, {speakers, ""}, {0, "samples"}});
  return graph.serialise("nabu_separator", "nabu");
}

}  // namespace

torch::jit::Module script_model(const Model& model) {
  return script_model_in(model, std::make_shared<torch::jit::CompilationUnit>());
}

namespace {

std::string identifier(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

// The exported module with the attributes every reader uses: the rate, the speakers and, for
// chunking (the C++ API's Separator::from_exported), the samples of one analysis frame.
torch::jit::Module separator_module(const std::shared_ptr<torch::jit::CompilationUnit>& unit,
                                    TaskSeparation& separation) {
  torch::jit::Module top(c10::QualifiedName("nabu.Separator"), unit, /*shouldMangle=*/true);
  top.register_attribute("sample_rate", c10::IntType::get(),
                         static_cast<int64_t>(separation.model_sample_rate()));
  top.register_attribute("speakers", c10::IntType::get(),
                         static_cast<int64_t>(separation.num_speakers()));
  top.register_attribute("frame_length", c10::IntType::get(),
                         separation.frame_length(separation.model_sample_rate()));
  return top;
}

// A spectral input's feature and normalisation as `features` (float) from `mixture`
// (feature_computers.cpp, normalise_features), or an Error naming what does not export.
std::string feature_source(torch::jit::Module& top, const Recipe& recipe,
                           const SectionReader& section, int rate, const std::string& task) {
  const FeatureOptions* options = section.feature_options();
  const ConfigFile& processor =
      recipe.processor_config(recipe.get("database.conf").section(section.section()));
  const std::string where = "task " + task + ": input " + section.section() + " (" +
                            processor.path() + ")";
  const std::string name = processor.section("processor").get_string("processor", "");
  const std::string expression =
      options ? spectral_feature_script(options->feature, "spectrum", options->nfft) : "";
  if ((name != "audio_feat_processor" && name != "audio_signal_processor") || expression.empty())
    throw Error(where + ": export computes magspec, logspec or powspec features of the mixture "
                "(audio_feat_processor), not " + name + " " + (options ? options->feature : ""));
  if (options->include_energy)
    throw Error(where + ": include_energy = True does not export");
  top.register_buffer("feature_stft_window",
                      make_window(options->winfunc, options->frames(rate).frame_length()));
  std::string source = "    spectrum = self.feature_stft(mixture)\n"
                       "    features = " + expression + "\n";
  const std::string mvn = processor.section("processor").get_string("mvn_type", "none");
  if (mvn == "global") {
    top.register_buffer("mvn_mean", section.statistics()->mean.clone());
    top.register_buffer("mvn_std", section.statistics()->std.clone());
    source += "    features = (features - self.mvn_mean) / (self.mvn_std + 1e-12)\n";
  } else if (mvn == "local") {
    source += "    mean = features.mean(1, True)\n"
              "    deviation = (features - mean).square().mean(1, True).sqrt()\n"
              "    features = (features - mean) / (deviation + 1e-12)\n";
  }
  top.define(stft_script("feature_stft", options->frames(rate), options->preemph));
  return source;
}

// What separate_samples does for a mask model (separation.cpp): the input's feature and
// normalisation, the task's graph (single-input nodes, each model a submodule), the
// reconstructor's masks on the mixture's spectrum and the inverse STFT, zeros after the cut.
void define_mask_separator(torch::jit::Module& top,
                           const std::shared_ptr<torch::jit::CompilationUnit>& unit,
                           Separator& separator, TaskSeparation& separation,
                           const std::string& task) {
  const Reconstructor& reconstructor = separation.reconstructor();
  const std::string masks = reconstructor.torchscript_masks();
  if (masks.empty()) throw Error("task " + task + ": " + reconstructor.why_not_scripted());
  const int rate = separation.model_sample_rate();
  const auto inputs = separator.input_sections(task);
  if (inputs.size() != 1)
    throw Error("task " + task + ": export takes a graph with one input, not " +
                std::to_string(inputs.size()));
  std::string source =
      "def forward(self, waveform: Tensor) -> Tensor:\n"
      "    batch = waveform.unsqueeze(0) if waveform.dim() == 1 else waveform\n"
      "    mixture = batch.double()\n" +
      feature_source(top, separator.recipe(), *inputs.front(), rate, task);
  const ModelGraph& graph = separator.loaded_graph(task, rate);
  source += "    v_" + identifier(graph.input_names().front()) + " = features.float()\n";
  std::set<std::string> models;
  for (const auto& node : graph.nodes()) {
    if (node.inputs.size() != 1)
      throw Error("task " + task + ": node " + node.name + " has " +
                  std::to_string(node.inputs.size()) + " inputs; export takes one per node");
    if (models.insert(node.model).second)
      top.register_module("m_" + identifier(node.model),
                          script_model_in(graph.bank().at(node.model), unit));
    source += "    v_" + identifier(node.output) + " = self.m_" + identifier(node.model) +
              ".forward(v_" + identifier(node.inputs.front()) + ")\n";
  }
  source += "    estimates = v_" + identifier(reconstructor.output_names().front()) + "\n" + masks;
  const FeatureOptions* mixture = separation.mixture_section().feature_options();
  if (!mixture || mixture->feature != "spec")
    throw Error("task " + task + ": org_mix section " + separation.mixture_section().section() +
                " must give the mixture's spectrum (feature = spec) for export");
  const FrameSettings frames = mixture->frames(rate);
  top.register_buffer("mixture_stft_window", make_window(frames.winfunc, frames.frame_length()));
  top.register_buffer("inverse_stft_window", make_window(frames.winfunc, frames.frame_length()));
  top.define(stft_script("mixture_stft", frames, 0.0));
  top.define(inverse_stft_script("inverse_stft", frames));
  top.define(source +
             "    signals = self.inverse_stft(self.mixture_stft(mixture).unsqueeze(1) * "
             "masks.double())\n"
             "    return torch.constant_pad_nd(signals, [0, mixture.size(1) - signals.size(2)], "
             "0.0).float()\n");
}

// The exported module against separate_samples on a probe (two seconds of two gliding tones and
// a fast chirp, whole int16 values so that float32 holds them): an export that computes anything else
// is refused instead of written.
void check_against_separation(torch::jit::Module& top, TaskSeparation& separation) {
  const int rate = separation.model_sample_rate();
  auto time = torch::arange(2 * rate, torch::kFloat64) / rate;
  auto probe = torch::round(3000.0 * torch::sin(2.0 * M_PI * (220.0 + 40.0 * time) * time) +
                            2000.0 * torch::sin(2.0 * M_PI * (700.0 - 90.0 * time) * time) +
                            300.0 * torch::sin(1e5 * time.square()));
  const auto expected = separation.separate_samples(probe, rate);
  torch::NoGradGuard no_grad;
  top.eval();
  const auto got = top.forward({probe.to(torch::kFloat32)}).toTensor()[0].to(torch::kFloat64);
  const double rms = expected.square().mean().sqrt().item<double>();
  const double error =
      (got.narrow(1, 0, expected.size(1)) - expected).abs().max().item<double>() / rms;
  const double tail = got.narrow(1, expected.size(1), got.size(1) - expected.size(1))
                          .abs()
                          .sum()
                          .item<double>();
  if (!(error < 1e-4) || tail != 0.0)
    throw Error(fmt::format("the exported module differs from nabu separate by {:.2e} of the "
                            "output's RMS on a probe signal; nothing was written (please report)",
                            error));
  spdlog::info("the exported module reproduces nabu separate on a probe signal within {:.1e} "
               "of the output's RMS",
               error);
}

void save_module(torch::jit::Module& top, const std::filesystem::path& out) {
  const auto temporary = temporary_sibling(out);
  try {
    top.save(temporary.string());
    rename_replace(temporary, out);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw;
  }
}

}  // namespace

void export_experiment(const Recipe& recipe, const std::filesystem::path& expdir,
                       const ExportRequest& request) {
  if (request.format != "torchscript" && request.format != "onnx")
    throw Error("--format=" + request.format + ": expected torchscript or onnx");
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
  const bool waveforms = separation->reconstructor().estimates_signals();
  if (request.format == "onnx" || waveforms) {
    const Model& model =
        separation->waveform_model(request.format == "onnx" ? "ONNX export" : "export");
    const auto frames = separator.input_sections(task).front()->feature_options()->frames(
        separation->model_sample_rate());
    if (request.format == "onnx") {
      write_file_atomic(request.out, onnx_model(model, *separation, frames));
    } else {
      auto unit = std::make_shared<torch::jit::CompilationUnit>();
      auto top = separator_module(unit, *separation);
      top.register_module("model", script_model_in(model, unit));
      top.define(separator_source(frames));
      check_against_separation(top, *separation);
      save_module(top, request.out);
    }
  } else {
    auto unit = std::make_shared<torch::jit::CompilationUnit>();
    auto top = separator_module(unit, *separation);
    define_mask_separator(top, unit, separator, *separation, task);
    check_against_separation(top, *separation);
    save_module(top, request.out);
  }
  spdlog::info("exported task {} ({}, {} Hz, {} speakers) to {}", task, request.format,
               separation->model_sample_rate(), separation->num_speakers(),
               request.out.string());
}

}  // namespace nabu
