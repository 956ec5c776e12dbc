#include "nabu/neuralnetworks/trainers/validation_policy.h"

#include <cmath>

#include "nabu/core/error.h"

namespace nabu {

ValidationPolicy::ValidationPolicy(ValidationPolicyOptions options) : options_(options) {
  if (options_.num_tracks < 1) throw Error("validation needs at least one track");
}

ValidationState ValidationPolicy::initial_state() const {
  ValidationState state;
  // The FIFO of relative improvements has num_tries entries (the original sizes it so).
  std::size_t fifo = options_.max_tries > 0 ? static_cast<std::size_t>(options_.max_tries) : 1;
  ValidationTrack track;
  track.relative.assign(fifo, ValidationTrack::kInitial);
  state.tracks.assign(options_.num_tracks, track);
  return state;
}

ValidationDecision ValidationPolicy::update(const std::vector<double>& losses, int64_t global_step,
                                            ValidationState& state) const {
  if (losses.size() != state.tracks.size())
    throw Error("validation produced " + std::to_string(losses.size()) + " losses for " +
                std::to_string(state.tracks.size()) + " tracks");
  ValidationDecision decision;
  ++state.count;
  bool any_worse = false;
  for (std::size_t i = 0; i < losses.size(); ++i) {
    ValidationTrack& track = state.tracks[i];
    double current = losses[i];
    // 1. relative improvement against the previous validation (the magnitude divides: a
    // validation_metric track holds negated scores, which are negative)
    track.relative.push_back((track.previous - current) / std::fabs(track.previous));
    track.relative.pop_front();
    // 2./3. worse or equal than the best: count a try; better: new best
    if (current >= track.best) {
      any_worse = true;
      decision.improved.push_back(false);
      ++track.tries;
      if (options_.max_tries > 0 && track.tries == options_.max_tries) {
        decision.terminate = true;
        decision.reason = "validation did not improve " + std::to_string(track.tries) +
                          " times in a row";
      }
      double total = 0;
      for (double value : track.relative) total += std::fabs(value);
      if (global_step > 1000 && total < 0.004) {
        decision.terminate = true;
        decision.reason = "relative improvements became too small";
      }
    } else {
      decision.improved.push_back(true);
      track.best = current;
      if (options_.reset_tries) track.tries = 0;
    }
    // 4.
    track.previous = current;
  }
  if (any_worse) {
    decision.go_back = options_.go_back && !decision.terminate;
    decision.halve_lr = options_.valid_adapt && !decision.terminate;
  }
  if (decision.halve_lr) state.lr_factor *= 0.5;
  // 6. going back keeps validated_step, so the next validation follows the restored state.
  if (!decision.go_back) state.validated_step = global_step;
  state.seconds_since_validation = 0;
  // 8. a new validated state only when every track has no pending tries.
  int pending = 0;
  for (const auto& track : state.tracks) pending += track.tries;
  decision.save_validated = pending == 0 && !decision.terminate;
  return decision;
}

double learning_rate(double initial, double decay, int64_t step, int64_t num_steps,
                     double lr_factor) {
  double progress = num_steps > 0 ? static_cast<double>(step) / static_cast<double>(num_steps) : 0.0;
  return initial * std::pow(decay, progress) * lr_factor;
}

int64_t steps_for_task(int num_epochs, int64_t examples, int batch_size,
                       int numbatches_to_aggregate, int world_size) {
  int64_t per_update = static_cast<int64_t>(batch_size) * std::max(1, numbatches_to_aggregate) *
                       std::max(1, world_size);
  return static_cast<int64_t>(num_epochs) * examples / per_update;
}

}  // namespace nabu
