// Time-domain losses (docs/losses.md): scale-invariant SNR of estimated waveforms against the
// source waveforms, in a fixed order (sisnr) or under the best speaker permutation (pit_sisnr),
// and pit_sisnr of the waveforms a mask model's masks make of the mixture (pit_sisnr_masks).
// Both measure every utterance on its own real samples only, zero-mean, so padding never counts;
// loss = −Σ SI-SNR in dB over utterances and speakers, norm = B·S: Σloss/Σnorm is the mean
// negative SI-SNR per source.
#include <torch/torch.h>

#include "nabu/core/error.h"
#include "nabu/neuralnetworks/loss_computers/loss_computer.h"
#include "nabu/neuralnetworks/loss_computers/loss_ops.h"
#include "nabu/processing/signal.h"

namespace nabu {

namespace {

using namespace losses;

struct SiSnrOptions {
  std::string target = "multi_targets";
  std::string output = "sig_est";
  double epsilon = 1e-8;

  void declare(OptionsReader& r) {
    r("target", target,
      "name of the source waveforms [B, N, S] or [B, N, 1, S] (multi_target_processor with "
      "feature = raw)");
    r("output", output, "name of the estimated waveforms [B, N, S] or [B, N, 1, S]");
    r("epsilon", epsilon, "added to the energies so that silent sources stay finite");
    r.require(epsilon > 0, "epsilon", "must be > 0");
  }
};

// [B, N, 1, S] (a store's raw sources) or [B, N, S] -> [B, N, S].
torch::Tensor as_waveforms(const torch::Tensor& x, const std::string& name,
                           const std::string& what) {
  if (x.dim() == 4 && x.size(2) == 1) return x.squeeze(2);
  if (x.dim() == 3) return x;
  expect_rank(x, 3, name, what, "[B, N, S] or [B, N, 1, S]");
  return x;
}

class SiSnrLoss : public LossComputer {
 public:
  SiSnrLoss(const SiSnrOptions& options, bool permute, std::string type)
      : options_(options), permute_(permute), what_("loss " + std::move(type)) {}

  LossResult operator()(const TensorMap& targets, const TensorMap& outputs,
                        const torch::Tensor& seq_lengths) override {
    auto estimates = as_waveforms(get_tensor(outputs, options_.output, what_), options_.output,
                                  what_);
    auto sources = as_dtype_of(
        as_waveforms(get_tensor(targets, options_.target, what_), options_.target, what_),
        estimates);
    check_frames({{options_.output, estimates}, {options_.target, sources}}, seq_lengths, what_);
    const int64_t speakers = sources.size(2);
    if (estimates.size(2) != speakers)
      throw Error(what_ + ": " + options_.output + " has " + std::to_string(estimates.size(2)) +
                  " speakers but " + options_.target + " has " + std::to_string(speakers));
    auto pairwise = -pairwise_si_snr(estimates, sources, seq_lengths, options_.epsilon);
    LossResult result;
    result.loss = min_over_permutations(pairwise, permute_).sum();
    result.norm = torch::full({}, static_cast<double>(sources.size(0) * speakers),
                              estimates.options())
                      .detach();
    return result;
  }

  std::vector<std::string> target_names() const override { return {options_.target}; }
  std::vector<std::string> output_names() const override { return {options_.output}; }

 private:
  SiSnrOptions options_;
  bool permute_;
  std::string what_;
};

// ---- pit_sisnr_masks ---------------------------------------------------------------------------

struct MaskSiSnrOptions {
  std::string mixture = "mix_wave";
  std::string target = "multi_targets";
  std::string output = "bin_est";
  MaskActivation mask_activation = MaskActivation::kSoftmax;
  FrameSettings framing;  // the model input's features' (8 kHz, 32 ms cosine windows every 8 ms)
  double epsilon = 1e-8;

  void declare(OptionsReader& r) {
    r("mixture", mixture, "name of the mixture waveform target [B, N, 1] (feature = raw)");
    r("target", target, "name of the source waveforms [B, N, 1, S] (feature = raw)");
    r("output", output, "name of the mask logits [B, T, F*S] (column s*F+f) or [B, T, F, S]");
    declare_mask_activation(r, "activation", mask_activation, "mask activation over the speakers");
    r("sample_rate", framing.sample_rate, "sample rate of the waveforms (Hz)");
    r("winlen", framing.winlen, "analysis window (s): the model input's feature processor's");
    r("winstep", framing.winstep, "frame step (s): the model input's feature processor's");
    r.choice("winfunc", framing.winfunc, {"cosine", "hanning", "hamming", "none", "None"},
             "analysis window: the model input's feature processor's");
    r("nfft", framing.nfft, "FFT length: the model input's feature processor's");
    r("epsilon", epsilon, "added to the energies so that silent sources stay finite");
    r.require(framing.sample_rate > 0, "sample_rate", "must be > 0");
    r.require(framing.winlen > 0 && framing.winstep > 0, "winstep",
              "winlen and winstep must be > 0");
    r.require(framing.nfft > 0, "nfft", "must be > 0");
    r.require(epsilon > 0, "epsilon", "must be > 0");
  }
};

// Mask models trained on the time-domain metric: the masks multiply the STFT of the mixture
// waveform, computed here with the features' framing; a differentiable weighted overlap-add
// (as overlap_add_inverse) gives the waveforms, scored with PIT SI-SNR against the sources on
// each utterance's own samples.
class MaskSiSnrLoss : public LossComputer {
 public:
  explicit MaskSiSnrLoss(const MaskSiSnrOptions& options)
      : options_(options), settings_(options.framing) {
    if (settings_.nfft < settings_.frame_length())
      throw ConfigError("loss pit_sisnr_masks: nfft (" + std::to_string(settings_.nfft) +
                        ") is shorter than the frame length (" +
                        std::to_string(settings_.frame_length()) + " samples)");
  }

  LossResult operator()(const TensorMap& targets, const TensorMap& outputs,
                        const torch::Tensor& seq_lengths) override {
    const std::string what = "loss pit_sisnr_masks";
    auto logits = get_tensor(outputs, options_.output, what);
    auto mixture = as_dtype_of(as_waveforms(get_tensor(targets, options_.mixture, what),
                                            options_.mixture, what), logits);
    auto sources = as_dtype_of(as_waveforms(get_tensor(targets, options_.target, what),
                                            options_.target, what), logits);
    if (mixture.size(2) != 1)
      throw Error(what + ": " + options_.mixture + " must be one waveform [B, N, 1]");
    const int64_t length = settings_.frame_length(), step = settings_.frame_step();
    const int64_t batch = logits.size(0), frames = logits.size(1);
    const int64_t bins = settings_.num_bins(), speakers = sources.size(2);
    if (mixture.size(1) != sources.size(1) || mixture.size(0) != batch)
      throw Error(what + ": " + options_.mixture + " and " + options_.target +
                  " must hold the same utterances and samples");
    const int64_t analysed = mixture.size(1) < length ? 0 : (mixture.size(1) - length) / step + 1;
    if (analysed != frames)
      throw Error(what + ": " + options_.output + " has " + std::to_string(frames) +
                  " frames but the mixture's " + std::to_string(mixture.size(1)) +
                  " samples make " + std::to_string(analysed) + " frames of " +
                  std::to_string(length) + " every " + std::to_string(step) +
                  " (set winlen, winstep and sample_rate as the features')");
    if (logits.dim() == 3 && logits.size(2) == bins * speakers) {
      logits = logits.reshape({batch, frames, speakers, bins}).transpose(2, 3);
    } else if (!(logits.dim() == 4 && logits.size(2) == bins && logits.size(3) == speakers)) {
      throw Error(what + ": " + options_.output + " must be [B, T, F*S] or [B, T, F, S] with F = " +
                  std::to_string(bins) + " (nfft/2+1) and S = " + std::to_string(speakers));
    }
    check_frames({{options_.output, logits}}, seq_lengths, what);
    auto real = real_frames(seq_lengths, frames, logits).view({batch, frames, 1, 1});
    auto masks = apply_activation(logits, options_.mask_activation, 3) * real;  // [B,T,F,S]
    auto window = make_window(settings_.winfunc, length).to(logits.options());
    auto spectrum = torch::fft::rfft(mixture.squeeze(2).unfold(1, length, step) * window,
                                     settings_.nfft, -1);                   // [B, T, F]
    auto masked = spectrum.unsqueeze(-1) * masks;                           // [B, T, F, S]
    auto time_frames = torch::fft::irfft(masked.permute({0, 3, 1, 2}), settings_.nfft, -1)
                           .narrow(-1, 0, length) *
                       window;  // [B, S, T, L]
    const int64_t total = (frames - 1) * step + length;
    auto columns = time_frames.reshape({batch * speakers, frames, length}).transpose(1, 2);
    auto signals = torch::nn::functional::fold(
                       columns, torch::nn::functional::FoldFuncOptions({1, total}, {1, length})
                                    .stride({1, step}))
                       .reshape({batch, speakers, total});
    // Each utterance's own sum of squared windows (its real frames only), floored at kEdgeFloor
    // of its largest value, as overlap_add_inverse does for one signal.
    auto window_power =
        torch::nn::functional::fold(
            window.square().view({1, length, 1}) * real.view({batch, 1, frames}),
            torch::nn::functional::FoldFuncOptions({1, total}, {1, length}).stride({1, step}))
            .reshape({batch, 1, total});
    auto floor = (window_power.amax(-1, /*keepdim=*/true) * kEdgeFloor).clamp_min(1e-15);
    signals = signals / torch::maximum(window_power, floor);
    auto estimates = torch::nn::functional::pad(
        signals.transpose(1, 2),
        torch::nn::functional::PadFuncOptions({0, 0, 0, sources.size(1) - total}));
    // Utterance b covers (T_b − 1) steps plus one frame.
    auto samples = torch::where(seq_lengths.to(torch::kLong) > 0,
                                (seq_lengths.to(torch::kLong) - 1) * step + length,
                                torch::zeros_like(seq_lengths.to(torch::kLong)));
    auto pairwise = -pairwise_si_snr(estimates, sources, samples, options_.epsilon);
    LossResult result;
    result.loss = min_over_permutations(pairwise, true).sum();
    result.norm = torch::full({}, static_cast<double>(batch * speakers), logits.options()).detach();
    return result;
  }

  std::vector<std::string> target_names() const override {
    return {options_.mixture, options_.target};
  }
  std::vector<std::string> output_names() const override { return {options_.output}; }

 private:
  MaskSiSnrOptions options_;
  FrameSettings settings_;
};

LossPtr make_sisnr(const ConfigSection& section) {
  return std::make_shared<SiSnrLoss>(read_options<SiSnrOptions>(section, "loss_type sisnr"),
                                     false, "sisnr");
}
LossPtr make_pit_sisnr(const ConfigSection& section) {
  return std::make_shared<SiSnrLoss>(read_options<SiSnrOptions>(section, "loss_type pit_sisnr"),
                                     true, "pit_sisnr");
}

LossPtr make_pit_sisnr_masks(const ConfigSection& section) {
  return make_configured_loss<MaskSiSnrLoss, MaskSiSnrOptions>(section, "pit_sisnr_masks");
}

}  // namespace

NABU_REGISTER_WITH_OPTIONS(loss_registry, "sisnr", make_sisnr, SiSnrOptions,
                           "negative scale-invariant SNR (dB) of each estimated waveform against "
                           "the source in the same position, zero-mean over real samples; "
                           "norm = B*S")
NABU_REGISTER_WITH_OPTIONS(loss_registry, "pit_sisnr", make_pit_sisnr, SiSnrOptions,
                           "sisnr under the best speaker permutation of each utterance "
                           "(any number of speakers); norm = B*S")

NABU_REGISTER_WITH_OPTIONS(loss_registry, "pit_sisnr_masks", make_pit_sisnr_masks,
                           MaskSiSnrOptions,
                           "mask models on the time-domain metric: masks (bin_est) on the STFT of "
                           "the mixture waveform, weighted overlap-add, pit_sisnr against the "
                           "source waveforms; norm = B*S")

}  // namespace nabu
