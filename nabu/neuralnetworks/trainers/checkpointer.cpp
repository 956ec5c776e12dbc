#include "nabu/neuralnetworks/trainers/checkpointer.h"

#include "nabu/core/fs.h"

namespace nabu {

Checkpointer::Checkpointer(StageLayout layout, Communicator& communicator,
                           const StageSchedule& schedule,
                           std::vector<torch::optim::Optimizer*> optimizers, torch::Device device,
                           int average_checkpoints)
    : layout_(std::move(layout)), communicator_(communicator), schedule_(schedule),
      optimizers_(std::move(optimizers)), device_(device) {
  ensure_directory(layout_.logdir());
  ensure_directory(layout_.model_dir());
  if (communicator_.is_chief()) {
    snapshots_ = std::make_unique<ModelSnapshots>(layout_.dir, average_checkpoints);
    remove_stale_temporaries(layout_.logdir());
  }
}

void Checkpointer::write(const std::filesystem::path& path, const TrainingCheckpoint& checkpoint) {
  communicator_.tick();
  save_checkpoint(path, checkpoint, optimizers_);
  communicator_.tick();
}

void Checkpointer::write_latest(StageState& state, const Snapshot& snapshot) {
  const bool keep = snapshots_ && schedule_.keep_checkpoint_now(state);
  StageSchedule::checkpointed(state);
  if (keep) StageSchedule::kept(state);
  write(layout_.latest(), snapshot());
  if (keep) snapshots_->keep_checkpoint(layout_.latest(), state.step);
}

void Checkpointer::write_validated(const Snapshot& snapshot) {
  write(layout_.validated(), snapshot());
}

TrainingCheckpoint Checkpointer::read_validated(bool with_optimizer_state) const {
  if (!with_optimizer_state) return load_checkpoint(layout_.validated(), {});
  return load_checkpoint(layout_.validated(), optimizers_, device_);
}

bool Checkpointer::has_validated() const { return std::filesystem::exists(layout_.validated()); }

std::optional<TrainingCheckpoint> Checkpointer::read_resumable(std::string& note) const {
  auto path = resumable_checkpoint(layout_, &note);
  if (!path) return std::nullopt;
  return load_checkpoint(*path, optimizers_, device_);
}

}  // namespace nabu
