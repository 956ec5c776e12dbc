// ModelBank: one model per name of model.cfg's [hyper] model_names (docs/models.md). Every node and
// task that names a model uses this one instance, so the same name shares weights and different
// names never do. Parameters are created lazily on a model's first call (see model.h): run one
// forward pass on a small batch (ModelGraph::materialize) before creating optimizers or loading.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/neuralnetworks/models/model.h"

namespace nabu {

// Whether model.cfg is in the original's older single-model format ([io] or [model], no [hyper];
// Nabu-MSSS until November 2017): refused here, converted by `nabu recipe upgrade`.
bool is_single_model_format(const ConfigFile& model_cfg);

// What a (partial) load did, by "<model>.<parameter path>" name.
struct ParameterLoadReport {
  std::vector<std::string> loaded;
  std::vector<std::pair<std::string, std::string>> skipped;  // file entry, reason
  std::vector<std::string> missing;  // bank parameters the file did not provide
  bool complete() const { return skipped.empty() && missing.empty(); }
  std::string summary() const;  // one line per skipped/missing entry after a count line
};

// A model parameter file: every parameter by name, a dict of tensors that torch::pickle_load
// and Python's torch.load read. Written atomically; reading names the file in errors. Reading
// also takes an HDF5 file of float datasets named as the parameters, at its root (what
// tools/convert_tf_checkpoint makes of the original's TensorFlow checkpoints).
void write_parameter_file(const std::filesystem::path& path,
                          const std::map<std::string, torch::Tensor>& parameters);
std::map<std::string, torch::Tensor> read_parameter_file(const std::filesystem::path& path);

class ModelBank {
 public:
  // Creates (without building) every model of [hyper] model_names. Throws ConfigError naming
  // file:line for a missing section, an unknown architecture or a bad key.
  explicit ModelBank(const ConfigFile& model_cfg);

  // The problems of model.cfg, without creating anything (for `nabu check`).
  static std::vector<std::string> check(const ConfigFile& model_cfg);

  const std::vector<std::string>& names() const { return names_; }
  bool has(const std::string& name) const { return models_.count(name) > 0; }
  // Throws Error with a suggestion for an unknown name.
  const ModelPtr& get(const std::string& name) const;
  Model& at(const std::string& name) const { return *get(name); }

  // Models among `names` (all when empty) whose parameters do not exist yet.
  std::vector<std::string> unbuilt(const std::set<std::string>& names = {}) const;

  // The parameters of the models among `names` (all when empty), in a fixed order. With
  // trainable_only, models with trainable = False contribute nothing.
  std::vector<torch::Tensor> parameters(const std::set<std::string>& names = {},
                                        bool trainable_only = true) const;
  // "<model>.<parameter path>" -> parameter, models in model_names order.
  std::vector<std::pair<std::string, torch::Tensor>> named_parameters(
      const std::set<std::string>& names = {}) const;
  int64_t parameter_count(const std::string& name) const;

  // Lines for the log: per model its architecture, parameter tensors with shapes and counts.
  std::string summary() const;

  // Every parameter by name into one file, written atomically (a dict of tensors that
  // torch::pickle_load and Python's torch.load read). Unbuilt models are an Error.
  void save(const std::filesystem::path& path) const;
  // Loads a file written by save(). A parameter is loaded only when its name exists in the bank
  // and the shapes match; everything else is reported. strict: anything not loaded, or a bank
  // parameter not in the file, is an Error (nothing is changed then).
  ParameterLoadReport load(const std::filesystem::path& path, bool strict = false);
  // The same from tensors in memory (e.g. the best model kept by the trainer).
  ParameterLoadReport load_tensors(const std::map<std::string, torch::Tensor>& tensors,
                                   bool strict = false);
  // Copies of all parameters by name (for keeping a best model in memory), on device().
  std::map<std::string, torch::Tensor> state() const;

  // Moves every model's parameters and buffers to `device` (the tensors stay the same objects,
  // so optimizers built before keep them). Models are built on the CPU, from the same random
  // numbers on every device, and moved after; a model built later is built on the CPU again
  // (move the bank to the CPU, run its first forward pass, move it back).
  void to(const torch::Device& device);
  // Where the models compute: batches are moved here before a forward pass.
  const torch::Device& device() const { return device_; }

 private:
  std::vector<std::string> names_;
  std::map<std::string, ModelPtr> models_;
  torch::Device device_{torch::kCPU};
};

}  // namespace nabu
