// A trainer runs one stage of the curriculum (docs/trainer.md): it is made by name through
// trainer_registry() from trainer.cfg's `trainer` key, like every other component. The
// original has one trainer, multi_task (MultiTaskTrainer).
#pragma once

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

struct RunSettings {
  uint64_t seed = 1234;
  bool resume = false;
  c10::Device device{c10::kCPU};  // where the models compute (trainer.cfg precision: options)
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

// The signal that asked the training to stop (SIGINT, SIGTERM, SIGUSR1; 0: none): at the next
// update boundary, which every rank of a distributed run agrees on, the chief writes a checkpoint
// and every rank stops with Interrupted (kExitInterrupted for SIGINT, else kExitPreempted).
extern volatile std::sig_atomic_t interrupt_requested;

}  // namespace nabu
