#include "nabu/inference/chunked_separation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include "nabu/core/clock.h"
#include "nabu/core/error.h"
#include "nabu/core/interrupted.h"
#include "nabu/core/assignment.h"
#include "nabu/processing/audio_stream.h"
#include "nabu/processing/recording_checks.h"

namespace nabu {

ChunkedSeparation::ChunkedSeparation(const ChunkModel& model, ChunkOptions options, Sink sink)
    : ChunkedSeparation(model.separate, model.speakers, model.frame_length, model.sample_rate,
                        options, std::move(sink)) {}

ChunkedSeparation::ChunkedSeparation(ChunkSeparator separate, int speakers, int64_t frame_length,
                                     int sample_rate, ChunkOptions options, Sink sink)
    : separate_(std::move(separate)), sample_rate_(sample_rate), sink_(std::move(sink)),
      speakers_(speakers) {
  frame_ = frame_length;
  check_chunk_options(options, frame_length, sample_rate);
  if (options.chunk_seconds <= 0) {
    chunk_ = std::numeric_limits<int64_t>::max() / 4;
    hop_ = chunk_;
    return;
  }
  chunk_ = static_cast<int64_t>(std::llround(options.chunk_seconds * sample_rate));
  hop_ = chunk_ - static_cast<int64_t>(std::llround(options.overlap_seconds * sample_rate));
}

void check_chunk_options(const ChunkOptions& options, int64_t frame_length, int sample_rate) {
  if (options.chunk_seconds < 0)
    throw Error(fmt::format("--chunk-seconds={} must not be negative", options.chunk_seconds));
  if (options.chunk_seconds == 0) return;  // the whole signal at once: no overlap
  if (options.overlap_seconds < 0)
    throw Error(fmt::format("--overlap-seconds={} must not be negative", options.overlap_seconds));
  const int64_t chunk = std::llround(options.chunk_seconds * sample_rate);
  const int64_t overlap = std::llround(options.overlap_seconds * sample_rate);
  if (overlap < 2 * frame_length)
    throw Error(fmt::format("--overlap-seconds={} is shorter than two analysis frames ({:.3f} s)",
                            options.overlap_seconds, 2.0 * frame_length / sample_rate));
  if (2 * overlap > chunk)
    throw Error(fmt::format("--overlap-seconds={} is more than half of --chunk-seconds={}",
                            options.overlap_seconds, options.chunk_seconds));
}

int check_file_separation_options(TaskSeparation& task, const FileSeparationOptions& options) {
  if (options.model_rate < 0)
    throw Error(fmt::format("--model-rate={} must not be negative", options.model_rate));
  int model_rate = options.model_rate;
  // --model-rate stands in for the rate of the model's training data where the recipe's data
  // lists cannot be read; a model runs only at the rate it was trained at (its frames and FFT
  // are sized for it), so a rate that disagrees with the data is refused here, not per file.
  int trained = 0;
  try {
    trained = task.model_sample_rate();
  } catch (const Error&) {
    if (model_rate == 0) throw;
  }
  if (model_rate > 0 && trained > 0 && model_rate != trained)
    throw Error(fmt::format("--model-rate={}: the model was trained on {} Hz data; leave "
                            "--model-rate out: inputs of any rate are resampled to the model's",
                            model_rate, trained));
  if (model_rate == 0) model_rate = trained;
  check_chunk_options(options.chunks, task.frame_length(model_rate), model_rate);
  return model_rate;
}

std::vector<std::string> output_names(const std::vector<std::filesystem::path>& inputs) {
  std::map<std::string, int> stems;
  for (const auto& input : inputs) ++stems[input.stem().string()];
  std::vector<std::string> names;
  std::map<std::string, std::size_t> first_with;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::string stem = inputs[i].stem().string();
    names.push_back(stems[stem] > 1 ? inputs[i].filename().string() : stem);
    auto [at, fresh] = first_with.emplace(names.back(), i);
    if (!fresh)
      throw Error(inputs[at->second].string() + " and " + inputs[i].string() +
                  " would both be separated into " + names.back() +
                  "_s<k>.wav: give each file once, and files of one name in separate calls "
                  "with their own --out");
  }
  return names;
}

void ChunkedSeparation::push(const std::vector<double>& samples) {
  buffer_.insert(buffer_.end(), samples.begin(), samples.end());
  pushed_ += static_cast<int64_t>(samples.size());
  // More than a chunk: this chunk is not the last one.
  while (static_cast<int64_t>(buffer_.size()) > chunk_) separate_chunk(/*last=*/false);
}

void ChunkedSeparation::finish() {
  if (finished_ || pushed_ == 0) return;
  finished_ = true;
  int64_t covered = pending_.empty() ? 0 : pending_start_ + pending_[0].size();
  if (buffer_start_ + static_cast<int64_t>(buffer_.size()) > covered)
    separate_chunk(/*last=*/true);
  int64_t count = std::min<int64_t>(pending_[0].size(), pushed_ - emitted_);
  for (int s = 0; s < speakers_; ++s) emit(s, pending_[s].data(), count);
  emitted_ += count;
  // The snip can leave a few samples short of the input: complete with silence.
  if (emitted_ < pushed_) {
    std::vector<double> silence(static_cast<std::size_t>(pushed_ - emitted_), 0.0);
    for (int s = 0; s < speakers_; ++s) sink_(s, silence);
    emitted_ = pushed_;
  }
}

void ChunkedSeparation::separate_chunk(bool last) {
  int64_t count = last ? static_cast<int64_t>(buffer_.size()) : chunk_;
  // No padding: frames of digital silence are far outside what the model saw in training (their
  // normalised log spectra are extreme) and change the recurrent states of every frame before
  // them. The few samples the snip to whole frames drops at the end are completed with silence.
  auto samples = torch::zeros({count}, torch::kFloat64);
  std::copy(buffer_.begin(), buffer_.begin() + count, samples.data_ptr<double>());
  auto signals = separate_(samples);
  if (signals.size(0) != speakers_)
    throw Error("the reconstructor gave " + std::to_string(signals.size(0)) + " signals for " +
                std::to_string(speakers_) + " speakers");
  combine(signals.slice(1, 0, std::min<int64_t>(signals.size(1), count)).contiguous(),
          buffer_start_);
  if (last) return;
  buffer_.erase(buffer_.begin(), buffer_.begin() + hop_);
  buffer_start_ += hop_;
}

void ChunkedSeparation::combine(const torch::Tensor& signals, int64_t start) {
  const int64_t length = signals.size(1);
  auto column = [&](int s) { return signals[s].data_ptr<double>(); };
  if (pending_.empty()) {
    pending_.resize(speakers_);
    for (int s = 0; s < speakers_; ++s) pending_[s].assign(column(s), column(s) + length);
    pending_start_ = start;
    return;
  }
  const int64_t pending_end = pending_start_ + static_cast<int64_t>(pending_[0].size());
  const int64_t overlap = std::min(pending_end - start, length);
  if (overlap <= 0) throw Error("chunked separation: chunks do not overlap");
  const int64_t offset = start - pending_start_;  // where the overlap starts in pending_
  // Which new signal continues which speaker: the largest summed correlation on the overlap.
  std::vector<std::vector<double>> similarity(speakers_, std::vector<double>(speakers_, 0.0));
  for (int i = 0; i < speakers_; ++i)
    for (int j = 0; j < speakers_; ++j) {
      double dot = 0, a = 0, b = 0;
      const double* old_part = pending_[i].data() + offset;
      const double* new_part = column(j);
      for (int64_t t = 0; t < overlap; ++t) {
        dot += old_part[t] * new_part[t];
        a += old_part[t] * old_part[t];
        b += new_part[t] * new_part[t];
      }
      similarity[i][j] = dot / (std::sqrt(a * b) + 1e-12);
    }
  auto permutation = best_permutation(similarity);
  // Final samples: before the overlap, then the cross-faded overlap.
  for (int s = 0; s < speakers_; ++s) {
    std::vector<double> out(pending_[s].begin(), pending_[s].begin() + offset);
    const double* next = column(permutation[s]);
    for (int64_t t = 0; t < overlap; ++t) {
      double weight = (t + 0.5) / overlap;
      out.push_back(pending_[s][offset + t] * (1.0 - weight) + next[t] * weight);
    }
    emit(s, out.data(), static_cast<int64_t>(out.size()));
    pending_[s].assign(next + overlap, next + length);
  }
  emitted_ += offset + overlap;
  pending_start_ = start + overlap;
}

void ChunkedSeparation::emit(int speaker, const double* data, int64_t count) {
  if (count > 0) sink_(speaker, std::vector<double>(data, data + count));
}

torch::Tensor separate_in_chunks(TaskSeparation& task, const torch::Tensor& samples,
                                 int sample_rate, const ChunkOptions& options) {
  return separate_in_chunks(chunk_model(task, sample_rate), samples, options);
}

torch::Tensor separate_in_chunks(const ChunkModel& model, const torch::Tensor& samples,
                                 const ChunkOptions& options) {
  std::vector<std::vector<double>> outputs(static_cast<std::size_t>(model.speakers));
  ChunkedSeparation chunked(model, options,
                            [&](int s, const std::vector<double>& part) {
                              outputs[s].insert(outputs[s].end(), part.begin(), part.end());
                            });
  auto flat = samples.to(torch::kFloat64).contiguous();
  chunked.push(std::vector<double>(flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel()));
  chunked.finish();
  std::vector<torch::Tensor> rows;
  for (const auto& output : outputs)
    rows.push_back(torch::tensor(output, torch::kFloat64));
  return torch::stack(rows);
}

namespace {

// Between blocks: an interrupt unwinds, and the writers' destructors remove their temporaries.
void throw_if_interrupted(const FileSeparationOptions& options, const std::filesystem::path& input) {
  if (int signal_number = options.interrupted ? options.interrupted() : 0)
    throw SeparationInterrupted(input.string() + ": interrupted by " +
                                    signal_name(signal_number) + "; its outputs were not written",
                                signal_number);
}

// What makes a recording unseparable, found before any separation work: too short (the rule of
// processing/recording_checks.h, or shorter than one analysis frame), or silent (a first pass
// over the file: about a second per hour of audio).
void check_separable(const std::filesystem::path& input, const FileSeparationOptions& options,
                     const AudioReader& reader, int64_t frame, int model_rate) {
  if (auto problem = too_short_problem(reader.seconds()); !problem.empty())
    throw DataError(input.string() + ": " + problem);
  if (reader.seconds() * model_rate < frame)
    throw DataError(input.string() + ": shorter than one analysis frame (" +
                    fmt::format("{:.1f} ms < {:.1f} ms", reader.seconds() * 1000,
                                1000.0 * frame / model_rate) +
                    ")");
  AudioReader scan(input, options.channel);
  double peak = 0;
  for (auto block = scan.read(1 << 16); !block.empty(); block = scan.read(1 << 16)) {
    throw_if_interrupted(options, input);
    for (double value : block) peak = std::max(peak, std::fabs(value));
  }
  if (peak == 0) throw DataError(input.string() + ": silent (every sample is zero)");
}

// The separated signals' files: each speaker's samples resampled from the model's rate to the
// output rate, scaled from int16 scale, and (at the input's rate) exactly as long as the input.
class SpeakerOutputs {
 public:
  SpeakerOutputs(FileSeparationReport& report, const std::filesystem::path& out_dir,
                 const std::string& name, int speakers, int model_rate, int64_t target)
      : target_(target) {
    for (int s = 0; s < speakers; ++s) {
      report.outputs.push_back(out_dir / (name + "_s" + std::to_string(s + 1) + ".wav"));
      writers_.push_back(std::make_unique<AudioWriter>(report.outputs.back(), report.output_rate));
      to_output_.push_back(std::make_unique<Resampler>(model_rate, report.output_rate));
    }
  }
  void add(int s, const std::vector<double>& samples) { write(s, to_output_[s]->process(samples)); }
  // The resamplers' last samples, the padding to the input's length, and every file in place.
  void commit() {
    for (std::size_t s = 0; s < writers_.size(); ++s) {
      write(static_cast<int>(s), to_output_[s]->flush());
      if (target_ >= 0 && writers_[s]->written() < target_)
        write(static_cast<int>(s),
              std::vector<double>(static_cast<std::size_t>(target_ - writers_[s]->written()), 0.0));
    }
    for (auto& writer : writers_) writer->commit();
  }

 private:
  void write(int s, const std::vector<double>& samples) {
    std::vector<double> scaled;
    scaled.reserve(samples.size());
    for (double value : samples) scaled.push_back(value / 32768.0);
    if (target_ >= 0)
      scaled.resize(std::max<int64_t>(
          0, std::min<int64_t>(scaled.size(), target_ - writers_[s]->written())));
    writers_[s]->write(scaled);
  }

  int64_t target_;  // the input's length at the output rate, or -1 (the model's rate)
  std::vector<std::unique_ptr<AudioWriter>> writers_;
  std::vector<std::unique_ptr<Resampler>> to_output_;
};

}  // namespace

ChunkModel chunk_model(TaskSeparation& task, int sample_rate) {
  ChunkModel model;
  model.separate = [&task, sample_rate](const torch::Tensor& samples) {
    return task.separate_samples(samples, sample_rate);
  };
  model.speakers = task.num_speakers();
  model.sample_rate = sample_rate;
  model.frame_length = task.frame_length(sample_rate);
  return model;
}

FileSeparationReport separate_file(TaskSeparation& task, const std::filesystem::path& input,
                                   const std::filesystem::path& out_dir, const std::string& name,
                                   const FileSeparationOptions& options) {
  const int model_rate = options.model_rate > 0 ? options.model_rate : task.model_sample_rate();
  return separate_file(chunk_model(task, model_rate), input, out_dir, name, options);
}

FileSeparationReport separate_file(const ChunkModel& model, const std::filesystem::path& input,
                                   const std::filesystem::path& out_dir, const std::string& name,
                                   const FileSeparationOptions& options) {
  auto started = Clock::now();
  AudioReader reader(input, options.channel);
  FileSeparationReport report;
  report.input_rate = reader.sample_rate();
  report.channels = reader.channels();
  report.audio_seconds = reader.seconds();
  const int model_rate = model.sample_rate;
  report.output_rate = options.keep_model_rate ? model_rate : reader.sample_rate();
  check_separable(input, options, reader, model.frame_length, model_rate);
  // At the input's rate the outputs have exactly the input's length.
  SpeakerOutputs outputs(report, out_dir, name, model.speakers, model_rate,
                         options.keep_model_rate ? -1 : reader.frames());
  // Each output's pitch, measured as it is written (docs/postprocessing.md, "When a result is
  // likely poor").
  std::vector<PitchTracker> pitch(static_cast<std::size_t>(model.speakers), PitchTracker(model_rate));
  ChunkedSeparation chunked(model, options.chunks, [&](int s, const std::vector<double>& samples) {
    outputs.add(s, samples);
    pitch[s].push(samples);
  });
  Resampler to_model(reader.sample_rate(), model_rate);
  auto last_report = started;
  const int64_t block = reader.sample_rate();  // one second per read
  while (true) {
    throw_if_interrupted(options, input);
    auto samples = reader.read(block);
    if (samples.empty()) break;
    chunked.push(to_model.process(samples));
    if (seconds_since(last_report) >= options.progress_every_seconds) {
      last_report = Clock::now();
      double done = chunked.seconds_done(), wall = seconds_since(started);
      logger().info("{}: {:.0f}/{:.0f} s ({:.0f}%), {:.3f}x real time, ETA {}", input.string(),
                   done, report.audio_seconds, 100.0 * done / report.audio_seconds,
                   wall / std::max(done, 1e-9),
                   format_duration(wall / std::max(done, 1e-9) * (report.audio_seconds - done)));
    }
  }
  chunked.push(to_model.flush());
  chunked.finish();
  throw_if_interrupted(options, input);
  outputs.commit();
  for (const auto& tracker : pitch) report.output_pitch.push_back(tracker.result());
  report.wall_seconds = seconds_since(started);
  return report;
}

}  // namespace nabu
