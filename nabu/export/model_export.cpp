#include "nabu/export/model_export.h"

#include <torch/script.h>
#include <unistd.h>

#include <cctype>
#include <functional>
#include <map>
#include <set>

#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/onnx.h"
#include "nabu/neuralnetworks/models/model.h"
#include "nabu/neuralnetworks/models/model_graph.h"
#include "nabu/inference/task_separation.h"
#include "nabu/export/model_writers.h"
#include "nabu/export/stft_onnx.h"
#include "nabu/export/stft_script.h"
#include "nabu/processing/signal.h"

namespace nabu {

namespace {

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
  const std::string source = model_torchscript(model);
  torch::jit::Module module(c10::QualifiedName("nabu.Model_" + model.model_name()), unit,
                            /*shouldMangle=*/true);
  for (const auto& item : model.named_parameters(/*recurse=*/true))
    module.register_parameter(script_attribute(item.key()),
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

// The ONNX model: what separator_source computes, node by node, around model_onnx.
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
  auto keep = onnx_snipped_length(graph, length, frames);
  auto heard = graph.node(
      "Slice",
      {mixture, graph.ints({0}), graph.node("Reshape", {keep, graph.ints({1})}), graph.ints({1})});
  auto peak =
      graph.node("ReduceMax", {graph.node("Abs", {heard})}, {onnx::ints_attribute("axes", {1})});
  auto normalised =
      graph.node("Where", {graph.node("Greater", {peak, graph.doubles("zero", {}, {0.0})}),
                           graph.node("Div", {heard, peak}), heard});
  const std::string network =
      model_onnx(model, graph, graph.node("Cast", {normalised}, {to(onnx::ElementType::kFloat)}));
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

// What a mask model's export computes around its graph, checked: the one input's spectral
// feature and normalisation, and the mixture's spectrum of org_mix. Errors name what does not
// export.
struct MaskModelParts {
  const FeatureOptions* input = nullptr;  // the input section's feature
  std::string mvn;                        // global, local or none
  const MvnStatistics* statistics = nullptr;
  FrameSettings input_frames, mixture_frames;
};

MaskModelParts mask_model_parts(TrainedExperiment& separator, TaskSeparation& separation,
                                const std::string& task) {
  const auto inputs = separator.input_sections(task);
  if (inputs.size() != 1)
    throw Error("task " + task + ": export takes a graph with one input, not " +
                std::to_string(inputs.size()));
  const SectionReader& section = *inputs.front();
  const Recipe& recipe = separator.recipe();
  const ConfigFile& processor =
      recipe.processor_config(recipe.get("database.conf").section(section.section()));
  const std::string where =
      "task " + task + ": input " + section.section() + " (" + processor.path() + ")";
  const std::string name = processor.section("processor").get_string("processor", "");
  MaskModelParts parts;
  parts.input = section.feature_options();
  if ((name != "audio_feat_processor" && name != "audio_signal_processor") || !parts.input ||
      spectral_feature_script(parts.input->feature, "x", parts.input->nfft).empty())
    throw Error(where + ": export computes magspec, logspec or powspec features of the mixture "
                "(audio_feat_processor), not " + name + " " +
                (parts.input ? parts.input->feature : ""));
  if (parts.input->include_energy) throw Error(where + ": include_energy = True does not export");
  parts.mvn = processor.section("processor").get_string("mvn_type", "none");
  parts.statistics = section.statistics();
  const int rate = separation.model_sample_rate();
  parts.input_frames = parts.input->frames(rate);
  const FeatureOptions* mixture = separation.mixture_section().feature_options();
  if (!mixture || mixture->feature != "spec")
    throw Error("task " + task + ": org_mix section " + separation.mixture_section().section() +
                " must give the mixture's spectrum (feature = spec) for export");
  parts.mixture_frames = mixture->frames(rate);
  return parts;
}

// The graph's nodes in order, each a model applied to one earlier value: `apply(node, input)`
// gives the node's value. Returns the value of the reconstructor's output.
std::string chain_graph(const ModelGraph& graph, const Reconstructor& reconstructor,
                        const std::string& task, const std::string& features,
                        const std::function<std::string(const ModelGraph::Node&,
                                                        const std::string&)>& apply) {
  std::map<std::string, std::string> values{{graph.input_names().front(), features}};
  for (const auto& node : graph.nodes()) {
    if (node.inputs.size() != 1)
      throw Error("task " + task + ": node " + node.name + " has " +
                  std::to_string(node.inputs.size()) + " inputs; export takes one per node");
    values[node.output] = apply(node, values.at(node.inputs.front()));
  }
  return values.at(reconstructor.output_names().front());
}

// The feature and normalisation as TorchScript lines, from `mixture` to `features` (float).
std::string feature_source(torch::jit::Module& top, const MaskModelParts& parts) {
  top.register_buffer("feature_stft_window",
                      make_window(parts.input->winfunc, parts.input_frames.frame_length()));
  top.define(stft_script("feature_stft", parts.input_frames, parts.input->preemph));
  std::string source = "    spectrum = self.feature_stft(mixture)\n    features = " +
                       spectral_feature_script(parts.input->feature, "spectrum", parts.input->nfft) +
                       "\n";
  if (parts.mvn == "global") {
    top.register_buffer("mvn_mean", parts.statistics->mean.clone());
    top.register_buffer("mvn_std", parts.statistics->std.clone());
    source += "    features = (features - self.mvn_mean) / (self.mvn_std + 1e-12)\n";
  } else if (parts.mvn == "local") {
    source += "    mean = features.mean(1, True)\n"
              "    deviation = (features - mean).square().mean(1, True).sqrt()\n"
              "    features = (features - mean) / (deviation + 1e-12)\n";
  }
  return source + "    features = features.float()\n";
}

// What separate_samples does for a mask model (separation.cpp): the input's feature and
// normalisation, the task's graph (each model a submodule), the reconstructor's masks on the
// mixture's spectrum and the inverse STFT, zeros after the cut.
void define_mask_separator(torch::jit::Module& top,
                           const std::shared_ptr<torch::jit::CompilationUnit>& unit,
                           TrainedExperiment& separator, TaskSeparation& separation,
                           const std::string& task) {
  const Reconstructor& reconstructor = separation.reconstructor();
  const std::string masks = reconstructor.torchscript_masks();
  if (masks.empty()) throw Error("task " + task + ": " + reconstructor.why_not_scripted());
  const MaskModelParts parts = mask_model_parts(separator, separation, task);
  std::string source =
      "def forward(self, waveform: Tensor) -> Tensor:\n"
      "    batch = waveform.unsqueeze(0) if waveform.dim() == 1 else waveform\n"
      "    mixture = batch.double()\n" +
      feature_source(top, parts);
  const ModelGraph& graph = separator.loaded_graph(task, separation.model_sample_rate());
  std::set<std::string> models;
  int64_t count = 0;
  const std::string estimates = chain_graph(
      graph, reconstructor, task, "features",
      [&](const ModelGraph::Node& node, const std::string& input) {
        if (models.insert(node.model).second)
          top.register_module("m_" + identifier(node.model),
                              script_model_in(graph.bank().at(node.model), unit));
        const std::string value = "v" + std::to_string(count++);
        source += "    " + value + " = self.m_" + identifier(node.model) + ".forward(" + input + ")\n";
        return value;
      });
  source += "    estimates = " + estimates + "\n" + masks;
  const FrameSettings& frames = parts.mixture_frames;
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

// The ONNX model of a mask model: what define_mask_separator scripts, node by node (stft_onnx.h
// for the transforms, model_onnx for the networks, Reconstructor::onnx_masks).
std::string onnx_mask_model(TrainedExperiment& separator, TaskSeparation& separation,
                            const std::string& task) {
  const Reconstructor& reconstructor = separation.reconstructor();
  if (reconstructor.torchscript_masks().empty())  // the same types have both
    throw Error("task " + task + ": " + reconstructor.why_not_scripted());
  const MaskModelParts parts = mask_model_parts(separator, separation, task);
  const int rate = separation.model_sample_rate();
  onnx::Graph graph;
  const auto to = [](onnx::ElementType type) {
    return onnx::int_attribute("to", static_cast<int64_t>(type));
  };
  graph.input("waveform", onnx::ElementType::kFloat, {{0, "batch"}, {0, "samples"}});
  auto mixture = graph.node("Cast", {"waveform"}, {to(onnx::ElementType::kDouble)});
  auto length = graph.node("Gather", {graph.node("Shape", {"waveform"}), graph.int_scalar(1)});
  auto spectrum = onnx_stft(graph, mixture, onnx_snipped_length(graph, length, parts.input_frames),
                            parts.input_frames, parts.input->preemph);
  auto power = graph.node("Add", {graph.node("Mul", {spectrum.real, spectrum.real}),
                                  graph.node("Mul", {spectrum.imaginary, spectrum.imaginary})});
  std::string features;
  if (parts.input->feature == "powspec")
    features = graph.node("Div", {power, graph.doubles("nfft", {}, {double(parts.input->nfft)})});
  else
    features = graph.node("Sqrt", {power});
  if (parts.input->feature == "logspec")  // 10 log10(max(|X|, 1e-30))
    features = graph.node("Mul", {graph.node("Log", {graph.node("Max", {features, graph.doubles("tiny", {}, {1e-30})})}),
                                  graph.doubles("decibels", {}, {10.0 / std::log(10.0)})});
  if (parts.mvn == "global") {
    const auto vector = [&](const std::string& name, const torch::Tensor& values) {
      auto doubles = values.to(torch::kFloat64).contiguous();
      return graph.doubles(name, {doubles.numel()},
                           std::vector<double>(doubles.data_ptr<double>(),
                                               doubles.data_ptr<double>() + doubles.numel()));
    };
    features = graph.node("Div", {graph.node("Sub", {features, vector("mvn_mean", parts.statistics->mean)}),
                                  graph.node("Add", {vector("mvn_std", parts.statistics->std),
                                                     graph.doubles("epsilon", {}, {1e-12})})});
  } else if (parts.mvn == "local") {
    auto mean = graph.node("ReduceMean", {features}, {onnx::ints_attribute("axes", {1})});
    auto centred = graph.node("Sub", {features, mean});
    auto deviation = graph.node("Sqrt", {graph.node("ReduceMean", {graph.node("Mul", {centred, centred})},
                                                    {onnx::ints_attribute("axes", {1})})});
    features = graph.node("Div", {centred, graph.node("Add", {deviation, graph.doubles("epsilon", {}, {1e-12})})});
  }
  const ModelGraph& models = separator.loaded_graph(task, rate);
  const std::string estimates = chain_graph(
      models, reconstructor, task, graph.node("Cast", {features}, {to(onnx::ElementType::kFloat)}),
      [&](const ModelGraph::Node& node, const std::string& input) {
        const Model& model = models.bank().at(node.model);
        return model_onnx(model, graph, input);
      });
  // The rank of the estimates: one forward pass as nabu separate makes it.
  auto probe = torch::sin(torch::arange(rate / 4, torch::kFloat64) * 0.3) * 3000.0;
  const int64_t rank = separator.forward_samples(task, probe, rate)
                           .at(reconstructor.output_names().front())
                           .dim() + 1;
  auto masks = reconstructor.onnx_masks(graph, estimates, rank);
  if (masks.empty()) throw Error("task " + task + ": " + reconstructor.why_not_scripted());
  masks = graph.node("Cast", {masks}, {to(onnx::ElementType::kDouble)});
  auto mix = onnx_stft(graph, mixture, onnx_snipped_length(graph, length, parts.mixture_frames),
                       parts.mixture_frames, 0.0);
  const auto masked = [&](const std::string& part) {
    return graph.node("Mul", {graph.node("Unsqueeze", {part, graph.ints({1})}), masks});
  };
  auto signals = onnx_inverse_stft(graph, {masked(mix.real), masked(mix.imaginary)},
                                   parts.mixture_frames);
  auto total = graph.node("Gather", {graph.node("Shape", {signals}), graph.int_scalar(2)});
  auto pads = graph.node("Concat", {graph.ints({0, 0, 0, 0, 0}),
                                    graph.node("Reshape", {graph.node("Sub", {length, total}), graph.ints({1})})},
                         {onnx::int_attribute("axis", 0)});
  auto padded = graph.node("Cast", {graph.node("Pad", {signals, pads})}, {to(onnx::ElementType::kFloat)});
  graph.output(padded, "separated", onnx::ElementType::kFloat,
               {{0, "batch"}, {separation.num_speakers(), ""}, {0, "samples"}});
  return graph.serialise("nabu_separator", "nabu");
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
  logger().info("the exported module reproduces nabu separate on a probe signal within {:.1e} "
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
  const auto [task, segment] = experiment_task(recipe, request.task);
  TrainedExperiment separator(recipe, expdir, segment, request.early, request.model, c10::kCPU);
  auto separation = std::make_unique<TaskSeparation>(separator, task);
  // A time-domain model: the one model on the waveform and its analysis frames (checked first).
  const Model* waveform = separation->reconstructor().estimates_signals()
                              ? &separation->waveform_model("export")
                              : nullptr;
  const FrameSettings frames =
      waveform ? separator.input_sections(task).front()->feature_options()->frames(
                     separation->model_sample_rate())
               : FrameSettings{};
  if (request.format == "onnx") {
    write_file_atomic(request.out, waveform ? onnx_model(*waveform, *separation, frames)
                                            : onnx_mask_model(separator, *separation, task));
  } else {
    auto unit = std::make_shared<torch::jit::CompilationUnit>();
    auto top = separator_module(unit, *separation);
    if (waveform) {
      top.register_module("model", script_model_in(*waveform, unit));
      top.define(separator_source(frames));
    } else {
      define_mask_separator(top, unit, separator, *separation, task);
    }
    check_against_separation(top, *separation);
    save_module(top, request.out);
  }
  logger().info("exported task {} ({}, {} Hz, {} speakers) to {}", task, request.format,
               separation->model_sample_rate(), separation->num_speakers(),
               request.out.string());
}

}  // namespace nabu
