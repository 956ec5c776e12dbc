#include "nabu/processing/data_preparation.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include "nabu/core/clock.h"
#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/progress.h"
#include "nabu/core/strings.h"
#include "nabu/processing/database_section.h"
#include "nabu/processing/processor.h"
#include "nabu/processing/store.h"

namespace nabu {

namespace {

// What a store was made from, as one stable hash: the data lines (utterance and fields) and the
// size and modification time of every field that names a file, so a corpus regenerated under the
// same names (other voices, augmentation) makes its stores stale too. Stat only: hashing the
// audio itself would read the whole corpus on every `nabu data`.
std::string fingerprint(const std::vector<DataLine>& lines) {
  std::string text;
  for (const auto& line : lines) {
    text += line.utterance;
    for (const auto& field : line.fields) {
      text += " " + field;
      std::error_code error;
      if (!std::filesystem::is_regular_file(field, error)) continue;
      auto size = std::filesystem::file_size(field, error);
      auto time = std::filesystem::last_write_time(field, error);
      if (!error)
        text += fmt::format("|{}|{}", size, static_cast<long long>(time.time_since_epoch().count()));
    }
    text += "\n";
  }
  return fmt::format("{:016x}", stable_hash(text));
}


// Runs `work(i)` for i in [0, count) on `workers` threads and hands the results to `consume` in
// index order on the calling thread, keeping at most `window` results in memory.
template <class Result>
void ordered_parallel(std::size_t count, int workers, std::size_t window,
                      const std::function<Result(std::size_t)>& work,
                      const std::function<void(std::size_t, Result&)>& consume) {
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::size_t, Result> ready;
  std::size_t next_to_consume = 0, next_to_start = 0;
  std::exception_ptr failure;
  bool stop = false;
  auto worker = [&] {
    while (true) {
      std::size_t index;
      {
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [&] {
          return stop || next_to_start >= count || next_to_start < next_to_consume + window;
        });
        if (stop || next_to_start >= count) return;
        index = next_to_start++;
      }
      try {
        Result result = work(index);
        std::lock_guard<std::mutex> lock(mutex);
        ready.emplace(index, std::move(result));
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!failure) failure = std::current_exception();
        stop = true;
      }
      changed.notify_all();
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < std::max(1, workers); ++i) threads.emplace_back(worker);
  try {
    while (next_to_consume < count) {
      Result result;
      {
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [&] { return stop || ready.count(next_to_consume); });
        if (stop) break;
        result = std::move(ready[next_to_consume]);
        ready.erase(next_to_consume);
      }
      consume(next_to_consume, result);
      {
        std::lock_guard<std::mutex> lock(mutex);
        ++next_to_consume;
      }
      changed.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!failure) failure = std::current_exception();
    stop = true;
  }
  changed.notify_all();
  {
    std::lock_guard<std::mutex> lock(mutex);
    stop = true;
  }
  changed.notify_all();
  for (auto& thread : threads) thread.join();
  if (failure) std::rethrow_exception(failure);
}

// Keeps LibTorch's intra-op pool at one thread while utterances are processed in parallel.
class TorchThreadsGuard {
 public:
  explicit TorchThreadsGuard(int threads) : previous_(torch::get_num_threads()) {
    torch::set_num_threads(threads);
  }
  ~TorchThreadsGuard() { torch::set_num_threads(previous_); }

 private:
  int previous_;
};

struct ProcessedUtterance {
  std::vector<std::vector<std::pair<torch::Tensor, int64_t>>> segments;  // per segment length
  int64_t frames = 0;
  int sample_rate = 0;
};


}  // namespace

DataPreparation::DataPreparation(const Recipe& recipe, std::filesystem::path expdir,
                                 DataPreparationOptions options)
    : recipe_(recipe), expdir_(std::move(expdir)), options_(std::move(options)) {
  if (options_.workers <= 0)
    options_.workers = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

std::vector<SectionSummary> DataPreparation::run() {
  const ConfigFile& database = recipe_.get("database.conf");
  auto order = plan_sections(recipe_, options_);
  // Configuration problems surface before any long work starts.
  for (const auto& name : order) {
    const ConfigSection& section = database.section(name);
    auto options = read_database_section(section, database);
    make_processor(recipe_.processor_config(section));
    try {
      stored_type_for_writer_style(options.writer_style);
    } catch (const ConfigError& e) {
      section.fail("writer_style", e.what());
    }
  }
  logger().info("preparing {} section(s) in this order: {}", order.size(), join(order, ", "));
  std::vector<SectionSummary> summaries;
  for (const auto& name : order) summaries.push_back(prepare(name));
  return summaries;
}

namespace {

// One section's preparation: what it reads, how, and where it writes.
struct SectionWork {
  std::string name, what;  // "[name]" for messages
  const ConfigSection& raw_section;
  DatabaseSectionOptions options;
  const ConfigFile& processor_config;
  std::string config_text;  // the processor config as stored in every store's metadata
  std::vector<DataLine> lines;
  std::string source_lines;  // their fingerprint
  std::string recipe;        // Recipe::origin()

  DataError utterance_error(const DataLine& line, const std::string& message) const {
    return DataError(what + " utterance '" + line.utterance + "' (" + line.origin + "): " +
                     message);
  }
};

// Whether the store of `segment` must be made: missing, or made from other list lines (a
// regenerated corpus) by this section and recipe. A store made with another configuration, or by
// another section or recipe from other lines, is an error (their experiments read it); the same
// data made by another section or recipe (the original's recipes share store_dirs under other
// section names) is reused.
bool store_missing(const SectionWork& work, const std::string& segment) {
  auto path = store_path(work.options.store_dir, segment);
  StoreMetadata metadata;
  if (!read_store_metadata(path, metadata)) return true;
  const bool same_config = metadata.processor_config == work.config_text &&
                           metadata.writer_style == work.options.writer_style;
  const bool other_section = metadata.section != work.name;
  const bool other_recipe = !metadata.recipe.empty() && metadata.recipe != work.recipe;
  const bool other_lines = metadata.source_lines != work.source_lines;
  if (!same_config || ((other_section || other_recipe) && other_lines))
    throw DataError(work.what + ": " + path.string() + " was made " +
                    (other_section ? "for section [" + metadata.section + "] " : std::string()) +
                    (other_recipe ? "by recipe " + metadata.recipe + " " : std::string()) +
                    (same_config ? "from other list lines"
                                 : "with another processor config or writer_style") +
                    "; give this recipe its own store_dir (" +
                    work.raw_section.where("store_dir") + "), or remove the store");
  if (other_section)
    logger().info("{}: {} was made by section [{}] with the same processor config and list "
                 "lines; it is used as it is", work.what, path.string(), metadata.section);
  if (!other_lines) return false;
  logger().info("{}: {} was made from other list lines or other files than {} now name; it is "
               "made again", work.what, path.string(), join(work.options.datafiles, " "));
  return true;
}

// A processor whose output can be stored (not one computed on the fly).
ProcessorPtr storable_processor(const SectionWork& work) {
  ProcessorPtr processor = make_processor(work.processor_config);
  if (!processor->storable()) {
    const ConfigSection& section = work.processor_config.section("processor");
    work.raw_section.fail("processor_config",
                          "processor '" + section.get_string("processor") + "' (feature " +
                              section.get_string("feature", "?") +
                              ") is computed on the fly and cannot be preprocessed; set "
                              "preprocess = False");
  }
  return processor;
}

// String labels numbered before the (parallel) processing, continuing label2index_dir.
void number_labels(const SectionWork& work, Processor& processor) {
  std::vector<std::string> known;
  const auto& options = work.options;
  if (!options.label2index_dir.empty() &&
      !same_directory(options.label2index_dir, options.store_dir)) {
    try {
      known = read_label_index(options.label2index_dir);
    } catch (const Error& e) {
      work.raw_section.fail("label2index_dir", e.what());
    }
  }
  try {
    processor.number_labels(work.lines, known);
  } catch (const DataError& e) {
    throw DataError(work.what + " " + e.what());
  }
  write_label_index(options.store_dir, *processor.alphabet());
  logger().info("{}: {} labels ({} new) -> {}", work.what, processor.alphabet()->size(),
               processor.alphabet()->size() - known.size(),
               (std::filesystem::path(options.store_dir) / "label2index.json").string());
}

// Global mean and variance: computed here when meanandvar_dir is this section's store_dir,
// else read from there.
void prepare_statistics(const SectionWork& work, Processor& processor, int workers) {
  const auto& options = work.options;
  if (options.meanandvar_dir.empty())
    work.raw_section.fail("meanandvar_dir", "required for mvn_type = global");
  auto statistics_path = std::filesystem::path(options.meanandvar_dir) / "mvn_stats.h5";
  if (!same_directory(options.meanandvar_dir, options.store_dir)) {
    processor.set_statistics(MvnStatistics::load(statistics_path));
    return;
  }
  logger().info("{}: computing global mean and variance over {} utterances", work.what,
               work.lines.size());
  MvnAccumulator accumulator;
  ProgressReporter progress(work.what + " statistics", work.lines.size());
  ordered_parallel<torch::Tensor>(
      work.lines.size(), workers, 64,
      [&](std::size_t i) {
        try {
          return processor.statistics_observations(work.lines[i]);
        } catch (const std::exception& e) {
          throw work.utterance_error(work.lines[i], e.what());
        }
      },
      [&](std::size_t i, torch::Tensor& observations) {
        accumulator.add(observations);
        progress.update(i + 1);
      });
  MvnStatistics statistics = accumulator.finish();
  statistics.save(statistics_path);
  processor.set_statistics(statistics);
}

std::vector<std::unique_ptr<StoreWriter>> open_writers(const SectionWork& work,
                                                       Processor& processor,
                                                       const std::vector<std::string>& missing) {
  std::vector<std::unique_ptr<StoreWriter>> writers;
  for (const auto& segment : missing) {
    StoreMetadata metadata;
    metadata.stored_type = stored_type_for_writer_style(work.options.writer_style);
    metadata.nontime_dims = processor.nontime_dims();
    metadata.section = work.name;
    metadata.segment_length = segment;
    metadata.writer_style = work.options.writer_style;
    metadata.processor_config = work.config_text;
    metadata.source_lines = work.source_lines;
    metadata.recipe = work.recipe;
    writers.push_back(
        std::make_unique<StoreWriter>(store_path(work.options.store_dir, segment), metadata));
  }
  return writers;
}

// Every utterance processed (in parallel, written in list order) into the missing stores.
void write_stores(const SectionWork& work, Processor& processor,
                  const std::vector<std::string>& missing, int workers, SectionSummary& summary) {
  auto writers = open_writers(work, processor, missing);
  const FeatureOptions* features = processor.feature_options();
  const double frame_seconds = features ? features->winstep : 0.0;
  const bool samples = features && features->feature == "raw";
  int section_rate = 0;
  ProgressReporter progress(work.what, work.lines.size());
  ordered_parallel<ProcessedUtterance>(
      work.lines.size(), workers, 64,
      [&](std::size_t i) {
        try {
          ProcessedUtterance result;
          auto data = processor.process(work.lines[i], &result.sample_rate);
          result.frames = data.size(0);
          for (const auto& segment : missing)
            result.segments.push_back(processor.segment(data, segment));
          return result;
        } catch (const std::exception& e) {
          throw work.utterance_error(work.lines[i], e.what());
        }
      },
      [&](std::size_t i, ProcessedUtterance& result) {
        if (section_rate == 0) section_rate = result.sample_rate;
        if (result.sample_rate != section_rate)
          throw work.utterance_error(
              work.lines[i], "sample rate " + std::to_string(result.sample_rate) +
                                 " Hz differs from " + std::to_string(section_rate) +
                                 " Hz of the section's first utterance");
        for (std::size_t s = 0; s < missing.size(); ++s) {
          const auto& segments = result.segments[s];
          for (std::size_t k = 0; k < segments.size(); ++k) {
            std::string example = missing[s] == "full"
                                      ? work.lines[i].utterance
                                      : work.lines[i].utterance + "_part" + std::to_string(k);
            writers[s]->append(example, segments[k].first, segments[k].second);
          }
        }
        summary.frames += result.frames;
        summary.audio_seconds += samples ? static_cast<double>(result.frames) / result.sample_rate
                                         : result.frames * frame_seconds;
        progress.update(i + 1);
      });
  for (auto& writer : writers) {
    writer->set_utterances(static_cast<int64_t>(work.lines.size()));
    writer->commit();
    summary.examples += writer->examples();
    summary.bytes += writer->bytes();
  }
}

}  // namespace

SectionSummary DataPreparation::prepare(const std::string& name) {
  const ConfigFile& database = recipe_.get("database.conf");
  const ConfigSection& raw_section = database.section(name);
  const ConfigFile& processor_config = recipe_.processor_config(raw_section);
  SectionWork work{name,           "[" + name + "]",
                   raw_section,    read_database_section(raw_section, database),
                   processor_config, processor_config.to_string(),
                   {},             {},
                   recipe_.origin()};
  work.lines = read_data_lines(work.options.datafiles);
  if (work.lines.empty()) raw_section.fail("datafiles", "the list files contain no utterances");
  work.source_lines = fingerprint(work.lines);
  SectionSummary summary;
  summary.section = name;
  auto start = Clock::now();

  std::vector<std::string> missing;
  for (const auto& segment : work.options.segment_lengths)
    if (store_missing(work, segment)) missing.push_back(segment);
  // Records of what was used, as the original's <expdir>/<section>/ copies.
  if (!expdir_.empty()) {
    ConfigFile record("database.cfg");
    auto& copy = record.add_section(name);
    const ConfigSection resolved = resolve_globalvars(raw_section, database);
    for (const auto& [key, value] : resolved.entries()) copy.set(key, value.text, value.origin);
    record.save(expdir_ / "data" / name / "database.cfg");
    processor_config.save(expdir_ / "data" / name / "processor.cfg");
  }
  if (missing.empty()) {
    logger().info("{}: complete ({} store(s) in {}), skipped", work.what,
                 work.options.segment_lengths.size(), work.options.store_dir);
    summary.skipped = true;
    return summary;
  }

  ProcessorPtr processor = storable_processor(work);
  logger().info("{}: {} utterances -> {} (segment lengths: {})", work.what, work.lines.size(),
               work.options.store_dir, join(missing, " "));
  TorchThreadsGuard torch_threads(options_.workers > 1 ? 1 : torch::get_num_threads());
  if (processor->numbers_labels()) number_labels(work, *processor);
  if (processor->needs_statistics()) prepare_statistics(work, *processor, options_.workers);
  write_stores(work, *processor, missing, options_.workers, summary);
  summary.utterances = static_cast<int64_t>(work.lines.size());
  summary.wall_seconds = seconds_since(start);
  logger().info("{}: done: {} utterances, {} examples, {} frames, {:.1f} MB in {:.1f} s "
               "({:.0f}x real time)",
               work.what, summary.utterances, summary.examples, summary.frames,
               summary.bytes / 1e6, summary.wall_seconds,
               summary.audio_seconds / std::max(summary.wall_seconds, 1e-9));
  return summary;
}

}  // namespace nabu
