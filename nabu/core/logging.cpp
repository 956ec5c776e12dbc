#include "nabu/core/logging.h"

#include <cmath>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "nabu/core/clock.h"
#include "nabu/core/error.h"
#include "nabu/core/fs.h"

namespace nabu {

namespace {

std::string& prefix() {
  static std::string value;
  return value;
}

std::string pattern() { return "[%Y-%m-%d %H:%M:%S] [%^%l%$] " + prefix() + "%v"; }

std::shared_ptr<spdlog::logger> make_logger(spdlog::level::level_enum level) {
  auto console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("nabu", console);
  logger->set_level(level);
  logger->set_pattern(pattern());
  return logger;
}

}  // namespace

void setup_logging(const std::string& level_name) {
  auto level = spdlog::level::from_str(level_name);
  if (level == spdlog::level::off && level_name != "off")
    throw Error("--log-level '" + level_name + "': expected trace, debug, info, warn or error");
  spdlog::set_default_logger(make_logger(level));
}

void log_to_file(const std::filesystem::path& path) {
  if (path.has_parent_path()) ensure_directory(path.parent_path());
  auto logger = spdlog::default_logger();
  auto& sinks = logger->sinks();
  // Keep the console sink (first) and replace any earlier file sink.
  if (sinks.size() > 1) sinks.resize(1);
  try {
    auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path.string(), false);
    file->set_pattern("[%Y-%m-%d %H:%M:%S] [%l] " + prefix() + "%v");
    sinks.push_back(file);
    // Every line reaches the file at once: `tail -f run.log` follows a training as it goes, a
    // killed process loses no buffered lines, and processes appending to the same log (a
    // training and a test, or workers) interleave whole lines instead of 8 KiB blocks.
    logger->flush_on(spdlog::level::trace);
  } catch (const spdlog::spdlog_ex& e) {
    throw Error(path.string() + ": cannot open log file: " + e.what());
  }
}

void set_log_prefix(const std::string& value) {
  prefix() = value;
  auto logger = spdlog::default_logger();
  for (std::size_t i = 0; i < logger->sinks().size(); ++i)
    logger->sinks()[i]->set_pattern(i == 0 ? pattern()
                                           : "[%Y-%m-%d %H:%M:%S] [%l] " + prefix() + "%v");
}

MetricsWriter::MetricsWriter(const std::filesystem::path& path) {
  if (path.has_parent_path()) ensure_directory(path.parent_path());
  out_.open(path, std::ios::app);
  if (!out_) throw Error(path.string() + ": cannot open metrics file");
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (!out_.is_open()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  out_ << record.dump() << "\n";
  out_.flush();
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto total = static_cast<int64_t>(seconds);
  if (total >= 3600) return fmt::format("{}h{:02d}m", total / 3600, (total % 3600) / 60);
  if (total >= 60) return fmt::format("{}m{:02d}s", total / 60, total % 60);
  return fmt::format("{}s", total);
}

}  // namespace nabu
