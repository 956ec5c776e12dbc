// `nabu export`: a trained experiment as one TorchScript file that runs without Nabu
// (torch.jit.load in Python, torch::jit::load in C++). The file's forward takes a mono waveform
// [N] or [B, N] (float, int16 scale) at the model's sample rate and returns [B, S, N] float32: what
// `nabu separate` computes between the waveform and the separated waveforms for one chunk. For the
// time-domain models (conv_tasnet, dprnn): the input cut to whole analysis frames and divided by
// its peak, the network, each speaker's gain that rebuilds the mixture by least squares. For the
// mask models (stackedmasks): the STFT, the feature and its normalisation, the graph, the masks
// and the inverse STFT. Zeros after the cut. Deep clustering and architectures without a script
// are refused in one line naming why; every export is checked against nabu separate on a probe
// signal before it is written.
#pragma once

#include <filesystem>
#include <string>

#include "nabu/core/recipe.h"

namespace torch::jit {
struct Module;
}

namespace nabu {

class Model;

// The TorchScript module of one built model: copies of its parameters and model_torchscript()
// (model_writers.h) as its forward. Throws Error saying why for a model without a writer.
torch::jit::Module script_model(const Model& model);

struct ExportRequest {
  std::string task;             // test task whose graph to export; empty: the first
  std::string model = "final";  // final or avg (as nabu separate --model)
  bool early = false;           // the latest validated checkpoint of an unfinished training
  std::string format = "torchscript";
  std::filesystem::path out;
};

// Writes request.out atomically (a temporary renamed into place: nothing half-written on any
// error). Throws Error naming what is wrong: the format, a missing model, an architecture or a
// graph that does not export, an unwritable --out.
void export_experiment(const Recipe& recipe, const std::filesystem::path& expdir,
                       const ExportRequest& request);

}  // namespace nabu
