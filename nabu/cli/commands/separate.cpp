// `nabu separate`: flags -> separate_file (inference/chunked_separation.h) for every file;
// a file that fails is reported in one line and the others are still separated. Options are
// checked once before any file; SIGINT/SIGTERM stop the file being written without leaving
// temporaries, and end the process with that signal.
#include <signal.h>

#include <algorithm>
#include <csignal>
#include <functional>
#include <iostream>
#include <map>
#include <memory>

#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include "nabu/cli/commands/cli.h"
#include "nabu/cli/commands/separate_stream.h"
#include "nabu/core/cpu_features.h"
#include "nabu/core/device.h"
#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/neuralnetworks/kernels/mixed_precision.h"
#include "nabu/inference/chunked_separation.h"
#include "nabu/inference/exported_separator.h"
#include "nabu/inference/separation_cautions.h"
#include "nabu/inference/shipped_models.h"
#include "nabu/processing/audio_stream.h"

namespace nabu::cli {

namespace {

volatile std::sig_atomic_t received_signal = 0;

void remember_signal(int signal_number) { received_signal = signal_number; }

// SIGINT/SIGTERM remembered without SA_RESTART, so that a read of stdin waiting for the next
// piece of a stream returns.
void catch_signals() {
  struct sigaction action {};
  action.sa_handler = remember_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

// Ends the process as the remembered signal would have, after the log is flushed.
void end_by_signal() {
  spdlog::shutdown();
  std::signal(received_signal, SIG_DFL);
  std::raise(received_signal);
}

// --stream: stdin through a causal model into <out>/s<k>.pcm; the per-piece compute at the end.
int separate_stream(TaskSeparation& separation, const std::string& out, double piece_ms) {
  StreamRequest request;
  request.out = out;
  request.piece_ms = piece_ms;
  request.interrupted = [] { return static_cast<int>(received_signal); };
  try {
    const auto report = stream_separation(separation, request);
    auto compute = report.compute_seconds;
    std::sort(compute.begin(), compute.end());
    const double median = compute.empty() ? 0.0 : compute[compute.size() / 2];
    const double piece_seconds = static_cast<double>(report.piece_samples) / report.sample_rate;
    logger().info("streamed {:.1f} s in {} pieces: median compute {:.3f} ms per {:.1f} ms piece "
                 "(real-time factor {:.3f}), slowest {:.3f} ms",
                 static_cast<double>(report.samples) / report.sample_rate, compute.size(),
                 1000.0 * median, 1000.0 * piece_seconds, median / piece_seconds,
                 compute.empty() ? 0.0 : 1000.0 * compute.back());
    for (const auto& output : report.outputs) std::cout << output.string() << "\n";
  } catch (const SeparationInterrupted& interrupted) {
    std::cerr << "nabu separate: " << interrupted.what() << std::endl;
    received_signal = interrupted.signal_number;
    end_by_signal();
  }
  return 0;
}

// --precision, checked against the device (fp16: CUDA only), with the warning bf16 deserves on
// a CPU without bfloat16 instructions.
Precision separation_precision(const std::string& name, const c10::Device& device) {
  const Precision precision = parse_precision(name, "--precision");
  check_precision(precision, device, "--precision");
  const std::string slow = bf16_speed_warning(precision, device, cpu_flags());
  if (!slow.empty()) logger().warn(slow);
  return precision;
}

// The model a recording is separated with, and the pitch range in which it separates poorly.
struct ChosenModel {
  const ChunkModel* model;
  WeakPitchRange weak;
};
using ModelChooser = std::function<ChosenModel(const std::string& recording)>;

// --near-pitch-semitones: negative keeps the model's own weak range (its card's).
WeakPitchRange weak_range(WeakPitchRange model_range, double semitones) {
  if (semitones >= 0) model_range.semitones = semitones;
  return model_range;
}

// The recordings, one after another, into <out>; a signal ends the process after the file it
// interrupted was removed. A separation the model is known to do poorly is said in one line.
int separate_files(const ModelChooser& choose, const RecordingOptions& recordings,
                   const std::string& out, FileSeparationOptions options) {
  const auto names = output_names(
      std::vector<fs::path>(recordings.recordings.begin(), recordings.recordings.end()));
  ensure_directory(out);
  options.interrupted = [] { return static_cast<int>(received_signal); };
  std::size_t index = 0;
  int status = 0;
  try {
    status = for_each_recording(recordings, "separate", "separated", [&](const std::string& path) {
      const std::string& name = names.at(index++);  // in the order of the recordings
      const ChosenModel chosen = choose(path);
      auto report = separate_file(*chosen.model, path, out, name, options);
      logger().info("{}: {:.1f} s, {} Hz, {} channel(s) -> {} Hz, {:.3f}x real time", path,
                   report.audio_seconds, report.input_rate, report.channels, report.output_rate,
                   report.wall_seconds / std::max(report.audio_seconds, 1e-9));
      for (const auto& caution : separation_cautions(report.output_pitch, chosen.weak))
        logger().warn("{}: {}", path, caution.message);
      for (const auto& output : report.outputs) std::cout << output.string() << "\n";
    });
  } catch (const SeparationInterrupted& interrupted) {
    // The outputs of the files before are complete; end as the signal would have.
    std::cerr << "nabu separate: " << interrupted.what() << std::endl;
    received_signal = interrupted.signal_number;
  }
  if (received_signal != 0) end_by_signal();
  return status;
}

// Neither --expdir nor --model: each recording with the shipped model that is the default for
// its rate (nabu models says which), each model loaded once.
int separate_with_defaults(const RecordingOptions& recordings, const std::string& out,
                           const FileSeparationOptions& options, double near_pitch_semitones) {
  std::map<std::string, std::pair<std::unique_ptr<ExportedSeparator>, ChosenModel>> loaded;
  std::map<std::string, ChunkModel> models;
  auto choose = [&](const std::string& recording) {
    const ShippedModel shipped = default_shipped_model(AudioReader(recording).sample_rate());
    auto found = loaded.find(shipped.name);
    if (found == loaded.end()) {
      auto exported = std::make_unique<ExportedSeparator>(shipped.file);
      logger().info("model: {} ({} Hz, {} speakers), the default for recordings {}", shipped.name,
                   exported->sample_rate(), exported->speakers(),
                   shipped.default_from_rate > 0
                       ? "at " + std::to_string(shipped.default_from_rate) + " Hz and above"
                       : std::string("at this rate"));
      models[shipped.name] = exported->chunk_model();
      const ChunkModel& model = models[shipped.name];
      check_chunk_options(options.chunks, model.frame_length, model.sample_rate);
      found = loaded
                  .emplace(shipped.name,
                           std::make_pair(std::move(exported),
                                          ChosenModel{&model, weak_range(shipped.weak_pitch,
                                                                         near_pitch_semitones)}))
                  .first;
    }
    return found->second.second;
  };
  catch_signals();
  return separate_files(choose, recordings, out, options);
}

// --model=<name> without --expdir: a shipped model (nabu models), or a file nabu export wrote
// (a path), on the CPU; what only an experiment has is refused by its flag.
int separate_with_exported(const CommonOptions& common, const RecordingOptions& recordings,
                           const std::string& out, FileSeparationOptions options, bool stream,
                           const std::string& precision, double near_pitch_semitones) {
  const std::string& name = recordings.model;
  if (is_experiment_model(name)) {
    if (name != "final" || stream)
      throw Error("--expdir (a trained experiment) or --model=<shipped model> is required; "
                  "nabu models lists the shipped models");
    // Neither given: the default shipped model of each recording's rate.
    if (precision != "fp32") throw Error("--precision=" + precision + " takes an experiment (--expdir)");
    if (!recordings.task.empty() || recordings.early || options.model_rate != 0)
      throw Error("--task, --allow-early-testing and --model-rate take an experiment (--expdir)");
    if (recordings.device != "auto" && recordings.device != "cpu")
      throw Error("--device=" + recordings.device + ": the shipped models compute on the CPU");
    check_recording_files(recordings, "separate");
    apply_common_options(common);
    return separate_with_defaults(recordings, out, options, near_pitch_semitones);
  }
  const std::string flag = "--model=" + name;
  if (stream) throw Error("--stream takes a causal experiment (--expdir), not " + flag);
  if (precision != "fp32") throw Error("--precision=" + precision + " takes an experiment (--expdir); " + flag + " computes in fp32");
  if (!recordings.task.empty() || recordings.early || options.model_rate != 0)
    throw Error("--task, --allow-early-testing and --model-rate take an experiment (--expdir), not " + flag);
  if (recordings.device != "auto" && recordings.device != "cpu")
    throw Error("--device=" + recordings.device + ": " + flag + " computes on the CPU");
  check_recording_files(recordings, "separate");
  apply_common_options(common);
  const std::filesystem::path file = exported_model_file(name, "--model");
  ExportedSeparator exported(file);
  logger().info("model: {} ({} Hz, {} speakers)", file.string(), exported.sample_rate(),
               exported.speakers());
  const ChunkModel model = exported.chunk_model();
  check_chunk_options(options.chunks, model.frame_length, model.sample_rate);
  const ChosenModel chosen{&model, weak_range(weak_pitch_range_of(file), near_pitch_semitones)};
  catch_signals();
  return separate_files([&](const std::string&) { return chosen; }, recordings, out, options);
}

// The flags of nabu separate beyond the recording options.
struct SeparateFlags {
  std::string out, precision = "fp32";
  bool stream = false;
  double piece_ms = 20.0, near_pitch_semitones = -1.0;
  FileSeparationOptions options;
};

void add_separate_flags(po::options_description& description, SeparateFlags& flags) {
  FileSeparationOptions& options = flags.options;
  description.add_options()
      ("out", po::value(&flags.out),
       "folder for the separated signals: <stem>_s1.wav, ... (mix_s1.wav for mix.wav); inputs\n"
       "of one call that share a stem keep their extension (mix.ogg_s1.wav, mix.flac_s1.wav)")
      ("chunk-seconds", po::value(&options.chunks.chunk_seconds)->default_value(8.0),
       "separate in chunks of this length, so memory does not grow with the input (0 = the\n"
       "whole file at once)")
      ("overlap-seconds", po::value(&options.chunks.overlap_seconds)->default_value(1.0),
       "overlap of consecutive chunks: speakers are matched and cross-faded on it")
      ("precision", po::value(&flags.precision)->default_value("fp32"),
       "fp32, or bf16 (autocast: the matrix products, convolutions and LSTMs in bfloat16; on\n"
       "a CPU with avx512_bf16 or AMX), or fp16 (CUDA devices only)")
      ("stream", switch_value(&flags.stream),
       "separate 16-bit mono PCM from stdin at the model's rate, piece by piece, into\n"
       "<out>/s1.pcm, s2.pcm, ... (16-bit; named pipes made with mkfifo are written as the\n"
       "pieces come): causal models only (conv_tasnet with causal = True)")
      ("stream-ms", po::value(&flags.piece_ms)->default_value(20.0),
       "with --stream: milliseconds of input per piece (the latency is this plus the model's\n"
       "lookahead, half its kernel)")
      ("keep-model-rate", switch_value(&options.keep_model_rate),
       "write the outputs at the model's sample rate instead of the input's")
      ("near-pitch-semitones", po::value(&flags.near_pitch_semitones)->default_value(-1.0),
       "say when two outputs' median pitches lie fewer than this many semitones apart (voices\n"
       "the model separates poorly, or one voice left in both): default -1, the model's own\n"
       "range (a shipped model's card, else 4); 0 = never")
      ("model-rate", po::value(&options.model_rate)->default_value(0),
       "the sample rate the model was trained at, for when the recipe's data lists cannot be\n"
       "read (default: read from them; a rate that disagrees with them is refused)");
}

}  // namespace

int cmd_separate(const std::vector<std::string>& args) {
  CommonOptions common;
  RecordingOptions recordings;
  SeparateFlags flags;
  po::options_description description("Options");
  po::positional_options_description positional;
  add_recording_options(description, positional, common, recordings,
                        "test task whose graph and reconstructor to use (default: the first of "
                        "test_evaluator.cfg)");
  add_separate_flags(description, flags);
  if (!parse_command_line(
          "separate",
          "Separates recordings with a trained experiment: any format libsndfile reads, any\n"
          "sample rate (resampled to the model's and back), any channel count (mixed down) and\n"
          "any length (in overlapping chunks, in bounded memory). Writes <out>/<name>_s<k>.wav,\n"
          "32-bit float, at the input's level and rate (<name>: the stem, or the file name when\n"
          "inputs share a stem).\n\n"
          "Without --expdir, --model names a shipped model (nabu models) or a file nabu export\n"
          "wrote, and separates with no training; with neither, each recording is separated by\n"
          "the shipped model that is the default for its sample rate (nabu models says which).\n"
          "When two outputs' median pitches lie within the model's weak range (--near-pitch-\n"
          "semitones), a line says the result is likely poor.\n\n"
          "Example: nabu separate --model=pit_blstm_2spk_8k --out=sep/ meeting.wav\n"
          "         nabu separate --expdir=exp/dc --out=sep/ meeting.wav interview.flac\n"
          "         arecord -f S16_LE -r 8000 | nabu separate --expdir=exp/causal --stream --out=live/",
          args, description, &positional))
    return 0;
  require(flags.out, "out", "separate");
  // Both paths read the same channel of each recording (AudioReader checks it against the file).
  FileSeparationOptions& options = flags.options;
  options.channel = recordings.channel;
  if (common.expdir.empty())
    return separate_with_exported(common, recordings, flags.out, options, flags.stream,
                                  flags.precision, flags.near_pitch_semitones);
  if (flags.stream && !recordings.recordings.empty())
    throw Error("--stream reads stdin; no audio file may be given (" + recordings.recordings[0] +
                ")");
  if (flags.stream && !(flags.piece_ms > 0.0)) throw Error("--stream-ms must be > 0");
  if (flags.stream && flags.precision != "fp32")
    throw Error("--precision applies to files; --stream computes in fp32");
  Recipe recipe = flags.stream ? load_experiment_recipe(common, recordings.task, "separate")
                         : load_trained_recipe(common, recordings, "separate");
  const auto [task, segment] = experiment_task(recipe, recordings.task);
  const auto device = resolve_device(recordings.device, "--device");
  const Precision precision = separation_precision(flags.precision, device);
  TrainedExperiment separator(recipe, common.expdir, segment, recordings.early, recordings.model,
                              device);
  separator.set_precision(precision);
  auto separation = std::make_unique<TaskSeparation>(separator, task);
  if (flags.stream) {
    catch_signals();
    return separate_stream(*separation, flags.out, flags.piece_ms);
  }
  options.model_rate = check_file_separation_options(*separation, options);
  const ChunkModel model = chunk_model(*separation, options.model_rate);
  const ChosenModel chosen{&model, weak_range(WeakPitchRange{}, flags.near_pitch_semitones)};
  catch_signals();
  return separate_files([&](const std::string&) { return chosen; }, recordings, flags.out,
                        options);
}

}  // namespace nabu::cli
