// trainer.cfg [trainer] (SPEC §1.2, §2.a, §4.10, §4.17): one options struct, read in one place.
#pragma once

#include <string>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/core/options.h"

namespace nabu {

// The values of one stage of the segment-length curriculum.
struct StageSettings {
  std::string segment_length;  // "100", "full", ...
  int index = 0;
  int batch_size = 1;
  int numbatches_to_aggregate = 1;
  double initial_learning_rate = 1e-3;
  double learning_rate_decay = 1.0;
  int max_steps = -1;  // -1: as many as num_epochs give
};

struct TrainerOptions {
  std::string trainer = "multi_task";
  std::vector<std::string> tasks;
  std::vector<std::string> segment_lengths{"full"};
  int num_epochs = 100;
  std::vector<int> max_steps{-1};  // new: per stage cap on the updates, -1 = none
  std::vector<double> initial_learning_rate{1e-3};
  std::vector<double> learning_rate_decay{1.0};
  double clip_grad_value = 2e7;
  double clip_grad_norm = 0.0;  // new: global-norm clipping, 0 = off
  bool normalize_gradients = true;
  std::vector<int> batch_size{8};
  std::vector<int> numbatches_to_aggregate{1};
  int numbuckets = 1;
  bool shuffle = true;  // new: the original never shuffles (file order)
  int valid_frequency = 150;
  bool valid_adapt = false;
  bool go_back = false;
  std::string num_tries = "3";  // an integer, or None for no early stopping
  bool reset_tries = true;
  std::vector<double> task_weights;  // default: 1 per task
  bool acc_steps = false;
  bool normalize_weights_acc_steps = false;
  std::string init_file;
  double checkpoint_every = 10.0;  // minutes
  int progress_every = 10;         // steps between progress lines
  int prefetch = 4;                // batches the loader keeps ready

  void declare(OptionsReader& r);
  // Validates cross-key rules (list lengths, values); throws ConfigError naming the key.
  void validate(const ConfigSection& section) const;
  StageSettings stage(std::size_t index) const;
  std::size_t num_stages() const { return segment_lengths.size(); }
  // num_tries as an int; -1 when disabled (None).
  int max_tries() const;
  double task_weight(std::size_t task_index) const;
};

// Reads and validates [trainer] of trainer.cfg.
TrainerOptions read_trainer_options(const ConfigFile& trainer_cfg);

}  // namespace nabu
