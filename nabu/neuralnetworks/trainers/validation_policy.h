// The validation rules of the original MultiTaskTrainer (docs/trainer.md, "Validation"), as a
// small pure state machine: (validation losses, state) -> decision. When a validation is due is
// the StageSchedule's.
// One track per validation task with validate_per_task, else one track for the weighted total.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace nabu {

struct ValidationPolicyOptions {
  int max_tries = 3;  // -1: never stop on the count of tries (num_tries = None)
  bool reset_tries = true;
  bool valid_adapt = false;  // halve the learning rate when worse
  bool go_back = false;      // return to the last validated state when worse
  int num_tracks = 1;
};

struct ValidationTrack {
  static constexpr double kInitial = 1.79e308;  // the original's "infinite" start value
  double best = kInitial;
  double previous = kInitial;
  std::deque<double> relative;  // last num_tries relative improvements
  int tries = 0;
  // Every field with its key in the checkpoint (StageState::for_each_saved).
  template <typename Visit>
  void for_each_saved(Visit&& visit) {
    visit("best", best, true);
    visit("previous", previous, true);
    visit("tries", tries, true);
    visit("relative", relative, true);
  }
};

struct ValidationState {
  std::vector<ValidationTrack> tracks;
  int64_t validated_step = 0;
  double seconds_since_validation = 0;  // training time since the last validation
  double lr_factor = 1.0;
  int64_t count = 0;  // validations made in the stage (training_summary.json)
  bool initialised() const { return !tracks.empty(); }
};

struct ValidationDecision {
  std::vector<bool> improved;  // per track
  bool terminate = false;      // restore the best state and stop
  bool go_back = false;        // restore the last validated state and continue
  bool halve_lr = false;
  bool save_validated = false;  // this is the new best state: save it
  std::string reason;           // why terminate (for the log)
};

class ValidationPolicy {
 public:
  explicit ValidationPolicy(ValidationPolicyOptions options);
  // Fresh tracks (StageSchedule::initial_validation sets when the first validation is due).
  ValidationState initial_state() const;
  // Applies one validation (losses: one per track) at `global_step` and updates `state`.
  ValidationDecision update(const std::vector<double>& losses, int64_t global_step,
                            ValidationState& state) const;
  const ValidationPolicyOptions& options() const { return options_; }

 private:
  ValidationPolicyOptions options_;
};

// The learning rate of the original: initial * decay^(step / num_steps) * lr_factor
// (tf.train.exponential_decay without staircase).
double learning_rate(double initial, double decay, int64_t step, int64_t num_steps,
                     double lr_factor);

// (num_epochs * examples) // (batch_size * numbatches_to_aggregate * world_size), docs/trainer.md.
int64_t steps_for_task(int num_epochs, int64_t examples, int batch_size,
                       int numbatches_to_aggregate, int world_size = 1);

}  // namespace nabu
