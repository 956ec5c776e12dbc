// `nabu export`: a trained experiment as one TorchScript file that runs without Nabu
// (torch.jit.load in Python, torch::jit::load in C++). The file's forward takes a mono waveform
// [N] or [B, N] (float, any scale) at the model's sample rate and returns [B, S, N] float32: what
// `nabu separate` computes between the waveform and the separated waveforms for one chunk (the
// input cut to whole analysis frames and divided by its peak, the network, each speaker's gain
// that rebuilds the mixture by least squares, zeros after the cut), at the input's scale.
// Exported so far: the time-domain models (conv_tasnet, dprnn); other architectures and the
// mask models are refused in one line naming why.
#pragma once

#include <filesystem>
#include <string>

#include "nabu/core/recipe.h"

namespace torch::jit {
struct Module;
}

namespace nabu {

class Model;

// The TorchScript module of one built model: copies of its parameters and Model::torchscript()
// as its forward. Throws Error with Model::why_not_exported() for an architecture without one.
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
