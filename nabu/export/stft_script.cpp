#include "nabu/export/stft_script.h"

#include <fmt/format.h>

namespace nabu {

std::string stft_script(const std::string& name, const FrameSettings& settings, double preemph) {
  const double rate = settings.sample_rate;  // the same operations in the same order
  const int64_t length = settings.frame_length(), step = settings.frame_step();
  // snipped_length: int() truncates towards zero, python_round rounds half away from zero.
  std::string script = fmt::format(
      "def {0}(self, x: Tensor) -> Tensor:\n"
      "    length = x.size(1)\n"
      "    whole = int((float(length) - {1:.17g} * {3:.17g}) / ({2:.17g} * {3:.17g}))\n"
      "    value = float(whole) * {2:.17g} * {3:.17g} + {1:.17g} * {3:.17g}\n"
      "    rounded = int(value + 0.5) if value >= 0.0 else -int(-value + 0.5)\n"
      "    keep = min(max(rounded, 0), length)\n"
      "    signal = x.narrow(1, 0, keep)\n",
      name, settings.winlen, settings.winstep, rate);
  if (preemph != 0.0)
    script += fmt::format(
        "    if keep >= 2:\n"
        "        signal = torch.cat([signal.narrow(1, 0, 1), signal.narrow(1, 1, keep - 1) - "
        "{:.17g} * signal.narrow(1, 0, keep - 1)], 1)\n",
        preemph);
  // num_frames: one frame for a signal no longer than a frame, else enough to cover it.
  script += fmt::format(
      "    frames = 1 if keep <= {0} else 1 + (keep - {0} + {1} - 1) // {1}\n"
      "    padded = torch.constant_pad_nd(signal, [0, (frames - 1) * {1} + {0} - keep], 0.0)\n"
      "    windowed = padded.unfold(1, {0}, {1}) * self.{2}_window\n"
      "    return torch.fft_rfft(windowed, {3}, -1)\n",
      length, step, name, settings.nfft);
  return script;
}

std::string inverse_stft_script(const std::string& name, const FrameSettings& settings) {
  const int64_t length = settings.frame_length(), step = settings.frame_step();
  return fmt::format(
      "def {0}(self, spectra: Tensor) -> Tensor:\n"
      "    batch = spectra.size(0)\n"
      "    speakers = spectra.size(1)\n"
      "    frames = spectra.size(2)\n"
      "    window = self.{0}_window\n"
      "    pieces = torch.fft_irfft(spectra, {3}, -1).narrow(3, 0, {1}).double() * window\n"
      "    total = (frames - 1) * {2} + {1}\n"
      "    positions = (torch.arange(frames) * {2}).unsqueeze(1) + torch.arange({1}).unsqueeze(0)\n"
      "    flat = positions.reshape([-1])\n"
      "    signal = pieces.new_zeros([batch * speakers, total]).index_add_("
      "1, flat, pieces.reshape([batch * speakers, frames * {1}]))\n"
      "    power = window.new_zeros([total]).index_add_(0, flat, "
      "window.square().repeat([frames]))\n"
      "    floor = max({4:.17g} * float(power.max()), 1e-15)\n"
      "    return (signal / power.clamp_min(floor)).reshape([batch, speakers, total])\n",
      name, length, step, settings.nfft, kEdgeFloor);
}

std::string spectral_feature_script(const std::string& feature, const std::string& spectrum,
                                    int nfft) {
  if (feature == "magspec") return spectrum + ".abs()";
  if (feature == "logspec")
    return "10.0 * torch.log10(torch.clamp_min(" + spectrum + ".abs(), 1e-30))";
  if (feature == "powspec") return spectrum + ".abs().square() / " + std::to_string(nfft) + ".0";
  return "";
}

}  // namespace nabu
