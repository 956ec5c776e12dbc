// Where a stage's checkpoints are written, kept and read (docs/trainer.md, "Checkpoints and
// resume"): latest.pt (when the StageSchedule says, after every validation, at a signal and at
// the end), validated.pt (each new best validation), kept copies of latest.pt
// (keep_checkpoint_every_hours) and the model snapshots (ModelSnapshots). Only the chief writes;
// every rank reads.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nabu/core/experiment_layout.h"
#include "nabu/distributed/communicator.h"
#include "nabu/neuralnetworks/trainers/checkpoint.h"
#include "nabu/neuralnetworks/trainers/model_snapshots.h"
#include "nabu/neuralnetworks/trainers/stage_schedule.h"

namespace nabu {

class Checkpointer {
 public:
  // The checkpoint of the stage as it is now (parameters, state, positions, random state).
  using Snapshot = std::function<TrainingCheckpoint()>;

  // `optimizers`: their states go into every checkpoint and come back from every read.
  // `average_checkpoints`: ModelSnapshots' count of best models (chief only).
  Checkpointer(StageLayout layout, Communicator& communicator, const StageSchedule& schedule,
               std::vector<torch::optim::Optimizer*> optimizers, torch::Device device,
               int average_checkpoints);

  // latest.pt. The schedule's timers restart with it (so the saved state holds them restarted),
  // and a copy is kept when keep_checkpoint_every_hours says so.
  void write_latest(StageState& state, const Snapshot& snapshot);
  // validated.pt: the state a going back or the stage's end returns to.
  void write_validated(const Snapshot& snapshot);
  // validated.pt; `with_optimizer_state`: its optimizer states also replace the optimizers'.
  TrainingCheckpoint read_validated(bool with_optimizer_state = true) const;
  bool has_validated() const;
  // The checkpoint a resumed stage continues from (resumable_checkpoint), or nullopt; `note`
  // says why a newer one was passed over.
  std::optional<TrainingCheckpoint> read_resumable(std::string& note) const;

  // The chief's model snapshots (exports, best models, kept checkpoints); null on other ranks.
  ModelSnapshots* snapshots() { return snapshots_.get(); }
  const StageLayout& layout() const { return layout_; }

 private:
  void write(const std::filesystem::path& path, const TrainingCheckpoint& checkpoint);

  StageLayout layout_;
  Communicator& communicator_;
  const StageSchedule& schedule_;
  std::vector<torch::optim::Optimizer*> optimizers_;
  torch::Device device_;
  std::unique_ptr<ModelSnapshots> snapshots_;
};

}  // namespace nabu
