#include "nabu/neuralnetworks/trainers/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>

#include <sstream>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/strings.h"

namespace nabu {

namespace {

torch::Tensor scalar(int64_t value) { return torch::tensor({value}, torch::kLong); }
torch::Tensor scalar(double value) { return torch::tensor({value}, torch::kFloat64); }

int64_t read_int(torch::serialize::InputArchive& archive, const std::string& key) {
  torch::Tensor tensor;
  archive.read(key, tensor);
  return tensor.item<int64_t>();
}

double read_double(torch::serialize::InputArchive& archive, const std::string& key) {
  torch::Tensor tensor;
  archive.read(key, tensor);
  return tensor.item<double>();
}

// StageState::for_each_saved's visitors: one writes every field under its key, the other reads
// it back (a field that is not required reads as 0 when the checkpoint predates it).
struct StateWriter {
  torch::serialize::OutputArchive& archive;
  void operator()(const std::string& key, int64_t& value, bool) { archive.write(key, scalar(value)); }
  void operator()(const std::string& key, int& value, bool) {
    archive.write(key, scalar(static_cast<int64_t>(value)));
  }
  void operator()(const std::string& key, double& value, bool) { archive.write(key, scalar(value)); }
  void operator()(const std::string& key, std::deque<double>& values, bool) {
    archive.write(key, torch::tensor(std::vector<double>(values.begin(), values.end()),
                                     torch::kFloat64));
  }
  void operator()(const std::string& key, std::vector<ValidationTrack>& tracks, bool) {
    archive.write(key, scalar(static_cast<int64_t>(tracks.size())));
    for (std::size_t i = 0; i < tracks.size(); ++i)
      tracks[i].for_each_saved([&](const std::string& field, auto& value, bool required) {
        (*this)(track_key(i, field), value, required);
      });
  }
  static std::string track_key(std::size_t i, const std::string& field) {
    return "validation/track" + std::to_string(i) + "/" + field;
  }
};

struct StateReader {
  torch::serialize::InputArchive& archive;
  torch::Tensor read(const std::string& key, bool required) {
    torch::Tensor value;
    if (required) {
      archive.read(key, value);
    } else if (!archive.try_read(key, value)) {
      value = torch::zeros({1}, torch::kFloat64);
    }
    return value;
  }
  void operator()(const std::string& key, int64_t& value, bool required) {
    value = required ? read_int(archive, key) : static_cast<int64_t>(read(key, false).item<double>());
  }
  void operator()(const std::string& key, int& value, bool required) {
    value = static_cast<int>(read(key, required).item<int64_t>());
  }
  void operator()(const std::string& key, double& value, bool required) {
    value = required ? read_double(archive, key) : read(key, false).item<double>();
  }
  void operator()(const std::string& key, std::deque<double>& values, bool required) {
    auto tensor = read(key, required).to(torch::kFloat64).contiguous();
    values.assign(tensor.data_ptr<double>(), tensor.data_ptr<double>() + tensor.numel());
  }
  void operator()(const std::string& key, std::vector<ValidationTrack>& tracks, bool) {
    tracks.assign(static_cast<std::size_t>(read_int(archive, key)), ValidationTrack{});
    for (std::size_t i = 0; i < tracks.size(); ++i)
      tracks[i].for_each_saved([&](const std::string& field, auto& value, bool required) {
        (*this)(StateWriter::track_key(i, field), value, required);
      });
  }
};

}  // namespace

std::optional<std::filesystem::path> resumable_checkpoint(const StageLayout& stage,
                                                          std::string* note) {
  std::vector<std::string> skipped;
  for (const auto& path : {stage.latest(), stage.latest_previous(), stage.validated()}) {
    const std::string name = path.filename().string();
    if (!std::filesystem::exists(path)) {
      skipped.push_back(std::string(name) + " is missing");
      continue;
    }
    try {
      load_checkpoint(path, {});
    } catch (const Error& e) {
      skipped.push_back(std::string(name) + " is unreadable (" +
                        std::string(e.what()).substr(0, 160) + ")");
      continue;
    }
    if (note)
      *note = skipped.empty() || path == stage.latest()
                  ? ""
                  : "resuming from " + path.string() + ": " + join(skipped, ", ");
    return path;
  }
  return std::nullopt;
}

void remove_stale_temporaries(const std::filesystem::path& directory) {
  std::error_code ec;
  if (!std::filesystem::is_directory(directory, ec)) return;
  for (const auto& entry : std::filesystem::directory_iterator(directory, ec))
    if (entry.path().filename().string().find(".tmp.") != std::string::npos)
      std::filesystem::remove_all(entry.path(), ec);
}

torch::Tensor rng_state(const torch::Device& device) {
  at::Generator generator = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void set_rng_state(const torch::Tensor& state, const torch::Device& device) {
  at::Generator generator = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

void save_checkpoint(const std::filesystem::path& path, const TrainingCheckpoint& checkpoint,
                     const std::vector<torch::optim::Optimizer*>& optimizers) {
  torch::serialize::OutputArchive archive;
  archive.write("meta/num_steps", scalar(checkpoint.num_steps));
  archive.write("meta/finished", scalar(static_cast<int64_t>(checkpoint.finished)));
  archive.write("meta/stage", c10::IValue(checkpoint.stage));
  StageState state = checkpoint.state;
  state.for_each_saved(StateWriter{archive});
  std::vector<std::string> position_names;
  for (const auto& [name, position] : checkpoint.positions) {
    archive.write("positions/" + name, torch::tensor({position.epoch, position.batch}, torch::kLong));
    position_names.push_back(name);
  }
  archive.write("positions/names", c10::IValue(c10::List<std::string>(position_names)));
  std::vector<std::string> parameter_names;
  for (const auto& [name, tensor] : checkpoint.parameters) {
    archive.write("parameters/" + name, tensor);
    parameter_names.push_back(name);
  }
  archive.write("parameters/names", c10::IValue(c10::List<std::string>(parameter_names)));
  archive.write("rng", checkpoint.rng_state);
  if (checkpoint.device_rng_state.defined())
    archive.write("rng_device", checkpoint.device_rng_state);
  if (checkpoint.loss_scale > 0) {
    archive.write("precision/loss_scale", scalar(checkpoint.loss_scale));
    archive.write("precision/good_steps", scalar(checkpoint.loss_scale_good_steps));
  }
  archive.write("optimizers", scalar(static_cast<int64_t>(optimizers.size())));
  for (std::size_t i = 0; i < optimizers.size(); ++i) {
    torch::serialize::OutputArchive sub;
    optimizers[i]->save(sub);
    archive.write("optimizer/" + std::to_string(i), sub);
  }
  ensure_directory(path.parent_path());
  // Serialised in memory and written by us: LibTorch's own file writer aborts the process when
  // a write fails (its destructor throws), and a full disk must be an error, not a crash.
  std::ostringstream buffer;
  archive.save_to(buffer);
  const std::string bytes = buffer.str();
  AtomicPath target(path);
  try {
    write_file(target.temporary(), bytes);
    // Read back before it replaces the previous one: only complete bytes may win.
    if (read_file(target.temporary()) != bytes) throw Error("the bytes read back differ");
  } catch (const Error& e) {
    throw Error("checkpoint " + path.string() + " cannot be written (" +
                std::string(e.what()).substr(0, 240) + "); the previous checkpoint is kept");
  }
  // Keep the previous checkpoint: a crash while writing never leaves us without one.
  std::error_code ec;
  if (std::filesystem::exists(path, ec))
    std::filesystem::rename(path, path.string() + ".prev", ec);
  target.commit();
}

TrainingCheckpoint load_checkpoint(const std::filesystem::path& path,
                                   const std::vector<torch::optim::Optimizer*>& optimizers,
                                   const torch::Device& device) {
  TrainingCheckpoint checkpoint;
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path.string(), device);
    checkpoint.num_steps = read_int(archive, "meta/num_steps");
    checkpoint.finished = read_int(archive, "meta/finished") != 0;
    c10::IValue stage;
    archive.read("meta/stage", stage);
    checkpoint.stage = stage.toStringRef();
    checkpoint.state.for_each_saved(StateReader{archive});
    c10::IValue names;
    archive.read("positions/names", names);
    for (const auto& name : names.toListRef()) {
      torch::Tensor position;
      archive.read("positions/" + name.toStringRef(), position);
      checkpoint.positions[name.toStringRef()] =
          PipelinePosition{position[0].item<int64_t>(), position[1].item<int64_t>()};
    }
    archive.read("parameters/names", names);
    for (const auto& name : names.toListRef()) {
      torch::Tensor tensor;
      archive.read("parameters/" + name.toStringRef(), tensor);
      checkpoint.parameters[name.toStringRef()] = tensor;
    }
    archive.read("rng", checkpoint.rng_state);
    checkpoint.rng_state = checkpoint.rng_state.cpu();
    if (archive.try_read("rng_device", checkpoint.device_rng_state))
      checkpoint.device_rng_state = checkpoint.device_rng_state.cpu();
    auto optional_double = [&](const std::string& key) {
      torch::Tensor value;
      return archive.try_read(key, value) ? value.item<double>() : 0.0;
    };
    checkpoint.loss_scale = optional_double("precision/loss_scale");
    checkpoint.loss_scale_good_steps =
        static_cast<int64_t>(optional_double("precision/good_steps"));
    int64_t count = read_int(archive, "optimizers");
    if (!optimizers.empty()) {
      if (count != static_cast<int64_t>(optimizers.size()))
        throw Error("it has " + std::to_string(count) + " optimizers, this run builds " +
                    std::to_string(optimizers.size()));
      for (std::size_t i = 0; i < optimizers.size(); ++i) {
        torch::serialize::InputArchive sub;
        archive.read("optimizer/" + std::to_string(i), sub);
        optimizers[i]->load(sub);
      }
    }
  } catch (const c10::Error& e) {
    throw Error("checkpoint " + path.string() + " cannot be read: " + e.what_without_backtrace());
  } catch (const Error& e) {
    throw Error("checkpoint " + path.string() + ": " + e.what());
  }
  return checkpoint;
}

}  // namespace nabu
