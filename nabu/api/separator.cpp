// The public API (nabu/separator.h) over the internal classes: an experiment is the Separator and
// TaskSeparation `nabu separate` uses, an exported file a TorchScript module; both separate in
// chunks (ChunkedSeparation) between the two resamplers, as separate_file does for a file.
#include "nabu/separator.h"

#include <torch/torch.h>

#include <cmath>

#include "nabu/core/error.h"
#include "nabu/core/logging.h"
#include "nabu/core/recipe.h"
#include "nabu/neuralnetworks/models/model.h"
#include "nabu/inference/chunked_separation.h"
#include "nabu/inference/exported_separator.h"
#include "nabu/inference/task_separation.h"
#include "nabu/inference/separation_cautions.h"
#include "nabu/inference/separation_stream.h"
#include "nabu/inference/shipped_models.h"
#include "nabu/processing/audio_stream.h"
#include "nabu_version.h"  // generated: NABU_VERSION_STRING

namespace nabu::api {

namespace {

constexpr double kInt16Scale = 32768.0;  // the models hear int16-scale samples

Signals api_signals(const torch::Tensor& separated) {  // [S, m] float
  auto rows = separated.to(torch::kFloat32).contiguous();
  Signals signals(static_cast<std::size_t>(rows.size(0)));
  for (int64_t s = 0; s < rows.size(0); ++s)
    signals[s].assign(rows[s].data_ptr<float>(), rows[s].data_ptr<float>() + rows.size(1));
  return signals;
}

}  // namespace

struct Separator::Impl {
  SeparatorOptions options;
  // An experiment:
  std::unique_ptr<Recipe> recipe;
  std::unique_ptr<TrainedExperiment> separator;
  std::unique_ptr<TaskSeparation> task;
  // An exported file:
  std::unique_ptr<ExportedSeparator> exported;
  // Either one's chunk separation, rate, speakers and frame, the chunk options checked.
  ChunkModel model;
  WeakPitchRange weak_pitch;  // where the model separates poorly (options.near_pitch_semitones)

  void set_model(ChunkModel chosen, WeakPitchRange weak) {
    if (options.near_pitch_semitones >= 0) weak.semitones = options.near_pitch_semitones;
    weak_pitch = std::move(weak);
    model = std::move(chosen);
    check_chunk_options({options.chunk_seconds, options.overlap_seconds}, model.frame_length,
                        model.sample_rate);
  }
};

Separator::Separator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Separator::Separator(Separator&&) noexcept = default;
Separator& Separator::operator=(Separator&&) noexcept = default;
Separator::~Separator() = default;

static void apply_api_options(const SeparatorOptions& options) {
  if (options.threads < 0) throw Error("threads must be >= 0");
  if (options.threads > 0) torch::set_num_threads(options.threads);
  if (options.log)
    log_to(options.log_level, options.log);
  else
    setup_logging(options.log_level, "log_level");
}

const char* version() { return NABU_VERSION_STRING; }

Separator Separator::from_experiment(const std::string& expdir, const SeparatorOptions& options) {
  apply_api_options(options);
  require_trained_experiment(expdir);
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->recipe = std::make_unique<Recipe>(Recipe::load(expdir));
  const auto [task, segment] = experiment_task(*impl->recipe, options.task);
  impl->separator = std::make_unique<TrainedExperiment>(*impl->recipe, expdir, segment,
                                                        /*early=*/false, options.model);
  impl->task = std::make_unique<TaskSeparation>(*impl->separator, task);
  impl->set_model(chunk_model(*impl->task, impl->task->model_sample_rate()), WeakPitchRange{});
  return Separator(std::move(impl));
}

Separator Separator::from_exported(const std::string& file, const SeparatorOptions& options) {
  apply_api_options(options);
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->exported = std::make_unique<ExportedSeparator>(file);
  impl->set_model(impl->exported->chunk_model(), weak_pitch_range_of(file));
  return Separator(std::move(impl));
}

int Separator::sample_rate() const { return impl_->model.sample_rate; }
int Separator::speakers() const { return impl_->model.speakers; }
std::vector<std::string> Separator::warnings() const {
  return impl_->separator ? impl_->separator->training_warnings() : std::vector<std::string>{};
}

Signals Separator::separate(const std::vector<float>& samples, int rate) {
  return separate_with_cautions(samples, rate).signals;
}

Separation Separator::separate_with_cautions(const std::vector<float>& samples, int rate) {
  if (rate <= 0) throw Error("separate: the sample rate must be > 0, not " + std::to_string(rate));
  const ChunkModel& model = impl_->model;
  if (static_cast<double>(samples.size()) * model.sample_rate / rate < model.frame_length)
    throw DataError("separate: " + std::to_string(samples.size()) +
                    " samples are shorter than one analysis frame");
  std::vector<double> input;
  input.reserve(samples.size());
  double peak = 0;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (!std::isfinite(samples[i]))
      throw DataError("separate: sample " + std::to_string(i) + " is not a number");
    input.push_back(samples[i] * kInt16Scale);
    peak = std::max(peak, std::fabs(input.back()));
  }
  if (peak == 0) throw DataError("separate: the signal is silent (every sample is zero)");
  std::vector<std::vector<double>> at_model(static_cast<std::size_t>(model.speakers));
  ChunkedSeparation chunked(model, {impl_->options.chunk_seconds, impl_->options.overlap_seconds},
                            [&](int s, const std::vector<double>& part) {
                              at_model[s].insert(at_model[s].end(), part.begin(), part.end());
                            });
  chunked.push(resample_whole(input, rate, model.sample_rate));
  chunked.finish();
  Separation result;
  Signals& separated = result.signals;
  separated.resize(at_model.size());
  std::vector<PitchEstimate> pitch;
  for (std::size_t s = 0; s < at_model.size(); ++s) {
    pitch.push_back(estimate_pitch(torch::tensor(at_model[s], torch::kFloat64), model.sample_rate));
    result.median_f0_hz.push_back(pitch.back().median_f0_hz);
    // Exactly the input's length.
    auto out = resample_whole(at_model[s], model.sample_rate, rate,
                              static_cast<int64_t>(samples.size()));
    separated[s].reserve(out.size());
    for (double value : out) separated[s].push_back(static_cast<float>(value / kInt16Scale));
  }
  for (const auto& caution : separation_cautions(pitch, impl_->weak_pitch))
    result.cautions.push_back({caution.kind, caution.message});
  return result;
}

struct Stream::Impl {
  std::unique_ptr<SeparationStream> stream;
};

Stream::Stream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Stream::Stream(Stream&&) noexcept = default;
Stream& Stream::operator=(Stream&&) noexcept = default;
Stream::~Stream() = default;

Stream Separator::stream() {
  if (!impl_->task)
    throw Error("streaming takes an experiment (Separator::from_experiment), not an exported file");
  auto impl = std::make_unique<Stream::Impl>();
  impl->stream = std::make_unique<SeparationStream>(*impl_->task);
  return Stream(std::move(impl));
}

Signals Stream::push(const float* samples, std::size_t count) {
  auto piece =
      torch::from_blob(const_cast<float*>(samples), {static_cast<int64_t>(count)}, torch::kFloat32);
  return api_signals(impl_->stream->push(piece.clone()));
}

Signals Stream::finish() { return api_signals(impl_->stream->finish()); }

int64_t Stream::lookahead() const { return impl_->stream->lookahead(); }

Audio read_audio(const std::string& path) {
  AudioReader reader(path);
  Audio audio;
  audio.sample_rate = reader.sample_rate();
  for (auto block = reader.read(1 << 16); !block.empty(); block = reader.read(1 << 16))
    for (double value : block) audio.samples.push_back(static_cast<float>(value / kInt16Scale));
  return audio;
}

void write_audio(const std::string& path, const std::vector<float>& samples, int sample_rate) {
  AudioWriter writer(path, sample_rate);
  writer.write(std::vector<double>(samples.begin(), samples.end()));
  writer.commit();
}

}  // namespace nabu::api
