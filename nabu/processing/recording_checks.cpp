#include "nabu/processing/recording_checks.h"

#include <algorithm>
#include <array>
#include <cctype>

#include <fmt/format.h>

#include "nabu/core/error.h"

namespace nabu {

std::string too_short_problem(double seconds) {
  if (seconds >= kShortestRecordingSeconds) return "";
  return fmt::format("too short: {:.3f} s (nabu takes recordings of {} s or more)", seconds,
                     kShortestRecordingSeconds);
}

std::string truncation_problem(const WavHeader& header) {
  if (!header.truncated()) return "";
  return fmt::format("truncated: the header declares {:.3g} s, the file holds {:.3g} s",
                     header.seconds(),
                     double(header.frames_present) / std::max(1, header.sample_rate));
}

void refuse_truncated_wav(const std::filesystem::path& path) {
  WavHeader header;
  try {
    header = read_wav_header(path);
  } catch (const DataError&) {
    return;  // not a RIFF/WAVE file this reader knows: libsndfile's checks are the rule
  }
  if (auto problem = truncation_problem(header); !problem.empty())
    throw DataError(path.string() + ": " + problem);
}

bool is_audio_of_another_format(const std::filesystem::path& path) {
  static const std::array<const char*, 12> extensions{".flac", ".ogg", ".oga", ".opus", ".mp3",
                                                      ".m4a", ".aac", ".aif", ".aiff", ".au",
                                                      ".wma", ".caf"};
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return std::find(extensions.begin(), extensions.end(), extension) != extensions.end();
}

std::string other_format_problem() {
  return "not a .wav file: nabu prepare reads RIFF/WAVE only; convert it (sox in.flac out.wav) "
         "or move it out";
}

}  // namespace nabu
