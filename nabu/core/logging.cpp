#include "nabu/core/logging.h"

#include <cmath>
#include <mutex>

#include <spdlog/sinks/base_sink.h>
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

// Hands every line to a function (the C++ API's callback).
class FunctionSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  using Line = std::function<void(const std::string&, const std::string&)>;
  explicit FunctionSink(Line line) : line_(std::move(line)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    const auto level = spdlog::level::to_string_view(message.level);
    line_(std::string(level.data(), level.size()),
          std::string(message.payload.data(), message.payload.size()));
  }
  void flush_() override {}

 private:
  Line line_;
};

spdlog::level::level_enum parse_level(const std::string& name, const std::string& what) {
  auto level = spdlog::level::from_str(name);
  if (level == spdlog::level::off && name != "off")
    throw Error(what + " '" + name + "': expected trace, debug, info, warn or error");
  return level;
}

std::shared_ptr<spdlog::logger>& nabu_logger() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto made = std::make_shared<spdlog::logger>(
        "nabu", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    made->set_level(spdlog::level::warn);
    made->set_pattern(pattern());
    return made;
  }();
  return logger;
}

}  // namespace

spdlog::logger& logger() { return *nabu_logger(); }

void setup_logging(const std::string& level_name, const std::string& what) {
  auto level = parse_level(level_name, what);
  auto& logger = nabu_logger();
  logger->sinks().assign({std::make_shared<spdlog::sinks::stderr_color_sink_mt>()});
  logger->set_level(level);
  logger->set_pattern(pattern());
}

void log_to(const std::string& level,
            std::function<void(const std::string&, const std::string&)> line) {
  auto& logger = nabu_logger();
  logger->set_level(parse_level(level, "log_level"));
  logger->sinks().assign({std::make_shared<FunctionSink>(std::move(line))});
}

void log_to_file(const std::filesystem::path& path) {
  if (path.has_parent_path()) ensure_directory(path.parent_path());
  auto& logger = nabu_logger();
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
  auto& logger = nabu_logger();
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
