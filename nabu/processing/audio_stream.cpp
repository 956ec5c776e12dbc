#include "nabu/processing/audio_stream.h"

#include <sndfile.h>
#include <soxr.h>

#include <cmath>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/processing/recording_checks.h"

namespace nabu {

namespace {

SNDFILE* sndfile(void* handle) { return static_cast<SNDFILE*>(handle); }

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f s", seconds);
  return text;
}

}  // namespace

AudioReader::AudioReader(const std::filesystem::path& path, int channel)
    : path_(path), channel_(channel) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw DataError(path.string() + ": no such file");
  if (!std::filesystem::is_regular_file(path, ec))
    throw DataError(path.string() + ": not a regular file");
  SF_INFO info{};
  file_ = sf_open(path.c_str(), SFM_READ, &info);
  if (!file_)
    throw DataError(path.string() + ": not a readable audio file (" + sf_strerror(nullptr) + ")");
  sample_rate_ = info.samplerate;
  channels_ = info.channels;
  frames_ = info.frames;
  if (sample_rate_ <= 0 || channels_ <= 0) {
    sf_close(sndfile(file_));
    throw DataError(path.string() + ": no sample rate or channel count in its header");
  }
  if (channel_ < 0 || channel_ > channels_) {
    sf_close(sndfile(file_));
    throw DataError(path.string() + ": --channel=" + std::to_string(channel_) + " but it has " +
                    std::to_string(channels_) + " channel(s)");
  }
  if (frames_ <= 0) {
    sf_close(sndfile(file_));
    throw DataError(path.string() + ": empty (no samples)");
  }
  if ((info.format & SF_FORMAT_TYPEMASK) == SF_FORMAT_WAV) {
    try {
      refuse_truncated_wav(path);  // the rule nabu prepare applies (recording_checks.h)
    } catch (...) {
      sf_close(sndfile(file_));
      throw;
    }
  }
  // Normalised reads ([-1, 1] for every format), scaled to int16 below.
  sf_command(sndfile(file_), SFC_SET_NORM_DOUBLE, nullptr, SF_TRUE);
}

AudioReader::~AudioReader() {
  if (file_) sf_close(sndfile(file_));
}

std::vector<double> AudioReader::read(int64_t count) {
  count = std::min(count, frames_ - position_);
  if (count <= 0) return {};
  interleaved_.resize(static_cast<std::size_t>(count * channels_));
  sf_count_t got = sf_readf_double(sndfile(file_), interleaved_.data(), count);
  if (got != count)
    throw DataError(path_.string() + ": read failed at " +
                    seconds_text(static_cast<double>(position_ + std::max<sf_count_t>(got, 0)) /
                                 sample_rate_) +
                    " (truncated or corrupt file)");
  std::vector<double> mono(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    double value = 0;
    if (channel_ > 0) {
      value = interleaved_[i * channels_ + channel_ - 1];
    } else {
      for (int c = 0; c < channels_; ++c) value += interleaved_[i * channels_ + c];
      value /= channels_;
    }
    if (!std::isfinite(value))
      throw DataError(path_.string() + ": sample " + std::to_string(position_ + i) + " (at " +
                      seconds_text(static_cast<double>(position_ + i) / sample_rate_) +
                      ") is " + (std::isnan(value) ? "NaN" : "infinite"));
    mono[i] = value * 32768.0;
  }
  position_ += count;
  return mono;
}

Resampler::Resampler(double input_rate, double output_rate) : ratio_(output_rate / input_rate) {
  if (input_rate == output_rate) return;
  soxr_error_t error = nullptr;
  soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT64_I, SOXR_FLOAT64_I);
  soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, 0);
  soxr_ = soxr_create(input_rate, output_rate, 1, &error, &io, &quality, nullptr);
  if (error || !soxr_)
    throw Error("cannot resample " + std::to_string(input_rate) + " Hz to " +
                std::to_string(output_rate) + " Hz: " + (error ? error : "soxr_create failed"));
}

Resampler::~Resampler() {
  if (soxr_) soxr_delete(static_cast<soxr_t>(soxr_));
}

std::vector<double> Resampler::process(const std::vector<double>& input) {
  if (!soxr_) return input;
  std::vector<double> all;
  std::vector<double> output(static_cast<std::size_t>(input.size() * ratio_ + 64));
  std::size_t offset = 0;
  // soxr may take less than all of the input when the output buffer fills: call until it has.
  do {
    std::size_t consumed = 0, produced = 0;
    soxr_error_t error =
        soxr_process(static_cast<soxr_t>(soxr_), input.data() + offset, input.size() - offset,
                     &consumed, output.data(), output.size(), &produced);
    if (error) throw Error(std::string("resampling failed: ") + error);
    all.insert(all.end(), output.begin(), output.begin() + produced);
    offset += consumed;
    if (consumed == 0 && produced == 0) break;
  } while (offset < input.size());
  return all;
}

std::vector<double> resample_whole(const std::vector<double>& samples, double from, double to,
                                   int64_t length) {
  Resampler resampler(from, to);
  auto out = resampler.process(samples);
  auto rest = resampler.flush();
  out.insert(out.end(), rest.begin(), rest.end());
  if (length >= 0) out.resize(static_cast<std::size_t>(length), 0.0);
  return out;
}

std::vector<double> Resampler::flush() {
  if (!soxr_) return {};
  std::vector<double> all;
  std::vector<double> output(4096);
  while (true) {
    std::size_t produced = 0;
    soxr_error_t error = soxr_process(static_cast<soxr_t>(soxr_), nullptr, 0, nullptr,
                                      output.data(), output.size(), &produced);
    if (error) throw Error(std::string("resampling failed: ") + error);
    if (produced == 0) break;
    all.insert(all.end(), output.begin(), output.begin() + produced);
  }
  return all;
}

AudioWriter::AudioWriter(const std::filesystem::path& path, int sample_rate)
    : path_(path), temporary_(temporary_sibling(path)) {
  if (path.has_parent_path()) ensure_directory(path.parent_path());
  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = 1;
  info.format = SF_FORMAT_WAV | SF_FORMAT_FLOAT;
  file_ = sf_open(temporary_.c_str(), SFM_WRITE, &info);
  if (!file_) throw Error(path.string() + ": cannot write (" + sf_strerror(nullptr) + ")");
}

AudioWriter::~AudioWriter() {
  if (file_) sf_close(sndfile(file_));
  if (!committed_) {
    std::error_code ec;
    std::filesystem::remove(temporary_, ec);
  }
}

void AudioWriter::write(const std::vector<double>& samples) {
  if (samples.empty()) return;
  sf_count_t count = static_cast<sf_count_t>(samples.size());
  if (sf_writef_double(sndfile(file_), samples.data(), count) != count)
    throw Error(path_.string() + ": write failed (" + sf_strerror(sndfile(file_)) + ")");
  written_ += count;
}

void AudioWriter::commit() {
  if (sf_close(sndfile(file_)) != 0) {
    file_ = nullptr;
    throw Error(path_.string() + ": write failed when closing");
  }
  file_ = nullptr;
  rename_replace(temporary_, path_);
  committed_ = true;
}

}  // namespace nabu
