// `nabu separate`: flags -> separate_file (postprocessing/chunked_separation.h) for every file;
// a file that fails is reported in one line and the others are still separated. Options are
// checked once before any file; SIGINT/SIGTERM stop the file being written without leaving
// temporaries, and end the process with that signal.
#include <csignal>
#include <iostream>

#include <spdlog/spdlog.h>

#include "nabu/cli/commands/cli.h"
#include "nabu/core/device.h"
#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/neuralnetworks/trainers/mixed_precision.h"
#include "nabu/postprocessing/chunked_separation.h"

namespace nabu::cli {

namespace {

volatile std::sig_atomic_t received_signal = 0;

void remember_signal(int signal_number) { received_signal = signal_number; }

// --precision, checked against the device (fp16: CUDA only), with the warning bf16 deserves on
// a CPU without bfloat16 instructions.
Precision separation_precision(const std::string& name, const c10::Device& device) {
  const Precision precision = parse_precision(name, "--precision");
  check_precision(precision, device, "--precision");
  const std::string slow = bf16_speed_warning(precision, device, cpu_flags());
  if (!slow.empty()) spdlog::warn(slow);
  return precision;
}

}  // namespace

int cmd_separate(const std::vector<std::string>& args) {
  CommonOptions common;
  RecordingOptions recordings;
  std::string out, precision_name = "fp32";
  FileSeparationOptions options;
  po::options_description description("Options");
  po::positional_options_description positional;
  add_recording_options(description, positional, common, recordings,
                        "test task whose graph and reconstructor to use (default: the first of "
                        "test_evaluator.cfg)");
  description.add_options()
      ("out", po::value(&out),
       "folder for the separated signals: <stem>_s1.wav, ... (mix_s1.wav for mix.wav); inputs\n"
       "of one call that share a stem keep their extension (mix.ogg_s1.wav, mix.flac_s1.wav)")
      ("chunk-seconds", po::value(&options.chunks.chunk_seconds)->default_value(8.0),
       "separate in chunks of this length, so memory does not grow with the input (0 = the\n"
       "whole file at once)")
      ("overlap-seconds", po::value(&options.chunks.overlap_seconds)->default_value(1.0),
       "overlap of consecutive chunks: speakers are matched and cross-faded on it")
      ("precision", po::value(&precision_name)->default_value("fp32"),
       "fp32, or bf16 (autocast: the matrix products, convolutions and LSTMs in bfloat16; on\n"
       "a CPU with avx512_bf16 or AMX), or fp16 (CUDA devices only)")
      ("keep-model-rate", po::bool_switch(&options.keep_model_rate),
       "write the outputs at the model's sample rate instead of the input's")
      ("model-rate", po::value(&options.model_rate)->default_value(0),
       "the sample rate the model was trained at, for when the recipe's data lists cannot be\n"
       "read (default: read from them; a rate that disagrees with them is refused)");
  if (!parse_command_line(
          "separate",
          "Separates recordings with a trained experiment: any format libsndfile reads, any\n"
          "sample rate (resampled to the model's and back), any channel count (mixed down) and\n"
          "any length (in overlapping chunks, in bounded memory). Writes <out>/<name>_s<k>.wav,\n"
          "32-bit float, at the input's level and rate (<name>: the stem, or the file name when\n"
          "inputs share a stem).\n\n"
          "Example: nabu separate --expdir=exp/dc --out=sep/ meeting.wav interview.flac",
          args, description, &positional))
    return 0;
  require(out, "out", "separate");
  const auto names = output_names(
      std::vector<fs::path>(recordings.recordings.begin(), recordings.recordings.end()));
  Recipe recipe = load_trained_recipe(common, recordings, "separate");
  options.channel = recordings.channel;
  const ConfigFile& test_cfg = recipe.get("test_evaluator.cfg");
  std::string task = recordings.task;
  if (task.empty()) task = test_cfg.section("evaluator").get_list("tasks").at(0);
  std::string segment = test_cfg.section("evaluator").get_string("segment_length", "full");
  const auto device = resolve_device(recordings.device, "--device");
  const Precision precision = separation_precision(precision_name, device);
  Separator separator(recipe, common.expdir, segment, recordings.early, recordings.model, device);
  separator.set_precision(precision);
  auto separation = separator.task(task);
  options.model_rate = check_file_separation_options(*separation, options);
  ensure_directory(out);
  std::signal(SIGINT, remember_signal);
  std::signal(SIGTERM, remember_signal);
  options.interrupted = [] { return static_cast<int>(received_signal); };
  std::size_t index = 0;
  int status = 0;
  try {
    status = for_each_recording(recordings, "separate", "separated", [&](const std::string& path) {
      const std::string& name = names.at(index++);  // in the order of the recordings
      auto report = separate_file(*separation, path, out, name, options);
      spdlog::info("{}: {:.1f} s, {} Hz, {} channel(s) -> {} Hz, {:.3f}x real time", path,
                   report.audio_seconds, report.input_rate, report.channels, report.output_rate,
                   report.wall_seconds / std::max(report.audio_seconds, 1e-9));
      for (const auto& output : report.outputs) std::cout << output.string() << "\n";
    });
  } catch (const SeparationInterrupted& interrupted) {
    // The outputs of the files before are complete; end as the signal would have.
    std::cerr << "nabu separate: " << interrupted.what() << std::endl;
    received_signal = interrupted.signal_number;
  }
  if (received_signal != 0) {
    spdlog::shutdown();
    std::signal(received_signal, SIG_DFL);
    std::raise(received_signal);
  }
  return status;
}

}  // namespace nabu::cli
