// The test of a trained experiment (`nabu test`, docs/trainer.md "Testing"): for every task of
// test_evaluator.cfg, the test loss, the separated signals (reconstructor.cfg) written as wavs
// and their scores (scorer.cfg) written as the original's results JSON, all in <expdir>/test/.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "nabu/core/recipe.h"

namespace nabu {

struct ChunkModel;

struct TestRunOptions {
  std::string task;                // only this task (default: [evaluator] tasks)
  bool allow_early_testing = false;  // the latest validated checkpoint of a running training
  std::string model = "final";       // "avg": model_avg.pt (average_checkpoints)
  // Reconstructed and scored per task at most (-1 = all); a subset's results go to
  // <expdir>/test_first<N>/ (after the other suffixes), never over the full results.
  int64_t max_utterances = -1;
  // > 0: each test mixture is separated from its audio in chunks of this length, as `nabu
  // separate` does with long recordings (to measure what chunking costs), with the results in
  // <expdir>/test_chunks_<S>s/ (test_avg_chunks_<S>s/ with model avg) instead of <expdir>/test/; 0: whole utterances.
  double chunk_seconds = 0;
  double overlap_seconds = 1.0;
  c10::Device device{c10::kCPU};  // where the models compute (--device)
  uint64_t seed = 1234;  // speaker-verification trials are drawn from it (--seed)
  // Receives each score table (per task and scorer) as soon as it is known.
  std::function<void(const std::string&)> on_summary;
};

// The problem with a test task section whose output_handling_type is neither `reconstructor`
// nor `speaker_verification`, naming file:line; empty when it is supported.
std::string unsupported_output_handling(const ConfigSection& task);

// The results folder of `options` under the experiment: test, then _avg, _chunks_<S>s and
// _first<N> as --model=avg, --chunk-seconds and --max-utterances ask.
std::string test_folder_name(const TestRunOptions& options);

// Writes into a temporary sibling that replaces <expdir>/<test_folder_name> when the run is done.
void run_test(const Recipe& recipe, const std::filesystem::path& expdir,
              const TestRunOptions& options);

// The test of an exported model (a shipped one: `nabu test --model=<name> --recipe=R`): every
// separation task of R's test_evaluator.cfg (or options.task), its mixtures read from the audio
// of scorer.cfg's base list, separated whole (or in chunks of options.chunk_seconds) and scored
// by scorer.cfg, into <expdir>/<test_folder_name> (options.model names the model); no test loss.
// Every task is checked before any folder is made.
void run_exported_test(const Recipe& recipe, const ChunkModel& model,
                       const std::filesystem::path& expdir, const TestRunOptions& options);

}  // namespace nabu
