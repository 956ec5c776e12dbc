#include "nabu/core/tensorboard.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/protobuf_wire.h"

namespace nabu {

namespace {

// The reflected table of the Castagnoli polynomial 0x1EDC6F41 (reversed: 0x82F63B78).
const std::array<uint32_t, 256>& crc32c_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t crc = i;
      for (int bit = 0; bit < 8; ++bit) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
      t[i] = crc;
    }
    return t;
  }();
  return table;
}

double now_wall_time() {
  using namespace std::chrono;
  return duration_cast<duration<double>>(system_clock::now().time_since_epoch()).count();
}

using namespace wire;

// Event fields: wall_time 1, step 2, file_version 3, summary 5, session_log 7.
std::string event_header(double wall_time, int64_t step) {
  std::string event;
  put_double(event, 1, wall_time);
  if (step != 0) put_int64(event, 2, step);  // proto3: a zero is not written
  return event;
}

// A Summary.Value: tag 1, then the value's field.
std::string summary_value(const std::string& tag, const std::string& value_field) {
  std::string value;
  put_bytes(value, 1, tag);
  return value + value_field;
}

// An Event holding a Summary of these Values.
std::string summary_event(double wall_time, int64_t step, const std::vector<std::string>& values) {
  std::string summary;
  for (const auto& value : values) put_bytes(summary, 1, value);  // Summary.value, repeated
  std::string event = event_header(wall_time, step);
  put_bytes(event, 5, summary);
  return event;
}

std::string simple_value(const std::string& tag, float value) {
  std::string field;
  put_float(field, 2, value);  // Value.simple_value
  return summary_value(tag, field);
}

std::string event_file_host() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// Adds the numbers under `value` to `out` with `tag` as their prefix.
void flatten(const std::string& tag, const nlohmann::json& value,
             std::vector<std::pair<std::string, double>>& out) {
  if (value.is_number()) {
    const double number = value.get<double>();
    if (std::isfinite(number)) out.emplace_back(tag, number);
  } else if (value.is_object()) {
    for (const auto& [key, child] : value.items()) flatten(tag + "/" + key, child, out);
  } else if (value.is_array()) {
    for (std::size_t i = 0; i < value.size(); ++i)
      flatten(tag + "/" + std::to_string(i), value[i], out);
  }
}

}  // namespace

uint32_t crc32c(const std::string& bytes) {
  const auto& table = crc32c_table();
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : bytes) crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const std::string& bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

std::string tfrecord_frame(const std::string& data) {
  std::string length;
  put_little_endian(length, static_cast<uint64_t>(data.size()));
  std::string frame = length;
  put_little_endian(frame, masked_crc32c(length));
  frame += data;
  put_little_endian(frame, masked_crc32c(data));
  return frame;
}

namespace tensorboard_proto {

std::string scalars_event(double wall_time, int64_t step,
                          const std::vector<std::pair<std::string, double>>& values) {
  std::vector<std::string> encoded;
  for (const auto& [tag, value] : values)
    encoded.push_back(simple_value(tag, static_cast<float>(value)));
  return summary_event(wall_time, step, encoded);
}

std::string file_version_event(double wall_time) {
  std::string event = event_header(wall_time, 0);
  put_bytes(event, 3, "brain.Event:2");
  return event;
}

std::string session_start_event(double wall_time, int64_t step) {
  std::string session_log;
  put_int64(session_log, 1, 1);  // SessionLog.status = START
  std::string event = event_header(wall_time, step);
  put_bytes(event, 7, session_log);
  return event;
}

std::string audio_event(double wall_time, int64_t step, const std::string& tag,
                        const std::string& wav, float sample_rate, int64_t frames) {
  std::string audio;
  put_float(audio, 1, sample_rate);
  put_int64(audio, 2, 1);  // num_channels
  put_int64(audio, 3, frames);
  put_bytes(audio, 4, wav);
  put_bytes(audio, 5, "audio/wav");
  std::string field;
  put_bytes(field, 6, audio);  // Value.audio
  return summary_event(wall_time, step, {summary_value(tag, field)});
}

std::string histogram_event(double wall_time, int64_t step, const std::string& tag,
                            const std::vector<double>& values) {
  std::vector<double> finite;
  for (double v : values)
    if (std::isfinite(v)) finite.push_back(v);
  const double low = finite.empty() ? 0.0 : *std::min_element(finite.begin(), finite.end());
  const double high = finite.empty() ? 0.0 : *std::max_element(finite.begin(), finite.end());
  double sum = 0, squares = 0;
  for (double v : finite) {
    sum += v;
    squares += v * v;
  }
  // 30 equal buckets over [low, high]; bucket i holds (limit[i-1], limit[i]], the first also low.
  const int count = high > low ? 30 : 1;
  std::vector<double> limits(count), buckets(count, 0.0);
  for (int i = 0; i < count; ++i) limits[i] = low + (high - low) * (i + 1) / count;
  limits.back() = high;
  for (double v : finite) {
    int i = high > low ? static_cast<int>(std::ceil((v - low) * count / (high - low))) - 1 : 0;
    buckets[std::clamp(i, 0, count - 1)] += 1;
  }
  std::string histo;
  put_double(histo, 1, low);
  put_double(histo, 2, high);
  put_double(histo, 3, static_cast<double>(finite.size()));
  put_double(histo, 4, sum);
  put_double(histo, 5, squares);
  put_packed_doubles(histo, 6, limits);
  put_packed_doubles(histo, 7, buckets);
  std::string field;
  put_bytes(field, 5, histo);  // Value.histo
  return summary_event(wall_time, step, {summary_value(tag, field)});
}

}  // namespace tensorboard_proto

std::string wav_bytes(const std::vector<float>& samples, int sample_rate) {
  const uint32_t data_bytes = static_cast<uint32_t>(samples.size() * 2);
  std::string wav = "RIFF";
  put_little_endian(wav, static_cast<uint32_t>(36 + data_bytes));
  wav += "WAVEfmt ";
  put_little_endian(wav, static_cast<uint32_t>(16));
  put_little_endian(wav, static_cast<uint16_t>(1));  // PCM
  put_little_endian(wav, static_cast<uint16_t>(1));  // mono
  put_little_endian(wav, static_cast<uint32_t>(sample_rate));
  put_little_endian(wav, static_cast<uint32_t>(sample_rate * 2));
  put_little_endian(wav, static_cast<uint16_t>(2));   // block align
  put_little_endian(wav, static_cast<uint16_t>(16));  // bits per sample
  wav += "data";
  put_little_endian(wav, data_bytes);
  for (float s : samples) {
    const float clipped = std::isfinite(s) ? std::clamp(s, -1.0f, 1.0f) : 0.0f;
    put_little_endian(wav, static_cast<int16_t>(std::lround(clipped * 32767.0f)));
  }
  return wav;
}

std::vector<std::pair<std::string, double>> record_scalars(const nlohmann::json& record) {
  std::vector<std::pair<std::string, double>> out;
  if (!record.is_object()) return out;
  const std::string type = record.value("type", std::string("record"));
  for (const auto& [key, value] : record.items())
    if (key != "type" && key != "stage" && key != "step") flatten(type + "/" + key, value, out);
  if (type == "train" && record.contains("seconds") && record["seconds"].is_number()) {
    const double seconds = record["seconds"].get<double>();
    out.emplace_back("train/seconds_per_update", seconds);
    if (seconds > 0 && record.contains("examples") && record["examples"].is_number())
      out.emplace_back("train/examples_per_second", record["examples"].get<double>() / seconds);
  }
  return out;
}

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& dir, int64_t first_step) {
  ensure_directory(dir);
  const std::string stem = "events.out.tfevents." +
                           std::to_string(static_cast<int64_t>(now_wall_time())) + "." +
                           event_file_host() + "." + std::to_string(getpid());
  // Two writers of one process within a second (a short stage): numbered, in TensorBoard's
  // reading order (file names sorted).
  path_ = dir / stem;
  for (int n = 1; std::filesystem::exists(path_); ++n)
    path_ = dir / (stem + "." + std::to_string(n));
  out_.open(path_, std::ios::binary | std::ios::app);
  if (!out_) throw Error(path_.string() + ": cannot open the TensorBoard event file");
  write(tensorboard_proto::file_version_event(now_wall_time()));
  write(tensorboard_proto::session_start_event(now_wall_time(), first_step));
}

void TensorBoardWriter::write(const std::string& event) {
  out_ << tfrecord_frame(event);
  out_.flush();
  if (!out_) throw Error(path_.string() + ": cannot write the TensorBoard event file");
}

void TensorBoardWriter::scalars(const std::vector<std::pair<std::string, double>>& values,
                                int64_t step) {
  if (!values.empty()) write(tensorboard_proto::scalars_event(now_wall_time(), step, values));
}

void TensorBoardWriter::audio(const std::string& tag, int64_t step,
                              const std::vector<float>& samples, int sample_rate) {
  write(tensorboard_proto::audio_event(now_wall_time(), step, tag, wav_bytes(samples, sample_rate),
                                       static_cast<float>(sample_rate),
                                       static_cast<int64_t>(samples.size())));
}

void TensorBoardWriter::histogram(const std::string& tag, int64_t step,
                                  const std::vector<double>& values) {
  write(tensorboard_proto::histogram_event(now_wall_time(), step, tag, values));
}

}  // namespace nabu
