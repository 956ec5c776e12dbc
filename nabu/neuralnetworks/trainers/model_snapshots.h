// Model files a stage keeps besides its checkpoints (docs/trainer.md, "Model files"): the N best
// validated models and their average (average_checkpoints, as ESPnet, SpeechBrain and icefall
// offer), a snapshot every N updates (export_every), and a checkpoint kept every H hours
// (keep_checkpoint_every_hours, as TensorFlow's Saver). Only the chief writes them; when the last
// two are due is the StageSchedule's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "nabu/neuralnetworks/models/model_bank.h"

namespace nabu {


class ModelSnapshots {
 public:
  // `stage_dir`: <expdir>/<stage>. The best models live in <stage>/model/best/ with an index
  // (best.json) so a resumed stage goes on ranking them.
  // `average_checkpoints`: how many best validated models to keep and average (0 = off).
  ModelSnapshots(std::filesystem::path stage_dir, int average_checkpoints);

  // A validation with `loss` (lower is better) at `step`: the model is kept when it is among
  // the N best so far; the one it pushes out is deleted.
  void validated(double loss, int64_t step, const ModelBank& bank);
  // <stage>/model/export/model_step<step>.pt.
  void export_model(int64_t step, const ModelBank& bank) const;
  // A copy of `checkpoint` in <stage>/logdir/kept/.
  void keep_checkpoint(const std::filesystem::path& checkpoint, int64_t step) const;
  // <stage>/model/model_avg.pt: the element-wise mean of the kept best models. Returns how many
  // were averaged (0: nothing written).
  int write_average() const;

  struct Kept {
    int64_t step = 0;
    double loss = 0;
    std::string file;  // in the best/ folder
  };
  const std::vector<Kept>& best() const { return best_; }

 private:
  void save_index() const;

  std::filesystem::path stage_dir_, best_dir_;
  int average_checkpoints_;
  std::vector<Kept> best_;  // ascending loss
};

// The element-wise mean of model parameter files (same names and shapes; an Error names the
// first file that differs).
std::map<std::string, torch::Tensor> average_parameter_files(
    const std::vector<std::filesystem::path>& files);

}  // namespace nabu
