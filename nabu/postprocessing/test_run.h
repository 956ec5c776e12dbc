// The test of a trained experiment (`nabu test`, docs/trainer.md "Testing"): for every task of
// test_evaluator.cfg, the test loss, the separated signals (reconstructor.cfg) written as wavs
// and their scores (scorer.cfg) written as the original's results JSON, all in <expdir>/test/.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "nabu/core/recipe.h"

namespace nabu {

struct TestRunOptions {
  std::string task;                // only this task (default: [evaluator] tasks)
  bool allow_early_testing = false;  // the latest validated checkpoint of a running training
  std::string model = "final";       // "avg": model_avg.pt (average_checkpoints)
  int64_t max_utterances = -1;     // reconstructed and scored per task at most (-1 = all)
  // > 0: each test mixture is separated from its audio in chunks of this length, as `nabu
  // separate` does with long recordings (to measure what chunking costs), with the results in
  // <expdir>/test_chunks_<S>s/ (test_avg_chunks_<S>s/ with model avg) instead of <expdir>/test/; 0: whole utterances.
  double chunk_seconds = 0;
  double overlap_seconds = 1.0;
  // Receives each score table (per task and scorer) as soon as it is known.
  std::function<void(const std::string&)> on_summary;
};

// The problem with a test task section whose output_handling_type is not `reconstructor` (the
// original's speaker_verification is not built), naming file:line; empty when it is supported.
std::string unsupported_output_handling(const ConfigSection& task);

void run_test(const Recipe& recipe, const std::filesystem::path& expdir,
                       const TestRunOptions& options);

}  // namespace nabu
