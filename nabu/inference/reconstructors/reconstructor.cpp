#include "nabu/inference/reconstructors/reconstructor.h"

#include "nabu/core/error.h"
#include "nabu/core/strings.h"

namespace nabu {

void ReconstructorOptions::declare(OptionsReader& r) {
  r("reconstruct_type", reconstruct_type, "the reconstructor class");
  r("org_mix", org_mix,
    "database section(s) of the original mixture, read with rec_processor.cfg (complex STFT)");
  r("nrs", nrs, "number of speakers (signals to reconstruct); required");
  r("store_output", store_output, "also store the raw model outputs (raw_output/)");
  r("store_masks", store_masks, "also store the estimated masks (masks/)");
  r.require(nrs >= 1, "nrs", "the number of speakers must be at least 1 (required)");
  r.require(!trim(org_mix).empty(), "org_mix", "the mixture section is required");
}

Reconstructor::Reconstructor(const ConfigSection& section, const ReconstructorOptions& options,
                             std::vector<std::string> output_names)
    : num_speakers_(options.nrs),
      type_(options.reconstruct_type),
      org_mix_(trim(options.org_mix)),
      store_output_(options.store_output),
      store_masks_(options.store_masks),
      output_names_(std::move(output_names)),
      where_(section.where()) {}

const torch::Tensor& Reconstructor::output(const TensorMap& outputs,
                                           const std::string& name) const {
  auto found = outputs.find(name);
  if (found != outputs.end()) return found->second;
  if (outputs.size() == 1) return outputs.begin()->second;
  std::vector<std::string> names;
  for (const auto& entry : outputs) names.push_back(entry.first);
  throw Error(where_ + ": reconstruct_type " + type_ + " needs the model output '" + name +
              "'; the task gives: " + (names.empty() ? std::string("none") : join(names, ", ")));
}

torch::Tensor Reconstructor::signals(const TensorMap&, bool) {
  throw Error(where_ + ": reconstruct_type " + type_ +
              " makes masks, not signals (a bug: callers ask estimates_signals() first)");
}

torch::Tensor peak_normalised(const torch::Tensor& signals) {
  auto values = signals.to(torch::kFloat64);
  if (values.numel() == 0) return values;
  auto peak = values.abs().amax(-1, /*keepdim=*/true);
  return values / torch::where(peak > 0, peak, torch::ones_like(peak));
}

torch::Tensor Reconstructor::checked_usedbins(const torch::Tensor& usedbins,
                                              int64_t frames) const {
  if (!usedbins.defined() || usedbins.dim() != 2)
    throw Error(where_ + ": reconstruct_type " + type_ + " needs a used-bins mask [T, F]");
  if (usedbins.size(0) != frames)
    throw Error(where_ + ": the used-bins mask has " + std::to_string(usedbins.size(0)) +
                " frames but the model output has " + std::to_string(frames));
  return usedbins.to(torch::kBool);
}

ReconstructorRegistry& reconstructor_registry() {
  static ReconstructorRegistry registry("reconstruct_type");
  return registry;
}

ReconstructorPtr make_reconstructor(const ConfigSection& section) {
  std::string type = trim(section.get_string("reconstruct_type"));
  if (!reconstructor_registry().contains(type))
    section.fail("reconstruct_type", reconstructor_registry().unknown_message(type));
  return reconstructor_registry().create(type, section);
}

torch::Tensor masks_to_signals(const torch::Tensor& masks, const torch::Tensor& mixture_spectrum,
                               const FrameSettings& settings, int64_t signal_length,
                               bool normalise) {
  if (masks.dim() != 3 || mixture_spectrum.dim() != 2 ||
      masks.size(1) != mixture_spectrum.size(0) || masks.size(2) != mixture_spectrum.size(1))
    throw Error("masks_to_signals: masks " + std::to_string(masks.dim()) +
                "-D do not match the mixture spectrum [T, F] (expected masks [S, T, F] with "
                "T = " + std::to_string(mixture_spectrum.size(0)) +
                ", F = " + std::to_string(mixture_spectrum.dim() > 1 ? mixture_spectrum.size(1) : 0) +
                ")");
  auto mixture = mixture_spectrum.to(torch::kComplexDouble);
  auto weights = masks.to(torch::kFloat64);
  std::vector<torch::Tensor> signals;
  for (int64_t s = 0; s < masks.size(0); ++s)
    signals.push_back(overlap_add_inverse(mixture * weights[s], settings, signal_length));
  // docs/postprocessing.md: every reconstruction is scaled to max |x| = 1.
  auto stacked = torch::stack(signals);
  return normalise ? peak_normalised(stacked) : stacked;
}

}  // namespace nabu
