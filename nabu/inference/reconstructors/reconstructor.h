// Reconstructors turn the model outputs of one test utterance into masks [S, T, F], which
// masks_to_signals applies to the mixture's complex STFT and inverts (docs/postprocessing.md). One
// class per reconstructor.cfg `reconstruct_type`, built from its task section through
// reconstructor_registry(). Reading the side data (org_mix, usedbins) and writing wavs is the
// caller's job: a reconstructor names the database sections it needs and stays a pure function
// of tensors, so it can be tested without files.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/core/options.h"
#include "nabu/core/registry.h"
#include "nabu/neuralnetworks/tensor_map.h"
#include "nabu/processing/signal.h"

namespace nabu {

namespace onnx {
class Graph;
}

// Keys every mask reconstructor accepts (the original's Reconstructor/MaskReconstructor).
struct ReconstructorOptions {
  std::string reconstruct_type;
  std::string org_mix;  // database section of the mixture (complex STFT via rec_processor.cfg)
  int nrs = 0;          // number of speakers (required)
  bool store_output = false;
  bool store_masks = false;
  void declare(OptionsReader& r);
};

class Reconstructor {
 public:
  virtual ~Reconstructor() = default;

  int num_speakers() const { return num_speakers_; }
  const std::string& type() const { return type_; }
  const std::string& org_mix_section() const { return org_mix_; }
  // Empty when the type needs no used-bins mask.
  const std::string& usedbins_section() const { return usedbins_; }
  bool needs_usedbins() const { return !usedbins_.empty() && uses_usedbins_; }
  bool store_output() const { return store_output_; }
  bool store_masks() const { return store_masks_; }
  // The model outputs read (the original's requested_output_names).
  const std::vector<std::string>& output_names() const { return output_names_; }

  // outputs: the model outputs of ONE utterance truncated to its T frames ([T, F*D] bin_emb,
  // [T, F*S] bin_est, ...). usedbins: bool [T, F], undefined when not needed.
  // Returns float masks [S, T, F].
  virtual torch::Tensor masks(const TensorMap& outputs, const torch::Tensor& usedbins) = 0;

  // Whether the model outputs are the separated waveforms themselves (time-domain models): then
  // signals() gives them and masks() is not used; org_mix only has to give the mixture's audio.
  virtual bool estimates_signals() const { return false; }
  // outputs: the model outputs of ONE utterance truncated to its N samples. Returns [S, N] double,
  // each scaled to max |x| = 1 with `normalise` (as masks_to_signals).
  virtual torch::Tensor signals(const TensorMap& outputs, bool normalise);

  // masks() on one unpadded batch as TorchScript lines (`nabu export`): from the output
  // output_names()[0], held in `estimates` [B, T, ...], to `masks` [B, S, T, F] float. Empty when
  // the type cannot be scripted; why_not_scripted() then says why.
  virtual std::string torchscript_masks() const { return ""; }
  // The same as ONNX nodes (`nabu export --format=onnx`): from the value `estimates` (float, of
  // `rank` axes with the batch) to masks [B, S, T, F] float. Empty when the type cannot be; then
  // why_not_scripted() says why.
  virtual std::string onnx_masks(onnx::Graph& graph, const std::string& estimates,
                                 int64_t rank) const {
    return "";
  }
  virtual std::string why_not_scripted() const {
    return "reconstruct_type " + type_ +
           " has no TorchScript export (stackedmasks and the waveform models' types have)";
  }

  // Cluster centres [S, D] of the last masks() call (saved by the original under
  // cluster_centers/); undefined for types that do not cluster.
  const torch::Tensor& last_cluster_centers() const { return last_centers_; }

 protected:
  Reconstructor(const ConfigSection& section, const ReconstructorOptions& options,
                std::vector<std::string> output_names);
  // The output called `name`, else the only output there is; an Error naming the available ones.
  const torch::Tensor& output(const TensorMap& outputs, const std::string& name) const;
  // Checks usedbins is a defined [T, F] mask with `frames` frames; returns it as bool.
  torch::Tensor checked_usedbins(const torch::Tensor& usedbins, int64_t frames) const;

  int num_speakers_ = 0;
  std::string type_, org_mix_, usedbins_;
  bool uses_usedbins_ = true;
  bool store_output_ = false, store_masks_ = false;
  std::vector<std::string> output_names_;
  torch::Tensor last_centers_;
  std::string where_;  // "file:line: [section]" for errors about data
};

using ReconstructorPtr = std::shared_ptr<Reconstructor>;
using ReconstructorRegistry = Registry<ReconstructorPtr, const ConfigSection&>;
ReconstructorRegistry& reconstructor_registry();

// Builds the reconstructor named by the section's `reconstruct_type` (errors name file:line).
ReconstructorPtr make_reconstructor(const ConfigSection& section);

// Each row of signals [S, N] scaled to max |x| = 1 (an all-zero row stays zero). Returns double.
torch::Tensor peak_normalised(const torch::Tensor& signals);

// Applies every mask to the mixture's complex STFT [T, F] and inverts it with the original's
// spec2time (overlap_add_inverse, then, with `normalise`, each signal scaled to max |x| = 1; an
// all-zero signal stays zero instead of becoming NaN). masks: [S, T, F]. Returns [S, signal_length]
// double.
torch::Tensor masks_to_signals(const torch::Tensor& masks, const torch::Tensor& mixture_spectrum,
                               const FrameSettings& settings, int64_t signal_length,
                               bool normalise = true);

}  // namespace nabu
