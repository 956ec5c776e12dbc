// Whole `nabu train` runs on a synthetic corpus: the corpus, the tiny DC recipe options and the
// helpers the training-run and fault-injection tests share.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "test_helpers.h"

namespace nabu::testing {

// Two "speakers" per mixture: harmonic tones with their own pitch and a slow amplitude
// modulation, so the deep clustering targets are learnable. Written where the shipped recipes
// look for the generated corpus (data/corpus/2speakers/wav8k/min/{tr,cv,tt}) under `root`.
void make_tone_corpus(const fs::path& root, int train_mixtures = 16, int other_mixtures = 4);

// The shipped DC recipe.
std::string dc_recipe();
// The DC recipe made tiny and free of randomness that differs between runs of another shape
// (no input noise); deterministic, one thread. `extra` is appended.
std::string tiny_dc(const std::string& extra);

// A corpus with its stores, prepared once per test (each CTest test is its own process).
class TrainingRun : public ::testing::Test {
 protected:
  void SetUp() override;
  CommandResult train(const std::string& expdir, const std::string& extra);
  // The causal toy Conv-TasNet recipe (toy_ConvTasNet_causal_2spk) shrunk to a few hundred
  // parameters and trained `updates` updates per stage into `expdir`; `extra`: more flags.
  CommandResult train_small_causal_conv_tasnet(const std::string& expdir, int updates = 2,
                                               const std::string& extra = "");
  std::map<std::string, torch::Tensor> parameters(const std::string& checkpoint);
  TempDir dir_;
};

void expect_same_parameters(const std::map<std::string, torch::Tensor>& a,
                            const std::map<std::string, torch::Tensor>& b, double tolerance);
// A field of the training records by update number (the last record of each update).
std::map<int64_t, double> training_values_by_step(const fs::path& metrics,
                                                  const std::string& field);
// The training loss by update number.
std::map<int64_t, double> training_losses_by_step(const fs::path& metrics);
// Validation losses in the order they were logged.
std::vector<double> validation_losses(const fs::path& metrics);
// `nabu train --expdir=<expdir> <tiny_dc(options)>` in `dir`, killed without warning (SIGKILL)
// once its first stage logged three validations; fails the test when the run ended before or
// reached its second stage.
void kill_training_mid_first_stage(const TempDir& dir, const std::string& expdir,
                                   const std::string& options);
// Trains with `options` uninterrupted (exp_a) and killed in the middle of the first stage, then
// resumed (exp_b): both end bit-identical (parameters, losses of every update, val_sum.json).
void expect_resume_after_sigkill_bit_identical(const TempDir& dir, const std::string& options);
// Starts nabu in the background with its output in `log`; returns its pid.
pid_t spawn_nabu(const std::string& args, const fs::path& cwd, const fs::path& log);
// The same for a shell command (`exec`uted: the pid is the command's).
pid_t spawn_shell(const std::string& command, const fs::path& cwd, const fs::path& log);
using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Waits for a child; returns (exited normally, exit status or signal).
std::pair<bool, int> wait_child(pid_t pid);
// The pids of a process's children (the launcher's workers, rank order).
std::vector<pid_t> children_of(pid_t pid);
int count_lines_with(const fs::path& path, const std::string& text);
// Waits (up to `seconds`) until `path` has `count` lines containing `text`.
bool wait_for_lines(const fs::path& path, const std::string& text, int count, double seconds);

}  // namespace nabu::testing
