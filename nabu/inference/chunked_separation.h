// Separation of signals of any length in bounded memory: the signal is cut into chunks that
// overlap, each chunk is separated on its own (features, model, reconstructor; deep clustering's
// k-means per chunk), the speakers of each chunk are matched to the previous chunk's on the
// overlap (the permutation with the largest summed correlation), and the overlap is cross-faded
// linearly. Memory holds two chunks, whatever the length.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "nabu/inference/task_separation.h"
#include "nabu/processing/pitch.h"

namespace nabu {

struct ChunkOptions {
  double chunk_seconds = 8.0;    // 0: one chunk, the whole signal
  double overlap_seconds = 1.0;  // at most half a chunk
};

// Throws Error naming the flags (--chunk-seconds, --overlap-seconds) for chunk settings that
// cannot work: negative values, an overlap of less than two analysis frames or of more than half
// a chunk.
void check_chunk_options(const ChunkOptions& options, int64_t frame_length, int sample_rate);

// What chunked separation needs of a model: the separation of one chunk ([N] double, int16
// scale, at the model's rate, into [speakers, N'] with N' <= N) and its sizes (a trained
// experiment's task, or an exported file: exported_separator.h).
struct ChunkModel {
  std::function<torch::Tensor(const torch::Tensor& samples)> separate;
  int speakers = 0;
  int sample_rate = 0;       // the model's
  int64_t frame_length = 1;  // samples of one analysis frame at sample_rate
};
// A task's: chunks separated at `sample_rate` (the rate of its training data).
ChunkModel chunk_model(TaskSeparation& task, int sample_rate);

class ChunkedSeparation {
 public:
  // Receives finished samples of one speaker, in order, at the model's rate (int16 scale).
  using Sink = std::function<void(int speaker, const std::vector<double>& samples)>;
  using ChunkSeparator = decltype(ChunkModel::separate);

  // Throws Error for chunk settings that cannot work (overlap of less than two frames, more
  // than half a chunk).
  ChunkedSeparation(ChunkSeparator separate, int speakers, int64_t frame_length, int sample_rate,
                    ChunkOptions options, Sink sink);
  ChunkedSeparation(const ChunkModel& model, ChunkOptions options, Sink sink);
  // Appends samples (int16 scale, the model's rate); separates every chunk that is complete.
  void push(const std::vector<double>& samples);
  // Separates what is left and emits everything: in total exactly as many samples per speaker
  // as were pushed.
  void finish();
  int num_speakers() const { return speakers_; }
  double seconds_done() const { return static_cast<double>(emitted_) / sample_rate_; }

 private:
  void separate_chunk(bool last);
  void combine(const torch::Tensor& signals, int64_t start);
  void emit(int speaker, const double* data, int64_t count);

  ChunkSeparator separate_;
  int sample_rate_;
  int64_t chunk_ = 0, hop_ = 0, frame_ = 0;  // samples
  Sink sink_;
  int speakers_ = 0;
  std::vector<double> buffer_;
  int64_t buffer_start_ = 0;  // signal index of buffer_[0]
  int64_t pushed_ = 0;
  std::vector<std::vector<double>> pending_;  // per speaker, from pending_start_
  int64_t pending_start_ = 0;
  int64_t emitted_ = 0;  // per speaker
  bool finished_ = false;
};

// A whole signal ([N] double, int16 scale, at the model's rate) separated in chunks: [S, N].
torch::Tensor separate_in_chunks(TaskSeparation& task, const torch::Tensor& samples,
                                 int sample_rate, const ChunkOptions& options);
// The same with any model (an exported file's), at the model's rate.
torch::Tensor separate_in_chunks(const ChunkModel& model, const torch::Tensor& samples,
                                 const ChunkOptions& options);

struct FileSeparationOptions {
  ChunkOptions chunks;
  int channel = 0;              // 1-based channel to separate; 0 = mix all channels down
  bool keep_model_rate = false;  // write at the model's rate instead of the input's
  int model_rate = 0;           // 0: the rate of the data the model was trained on
  double progress_every_seconds = 10.0;
  // Polled between blocks: when it returns a signal number, separate_file stops, removes the
  // outputs it was writing and throws SeparationInterrupted (`nabu separate` on SIGINT/SIGTERM).
  std::function<int()> interrupted;
};

// Thrown by separate_file when `interrupted` fired: not an Error, so the files after it are not
// tried.
struct SeparationInterrupted : std::runtime_error {
  SeparationInterrupted(const std::string& what, int signal_number)
      : std::runtime_error(what), signal_number(signal_number) {}
  int signal_number;
};

// The checks of `options` that depend on no input, done once before any file: --model-rate
// against the rate of the data the model was trained on (when the recipe's data can be read),
// and the chunk settings. Returns the rate the model runs at. Throws Error naming the flag.
int check_file_separation_options(TaskSeparation& task, const FileSeparationOptions& options);

// The output name of each input of one call: its stem ("mix" for a/mix.wav), or its file name
// ("mix.ogg") when another input of the call has the same stem, so that no output overwrites
// another. Throws Error naming both inputs when two names still collide (the same file name in
// two folders, or a file given twice).
std::vector<std::string> output_names(const std::vector<std::filesystem::path>& inputs);

struct FileSeparationReport {
  std::vector<std::filesystem::path> outputs;  // <out>/<name>_s<k>.wav
  std::vector<PitchEstimate> output_pitch;     // of each output, at the model's rate
  double audio_seconds = 0, wall_seconds = 0;
  int input_rate = 0, output_rate = 0, channels = 0;
};

// Separates one audio file of any rate, channel count and length into <out_dir>/<name>_s<k>.wav
// (32-bit float, at the input's level: the outputs sum to about the input; `name` as
// output_names gives it). Throws DataError naming the file for a file that cannot be read, is
// empty, silent, shorter than one analysis frame or holds NaN samples; no output file is left
// behind then, nor when it is interrupted.
FileSeparationReport separate_file(TaskSeparation& task, const std::filesystem::path& input,
                                   const std::filesystem::path& out_dir, const std::string& name,
                                   const FileSeparationOptions& options);
// The same with any model (options.model_rate is not read: the model's rate is its own).
FileSeparationReport separate_file(const ChunkModel& model, const std::filesystem::path& input,
                                   const std::filesystem::path& out_dir, const std::string& name,
                                   const FileSeparationOptions& options);

}  // namespace nabu
