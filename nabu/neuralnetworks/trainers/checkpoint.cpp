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
  archive.write("meta/step", scalar(checkpoint.state.step));
  archive.write("meta/num_steps", scalar(checkpoint.num_steps));
  archive.write("meta/finished", scalar(static_cast<int64_t>(checkpoint.finished)));
  archive.write("meta/stage", c10::IValue(checkpoint.stage));
  archive.write("schedule/train_seconds", scalar(checkpoint.state.train_seconds));
  archive.write("schedule/seconds_since_kept", scalar(checkpoint.state.seconds_since_kept));
  const auto& validation = checkpoint.state.validation;
  archive.write("validation/validated_step", scalar(validation.validated_step));
  archive.write("validation/lr_factor", scalar(validation.lr_factor));
  archive.write("validation/seconds_since", scalar(validation.seconds_since_validation));
  archive.write("validation/count", scalar(validation.count));
  archive.write("validation/tracks", scalar(static_cast<int64_t>(validation.tracks.size())));
  for (std::size_t i = 0; i < validation.tracks.size(); ++i) {
    const auto& track = validation.tracks[i];
    std::string prefix = "validation/track" + std::to_string(i) + "/";
    archive.write(prefix + "best", scalar(track.best));
    archive.write(prefix + "previous", scalar(track.previous));
    archive.write(prefix + "tries", scalar(static_cast<int64_t>(track.tries)));
    std::vector<double> relative(track.relative.begin(), track.relative.end());
    archive.write(prefix + "relative", torch::tensor(relative, torch::kFloat64));
  }
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
    checkpoint.state.step = read_int(archive, "meta/step");
    checkpoint.num_steps = read_int(archive, "meta/num_steps");
    checkpoint.finished = read_int(archive, "meta/finished") != 0;
    c10::IValue stage;
    archive.read("meta/stage", stage);
    checkpoint.stage = stage.toStringRef();
    // Checkpoints written before a key existed read it as 0.
    auto optional_double = [&](const std::string& key) {
      torch::Tensor value;
      return archive.try_read(key, value) ? value.item<double>() : 0.0;
    };
    checkpoint.state.train_seconds = optional_double("schedule/train_seconds");
    checkpoint.state.seconds_since_kept = optional_double("schedule/seconds_since_kept");
    auto& validation = checkpoint.state.validation;
    validation.validated_step = read_int(archive, "validation/validated_step");
    validation.lr_factor = read_double(archive, "validation/lr_factor");
    validation.seconds_since_validation = optional_double("validation/seconds_since");
    validation.count = static_cast<int64_t>(optional_double("validation/count"));
    int64_t tracks = read_int(archive, "validation/tracks");
    for (int64_t i = 0; i < tracks; ++i) {
      std::string prefix = "validation/track" + std::to_string(i) + "/";
      ValidationTrack track;
      track.best = read_double(archive, prefix + "best");
      track.previous = read_double(archive, prefix + "previous");
      track.tries = static_cast<int>(read_int(archive, prefix + "tries"));
      torch::Tensor relative;
      archive.read(prefix + "relative", relative);
      for (int64_t k = 0; k < relative.size(0); ++k)
        track.relative.push_back(relative[k].item<double>());
      validation.tracks.push_back(track);
    }
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
