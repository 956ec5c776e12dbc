// Every file and folder of an experiment directory (docs/trainer.md, "The experiment directory"), named in
// one place: the trainer, the test and separate commands, the sweeps and the tools all ask here.
#pragma once

#include <filesystem>
#include <string>

namespace nabu {

// <expdir>/<stage>/: one stage of the segment-length curriculum.
struct StageLayout {
  std::filesystem::path dir;

  std::filesystem::path trainer_cfg() const { return dir / "trainer.cfg"; }
  std::filesystem::path database_cfg() const { return dir / "database.cfg"; }
  std::filesystem::path metrics() const { return dir / "metrics.jsonl"; }
  // The stage's TensorBoard run: <expdir>/tensorboard/<stage>, so `tensorboard --logdir
  // <expdir>/tensorboard` shows the stages side by side.
  std::filesystem::path tensorboard_dir() const {
    return dir.parent_path() / "tensorboard" / dir.filename();
  }
  std::filesystem::path profile_dir() const { return dir / "profile"; }
  // Checkpoints: the latest (its previous version beside it), the last validated, kept copies.
  std::filesystem::path logdir() const { return dir / "logdir"; }
  std::filesystem::path latest() const { return logdir() / "latest.pt"; }
  std::filesystem::path latest_previous() const { return logdir() / "latest.pt.prev"; }
  std::filesystem::path validated() const { return logdir() / "validated.pt"; }
  std::filesystem::path kept_dir() const { return logdir() / "kept"; }
  // Models: the stage's best validated model, the average of the best, the best ones, exports.
  std::filesystem::path model_dir() const { return dir / "model"; }
  std::filesystem::path model() const { return model_dir() / "model.pt"; }
  std::filesystem::path average_model() const { return model_dir() / "model_avg.pt"; }
  std::filesystem::path best_dir() const { return model_dir() / "best"; }
  std::filesystem::path export_dir() const { return model_dir() / "export"; }
};

struct ExperimentLayout {
  std::filesystem::path root;

  StageLayout stage(const std::string& segment_length) const { return {root / segment_length}; }
  // The recipe copy's marker (Recipe::save_copy) and the statistics copied into it.
  std::filesystem::path record() const { return root / "experiment.json"; }
  std::filesystem::path statistics_dir() const { return root / "statistics"; }
  std::filesystem::path log() const { return root / "run.log"; }
  std::filesystem::path val_sum() const { return root / "val_sum.json"; }
  // What each stage handed back (core/training_summary.h).
  std::filesystem::path training_summary() const { return root / "training_summary.json"; }
  // Every stage's TensorBoard run (StageLayout::tensorboard_dir).
  std::filesystem::path tensorboard_dir() const { return root / "tensorboard"; }
  std::filesystem::path train_options() const { return root / "train_options.json"; }
  std::filesystem::path overrides() const { return root / "overrides.txt"; }
  // The identity of every store the experiment read (processing/store_record.h).
  std::filesystem::path stores_record() const { return root / "stores.json"; }
  // The model nabu test and nabu separate use by default: the last stage's.
  std::filesystem::path final_model() const { return stage("full").model(); }
};

}  // namespace nabu
