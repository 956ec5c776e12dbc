// The feature computers, each registered under the original's name.
#include <cmath>

#include <fmt/format.h>

#include "nabu/core/error.h"
#include "nabu/processing/feature_computer.h"

namespace nabu {

void FeatureOptions::declare(OptionsReader& r) {
  r.choice("feature", feature, feature_registry().names(), "what is computed from the signal");
  r("winlen", winlen, "window length in seconds");
  r("winstep", winstep, "window step in seconds");
  r.choice("winfunc", winfunc, {"cosine", "hanning", "hamming", "none", "None"},
           "the analysis window");
  r("nfft", nfft, "FFT length (bins = nfft/2+1)");
  r("preemph", preemph, "pre-emphasis coefficient (not for spec/raw)");
  r("include_energy", include_energy, "append the log frame energy as a last column");
  r("nfilt", nfilt, "fbank/mfcc: number of mel filters");
  r("numcep", numcep, "mfcc: number of cepstra");
  r("lowfreq", lowfreq, "fbank/mfcc: lowest filter edge (Hz)");
  r("highfreq", highfreq, "fbank/mfcc: highest filter edge (Hz), -1 = rate/2");
  r("ceplifter", ceplifter, "mfcc: cepstral lifter");
  r.choice("dynamic", dynamic, {"nodelta", "delta", "ddelta"},
           "fbank/mfcc: append the first (delta) or first and second (ddelta) derivatives");
  r.require(nfft > 0, "nfft", "must be positive");
  r.require(winlen > 0, "winlen", "must be positive");
  r.require(winstep > 0, "winstep", "must be positive");
  r.require(nfilt > 0, "nfilt", "must be positive");
  r.require(numcep > 0 && numcep <= nfilt, "numcep", "must lie in 1..nfilt");
  r.require(lowfreq >= 0, "lowfreq", "must not be negative");
  r.require(highfreq == -1 || highfreq > lowfreq, "highfreq", "must be -1 or above lowfreq");
}

int FeatureOptions::fitting_nfft(int sample_rate) const {
  const int64_t frame = frames(sample_rate).frame_length();
  int fitting = 1;
  while (fitting < frame) fitting *= 2;
  return fitting;
}

std::string FeatureOptions::frame_problem(int sample_rate) const {
  const int64_t frame = frames(sample_rate).frame_length();
  if (feature == "raw" || nfft >= frame) return "";
  return fmt::format("nfft {} is shorter than a winlen of {:g} s at {} Hz ({} samples): set nfft "
                     "= {} for data at this rate",
                     nfft, winlen, sample_rate, frame, fitting_nfft(sample_rate));
}

FrameSettings FeatureOptions::frames(int sample_rate) const {
  FrameSettings settings;
  settings.sample_rate = sample_rate;
  settings.winlen = winlen;
  settings.winstep = winstep;
  settings.winfunc = winfunc;
  settings.nfft = nfft;
  return settings;
}

FeatureRegistry& feature_registry() {
  static FeatureRegistry registry("feature");
  return registry;
}

FeatureComputerPtr make_feature_computer(const FeatureOptions& options) {
  return feature_registry().create(options.feature, options);
}

torch::Tensor preemphasis(const torch::Tensor& signal, double coefficient) {
  if (coefficient == 0.0 || signal.size(0) < 2) return signal;
  auto out = signal.clone();
  out.slice(0, 1) -= coefficient * signal.slice(0, 0, -1);
  return out;
}

namespace {

double hz_to_mel(double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); }
double mel_to_hz(double mel) { return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0); }

}  // namespace

torch::Tensor mel_filterbank(int nfilt, int nfft, int sample_rate, int lowfreq, int highfreq) {
  double high = highfreq < 0 ? sample_rate / 2.0 : highfreq;
  if (high > sample_rate / 2.0)
    throw DataError("highfreq " + std::to_string(highfreq) + " Hz is above half the sample rate (" +
                    std::to_string(sample_rate) + " Hz)");
  double low_mel = hz_to_mel(lowfreq), high_mel = hz_to_mel(high);
  std::vector<double> bins(nfilt + 2);
  for (int i = 0; i < nfilt + 2; ++i) {
    double mel = low_mel + (high_mel - low_mel) * i / (nfilt + 1);
    bins[i] = std::floor((nfft + 1) * mel_to_hz(mel) / sample_rate);
  }
  auto bank = torch::zeros({nfilt, nfft / 2 + 1}, torch::kFloat64);
  auto accessor = bank.accessor<double, 2>();
  for (int j = 0; j < nfilt; ++j) {
    for (int i = static_cast<int>(bins[j]); i < static_cast<int>(bins[j + 1]); ++i)
      accessor[j][i] = (i - bins[j]) / (bins[j + 1] - bins[j]);
    for (int i = static_cast<int>(bins[j + 1]); i < static_cast<int>(bins[j + 2]); ++i)
      accessor[j][i] = (bins[j + 2] - i) / (bins[j + 2] - bins[j + 1]);
  }
  return bank;
}

namespace {

// Frames of the snipped (optionally pre-emphasised) signal, windowed.
torch::Tensor analysis_frames(const torch::Tensor& signal, const FeatureOptions& options,
                              int sample_rate, bool use_preemphasis,
                              const std::string& window = "") {
  FrameSettings settings = options.frames(sample_rate);
  if (!window.empty()) settings.winfunc = window;
  auto snipped = snip(signal, settings);
  if (use_preemphasis) snipped = preemphasis(snipped, options.preemph);
  return frame_signal(snipped, settings);
}

// log of the fbank energy per frame (the original's include_energy column): power spectrum of
// rectangular-window frames summed over bins, floored at machine epsilon.
torch::Tensor log_frame_energy(const torch::Tensor& signal, const FeatureOptions& options,
                               int sample_rate) {
  auto frames = analysis_frames(signal, options, sample_rate, true, "none");
  auto power = frames_spectrum(frames, options.nfft).abs().square() / options.nfft;
  auto energy = power.sum(1);
  energy = torch::where(energy == 0, torch::full_like(energy, 2.220446049250313e-16), energy);
  return energy.log();
}

torch::Tensor with_energy(const torch::Tensor& features, const torch::Tensor& signal,
                          const FeatureOptions& options, int sample_rate) {
  if (!options.include_energy) return features;
  return torch::cat({features, log_frame_energy(signal, options, sample_rate).unsqueeze(1)}, 1);
}

class SpectrumFeature : public FeatureComputer {
 public:
  enum class Kind { kSpec, kMagnitude, kLogMagnitude, kPower, kAngle };
  SpectrumFeature(const FeatureOptions& options, Kind kind)
      : FeatureComputer(options), kind_(kind) {}

  torch::Tensor compute(const torch::Tensor& signal, int sample_rate) const override {
    // docs/data_layout.md: pre-emphasis for magspec, logspec and powspec, not for spec.
    bool emphasise = kind_ != Kind::kSpec;
    auto spectrum =
        frames_spectrum(analysis_frames(signal, options_, sample_rate, emphasise), options_.nfft);
    torch::Tensor features;
    switch (kind_) {
      case Kind::kSpec:
        return spectrum;
      case Kind::kMagnitude:
        features = spectrum.abs();
        break;
      case Kind::kLogMagnitude:
        features = 10.0 * torch::log10(torch::clamp_min(spectrum.abs(), 1e-30));
        break;
      case Kind::kPower:
        features = spectrum.abs().square() / options_.nfft;
        break;
      case Kind::kAngle:
        features = torch::angle(spectrum);
        break;
    }
    return with_energy(features, signal, options_, sample_rate);
  }

  int64_t dim() const override {
    return options_.nfft / 2 + 1 + (options_.include_energy && kind_ != Kind::kSpec ? 1 : 0);
  }

 private:
  Kind kind_;
};

class RawFeature : public FeatureComputer {
 public:
  using FeatureComputer::FeatureComputer;
  torch::Tensor compute(const torch::Tensor& signal, int sample_rate) const override {
    auto snipped = snip(signal, options_.frames(sample_rate));
    double peak = snipped.numel() ? snipped.abs().max().item<double>() : 0.0;
    if (peak == 0.0) return snipped.unsqueeze(1);  // silent: nothing to normalise
    return (snipped / peak).unsqueeze(1);
  }
  int64_t dim() const override { return 1; }
  bool sample_domain() const override { return true; }
};

// Derivative along time with the kernel [2 1 0 -1 -2] and reflected edges (scipy convolve1d).
torch::Tensor time_derivative(const torch::Tensor& features) {
  int64_t frames = features.size(0);
  auto index = [frames](int64_t t) {
    // scipy 'reflect' mode: (d c b a | a b c d | d c b a)
    while (t < 0 || t >= frames) t = t < 0 ? -t - 1 : 2 * frames - t - 1;
    return t;
  };
  std::vector<int64_t> shifted_by[5];
  for (int k = -2; k <= 2; ++k)
    for (int64_t t = 0; t < frames; ++t) shifted_by[k + 2].push_back(index(t + k));
  auto gather = [&](int k) {
    return features.index_select(0, torch::tensor(shifted_by[k + 2], torch::kLong));
  };
  // convolution flips the kernel: out[t] = 2 x[t+2] + x[t+1] - x[t-1] - 2 x[t-2]... as correlate
  // with [-2 -1 0 1 2]
  return 2 * gather(2) + gather(1) - gather(-1) - 2 * gather(-2);
}

class FilterbankFeature : public FeatureComputer {
 public:
  FilterbankFeature(const FeatureOptions& options, bool cepstra)
      : FeatureComputer(options), cepstra_(cepstra) {}

  torch::Tensor compute(const torch::Tensor& signal, int sample_rate) const override {
    // As the original's fbank: frames without a window function (rectangular).
    auto frames = analysis_frames(signal, options_, sample_rate, true, "none");
    auto power = frames_spectrum(frames, options_.nfft).abs().square() / options_.nfft;
    auto bank = mel_filterbank(options_.nfilt, options_.nfft, sample_rate, options_.lowfreq,
                               options_.highfreq);
    auto energies = torch::matmul(power, bank.t());
    energies =
        torch::where(energies == 0, torch::full_like(energies, 2.220446049250313e-16), energies);
    auto features = energies.log();
    if (cepstra_) {
      features = dct_ortho(features).slice(1, 0, options_.numcep);
      if (options_.ceplifter > 0) {
        auto n = torch::arange(features.size(1), torch::kFloat64);
        features = features * (1 + options_.ceplifter / 2 * torch::sin(M_PI * n / options_.ceplifter));
      }
    }
    features = with_energy(features, signal, options_, sample_rate);
    if (options_.dynamic == "delta") {
      features = torch::cat({features, time_derivative(features)}, 1);
    } else if (options_.dynamic == "ddelta") {
      auto delta = time_derivative(features);
      features = torch::cat({features, delta, time_derivative(delta)}, 1);
    }
    return features;
  }

  int64_t dim() const override {
    int64_t dim = (cepstra_ ? options_.numcep : options_.nfilt) + (options_.include_energy ? 1 : 0);
    if (options_.dynamic == "delta") return 2 * dim;
    if (options_.dynamic == "ddelta") return 3 * dim;
    return dim;
  }

 private:
  // DCT-II with orthonormal scaling over the last axis (scipy dct(type=2, norm='ortho')).
  static torch::Tensor dct_ortho(const torch::Tensor& x) {
    int64_t n = x.size(1);
    auto k = torch::arange(n, torch::kFloat64).unsqueeze(1);
    auto i = torch::arange(n, torch::kFloat64).unsqueeze(0);
    auto basis = torch::cos(M_PI * k * (2 * i + 1) / (2.0 * n)) * std::sqrt(2.0 / n);
    basis[0] = basis[0] / std::sqrt(2.0);
    return torch::matmul(x, basis.t());
  }
  bool cepstra_;
};

template <SpectrumFeature::Kind kind>
FeatureComputerPtr make_spectrum(const FeatureOptions& options) {
  return std::make_shared<SpectrumFeature>(options, kind);
}

}  // namespace

NABU_REGISTER(feature_registry, "spec", make_spectrum<SpectrumFeature::Kind::kSpec>,
              "complex STFT [T, nfft/2+1]")
NABU_REGISTER(feature_registry, "magspec", make_spectrum<SpectrumFeature::Kind::kMagnitude>,
              "magnitude spectrum |X|")
NABU_REGISTER(feature_registry, "logspec", make_spectrum<SpectrumFeature::Kind::kLogMagnitude>,
              "10 log10 |X| (log of the magnitude, as the original)")
NABU_REGISTER(feature_registry, "powspec", make_spectrum<SpectrumFeature::Kind::kPower>,
              "power spectrum |X|^2 / nfft")
NABU_REGISTER(feature_registry, "angspec", make_spectrum<SpectrumFeature::Kind::kAngle>,
              "phase spectrum")
NABU_REGISTER(
    feature_registry, "raw",
    [](const FeatureOptions& options) -> FeatureComputerPtr {
      return std::make_shared<RawFeature>(options);
    },
    "the snipped signal divided by its maximum, [N, 1]")
NABU_REGISTER(
    feature_registry, "fbank",
    [](const FeatureOptions& options) -> FeatureComputerPtr {
      return std::make_shared<FilterbankFeature>(options, false);
    },
    "log mel filterbank energies")
NABU_REGISTER(
    feature_registry, "mfcc",
    [](const FeatureOptions& options) -> FeatureComputerPtr {
      return std::make_shared<FilterbankFeature>(options, true);
    },
    "mel cepstra (DCT-II of log fbank, liftered)")

}  // namespace nabu
