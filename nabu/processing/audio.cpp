#include "nabu/processing/audio.h"

#include <sndfile.h>

#include <filesystem>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/strings.h"

namespace nabu {

Audio read_audio(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw DataError("audio file '" + path + "' does not exist");
  SF_INFO info{};
  SNDFILE* file = sf_open(path.c_str(), SFM_READ, &info);
  if (!file)
    throw DataError("cannot read audio file '" + path + "': " + sf_strerror(nullptr));
  struct Closer {
    SNDFILE* file;
    ~Closer() { sf_close(file); }
  } closer{file};
  if (info.channels != 1)
    throw DataError("audio file '" + path + "' has " + std::to_string(info.channels) +
                    " channels; expected mono");
  if (info.samplerate <= 0) throw DataError("audio file '" + path + "' has no sample rate");
  // Unnormalised reads: 16-bit PCM arrives in int16 scale, float files as stored.
  sf_command(file, SFC_SET_NORM_DOUBLE, nullptr, SF_FALSE);
  auto samples = torch::empty({static_cast<int64_t>(info.frames)}, torch::kFloat64);
  sf_count_t read = sf_readf_double(file, samples.data_ptr<double>(), info.frames);
  if (read != info.frames)
    throw DataError("audio file '" + path + "' is truncated or corrupt (read " +
                    std::to_string(read) + " of " + std::to_string(info.frames) + " samples)");
  return Audio{samples, info.samplerate};
}

Audio read_audio_fields(const std::vector<std::string>& fields) {
  if (fields.size() == 1) return read_audio(fields[0]);
  if (fields.size() == 3) {
    auto begin = parse_double(fields[1]);
    auto end = parse_double(fields[2]);
    if (begin && end) {
      Audio audio = read_audio(fields[0]);
      int64_t first = static_cast<int64_t>(*begin * audio.sample_rate);
      int64_t last = static_cast<int64_t>(*end * audio.sample_rate);
      int64_t total = audio.samples.size(0);
      if (*begin < 0 || first >= last || last > total)
        throw DataError("segment " + fields[1] + "-" + fields[2] + " s is outside '" + fields[0] +
                        "' (" + std::to_string(static_cast<double>(total) / audio.sample_rate) +
                        " s)");
      audio.samples = audio.samples.slice(0, first, last).clone();
      return audio;
    }
  }
  throw DataError("expected 'path' or 'path begin end', got '" + shorten(join(fields, " ")) + "'");
}

void write_audio(const std::string& path, const torch::Tensor& samples, int sample_rate) {
  auto data = samples.to(torch::kFloat64).contiguous().reshape({-1});
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) ensure_directory(parent);
  AtomicPath target(path);
  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = 1;
  info.format = SF_FORMAT_WAV | SF_FORMAT_FLOAT;
  SNDFILE* file = sf_open(target.temporary().c_str(), SFM_WRITE, &info);
  if (!file) throw Error("cannot write audio file '" + path + "': " + sf_strerror(nullptr));
  sf_count_t written = sf_writef_double(file, data.data_ptr<double>(), data.size(0));
  sf_close(file);
  if (written != data.size(0)) throw Error("write failed for '" + path + "' (disk full?)");
  target.commit();
}

}  // namespace nabu
