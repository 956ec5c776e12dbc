// What the inverse STFT's edges cost (docs/postprocessing.md): a trained experiment's test masks
// inverted with the original's spec2time (overlap-add divided by the sum of the windows) and with
// ours (weighted overlap-add, the divisor floored at a fraction of its largest value) for a few
// floors, scored with BSS Eval SDR against the scorer's references; the same masks for all.
//
//   build/bench/bench_istft_edges --expdir exp/demo [--task task_2spk] [--max-utterances N]
//                                 [--floors 0,0.01,0.1,0.3] [--threads N]
//
// Prints, per inverse, the mean SDR over speakers and utterances, and the mean over files of the
// largest absolute sample among the first and last 32 samples divided by the largest elsewhere
// (above 1: the edges are louder than the signal, a click).
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "nabu/core/error.h"
#include "nabu/core/openblas_core.h"
#include "nabu/core/recipe.h"
#include "nabu/core/strings.h"
#include "nabu/evaluation/scorers/bss_eval.h"
#include "nabu/inference/task_separation.h"
#include "nabu/processing/signal.h"

using namespace nabu;

namespace {

// The original's spec2time: irfft, overlap-add, divided by the sum of the windows (+1e-15).
torch::Tensor original_inverse(const torch::Tensor& spectrum, const FrameSettings& settings,
                               int64_t length) {
  int64_t frame_length = settings.frame_length(), step = settings.frame_step();
  int64_t frames = spectrum.size(0), total = (frames - 1) * step + frame_length;
  auto time_frames =
      torch::fft::irfft(spectrum, settings.nfft, -1).slice(1, 0, frame_length).to(torch::kFloat64);
  auto window = make_window(settings.winfunc, frame_length);
  auto signal = torch::zeros({total}, torch::kFloat64);
  auto window_sum = torch::zeros({total}, torch::kFloat64);
  for (int64_t t = 0; t < frames; ++t) {
    signal.slice(0, t * step, t * step + frame_length) += time_frames[t];
    window_sum.slice(0, t * step, t * step + frame_length) += window;
  }
  return (signal / (window_sum + 1e-15)).slice(0, 0, std::min(length, total));
}

struct Tally {
  double sdr = 0, edge_ratio = 0;
  int64_t speakers = 0, files = 0;
};

std::string argument(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == "--" + name) return argv[i + 1];
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  nabu::restart_for_openblas_core(argv);  // on the kernels the nabu program runs on
  try {
    std::string expdir = argument(argc, argv, "expdir", "");
    if (expdir.empty()) throw Error("--expdir is required");
    torch::set_num_threads(std::atoi(argument(argc, argv, "threads", "2").c_str()));
    int64_t max_utterances = std::atoll(argument(argc, argv, "max-utterances", "-1").c_str());
    std::vector<double> floors;
    for (const auto& text : split(argument(argc, argv, "floors", "0,0.01,0.1,0.3"), ','))
      floors.push_back(std::atof(text.c_str()));
    Recipe recipe = Recipe::load(expdir);
    std::string task = argument(
        argc, argv, "task",
        recipe.get("test_evaluator.cfg").section("evaluator").get_list("tasks").at(0));
    const ConfigSection& reconstructor = recipe.get("reconstructor.cfg").section(task);
    const ConfigSection& scorer = recipe.get("scorer.cfg").section(task);
    SectionReader mixtures(recipe, reconstructor.get_string("org_mix"));
    SectionReader sources(recipe, scorer.get_string("org_src"));
    TrainedExperiment separator(recipe, expdir, "full", false);
    auto separation = std::make_unique<TaskSeparation>(separator, task);

    std::vector<std::string> names{"original (window sum)"};
    for (double floor : floors) {
      char label[64];
      std::snprintf(label, sizeof label, "ours, floor %g", floor);
      names.push_back(label);
    }
    std::vector<Tally> tallies(names.size());
    separation->evaluate(max_utterances, [&](const Separation& separated) {
      int rate = 0;
      auto spectrum = mixtures.read(separated.utterance, &rate).to(torch::kComplexDouble);
      FrameSettings settings = mixtures.feature_options()->frames(rate);
      int64_t length = frames_span(spectrum.size(0), settings);
      auto references = sources.read(separated.utterance);
      const int64_t speakers = separated.masks.size(0);
      for (std::size_t k = 0; k < names.size(); ++k) {
        std::vector<torch::Tensor> signals;
        for (int64_t s = 0; s < speakers; ++s) {
          auto masked = spectrum * separated.masks[s].to(torch::kFloat64);
          auto signal = k == 0 ? original_inverse(masked, settings, length)
                               : overlap_add_inverse(masked, settings, length, floors[k - 1]);
          int64_t edge = 32, n = signal.size(0);
          double edges = std::max(signal.slice(0, 0, edge).abs().max().item<double>(),
                                  signal.slice(0, n - edge).abs().max().item<double>());
          double inside = signal.slice(0, edge, n - edge).abs().max().item<double>();
          tallies[k].edge_ratio += inside > 0 ? edges / inside : 0;
          ++tallies[k].files;
          signals.push_back(signal);
        }
        auto estimates = torch::stack(signals);
        int64_t common = std::min(estimates.size(1), references.size(1));
        auto scores = bss_eval_sources(references.slice(1, 0, common).to(torch::kFloat64),
                                       estimates.slice(1, 0, common), 512);
        for (double value : scores.sdr) tallies[k].sdr += value;
        tallies[k].speakers += speakers;
      }
    });
    std::printf("%-26s %10s %16s\n", "inverse", "mean SDR", "edge/inside max");
    for (std::size_t k = 0; k < names.size(); ++k)
      std::printf("%-26s %10.3f %16.3f\n", names[k].c_str(),
                  tallies[k].sdr / std::max<int64_t>(1, tallies[k].speakers),
                  tallies[k].edge_ratio / std::max<int64_t>(1, tallies[k].files));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_istft_edges: %s\n", e.what());
    return 1;
  }
}
