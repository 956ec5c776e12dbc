// The segment-length curriculum (docs/trainer.md, "Stages"): one stage per value of trainer.cfg's
// segment_lengths, in order, each with its own <expdir>/<stage>/ (trainer.cfg and database.cfg
// of the stage, metrics, logdir, model). A stage starts from init_file (the first) or the
// previous stage's model, resumes from its own checkpoint, or is skipped when it finished before
// (except full). The best validation losses go to <expdir>/val_sum.json.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <vector>

#include "nabu/core/recipe.h"
#include "nabu/distributed/communicator.h"
#include "nabu/neuralnetworks/trainers/trainer_options.h"

namespace nabu {

class StopRequest;

struct CurriculumSettings {
  const StopRequest* stop = nullptr;  // the run's (RunSettings::stop)
  uint64_t seed = 1234;  // stage i uses seed + i
  bool resume = false;   // continue stages from their latest checkpoint
  // --max-steps: one value for every stage or one per stage (-1 = the recipe's max_steps)
  std::vector<int64_t> max_steps;
  c10::Device device{c10::kCPU};  // --device or trainer.cfg's device, resolved
};

void run_curriculum(const Recipe& recipe, const std::filesystem::path& expdir,
                    const CurriculumSettings& settings, Communicator& communicator);

}  // namespace nabu
