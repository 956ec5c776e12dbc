// Logging: human lines on the console and in <expdir>/run.log (spdlog), machine-readable metrics
// as JSON lines in a separate file (MetricsWriter).
#pragma once

#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace nabu {

// Console logger with the given level ("trace", "debug", "info", "warn", "error").
void setup_logging(const std::string& level);
// Also write every log line to this file (appending). Replaces an earlier log file.
void log_to_file(const std::filesystem::path& path);
// Prefix every line (e.g. "[rank 1] ") for multi-process runs.
void set_log_prefix(const std::string& prefix);

class MetricsWriter {
 public:
  MetricsWriter() = default;
  explicit MetricsWriter(const std::filesystem::path& path);  // appends
  bool enabled() const { return out_.is_open(); }
  void write(const nlohmann::json& record);  // one line, flushed

 private:
  std::ofstream out_;
  std::mutex mutex_;
};

}  // namespace nabu
