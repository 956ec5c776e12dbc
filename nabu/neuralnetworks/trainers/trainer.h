// A trainer runs one stage of the curriculum (docs/trainer.md): it is made by name through
// trainer_registry() from trainer.cfg's `trainer` key, like every other component. The
// original has one trainer, multi_task (MultiTaskTrainer).
#pragma once

#include <atomic>
#include <csignal>
#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "nabu/core/recipe.h"
#include "nabu/core/registry.h"
#include "nabu/core/training_summary.h"
#include "nabu/distributed/communicator.h"
#include "nabu/neuralnetworks/trainers/trainer_options.h"

namespace nabu {

// A request to stop a training: the signal that asked for it (SIGINT, SIGTERM, SIGUSR1; 0: none).
// `nabu train`'s signal handlers set the run's (training_run.cpp); every stage's trainer reads it
// at update boundaries, which every rank of a distributed run agrees on: the chief writes a
// checkpoint and every rank stops with Interrupted (kExitInterrupted for SIGINT, else
// kExitPreempted). Lock-free, so a signal handler may set it.
class StopRequest {
 public:
  // The first signal names the stop; later ones (a scheduler repeating SIGTERM) change nothing.
  void request(int signal_number) {
    int none = 0;
    signal_.compare_exchange_strong(none, signal_number);
  }
  int signal() const { return signal_.load(); }

 private:
  std::atomic<int> signal_{0};
};

struct RunSettings {
  uint64_t seed = 1234;
  bool resume = false;
  c10::Device device{c10::kCPU};  // where the models compute (trainer.cfg precision: options)
  const StopRequest* stop = nullptr;  // none: nothing stops the run but its schedule
};

struct StageResult {
  bool validated = false;
  double best_validation = 0;
  std::map<std::string, double> best_per_task;
  int64_t steps = 0;
  std::string stop_reason;
  StageOutcome outcome;  // what the stage handed back (its best step, what it started from)
};

// What a stage trainer is built from.
struct StageContext {
  const Recipe& recipe;
  const TrainerOptions& options;
  StageSettings stage;
  std::filesystem::path stage_dir;   // <expdir>/<segment length>
  std::filesystem::path init_model;  // empty: fresh initialisation
  Communicator& communicator;
  RunSettings settings;
};

class StageTrainer {
 public:
  virtual ~StageTrainer() = default;
  // Trains the stage to its end and writes <stage>/model/model.pt (the best validated model).
  virtual StageResult run() = 0;
};

using StageTrainerPtr = std::unique_ptr<StageTrainer>;
using TrainerRegistry = Registry<StageTrainerPtr, const StageContext&>;
TrainerRegistry& trainer_registry();

}  // namespace nabu
