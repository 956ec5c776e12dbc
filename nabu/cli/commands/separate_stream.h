// `nabu separate --stream` (separate_stream.cpp): what it is asked and what it reports.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <vector>

namespace nabu {
class TaskSeparation;
}

namespace nabu::cli {

struct StreamRequest {
  std::filesystem::path out;         // folder of s1.pcm, s2.pcm, ...
  double piece_ms = 20.0;            // samples read from stdin per push
  std::function<int()> interrupted;  // a signal number once SIGINT/SIGTERM came, else 0
};

struct StreamReport {
  int sample_rate = 0;
  int64_t samples = 0, piece_samples = 0, lookahead_samples = 0;
  std::vector<double> compute_seconds;  // per push
  std::vector<std::filesystem::path> outputs;
};

// Separates stdin into request.out; throws Error (DataError for an odd byte count,
// SeparationInterrupted on a signal) leaving no regular output file behind.
StreamReport stream_separation(TaskSeparation& separation, const StreamRequest& request);

}  // namespace nabu::cli
