#include "nabu/neuralnetworks/trainers/model_snapshots.h"

#include <algorithm>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include "nabu/core/error.h"
#include "nabu/core/experiment_layout.h"
#include "nabu/core/fs.h"

namespace nabu {

ModelSnapshots::ModelSnapshots(std::filesystem::path stage_dir, int average_checkpoints)
    : stage_dir_(std::move(stage_dir)), best_dir_(StageLayout{stage_dir_}.best_dir()),
      average_checkpoints_(average_checkpoints) {
  auto index = best_dir_ / "best.json";
  if (average_checkpoints_ <= 0 || !std::filesystem::exists(index)) return;
  try {
    for (const auto& entry : nlohmann::json::parse(read_file(index)))
      if (std::filesystem::exists(best_dir_ / entry.at("file").get<std::string>()))
        best_.push_back({entry.at("step").get<int64_t>(), entry.at("loss").get<double>(),
                         entry.at("file").get<std::string>()});
  } catch (const nlohmann::json::exception& e) {
    throw Error(index.string() + ": unreadable (" + e.what() + "); remove it to start ranking anew");
  }
}

void ModelSnapshots::validated(double loss, int64_t step, const ModelBank& bank) {
  const std::size_t keep = static_cast<std::size_t>(std::max(0, average_checkpoints_));
  if (keep == 0) return;
  // A step validated again (after going back) replaces its earlier entry.
  best_.erase(std::remove_if(best_.begin(), best_.end(),
                             [&](const Kept& kept) { return kept.step == step; }),
              best_.end());
  if (best_.size() >= keep && loss >= best_.back().loss) return;
  Kept entry{step, loss, "model_step" + std::to_string(step) + ".pt"};
  bank.save(best_dir_ / entry.file);
  best_.insert(std::upper_bound(best_.begin(), best_.end(), entry,
                                [](const Kept& a, const Kept& b) { return a.loss < b.loss; }),
               entry);
  while (best_.size() > keep) {
    std::error_code ec;
    std::filesystem::remove(best_dir_ / best_.back().file, ec);
    best_.pop_back();
  }
  save_index();
}

void ModelSnapshots::save_index() const {
  nlohmann::json index = nlohmann::json::array();
  for (const auto& kept : best_)
    index.push_back({{"step", kept.step}, {"loss", kept.loss}, {"file", kept.file}});
  write_file_atomic(best_dir_ / "best.json", index.dump(1) + "\n");
}

void ModelSnapshots::export_model(int64_t step, const ModelBank& bank) const {
  bank.save(StageLayout{stage_dir_}.export_dir() / ("model_step" + std::to_string(step) + ".pt"));
}

void ModelSnapshots::keep_checkpoint(const std::filesystem::path& checkpoint,
                                     int64_t step) const {
  auto kept = StageLayout{stage_dir_}.kept_dir() /
              (checkpoint.stem().string() + "_step" + std::to_string(step) + ".pt");
  write_file_atomic(kept, read_file(checkpoint));
  logger().info("kept {}", kept.string());
}

int ModelSnapshots::write_average() const {
  if (average_checkpoints_ <= 0 || best_.empty()) return 0;
  std::vector<std::filesystem::path> files;
  for (const auto& kept : best_) files.push_back(best_dir_ / kept.file);
  write_parameter_file(StageLayout{stage_dir_}.average_model(), average_parameter_files(files));
  return static_cast<int>(files.size());
}

std::map<std::string, torch::Tensor> average_parameter_files(
    const std::vector<std::filesystem::path>& files) {
  if (files.empty()) throw Error("no model files to average");
  std::map<std::string, torch::Tensor> sum;
  std::map<std::string, torch::ScalarType> types;
  for (const auto& [name, tensor] : read_parameter_file(files.front())) {
    sum[name] = tensor.to(torch::kFloat64);
    types[name] = tensor.scalar_type();
  }
  for (std::size_t i = 1; i < files.size(); ++i) {
    auto tensors = read_parameter_file(files[i]);
    if (tensors.size() != sum.size())
      throw Error(files[i].string() + " has " + std::to_string(tensors.size()) +
                  " parameters, " + files.front().string() + " " + std::to_string(sum.size()));
    for (auto& [name, total] : sum) {
      auto it = tensors.find(name);
      if (it == tensors.end() || it->second.sizes() != total.sizes())
        throw Error(files[i].string() + ": parameter " + name +
                    (it == tensors.end() ? " is missing" : " has another shape"));
      total += it->second.to(torch::kFloat64);
    }
  }
  std::map<std::string, torch::Tensor> mean;
  for (auto& [name, total] : sum)
    mean[name] = (total / static_cast<double>(files.size())).to(types.at(name));
  return mean;
}

}  // namespace nabu
