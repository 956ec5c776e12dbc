// Everything needed to continue a stage exactly: parameters, optimizer states, the stage's
// schedule state (step, validation state with the learning-rate factor, training time and
// timers), pipeline positions and the RNG state. Written to a
// temporary file, read back completely (a full disk or a cut write never replaces a good
// checkpoint), then renamed; the previous checkpoint is kept as <name>.prev.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nabu/core/experiment_layout.h"
#include "nabu/neuralnetworks/trainers/stage_schedule.h"
#include "nabu/pipeline/input_pipeline.h"

namespace nabu {

struct TrainingCheckpoint {
  std::string stage;
  int64_t num_steps = 0;
  bool finished = false;  // the stage ended (early stop or step limit)
  StageState state;       // without its this-run-only fields
  std::map<std::string, PipelinePosition> positions;  // "<task>/<linked set>"
  std::map<std::string, torch::Tensor> parameters;    // bank parameters and buffers by name
  torch::Tensor rng_state;                            // CPU generator state
  // The GPU's generator state (dropout on a GPU draws from it); undefined for a CPU run.
  torch::Tensor device_rng_state;
  double loss_scale = 0;               // fp16's loss scale; 0: no fp16
  int64_t loss_scale_good_steps = 0;   // updates since the scale last changed
};

// Writes `checkpoint` plus the optimizers' states (archive "optimizer/<i>") to `path`.
void save_checkpoint(const std::filesystem::path& path, const TrainingCheckpoint& checkpoint,
                     const std::vector<torch::optim::Optimizer*>& optimizers);
// Reads a checkpoint; loads the optimizers' states when given (they must be built alike). Its
// tensors come onto `device`, wherever they were written: a checkpoint written on a GPU resumes on
// the CPU and the other way round (the generator states stay on the CPU).
TrainingCheckpoint load_checkpoint(const std::filesystem::path& path,
                                   const std::vector<torch::optim::Optimizer*>& optimizers,
                                   const torch::Device& device = torch::kCPU);

// The checkpoint a resumed stage continues from: latest.pt, else latest.pt.prev, else
// validated.pt, the first that exists and reads completely. `note` (when given) receives a
// line saying which was taken and why the newer ones were not; empty when latest.pt was fine.
// nullopt when there is none.
std::optional<std::filesystem::path> resumable_checkpoint(const StageLayout& stage,
                                                          std::string* note = nullptr);

// Removes the temporary files a killed writer left in `directory` ("<name>.tmp.<pid>.<n>").
void remove_stale_temporaries(const std::filesystem::path& directory);

// The state of `device`'s default generator (input noise and dropout draw from it) and its
// restore; the state tensor is always on the CPU.
torch::Tensor rng_state(const torch::Device& device = torch::kCPU);
void set_rng_state(const torch::Tensor& state, const torch::Device& device = torch::kCPU);

}  // namespace nabu
