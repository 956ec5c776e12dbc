// TensorBoard event files: what `nabu train` writes into <expdir>/tensorboard/<stage>/ beside
// metrics.jsonl, so that a run can be watched in TensorBoard (docs/trainer.md, "TensorBoard").
//
// The format is TensorFlow's: a file of records, each framed as TFRecord (the length as a
// little-endian uint64, its masked CRC-32C, the bytes, their masked CRC-32C), each record one
// serialised `Event` protocol buffer (tensorflow/core/util/event.proto, summary.proto). Nabu
// writes four small messages (Event, Summary.Value with a simple_value, an Audio or a
// HistogramProto, and SessionLog), so they are encoded here by hand, field by field, rather than
// through libprotobuf, whose generated classes would need protoc and the .proto files at build
// time for these few fields. tests/unit/test_tensorboard.cpp checks the bytes against written-out
// encodings, and tests/tensorboard/read_events.py reads the files with TensorBoard's own reader.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace nabu {

// CRC-32C (Castagnoli), as TFRecord frames use it, and TFRecord's masking of it.
uint32_t crc32c(const std::string& bytes);
uint32_t masked_crc32c(const std::string& bytes);

// One TFRecord: length, masked CRC of the length, data, masked CRC of the data.
std::string tfrecord_frame(const std::string& data);

// The protocol-buffer encodings of the messages written (exposed for the tests).
namespace tensorboard_proto {
// One Summary of simple values (tag, value as a float).
std::string scalars_event(double wall_time, int64_t step,
                          const std::vector<std::pair<std::string, double>>& values);
std::string file_version_event(double wall_time);
std::string session_start_event(double wall_time, int64_t step);
// `wav`: a whole WAV file.
std::string audio_event(double wall_time, int64_t step, const std::string& tag,
                        const std::string& wav, float sample_rate, int64_t frames);
// Buckets as TensorFlow's histogram summaries have them: bucket i counts the values in
// (limits[i-1], limits[i]].
std::string histogram_event(double wall_time, int64_t step, const std::string& tag,
                            const std::vector<double>& values);
}  // namespace tensorboard_proto

// A 16-bit PCM mono WAV file of samples in [-1, 1] (clipped), for audio summaries.
std::string wav_bytes(const std::vector<float>& samples, int sample_rate);

// Every finite number of a metrics.jsonl record as (tag, value): the record's type, then the path
// of keys to the number ("train/loss", "train/task_losses/task_2spk", "validation/loss"); the
// record's step, stage and type are not values. Train records add "train/seconds_per_update" and
// "train/examples_per_second".
std::vector<std::pair<std::string, double>> record_scalars(const nlohmann::json& record);

// A signal for TensorBoard's audio tab (validation_evaluator.cfg's tensorboard_audio).
struct AudioClip {
  std::string tag;  // "audio/<task>/<utterance>/separated_1", ...
  std::vector<float> samples;
  int sample_rate = 0;
};

class TensorBoardWriter {
 public:
  // A new event file in `dir` (created): events.out.tfevents.<seconds>.<host>.<pid>, beginning
  // with its file_version event, and a SessionLog START at `first_step`: TensorBoard's reader
  // drops what earlier files hold at that step and after, which a resumed run trains again.
  TensorBoardWriter(const std::filesystem::path& dir, int64_t first_step);
  const std::filesystem::path& path() const { return path_; }

  void scalars(const std::vector<std::pair<std::string, double>>& values, int64_t step);
  void audio(const std::string& tag, int64_t step, const std::vector<float>& samples,
             int sample_rate);
  void histogram(const std::string& tag, int64_t step, const std::vector<double>& values);

 private:
  void write(const std::string& event);

  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace nabu
