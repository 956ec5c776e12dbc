// Logging: human lines on the console and in <expdir>/run.log (spdlog), machine-readable metrics
// as JSON lines in a separate file (MetricsWriter).
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace nabu {

// Nabu's own logger, never spdlog's default one (which belongs to the application the library
// runs in): on first use it writes warnings and errors to stderr, which is what the C++ API does
// unless it is asked otherwise (SeparatorOptions); the program sets it up with setup_logging.
spdlog::logger& logger();
// The logger's level ("trace", "debug", "info", "warn", "error", "off"), on stderr; a bad level is
// an Error naming `what` (the flag or option it came from).
void setup_logging(const std::string& level, const std::string& what = "--log-level");
// Every line of `level` and above to `line` instead of stderr (the C++ API's log callback).
void log_to(const std::string& level, std::function<void(const std::string& level,
                                                          const std::string& message)> line);
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
