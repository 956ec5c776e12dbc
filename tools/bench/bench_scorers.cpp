// What each scorer costs per minute of audio (docs/results.md, "Scorers"): two recordings mixed at
// 0 dB, the "estimates" each source plus a fifth of the other, scored against the sources by
// stoi, estoi, pesq, si_sdr and sdr (BSS Eval v3, 512 taps), repeated; the median seconds per
// minute of scored audio (each speaker's signal counts once; stoi, estoi and pesq score all four
// pairings to choose the assignment, as the scorer does).
//
//   build/bench/bench_scorers [--repeats N] [--threads N] [--seconds S] [a.wav b.wav]
//
// Default recordings: codec2-examples' hts1a and hts2a (8 kHz), tiled to S seconds (default 10).
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "nabu/core/openblas_core.h"
#include "nabu/evaluation/scorers/bss_eval.h"
#include "nabu/evaluation/scorers/pesq.h"
#include "nabu/evaluation/scorers/stoi.h"
#include "nabu/processing/audio.h"

using namespace nabu;

namespace {

torch::Tensor read_signal(const std::string& path, int* rate) {
  if (path.size() > 4 && path.substr(path.size() - 4) == ".raw") {
    std::ifstream in(path, std::ios::binary);
    std::vector<double> samples;
    int16_t value;
    while (in.read(reinterpret_cast<char*>(&value), sizeof(value))) samples.push_back(value);
    *rate = 8000;
    return torch::tensor(samples, torch::kFloat64);
  }
  Audio audio = read_audio(path);
  *rate = audio.sample_rate;
  return audio.samples.to(torch::kFloat64);
}

torch::Tensor tiled(const torch::Tensor& signal, int64_t length) {
  return signal.repeat({length / signal.size(0) + 1}).slice(0, 0, length);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  nabu::restart_for_openblas_core(argv);  // on the kernels the nabu program runs on
  int repeats = 5, threads = 1;
  double seconds = 10;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--repeats" && i + 1 < argc) repeats = std::atoi(argv[++i]);
    else if (arg == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (arg == "--seconds" && i + 1 < argc) seconds = std::atof(argv[++i]);
    else files.push_back(arg);
  }
  if (files.empty())
    files = {"/usr/share/codec2/raw/hts1a.raw", "/usr/share/codec2/raw/hts2a.raw"};
  if (files.size() != 2) {
    std::fprintf(stderr, "bench_scorers: give two recordings (or none)\n");
    return 1;
  }
  torch::set_num_threads(threads);
  int rate_a = 0, rate_b = 0;
  auto a = read_signal(files[0], &rate_a), b = read_signal(files[1], &rate_b);
  if (rate_a != rate_b) {
    std::fprintf(stderr, "bench_scorers: the recordings differ in rate\n");
    return 1;
  }
  const int64_t length = static_cast<int64_t>(seconds * rate_a);
  auto references = torch::stack({tiled(a, length), tiled(b, length)});
  auto estimates = torch::stack({references[0] + 0.2 * references[1],
                                 references[1] + 0.2 * references[0]});
  const double minutes = 2.0 * length / rate_a / 60.0;  // two speakers scored
  std::printf("%s and %s, %d Hz, %.1f s each, %d thread(s), %d repeats\n", files[0].c_str(),
              files[1].c_str(), rate_a, seconds, threads, repeats);
  std::printf("%-8s %14s %22s %10s\n", "scorer", "s per minute", "range", "value");
  for (const std::string scorer : {"stoi", "estoi", "pesq", "si_sdr", "sdr"}) {
    std::vector<double> times;
    double value = 0;
    for (int r = 0; r < repeats; ++r) {
      auto start = std::chrono::steady_clock::now();
      if (scorer == "stoi" || scorer == "estoi") {
        value = stoi_of_sources(references, estimates, rate_a, scorer == "estoi");
      } else if (scorer == "pesq") {
        value = pesq_of_sources(references, estimates, rate_a);
      } else {
        auto scores = scorer == "sdr" ? bss_eval_sources(references, estimates, 512)
                                      : si_sdr_sources(references, estimates);
        value = (scores.sdr[0] + scores.sdr[1]) / 2;
      }
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                          .count());
    }
    const auto [low, high] = std::minmax_element(times.begin(), times.end());
    std::printf("%-8s %14.3f %10.3f - %9.3f %10.3f\n", scorer.c_str(), median(times) / minutes,
                *low / minutes, *high / minutes, value);
  }
  return 0;
}
