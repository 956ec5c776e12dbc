// `nabu test`: the test loss of every test task, the reconstruction of the separated signals and
// their scores (SPEC §2.g), written to <expdir>/test/.
#include <fstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "nabu/cli/commands/cli.h"
#include "nabu/cli/commands/separation.h"
#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/logging.h"
#include "nabu/core/recipe.h"
#include "nabu/neuralnetworks/evaluators/task_loss_evaluator.h"
#include "nabu/postprocessing/scorers/score_summary.h"

namespace nabu::cli {

namespace {

struct TestOptions {
  std::string task;
  bool allow_early_testing = false;
  int64_t max_utterances = -1;
};

// The scored signals of one utterance: (references [S, N], mixture [N]).
struct ScoringData {
  std::vector<ScorerPtr> scorers;
  std::vector<ScoreSummary> summaries;
  std::unique_ptr<SectionReader> sources, mixture;
};

void write_json(const fs::path& path, const nlohmann::json& value) {
  write_file_atomic(path, value.dump(2) + "\n");
}

}  // namespace

int cmd_test(const std::vector<std::string>& args) {
  CommonOptions common;
  TestOptions options;
  std::string early;
  po::options_description description("Options");
  add_common_options(description, common);
  description.add_options()
      ("task", po::value(&options.task), "test only this task (default: [evaluator] tasks)")
      ("allow_early_testing", po::value(&early)->implicit_value("True"),
       "test the latest validated model of a training that has not finished")
      ("max-utterances", po::value(&options.max_utterances)->default_value(-1),
       "reconstruct and score at most this many utterances per task (-1 = all)");
  if (!parse_command_line(
          "test",
          "Tests a trained experiment: for every task of test_evaluator.cfg, the test loss, the\n"
          "separated signals (reconstructor.cfg) written as wavs and their scores (scorer.cfg)\n"
          "written as results JSON, all in <expdir>/test/. Uses the recipe copy in --expdir\n"
          "unless --recipe is given.\n\n"
          "Example: nabu test --expdir=exp/dc",
          args, description))
    return 0;
  require(common.expdir, "expdir", "test");
  options.allow_early_testing = !early.empty() && parse_flag(early, "allow_early_testing");
  apply_common_options(common);
  fs::path expdir = common.expdir;
  if (!fs::is_directory(expdir)) throw Error(expdir.string() + ": no such experiment directory");
  Recipe recipe = common.recipe.empty() ? Recipe::load(expdir, common.overrides())
                                        : Recipe::load(common.recipe, common.overrides());
  fs::path testdir = expdir / "test";
  ensure_directory(testdir);
  log_to_file(expdir / "run.log");

  const ConfigFile& test_cfg = recipe.get("test_evaluator.cfg");
  const ConfigSection& evaluator = test_cfg.section("evaluator");
  std::vector<std::string> tasks = options.task.empty()
                                       ? evaluator.get_list("tasks")
                                       : std::vector<std::string>{options.task};
  std::string segment = evaluator.get_string("segment_length", "full");
  Separator separator(recipe, expdir, segment, options.allow_early_testing);
  nlohmann::json losses = nlohmann::json::object();

  for (const auto& task : tasks) {
    if (!test_cfg.has_section(task))
      throw ConfigError(evaluator.where("tasks") + ": no section [" + task + "]" +
                        did_you_mean(task, test_cfg.section_names()));
    auto run = separator.task(task);
    // Scorers of the task (scorer.cfg), with their side data.
    ScoringData scoring;
    const ConfigFile* scorer_cfg = recipe.find("scorer.cfg");
    const ConfigSection* scorer_section = scorer_cfg ? scorer_cfg->find_section(task) : nullptr;
    if (scorer_section) {
      scoring.scorers = make_scorers(*scorer_section);
      const auto& scorer_options = scoring.scorers.front()->options();
      scoring.sources = std::make_unique<SectionReader>(recipe, scorer_options.org_src);
      scoring.mixture = std::make_unique<SectionReader>(recipe, scorer_options.base);
      const ConfigFile& database = recipe.get("database.conf");
      SpeakerInfo speakers;
      for (const auto& file : database.section(scorer_options.spkinfo).get_list("datafiles")) {
        auto more = read_speaker_info(file);
        speakers.insert(more.begin(), more.end());
      }
      for (const auto& scorer : scoring.scorers)
        scoring.summaries.emplace_back(scorer->metrics(), speakers);
    } else {
      spdlog::warn("task {}: no [{}] in scorer.cfg: signals are reconstructed but not scored",
                   task, task);
    }

    fs::path wav_dir = testdir / "reconstructions" / task;
    std::string pointers;
    int64_t done = 0;
    auto result = run->evaluate(options.max_utterances, [&](const Separation& separation) {
      std::vector<std::string> paths;
      for (int64_t s = 0; s < separation.signals.size(0); ++s) {
        fs::path path = wav_dir / ("s" + std::to_string(s + 1)) / (separation.utterance + ".wav");
        write_audio(path.string(), separation.signals[s], separation.sample_rate);
        paths.push_back(path.string());
      }
      pointers += separation.utterance + " " + join(paths, " ") + "\n";
      if (!scoring.scorers.empty()) {
        auto references = scoring.sources->read(separation.utterance);
        auto mixture = scoring.mixture->read(separation.utterance).reshape({-1});
        int64_t length = std::min({references.size(1), mixture.size(0),
                                   separation.signals.size(1)});
        references = references.slice(1, 0, length);
        mixture = mixture.slice(0, 0, length);
        auto estimates = separation.signals.slice(1, 0, length);
        for (std::size_t i = 0; i < scoring.scorers.size(); ++i)
          scoring.summaries[i].add(separation.utterance,
                                   scoring.scorers[i]->evaluate(references, estimates, mixture));
      }
      ++done;
    });
    write_file_atomic(wav_dir / "pointers.scp", pointers);
    losses[task] = result.value();
    write_file_atomic(testdir / ("loss_" + task), fmt::format("{}\n", result.value()));
    spdlog::info("task {}: test loss {:.6g} over {} utterances; {} reconstructed into {}", task,
                 result.value(), result.examples, done, wav_dir.string());
    for (std::size_t i = 0; i < scoring.scorers.size(); ++i) {
      const auto& type = scoring.scorers[i]->type();
      write_json(testdir / ("results_" + task + "_" + type + "_complete.json"),
                 scoring.summaries[i].complete_json());
      write_json(testdir / ("results_" + task + "_" + type + "_summary.json"),
                 scoring.summaries[i].summary_json());
      std::cout << scoring.summaries[i].summary_text(type) << std::flush;
    }
  }
  write_json(testdir / "test_losses.json", losses);
  spdlog::info("test results in {}", testdir.string());
  return 0;
}

}  // namespace nabu::cli
