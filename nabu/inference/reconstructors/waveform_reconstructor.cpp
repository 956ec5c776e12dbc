// waveform (time-domain models: conv_tasnet, dprnn): the model output already holds one waveform
// per speaker, [N, S] (or [N, 1, S]) for an utterance of N samples (docs/postprocessing.md).
#include "nabu/core/error.h"
#include "nabu/inference/reconstructors/reconstructor.h"

namespace nabu {

namespace {

struct WaveformReconstructorOptions : ReconstructorOptions {
  std::string output = "sig_est";
  void declare(OptionsReader& r) {
    ReconstructorOptions::declare(r);
    r("output", output, "the model output holding the waveforms [N, S]");
  }
};

class WaveformReconstructor : public Reconstructor {
 public:
  explicit WaveformReconstructor(const ConfigSection& section)
      : WaveformReconstructor(section, read_options<WaveformReconstructorOptions>(
                                           section, "reconstruct_type waveform")) {}

  bool estimates_signals() const override { return true; }

  torch::Tensor signals(const TensorMap& outputs, bool normalise) override {
    auto waveforms = output(outputs, output_names_.front());
    if (waveforms.dim() == 3 && waveforms.size(1) == 1) waveforms = waveforms.squeeze(1);
    if (waveforms.dim() != 2 || waveforms.size(1) != num_speakers_)
      throw Error(where_ + ": " + output_names_.front() + " must be [N, " +
                  std::to_string(num_speakers_) + "] waveforms (nrs = " +
                  std::to_string(num_speakers_) + "), got " + std::to_string(waveforms.dim()) +
                  "-D with last size " +
                  std::to_string(waveforms.dim() ? waveforms.size(-1) : 0));
    auto stacked = waveforms.t().to(torch::kFloat64).contiguous();
    return normalise ? peak_normalised(stacked) : stacked;
  }

  torch::Tensor masks(const TensorMap&, const torch::Tensor&) override {
    throw Error(where_ + ": reconstruct_type waveform has no masks (store_masks = False)");
  }

 private:
  WaveformReconstructor(const ConfigSection& section, const WaveformReconstructorOptions& options)
      : Reconstructor(section, options, {options.output}) {
    uses_usedbins_ = false;
    if (options.store_masks)
      section.fail("store_masks", "reconstruct_type waveform estimates signals, not masks");
  }
};

ReconstructorPtr make_waveform(const ConfigSection& section) {
  return std::make_shared<WaveformReconstructor>(section);
}

}  // namespace

NABU_REGISTER_WITH_OPTIONS(reconstructor_registry, "waveform", make_waveform,
                           WaveformReconstructorOptions,
                           "the model output is one waveform per speaker [N, S] (conv_tasnet, "
                           "dprnn); org_mix gives the mixture audio (e.g. feature = raw)")

}  // namespace nabu
