// `nabu export`: flags -> export_experiment (export/model_export.h).
#include <filesystem>
#include <iostream>

#include "nabu/cli/commands/cli.h"
#include "nabu/core/error.h"
#include "nabu/export/model_export.h"

namespace nabu::cli {

int cmd_export(const std::vector<std::string>& args) {
  CommonOptions common;
  ExportRequest request;
  std::string out;
  po::options_description description("Options");
  add_common_options(description, common, "the trained experiment (nabu train); it must exist");
  description.add_options()
      ("task", po::value(&request.task),
       "test task whose graph to export (default: the first of test_evaluator.cfg)")
      ("model", po::value(&request.model)->default_value("final"),
       "final: the full stage's model.pt; avg: its model_avg.pt (average_checkpoints);\n"
       "step<N>: the model of update N (export_every); avg<A>-<B>: the mean of the exports\n"
       "of updates A to B")
      ("allow-early-testing", switch_value(&request.early),
       "export the latest validated checkpoint of a training that has not finished")
      ("format", po::value(&request.format)->default_value("torchscript"),
       "torchscript, or onnx (opset 17, the same models: input `waveform` [batch, samples],\n"
       "output `separated` [batch, speakers, samples], for onnxruntime)")
      ("out", po::value(&out), "the file to write, e.g. separator.pt (written atomically)");
  if (!parse_command_line(
          "export",
          "Writes a trained separation model as one file that runs without Nabu: TorchScript\n"
          "(torch.jit.load(F) in Python, torch::jit::load(F) in C++; nabu separate --model=F\n"
          "and nabu test --model=F take it) or, with --format=onnx, the same computation as an\n"
          "ONNX model for onnxruntime. Its forward takes a mono waveform [N] or [B, N] (float,\n"
          "int16 scale) at the model's sample rate (the file's `sample_rate` attribute) and\n"
          "returns [B, S, N] float32: what nabu separate computes for one chunk, at the input's\n"
          "scale. Both formats export the same models: the time-domain ones (conv_tasnet, dprnn,\n"
          "tf_gridnet) and the mask models (stackedmasks: STFT, features, mean/variance, the\n"
          "network of linear layers and fused recurrent stacks such as dblstm, masks, inverse\n"
          "STFT); others are refused in one line.\n\n"
          "Example: nabu export --expdir=exp/convtasnet --out=separator.pt\n"
          "         nabu export --expdir=exp/convtasnet --format=onnx --out=separator.onnx",
          args, description))
    return 0;
  require(common.expdir, "expdir", "export");
  require(out, "out", "export");
  Recipe recipe = load_experiment_recipe(common, request.task, "export");
  request.out = out;
  export_experiment(recipe, common.expdir, request);
  std::cout << out << "\n";
  return 0;
}

}  // namespace nabu::cli
