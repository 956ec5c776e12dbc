#include "nabu/evaluation/evaluation_run.h"

#include <signal.h>

#include <cerrno>
#include <cstdlib>
#include <optional>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/logging.h"
#include "nabu/core/progress.h"
#include "nabu/core/strings.h"
#include "nabu/evaluation/scorers/score_summary.h"
#include "nabu/inference/chunked_separation.h"
#include "nabu/processing/audio.h"
#include "nabu/processing/audio_stream.h"
#include "nabu/evaluation/recognition.h"
#include "nabu/inference/task_separation.h"
#include "nabu/evaluation/speaker_verification.h"

namespace nabu {

namespace {

// The scorers of one task with the side data they read: references and the mixture.
struct ScoringData {
  std::vector<ScorerPtr> scorers;
  std::vector<ScoreSummary> summaries;
  std::unique_ptr<SectionReader> sources, mixture, noise;  // noise: for sdr_snr
};

void write_json(const fs::path& path, const nlohmann::json& value) {
  write_file_atomic(path, value.dump(2) + "\n");
}

ScoringData make_scoring(const Recipe& recipe, const std::string& task) {
  ScoringData scoring;
  const ConfigFile* scorer_cfg = recipe.find("scorer.cfg");
  const ConfigSection* section = scorer_cfg ? scorer_cfg->find_section(task) : nullptr;
  if (!section) {
    logger().warn("task {}: no [{}] in scorer.cfg: signals are reconstructed but not scored", task,
                 task);
    return scoring;
  }
  scoring.scorers = make_scorers(*section);
  const auto& options = scoring.scorers.front()->options();
  scoring.sources = std::make_unique<SectionReader>(recipe, options.org_src);
  scoring.mixture = std::make_unique<SectionReader>(recipe, options.base);
  for (const auto& scorer : scoring.scorers)
    if (scorer->needs_noise() && !scoring.noise)
      scoring.noise = std::make_unique<SectionReader>(recipe, options.noise);
  const ConfigFile& database = recipe.get("database.conf");
  const ConfigSection& spkinfo = database.section(options.spkinfo);
  SpeakerInfo speakers;
  for (const auto& file : spkinfo.get_list("datafiles")) {
    try {
      auto more = read_speaker_info(file);
      speakers.insert(more.begin(), more.end());
    } catch (const DataError& e) {
      throw DataError(spkinfo.where("datafiles") + ": " + e.what());
    }
  }
  for (const auto& scorer : scoring.scorers)
    scoring.summaries.emplace_back(scorer->metrics(), speakers);
  return scoring;
}

// The scores of each scorer (in scoring.scorers' order), also added to their summaries.
std::vector<UtteranceScore> score(ScoringData& scoring, const Separation& separation) {
  std::vector<UtteranceScore> scores;
  if (scoring.scorers.empty()) return scores;
  auto references = scoring.sources->read(separation.utterance);
  auto mixture = scoring.mixture->read(separation.utterance).reshape({-1});
  int64_t length = std::min({references.size(1), mixture.size(0), separation.signals.size(1)});
  torch::Tensor noise;
  if (scoring.noise) {
    noise = scoring.noise->read(separation.utterance).reshape({-1});
    length = std::min(length, noise.size(0));
    noise = noise.slice(0, 0, length);
  }
  references = references.slice(1, 0, length);
  mixture = mixture.slice(0, 0, length);
  auto estimates = separation.signals.slice(1, 0, length);
  for (std::size_t i = 0; i < scoring.scorers.size(); ++i) {
    try {
      scores.push_back(scoring.scorers[i]->evaluate(references, estimates, mixture, noise,
                                                    separation.sample_rate));
    } catch (const Error& e) {
      throw DataError("test utterance " + separation.utterance + ": " + e.what());
    }
    scoring.summaries[i].add(separation.utterance, scores.back());
  }
  return scores;
}

// Each signal of [S, N] scaled to max |x| = 1, as whole-utterance reconstructions are.
torch::Tensor normalised_to_peak(const torch::Tensor& signals) {
  return signals / signals.abs().amax(1, /*keepdim=*/true).clamp_min(1e-12);
}

// The test mixture of `whole` separated from its audio in chunks, each signal normalised to
// max |x| = 1 as whole-utterance reconstructions are.
torch::Tensor separate_in_chunks(TaskSeparation& task, const Separation& whole,
                                 const TestRunOptions& options) {
  Audio audio = read_audio_fields(task.mixture_line(whole.utterance).fields);
  if (audio.sample_rate != whole.sample_rate)
    throw DataError("test utterance " + whole.utterance + ": its mixture audio is at " +
                    std::to_string(audio.sample_rate) + " Hz, the model's data at " +
                    std::to_string(whole.sample_rate) + " Hz");
  return normalised_to_peak(
      separate_in_chunks(task, audio.samples.reshape({-1}), audio.sample_rate,
                         ChunkOptions{options.chunk_seconds, options.overlap_seconds}));
}

// Each separated signal written to <wav_dir>/s<k>/<utterance>.wav, its line (with the paths the
// files will have in <final_wav_dir>) appended to `pointers`; returns those paths.
std::vector<std::string> write_reconstructions(const Separation& separation,
                                               const fs::path& wav_dir,
                                               const fs::path& final_wav_dir,
                                               std::string& pointers) {
  std::vector<std::string> paths;
  for (int64_t s = 0; s < separation.signals.size(0); ++s) {
    fs::path relative = fs::path("s" + std::to_string(s + 1)) / (separation.utterance + ".wav");
    write_audio((wav_dir / relative).string(), separation.signals[s], separation.sample_rate);
    paths.push_back((final_wav_dir / relative).string());
  }
  pointers += separation.utterance + " " + join(paths, " ") + "\n";
  return paths;
}

// The temporary siblings of `folder` ("<folder>.tmp.<pid>.<n>", "<folder>.old.tmp.<pid>.<n>")
// that a killed run left: those of processes that are gone (a concurrent run keeps its own).
void remove_abandoned_stagings(const fs::path& folder) {
  std::error_code ec;
  const std::string name = folder.filename().string();
  for (const auto& entry : fs::directory_iterator(folder.parent_path(), ec)) {
    const std::string sibling = entry.path().filename().string();
    for (const std::string& prefix : {name + ".tmp.", name + ".old.tmp."}) {
      if (sibling.rfind(prefix, 0) != 0) continue;
      const long pid = std::strtol(sibling.c_str() + prefix.size(), nullptr, 10);
      if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
        fs::remove_all(entry.path(), ec);
    }
  }
}

}  // namespace

std::string unsupported_output_handling(const ConfigSection& task) {
  std::string handling = task.get_string("output_handling_type", "reconstructor");
  if (handling == "reconstructor" || handling == "speaker_verification") return "";
  return task.where("output_handling_type") + ": [" + task.name() + "] output_handling_type = " +
         handling + " is not known (reconstructor: separated and scored signals; "
         "speaker_verification: speaker vectors scored in trials)";
}

std::string test_folder_name(const TestRunOptions& options) {
  return std::string("test") + (options.model != "final" ? "_" + options.model : "") +
         (options.chunk_seconds > 0 ? fmt::format("_chunks_{}s", options.chunk_seconds)
                                    : std::string()) +
         (options.max_utterances >= 0 ? fmt::format("_first{}", options.max_utterances)
                                      : std::string());
}

namespace {

// Every utterance, worst first, with its files (CSV); the summaries (JSON); the tables, with the
// five worst of the first scorer, on the console.
void write_scorer_results(const ScoringData& scoring, const std::string& task,
                          const fs::path& testdir,
                          const std::map<std::string, std::vector<std::string>>& files,
                          const TestRunOptions& options) {
  for (std::size_t i = 0; i < scoring.scorers.size(); ++i) {
    const auto& type = scoring.scorers[i]->type();
    const auto& summary = scoring.summaries[i];
    const std::string stem = "results_" + task + "_" + type;
    write_json(testdir / (stem + "_complete.json"), summary.complete_json());
    write_json(testdir / (stem + "_summary.json"), summary.summary_json());
    write_file_atomic(testdir / (stem + "_utterances.csv"), summary.utterances_csv(files));
    if (!options.on_summary) continue;
    const std::string unit = scoring.scorers[i]->unit();
    options.on_summary(summary.summary_text(type, unit) +
                       (i == 0 ? summary.worst_text(5, files, unit) : ""));
  }
}

// A test task that separates: every test mixture separated (whole, or in chunks), written to
// reconstructions/<task>/ with pointers.scp, scored by scorer.cfg's scorers; `record` (when a
// speaker-verification task reads this one) gets the masks and permutations.
EvaluationResult run_separation_test(const Recipe& recipe, TrainedExperiment& separator,
                                     const std::string& task, const fs::path& testdir,
                                     const fs::path& final_testdir, const TestRunOptions& options,
                                     SeparatedTaskRecord* record) {
  auto run = std::make_unique<TaskSeparation>(separator, task);
  ScoringData scoring = make_scoring(recipe, task);
  const fs::path wav_dir = testdir / "reconstructions" / task;
  const fs::path final_wav_dir = final_testdir / "reconstructions" / task;
  std::string pointers;
  // Per utterance the files to listen to: the mixture, then the separated signals.
  std::map<std::string, std::vector<std::string>> files;
  int64_t done = 0;
  auto loss = run->evaluate(options.max_utterances, [&](const Separation& whole) {
    Separation separation = whole;
    if (options.chunk_seconds > 0) separation.signals = separate_in_chunks(*run, whole, options);
    auto paths = write_reconstructions(separation, wav_dir, final_wav_dir, pointers);
    if (scoring.mixture && scoring.mixture->has(separation.utterance))
      paths.insert(paths.begin(), scoring.mixture->line(separation.utterance).fields.front());
    files[separation.utterance] = paths;
    auto scores = score(scoring, separation);
    if (record) {
      if (separation.masks.defined())
        record->masks[separation.utterance] = separation.masks.to(torch::kHalf);
      for (std::size_t i = 0; i < scores.size(); ++i) {
        auto perm = scores[i].permutation.find("SS");
        if (perm != scores[i].permutation.end())
          record->permutations[scoring.scorers[i]->type()][separation.utterance] = perm->second;
      }
    }
    ++done;
  });
  write_file_atomic(wav_dir / "pointers.scp", pointers);
  logger().info("task {}: test loss {:.6g} over {} utterances; {} reconstructed into {}", task,
               loss.value(), loss.examples, done, final_wav_dir.string());
  write_scorer_results(scoring, task, testdir, files, options);
  return loss;
}

// One test task of whatever kind (speaker verification, recognition, separation);
// `read_for_masks`: the separated tasks whose masks speaker-verification tasks read.
EvaluationResult run_test_task(const Recipe& recipe, TrainedExperiment& separator,
                               const std::string& task,
                               const std::vector<std::string>& read_for_masks,
                               const fs::path& testdir, const fs::path& final_testdir,
                               const TestRunOptions& options,
                               std::map<std::string, SeparatedTaskRecord>& separated) {
  const ConfigFile& test_cfg = recipe.get("test_evaluator.cfg");
  const ConfigSection& evaluator = test_cfg.section("evaluator");
  if (!test_cfg.has_section(task))
    throw ConfigError(evaluator.where("tasks") + ": no section [" + task + "]" +
                      did_you_mean(task, test_cfg.section_names()));
  if (std::string problem = unsupported_output_handling(test_cfg.section(task)); !problem.empty())
    throw ConfigError(problem);
  if (is_speaker_verification_task(test_cfg.section(task))) {
    if (options.chunk_seconds > 0)
      throw Error("--chunk-seconds separates test mixtures in chunks; task " + task +
                  " is a speaker_verification task");
    return run_speaker_verification_test(recipe, separator, task, testdir,
                                         options.max_utterances, options.seed, separated,
                                         options.on_summary);
  }
  if (is_recognition_task(recipe, task)) {
    if (options.chunk_seconds > 0)
      throw Error("--chunk-seconds separates test mixtures in chunks; task " + task +
                  " is a recognition task (decoder.cfg), recognised whole");
    return run_recognition_test(recipe, separator, task, testdir, options.max_utterances,
                                options.on_summary);
  }
  SeparatedTaskRecord* record = nullptr;
  if (std::count(read_for_masks.begin(), read_for_masks.end(), task)) record = &separated[task];
  return run_separation_test(recipe, separator, task, testdir, final_testdir, options, record);
}

// Fills a temporary sibling of `final_testdir` that replaces it when `fill` is done, so the
// folder holds one run's results only (no wavs of an earlier run with other options), and an
// interrupted or failed run leaves the previous results as they were.
void write_results_folder(
    const fs::path& final_testdir,
    const std::function<void(const fs::path& testdir, const fs::path& final_testdir)>& fill) {
  remove_abandoned_stagings(final_testdir);
  AtomicPath staged(final_testdir);
  const fs::path testdir = staged.temporary();
  ensure_directory(testdir);
  fill(testdir, final_testdir);
  // The previous results move aside (removed when `previous` dies), the new ones into place.
  std::optional<AtomicPath> previous;
  if (fs::exists(final_testdir)) {
    previous.emplace(final_testdir.string() + ".old");
    rename_replace(final_testdir, previous->temporary());
  }
  staged.commit();
  logger().info("test results in {}", final_testdir.string());
}

// The scorers of a test task an exported model is tested on: a separation task of
// test_evaluator.cfg with its [task] in scorer.cfg, whose base section lists the mixtures.
ScoringData exported_task_scoring(const Recipe& recipe, const std::string& task) {
  const ConfigFile& test_cfg = recipe.get("test_evaluator.cfg");
  if (!test_cfg.has_section(task))
    throw ConfigError(test_cfg.section("evaluator").where("tasks") + ": no section [" + task +
                      "]" + did_you_mean(task, test_cfg.section_names()));
  const ConfigSection& section = test_cfg.section(task);
  if (std::string problem = unsupported_output_handling(section); !problem.empty())
    throw ConfigError(problem);
  if (is_speaker_verification_task(section) || is_recognition_task(recipe, task))
    throw ConfigError(section.where() + ": task " + task + " is not a separation task; an "
                      "exported model is tested on separation tasks only (--task)");
  const ConfigFile* scorer_cfg = recipe.find("scorer.cfg");
  if (!scorer_cfg || !scorer_cfg->find_section(task))
    throw ConfigError(recipe.dir().string() + "/scorer.cfg: no section [" + task +
                      "]: an exported model is tested through the scorer's mixtures (base) and "
                      "references (org_src)");
  ScoringData scoring = make_scoring(recipe, task);
  if (scoring.mixture->lines().empty())
    throw DataError("task " + task + ": the list of [" + scoring.mixture->section() +
                    "] has no mixtures");
  scoring.sources->lines();  // a missing list is reported before anything is separated
  return scoring;
}

// A mixture at any rate separated as nabu separate does: resampled to the model's rate, whole or
// in chunks, and each signal back to the mixture's rate and exact length ([S, N]).
torch::Tensor separate_at_model_rate(const ChunkModel& model, const Audio& audio,
                                     const ChunkOptions& chunks) {
  auto samples = audio.samples.reshape({-1}).to(torch::kFloat64).contiguous();
  if (audio.sample_rate == model.sample_rate) return separate_in_chunks(model, samples, chunks);
  std::vector<double> input(samples.data_ptr<double>(), samples.data_ptr<double>() + samples.numel());
  auto at_model = separate_in_chunks(
      model, torch::tensor(resample_whole(input, audio.sample_rate, model.sample_rate)), chunks);
  std::vector<torch::Tensor> back;
  for (int64_t s = 0; s < at_model.size(0); ++s) {
    auto row = at_model[s].to(torch::kFloat64).contiguous();
    back.push_back(torch::tensor(resample_whole(
        std::vector<double>(row.data_ptr<double>(), row.data_ptr<double>() + row.numel()),
        model.sample_rate, audio.sample_rate, samples.numel())));
  }
  return torch::stack(back);
}

// One task's mixtures (scorer.cfg's base list) separated by an exported model from their audio
// (at the model's rate, or resampled to it and back as nabu separate does), whole or in chunks,
// each signal normalised to max |x| = 1 as in an experiment's test, written to
// reconstructions/<task>/ with pointers.scp and scored at the mixtures' rate.
void run_exported_task(const ChunkModel& model, const std::string& task, ScoringData& scoring,
                       const fs::path& testdir, const fs::path& final_testdir,
                       const TestRunOptions& options) {
  const auto& lines = scoring.mixture->lines();
  std::size_t count = lines.size();
  if (options.max_utterances >= 0)
    count = std::min(count, static_cast<std::size_t>(options.max_utterances));
  const fs::path wav_dir = testdir / "reconstructions" / task;
  const fs::path final_wav_dir = final_testdir / "reconstructions" / task;
  std::string pointers;
  std::map<std::string, std::vector<std::string>> files;
  ProgressReporter progress("task " + task + ": separating", count);
  for (std::size_t i = 0; i < count; ++i) {
    const DataLine& line = lines[i];
    Audio audio = read_audio_fields(line.fields);
    const int64_t references = scoring.sources->read(line.utterance).size(0);
    if (references != model.speakers)
      throw DataError("test utterance " + line.utterance + " (" + scoring.sources->section() +
                      "): " + std::to_string(references) + " reference signals, the model "
                      "separates " + std::to_string(model.speakers) + " speakers");
    Separation separation;
    separation.utterance = line.utterance;
    separation.sample_rate = audio.sample_rate;
    separation.signals = normalised_to_peak(separate_at_model_rate(
        model, audio, ChunkOptions{options.chunk_seconds, options.overlap_seconds}));
    auto paths = write_reconstructions(separation, wav_dir, final_wav_dir, pointers);
    paths.insert(paths.begin(), line.fields.front());
    files[line.utterance] = paths;
    score(scoring, separation);
    progress.update(i + 1);
  }
  write_file_atomic(wav_dir / "pointers.scp", pointers);
  logger().info("task {}: {} mixtures separated into {}", task, count, final_wav_dir.string());
  write_scorer_results(scoring, task, testdir, files, options);
}

}  // namespace

void run_test(const Recipe& recipe, const fs::path& expdir, const TestRunOptions& options) {
  const ConfigSection& evaluator = recipe.get("test_evaluator.cfg").section("evaluator");
  std::vector<std::string> tasks = options.task.empty()
                                       ? evaluator.get_list("tasks")
                                       : std::vector<std::string>{options.task};
  const std::string segment = experiment_task(recipe, options.task).segment;
  // The model is found before any folder is made: a missing one leaves nothing behind.
  TrainedExperiment separator(recipe, expdir, segment, options.allow_early_testing, options.model,
                      options.device);
  // Above the score tables too: scores of an untrained model are no measurement.
  if (options.on_summary)
    for (const auto& warning : separator.training_warnings())
      options.on_summary("WARNING: " + warning + "\n");
  write_results_folder(expdir / test_folder_name(options), [&](const fs::path& testdir,
                                                               const fs::path& final_testdir) {
    nlohmann::json losses = nlohmann::json::object();
    // Masks and permutations of the separated tasks that speaker-verification tasks read.
    const auto read_for_masks = tasks_read_for_masks(recipe, tasks);
    std::map<std::string, SeparatedTaskRecord> separated;
    for (const auto& task : tasks) {
      auto loss = run_test_task(recipe, separator, task, read_for_masks, testdir, final_testdir,
                                options, separated);
      losses[task] = loss.value();
      write_file_atomic(testdir / ("loss_" + task), fmt::format("{}\n", loss.value()));
    }
    write_json(testdir / "test_losses.json", losses);
  });
}

void run_exported_test(const Recipe& recipe, const ChunkModel& model, const fs::path& expdir,
                       const TestRunOptions& options) {
  const ConfigFile& test_cfg = recipe.get("test_evaluator.cfg");
  const ConfigSection& evaluator = test_cfg.section("evaluator");
  std::vector<std::string> tasks = options.task.empty()
                                       ? evaluator.get_list("tasks")
                                       : std::vector<std::string>{options.task};
  // Every task is checked before anything is separated: a bad one leaves nothing behind.
  std::vector<ScoringData> scorings;
  for (const auto& task : tasks) scorings.push_back(exported_task_scoring(recipe, task));
  write_results_folder(expdir / test_folder_name(options), [&](const fs::path& testdir,
                                                               const fs::path& final_testdir) {
    for (std::size_t t = 0; t < tasks.size(); ++t)
      run_exported_task(model, tasks[t], scorings[t], testdir, final_testdir, options);
  });
}

}  // namespace nabu
