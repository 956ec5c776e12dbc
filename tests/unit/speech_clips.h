// Speech the quality scorers' tests score (test_stoi.cpp, test_pesq.cpp): recorded clips of the
// evaluation-only packages, espeak-ng sentences, and the ways they are degraded.
#pragma once

#include <cmath>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "nabu/processing/audio.h"
#include "test_helpers.h"

namespace nabu::testing {

inline std::vector<double> as_vector(const torch::Tensor& samples) {
  auto contiguous = samples.to(torch::kFloat64).contiguous();
  return {contiguous.data_ptr<double>(), contiguous.data_ptr<double>() + contiguous.numel()};
}

// 8 kHz 16-bit raw speech of codec2-examples.
inline std::vector<double> read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<double> samples;
  int16_t value;
  while (in.read(reinterpret_cast<char*>(&value), sizeof(value))) samples.push_back(value);
  return samples;
}

inline std::vector<double> noise(std::size_t length, double deviation, unsigned seed) {
  std::mt19937 generator(seed);
  std::normal_distribution<double> gaussian(0.0, deviation);
  std::vector<double> out(length);
  for (double& v : out) v = gaussian(generator);
  return out;
}

inline double power(const std::vector<double>& x) {
  double sum = 0;
  for (double v : x) sum += v * v;
  return sum / std::max<std::size_t>(1, x.size());
}

// clean + gain * other, other scaled to `snr_db` below clean first (other repeated to length).
inline std::vector<double> add(const std::vector<double>& clean, const std::vector<double>& other,
                               double snr_db, double gain = 1.0) {
  std::vector<double> tiled(clean.size());
  for (std::size_t n = 0; n < clean.size(); ++n) tiled[n] = other[n % other.size()];
  const double scale =
      std::sqrt(power(clean) / (power(tiled) + 1e-12) / std::pow(10, snr_db / 10));
  std::vector<double> out(clean.size());
  for (std::size_t n = 0; n < clean.size(); ++n) out[n] = clean[n] + gain * scale * tiled[n];
  return out;
}

// 16-bit wav peaking at 20000.
inline void write_wav(const fs::path& path, const std::vector<double>& signal, int rate) {
  double peak = 1e-9;
  for (double v : signal) peak = std::max(peak, std::abs(v));
  std::vector<short> pcm(signal.size());
  for (std::size_t n = 0; n < signal.size(); ++n)
    pcm[n] = static_cast<short>(std::lround(signal[n] / peak * 20000.0));
  write_pcm16_wav(path, pcm, rate);
}

struct Clip {
  std::string name;
  std::vector<double> samples;
  int rate;
};

// One of three espeak-ng sentences, at 22.05 kHz.
inline Clip espeak_clip(int i, const TempDir& dir) {
  const char* sentences[] = {"The quick brown fox jumps over the lazy dog near the river bank.",
                             "Please call Stella and ask her to bring these things with her.",
                             "A large size in stockings is hard to sell, said the shopkeeper."};
  const fs::path wav = dir / ("espeak" + std::to_string(i) + ".wav");
  auto made = run_shell(std::string("espeak-ng -v en -s 150 -w '") + wav.string() + "' '" +
                            sentences[i % 3] + "'",
                        dir.path());
  if (made.exit_code != 0) throw std::runtime_error("espeak-ng failed: " + made.output);
  Audio audio = read_audio(wav.string());
  return {"espeak" + std::to_string(i), as_vector(audio.samples), audio.sample_rate};
}

}  // namespace nabu::testing
