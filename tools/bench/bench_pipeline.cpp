// Input pipeline alone, on the stores of a prepared recipe: batches (and examples) per second
// delivered by the background loader, padding waste (padded frames / real frames - 1) with 1 and
// N buckets, and the peak resident memory. With --dynamic-mixing the examples are dynamic
// mixtures of the listed sources (docs/dynamic_mixing.md), as many per epoch as the stores hold.
//
//   bench_pipeline --recipe=recipes/SS/DBLSTM/toy_DC_2spk [--task=task_2spk] [--segment=full]
//                  [--batch=8] [--buckets=1,8] [--epochs=2] [--prefetch=4]
//                  [--dynamic-mixing=data/corpus/sources/tr_wav.scp,data/corpus/sources/tr_utt2spk]
//
// Run from the project root after `nabu data` (the recipe's store paths are relative to it).
#include <sys/resource.h>

#include <chrono>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "nabu/core/error.h"
#include "nabu/core/openblas_core.h"
#include "nabu/core/recipe.h"
#include "nabu/core/strings.h"
#include "nabu/neuralnetworks/task_definition.h"
#include "nabu/pipeline/task_pipeline.h"

namespace {

struct Settings {
  std::string recipe, task = "task_2spk", segment = "full";
  int64_t batch = 8, epochs = 2, prefetch = 4;
  std::vector<int64_t> buckets{1, 8};
  std::vector<std::string> dynamic_mixing;  // source list, utt2spk (optional)
};

std::string value_of(const std::string& argument, const std::string& name) {
  std::string prefix = "--" + name + "=";
  return argument.rfind(prefix, 0) == 0 ? argument.substr(prefix.size()) : std::string();
}

Settings parse(int argc, char** argv) {
  Settings settings;
  for (int i = 1; i < argc; ++i) {
    std::string argument = argv[i], value;
    if (!(value = value_of(argument, "recipe")).empty()) settings.recipe = value;
    else if (!(value = value_of(argument, "task")).empty()) settings.task = value;
    else if (!(value = value_of(argument, "segment")).empty()) settings.segment = value;
    else if (!(value = value_of(argument, "batch")).empty()) settings.batch = std::stoll(value);
    else if (!(value = value_of(argument, "epochs")).empty()) settings.epochs = std::stoll(value);
    else if (!(value = value_of(argument, "prefetch")).empty()) settings.prefetch = std::stoll(value);
    else if (!(value = value_of(argument, "dynamic-mixing")).empty())
      settings.dynamic_mixing = nabu::split(value, ',');
    else if (!(value = value_of(argument, "buckets")).empty()) {
      settings.buckets.clear();
      for (const auto& field : nabu::split(value, ',')) settings.buckets.push_back(std::stoll(field));
    } else {
      throw nabu::Error("unknown argument '" + argument + "' (see the comment at the top of " +
                        "tools/bench/bench_pipeline.cpp)");
    }
  }
  if (settings.recipe.empty()) throw nabu::Error("--recipe=DIR is required");
  return settings;
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

}  // namespace

int main(int argc, char** argv) {
  nabu::restart_for_openblas_core(argv);  // on the kernels the nabu program runs on
  try {
    Settings settings = parse(argc, argv);
    torch::set_num_threads(1);
    auto recipe = nabu::Recipe::load(settings.recipe);
    const auto& trainer = recipe.get("trainer.cfg");
    auto spec = nabu::read_task_spec(trainer.section(settings.task), nabu::TaskRole::kTrain);
    const auto& set = spec.linked_sets.front();
    nabu::StoreCache stores;
    nabu::TaskPipelineOptions options;
    options.what = settings.task;
    options.segment_length = settings.segment;
    if (!settings.dynamic_mixing.empty()) {
      nabu::DynamicMixingOptions mixing;
      mixing.source_lists = {settings.dynamic_mixing.front()};
      if (settings.dynamic_mixing.size() > 1) mixing.utt2spk = {settings.dynamic_mixing[1]};
      mixing.seed = 1;
      options.mixing = mixing;
    }
    options.plan.batch_size = settings.batch;
    options.plan.seed = 1;
    options.cycle = true;
    options.prefetch = static_cast<int>(settings.prefetch);
    std::cout << settings.task << " (" << settings.segment << "): ";
    for (int64_t buckets : settings.buckets) {
      options.plan.numbuckets = static_cast<int>(buckets);
      nabu::TaskPipeline task_pipeline(recipe, set.inputs, set.targets, options, stores);
      if (buckets == settings.buckets.front())
        std::cout << task_pipeline.examples().size()
                  << (settings.dynamic_mixing.empty() ? " stored" : " dynamic")
                  << " examples, batch " << settings.batch << ", " << settings.epochs
                  << " epoch(s) per measurement\n";
      auto started = task_pipeline.start();
      nabu::InputPipeline& pipeline = *started;
      int64_t total = pipeline.batches_per_epoch() * settings.epochs, real = 0, padded = 0,
              count = 0;
      auto start = std::chrono::steady_clock::now();
      for (int64_t b = 0; b < total; ++b) {
        auto batch = pipeline.next();
        real += batch->real_frames;
        count += batch->size();
        padded += batch->padded_frames;
      }
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::cout << std::fixed << std::setprecision(1) << "numbuckets " << buckets << ": "
                << total / seconds << " batches/s (" << count / seconds
                << " examples/s), padding waste "
                << 100.0 * (static_cast<double>(padded) / std::max<int64_t>(1, real) - 1.0)
                << "% (padded/real frames - 1), peak RSS " << peak_rss_mb() << " MB\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_pipeline: error: " << e.what() << "\n";
    return 1;
  }
}
