#include "nabu/processing/data_preparation.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/strings.h"
#include "nabu/processing/database_section.h"
#include "nabu/processing/processor.h"
#include "nabu/processing/store.h"

namespace nabu {

namespace {

// The data lines (utterance and fields) as one stable hash: what a store was made from.
std::string fingerprint(const std::vector<DataLine>& lines) {
  std::string text;
  for (const auto& line : lines) text += line.utterance + " " + join(line.fields, " ") + "\n";
  return fmt::format("{:016x}", stable_hash(text));
}

using Clock = std::chrono::steady_clock;

std::string normal_path(const std::string& path) {
  return std::filesystem::path(path).lexically_normal().string();
}

std::string strip_slash(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

bool same_directory(const std::string& a, const std::string& b) {
  return strip_slash(normal_path(a)) == strip_slash(normal_path(b));
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
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

class ProgressReporter {
 public:
  ProgressReporter(std::string what, std::size_t total) : what_(std::move(what)), total_(total) {}
  void update(std::size_t done) {
    double elapsed = seconds_since(start_);
    if (done < total_ && elapsed - last_ < 5.0) return;
    last_ = elapsed;
    double rate = done / std::max(elapsed, 1e-9);
    spdlog::info("{}: {}/{} utterances ({:.0f}%), {:.1f} utt/s, ETA {:.0f} s", what_, done, total_,
                 100.0 * done / std::max<std::size_t>(total_, 1), rate,
                 rate > 0 ? (total_ - done) / rate : 0.0);
  }

 private:
  std::string what_;
  std::size_t total_;
  Clock::time_point start_ = Clock::now();
  double last_ = 0;
};

}  // namespace

std::vector<std::string> preparation_order(const ConfigFile& database) {
  struct Node {
    std::string name, store_dir, meanandvar_dir;
    std::vector<std::string> dependencies;
  };
  std::vector<Node> nodes;
  std::map<std::string, std::size_t> position;
  for (const auto& section : database.sections()) {
    if (section.name() == "globalvars") continue;
    auto options = read_database_section(section, database);
    if (!options.preprocess) continue;
    position[section.name()] = nodes.size();
    nodes.push_back({section.name(), options.store_dir, options.meanandvar_dir,
                     options.dependency_names()});
  }
  // Edges: explicit dependencies that are prepared here, and the statistics' producer.
  std::vector<std::set<std::size_t>> before(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    // `dependencies` is documentation in the original, which never reads it: a name that is no
    // section orders nothing (nabu check warns about it).
    for (const auto& dependency : nodes[i].dependencies) {
      auto it = position.find(dependency);
      if (it != position.end() && it->second != i) before[i].insert(it->second);
    }
    if (!nodes[i].meanandvar_dir.empty() &&
        !same_directory(nodes[i].meanandvar_dir, nodes[i].store_dir))
      for (std::size_t j = 0; j < nodes.size(); ++j)
        if (j != i && same_directory(nodes[j].store_dir, nodes[i].meanandvar_dir))
          before[i].insert(j);
  }
  // Kahn's algorithm, taking the earliest ready section in file order.
  std::vector<std::string> order;
  std::vector<bool> done(nodes.size(), false);
  while (order.size() < nodes.size()) {
    bool progressed = false;
    for (std::size_t i = 0; i < nodes.size() && !progressed; ++i) {
      if (done[i]) continue;
      bool ready = std::all_of(before[i].begin(), before[i].end(),
                               [&](std::size_t j) { return done[j]; });
      if (!ready) continue;
      done[i] = true;
      order.push_back(nodes[i].name);
      progressed = true;
    }
    if (!progressed) {
      std::vector<std::string> cycle;
      for (std::size_t i = 0; i < nodes.size(); ++i)
        if (!done[i]) cycle.push_back(nodes[i].name);
      throw ConfigError(database.path() + ": dependency cycle between sections " +
                        join(cycle, ", ") + " (dependencies / meanandvar_dir)");
    }
  }
  return order;
}

DataPreparation::DataPreparation(const Recipe& recipe, std::filesystem::path expdir,
                                 DataPreparationOptions options)
    : recipe_(recipe), expdir_(std::move(expdir)), options_(std::move(options)) {
  if (options_.workers <= 0)
    options_.workers = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

std::vector<SectionSummary> DataPreparation::run() {
  const ConfigFile& database = recipe_.get("database.conf");
  auto order = preparation_order(database);
  if (!options_.sections.empty()) {
    for (const auto& name : options_.sections)
      if (std::find(order.begin(), order.end(), name) == order.end())
        throw ConfigError("--section " + name + ": not a section with preprocess = True" +
                          did_you_mean(name, order));
    order = keep_selected(order, {options_.sections.begin(), options_.sections.end()});
  } else if (options_.only_used_sections) {
    order = keep_selected(order, used_sections());
  }
  check_statistics_exist(order);
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
  spdlog::info("preparing {} section(s) in this order: {}", order.size(), join(order, ", "));
  std::vector<SectionSummary> summaries;
  for (const auto& name : order) summaries.push_back(prepare(name));
  return summaries;
}

std::vector<std::string> DataPreparation::keep_selected(const std::vector<std::string>& order,
                                                        const std::set<std::string>& selected) {
  std::vector<std::string> kept;
  for (const auto& name : order) {
    if (selected.count(name)) {
      kept.push_back(name);
      continue;
    }
    spdlog::info("[{}]: skipped: {}", name,
                 options_.sections.empty()
                     ? "no task of this recipe uses it (--all-sections prepares every section)"
                     : "not named by --section");
  }
  return kept;
}

const ConfigSection* DataPreparation::statistics_producer(const ConfigSection& section) const {
  const ConfigFile& database = recipe_.get("database.conf");
  auto options = read_database_section(section, database);
  if (options.meanandvar_dir.empty() || same_directory(options.meanandvar_dir, options.store_dir))
    return nullptr;
  for (const auto& other : database.sections()) {
    if (other.name() == "globalvars" || other.name() == section.name()) continue;
    auto other_options = read_database_section(other, database);
    if (other_options.preprocess && same_directory(other_options.store_dir, options.meanandvar_dir))
      return &other;
  }
  return nullptr;
}

bool DataPreparation::needs_statistics(const ConfigSection& section) const {
  auto options = read_database_section(section, recipe_.get("database.conf"));
  if (options.processor_config.empty()) return false;
  return make_processor(recipe_.processor_config(section))->needs_statistics();
}

std::set<std::string> DataPreparation::used_sections() const {
  const ConfigFile& database = recipe_.get("database.conf");
  std::set<std::string> selected;
  std::vector<std::string> pending;
  for (const auto& [name, where] : options_.used_sections) {
    if (!database.has_section(name)) continue;  // nabu check reports it
    spdlog::info("[{}]: used by {}", name, join(where, ", "));
    if (selected.insert(name).second) pending.push_back(name);
  }
  // The sections that compute the statistics the used ones normalise with, transitively.
  while (!pending.empty()) {
    const ConfigSection& section = database.section(pending.back());
    pending.pop_back();
    if (!needs_statistics(section)) continue;
    if (const ConfigSection* producer = statistics_producer(section))
      if (selected.insert(producer->name()).second) {
        spdlog::info("[{}]: computes the statistics of [{}]", producer->name(), section.name());
        pending.push_back(producer->name());
      }
  }
  return selected;
}

void DataPreparation::check_statistics_exist(const std::vector<std::string>& order) const {
  const ConfigFile& database = recipe_.get("database.conf");
  std::set<std::string> checked(order.begin(), order.end());
  // Sections computed on the fly (preprocess = False) that the tasks use need statistics too.
  for (const auto& [name, where] : options_.used_sections)
    if (database.has_section(name) && options_.sections.empty()) checked.insert(name);
  for (const auto& name : checked) {
    const ConfigSection& section = database.section(name);
    auto options = read_database_section(section, database);
    if (options.meanandvar_dir.empty() ||
        same_directory(options.meanandvar_dir, options.store_dir) || !needs_statistics(section))
      continue;
    const ConfigSection* producer = statistics_producer(section);
    if (producer && std::find(order.begin(), order.end(), producer->name()) != order.end())
      continue;  // made here, before this section
    auto statistics = std::filesystem::path(options.meanandvar_dir) / "mvn_stats.h5";
    if (std::filesystem::exists(statistics)) continue;
    section.fail("meanandvar_dir",
                 "[" + name + "] normalises with the statistics in " + options.meanandvar_dir +
                     ", which do not exist; " +
                     (producer ? "section [" + producer->name() +
                                     "] of this recipe makes them (nabu data --section " +
                                     producer->name() + ")"
                               : std::string("no section of this recipe makes them (none has "
                                             "store_dir = ") +
                                     options.meanandvar_dir + "): prepare the recipe that does"));
  }
}

SectionSummary DataPreparation::prepare(const std::string& name) {
  const ConfigFile& database = recipe_.get("database.conf");
  const ConfigSection& raw_section = database.section(name);
  ConfigSection section = resolve_globalvars(raw_section, database);
  DatabaseSectionOptions options = read_database_section(raw_section, database);
  const ConfigFile& processor_config = recipe_.processor_config(raw_section);
  std::string config_text = processor_config.to_string();
  SectionSummary summary;
  summary.section = name;
  auto start = Clock::now();
  std::string what = "[" + name + "]";

  // Which stores are still missing; a store made with another configuration is an error, one
  // made from other list lines (a regenerated corpus) is stale and made again.
  auto lines = read_data_lines(options.datafiles);
  if (lines.empty()) raw_section.fail("datafiles", "the list files contain no utterances");
  const std::string source_lines = fingerprint(lines);
  std::vector<std::string> missing;
  for (const auto& segment : options.segment_lengths) {
    auto path = store_path(options.store_dir, segment);
    StoreMetadata metadata;
    if (!read_store_metadata(path, metadata)) {
      missing.push_back(segment);
      continue;
    }
    // The configuration first: a store another section or config made is never overwritten,
    // whatever its list lines.
    if (metadata.processor_config != config_text || metadata.section != name ||
        metadata.writer_style != options.writer_style)
      throw DataError(what + ": " + path.string() + " was made " +
                      (metadata.section != name ? "for section [" + metadata.section + "]"
                                                : std::string("with another processor config or "
                                                              "writer_style")) +
                      "; remove it or change store_dir");
    if (metadata.source_lines != source_lines) {
      spdlog::info("{}: {} was made from other list lines than {}; it is made again", what,
                   path.string(), join(options.datafiles, " "));
      missing.push_back(segment);
    }
  }
  // Records of what was used, as the original's <expdir>/<section>/ copies.
  if (!expdir_.empty()) {
    ConfigFile record("database.cfg");
    auto& copy = record.add_section(name);
    for (const auto& [key, value] : section.entries()) copy.set(key, value.text, value.origin);
    record.save(expdir_ / "data" / name / "database.cfg");
    processor_config.save(expdir_ / "data" / name / "processor.cfg");
  }
  if (missing.empty()) {
    spdlog::info("{}: complete ({} store(s) in {}), skipped", what, options.segment_lengths.size(),
                 options.store_dir);
    summary.skipped = true;
    return summary;
  }

  ProcessorPtr processor = make_processor(processor_config);
  if (!processor->storable())
    raw_section.fail("processor_config", "processor '" +
                                             processor_config.section("processor").get_string("processor") +
                                             "' (feature " +
                                             processor_config.section("processor").get_string("feature", "?") +
                                             ") is computed on the fly and cannot be preprocessed; "
                                             "set preprocess = False");
  StoredType stored_type = stored_type_for_writer_style(options.writer_style);
  spdlog::info("{}: {} utterances -> {} (segment lengths: {})", what, lines.size(),
               options.store_dir, join(missing, " "));
  TorchThreadsGuard torch_threads(options_.workers > 1 ? 1 : torch::get_num_threads());

  auto wrap = [&](const DataLine& line, const std::exception& e) {
    return DataError(what + " utterance '" + line.utterance + "' (" + line.origin +
                     "): " + e.what());
  };

  // Global mean/variance: computed here when meanandvar_dir is this section's store_dir.
  if (processor->needs_statistics()) {
    if (options.meanandvar_dir.empty())
      raw_section.fail("meanandvar_dir", "required for mvn_type = global");
    auto statistics_path = std::filesystem::path(options.meanandvar_dir) / "mvn_stats.h5";
    if (same_directory(options.meanandvar_dir, options.store_dir)) {
      spdlog::info("{}: computing global mean and variance over {} utterances", what,
                   lines.size());
      MvnAccumulator accumulator;
      ProgressReporter progress(what + " statistics", lines.size());
      ordered_parallel<torch::Tensor>(
          lines.size(), options_.workers, 64,
          [&](std::size_t i) {
            try {
              return processor->statistics_observations(lines[i]);
            } catch (const std::exception& e) {
              throw wrap(lines[i], e);
            }
          },
          [&](std::size_t i, torch::Tensor& observations) {
            accumulator.add(observations);
            progress.update(i + 1);
          });
      MvnStatistics statistics = accumulator.finish();
      statistics.save(statistics_path);
      processor->set_statistics(statistics);
    } else {
      processor->set_statistics(MvnStatistics::load(statistics_path));
    }
  }

  std::vector<std::unique_ptr<StoreWriter>> writers;
  for (const auto& segment : missing) {
    StoreMetadata metadata;
    metadata.stored_type = stored_type;
    metadata.nontime_dims = processor->nontime_dims();
    metadata.section = name;
    metadata.segment_length = segment;
    metadata.writer_style = options.writer_style;
    metadata.processor_config = config_text;
    metadata.source_lines = source_lines;
    writers.push_back(
        std::make_unique<StoreWriter>(store_path(options.store_dir, segment), metadata));
  }
  const FeatureOptions* features = processor->feature_options();
  double frame_seconds = features ? features->winstep : 0.0;
  int section_rate = 0;
  ProgressReporter progress(what, lines.size());
  ordered_parallel<ProcessedUtterance>(
      lines.size(), options_.workers, 64,
      [&](std::size_t i) {
        try {
          ProcessedUtterance result;
          auto data = processor->process(lines[i], &result.sample_rate);
          result.frames = data.size(0);
          for (const auto& segment : missing) result.segments.push_back(processor->segment(data, segment));
          return result;
        } catch (const std::exception& e) {
          throw wrap(lines[i], e);
        }
      },
      [&](std::size_t i, ProcessedUtterance& result) {
        if (section_rate == 0) section_rate = result.sample_rate;
        if (result.sample_rate != section_rate)
          throw DataError(what + " utterance '" + lines[i].utterance + "' (" + lines[i].origin +
                          "): sample rate " + std::to_string(result.sample_rate) +
                          " Hz differs from " + std::to_string(section_rate) +
                          " Hz of the section's first utterance");
        for (std::size_t s = 0; s < missing.size(); ++s) {
          const auto& segments = result.segments[s];
          for (std::size_t k = 0; k < segments.size(); ++k) {
            std::string example = missing[s] == "full"
                                      ? lines[i].utterance
                                      : lines[i].utterance + "_part" + std::to_string(k);
            writers[s]->append(example, segments[k].first, segments[k].second);
          }
        }
        summary.frames += result.frames;
        bool samples = features && features->feature == "raw";
        summary.audio_seconds +=
            samples ? static_cast<double>(result.frames) / result.sample_rate
                    : result.frames * frame_seconds;
        progress.update(i + 1);
      });
  for (auto& writer : writers) {
    writer->set_utterances(static_cast<int64_t>(lines.size()));
    writer->commit();
    summary.examples += writer->examples();
    summary.bytes += writer->bytes();
  }
  summary.utterances = static_cast<int64_t>(lines.size());
  summary.wall_seconds = seconds_since(start);
  spdlog::info("{}: done: {} utterances, {} examples, {} frames, {:.1f} MB in {:.1f} s "
               "({:.0f}x real time)",
               what, summary.utterances, summary.examples, summary.frames, summary.bytes / 1e6,
               summary.wall_seconds,
               summary.audio_seconds / std::max(summary.wall_seconds, 1e-9));
  return summary;
}

}  // namespace nabu
