// What nabu says of a recording a user hands it, one rule per problem and the same line in every
// command that reads one (nabu prepare folder, nabu separate, the C++ API's read_audio):
// truncated files, files too short to separate or to train on, and audio of another format
// among a folder's wavs (docs/own_data.md, "What can go wrong").
#pragma once

#include <filesystem>
#include <string>

#include "nabu/processing/wav_header.h"

namespace nabu {

// Shorter than this, a recording is refused: half a second holds a syllable or two, and the
// mixtures made of it, or its separation, measure nothing.
constexpr double kShortestRecordingSeconds = 0.5;

// "too short: 0.010 s (nabu takes recordings of 0.5 s or more)"; empty when long enough.
std::string too_short_problem(double seconds);
// "truncated: the header declares 4.85 s, the file holds 1.25 s"; empty when complete.
std::string truncation_problem(const WavHeader& header);
// Throws DataError "<path>: truncated: ..." when `path` is a RIFF/WAVE file that holds fewer
// samples than its header declares (libsndfile reads such a file quietly as a shorter one).
void refuse_truncated_wav(const std::filesystem::path& path);
// An audio file by its extension that nabu prepare does not read (it reads RIFF/WAVE only):
// flac, ogg, mp3, ...
bool is_audio_of_another_format(const std::filesystem::path& path);
// The line for such a file.
std::string other_format_problem();

}  // namespace nabu
