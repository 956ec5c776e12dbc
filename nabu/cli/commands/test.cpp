// `nabu test`: flags -> run_test (evaluation/evaluation_run.h); prints the score tables.
#include <algorithm>
#include <iostream>

#include <spdlog/spdlog.h>

#include "nabu/cli/commands/cli.h"
#include "nabu/core/device.h"
#include "nabu/core/error.h"
#include "nabu/core/experiment_layout.h"
#include "nabu/core/fs.h"
#include "nabu/core/logging.h"
#include "nabu/core/recipe.h"
#include "nabu/core/strings.h"
#include "nabu/inference/chunked_separation.h"
#include "nabu/evaluation/evaluation_run.h"
#include "nabu/inference/exported_separator.h"
#include "nabu/experiment/trained_experiment.h"
#include "nabu/inference/shipped_models.h"

namespace nabu::cli {

namespace {

// --model=<shipped name or exported file>: that model tested on the test lists of --recipe,
// separating from the audio; results in <expdir>/test_<name>/ (--expdir is made when missing).
int test_exported(const CommonOptions& common, TestRunOptions options, const std::string& device) {
  const std::string flag = "--model=" + options.model;
  const bool is_path = names_exported_file(options.model);
  if (!is_path) {
    std::vector<std::string> shipped;
    for (const auto& model : shipped_models()) shipped.push_back(model.name);
    if (std::find(shipped.begin(), shipped.end(), options.model) == shipped.end())
      throw Error(flag + ": expected " + experiment_model_choices() + "; or a shipped model (" +
                  join(shipped, ", ") + ") or a file nabu export wrote" +
                  did_you_mean(options.model, shipped));
  }
  const fs::path file = exported_model_file(options.model, "--model");
  if (common.recipe.empty()) {
    const std::string trained_with =
        is_path ? "" : shipped_model_recipe(find_shipped_model(options.model, "--model"));
    throw Error(flag + " needs --recipe: the recipe whose test lists (test_evaluator.cfg, "
                "scorer.cfg, database.conf) to separate and score" +
                (trained_with.empty() ? std::string()
                                      : "; the model was trained with " + trained_with));
  }
  if (options.allow_early_testing)
    throw Error("--allow-early-testing takes an experiment's model, not " + flag);
  if (device != "auto" && device != "cpu")
    throw Error("--device=" + device + ": " + flag + " computes on the CPU");
  apply_common_options(common);
  Recipe recipe = Recipe::load(common.recipe, common.overrides());
  check_task_flag(recipe, options.task);
  ExportedSeparator exported(file);
  const ChunkModel model = exported.chunk_model();
  if (options.chunk_seconds > 0)
    check_chunk_options(ChunkOptions{options.chunk_seconds, options.overlap_seconds},
                        model.frame_length, model.sample_rate);
  // The results folder is named after the model: its name, or the exported file's stem.
  options.model = is_path ? file.stem().string() : options.model;
  const fs::path expdir = common.expdir;
  ensure_directory(expdir);
  log_to_file(ExperimentLayout{expdir}.log());
  logger().info("model: {} ({} Hz, {} speakers), test lists of {}", file.string(),
               model.sample_rate, model.speakers, common.recipe);
  options.on_summary = [](const std::string& summary) { std::cout << summary << std::flush; };
  run_exported_test(recipe, model, expdir, options);
  return 0;
}

}  // namespace

int cmd_test(const std::vector<std::string>& args) {
  CommonOptions common;
  TestRunOptions options;
  bool early = false;
  po::options_description description("Options");
  add_common_options(description, common,
                     "the trained experiment (nabu train); it must exist");
  description.add_options()
      ("task", po::value(&options.task), "test only this task (default: [evaluator] tasks)")
      ("allow-early-testing", switch_value(&early),
       "test the latest validated model of a training that has not finished")
      ("max-utterances", po::value(&options.max_utterances)->default_value(-1),
       "reconstruct and score at most this many utterances per task (-1 = all; results in\n"
       "<expdir>/test_first<N>/, apart from the full ones)")
      ("model", po::value(&options.model)->default_value("final"),
       "final: each stage's model.pt; avg: model_avg.pt, the average of the best validated\n"
       "models (trainer.cfg average_checkpoints = N; results in <expdir>/test_avg/); step<N>:\n"
       "the model of update N (trainer.cfg export_every; results in <expdir>/test_step<N>/);\n"
       "avg<A>-<B>: the mean of the exports of updates A to B (in <expdir>/test_avg<A>-<B>/);\n"
       "a shipped model's name (nabu models) or a file nabu export wrote: that model on the\n"
       "test lists of --recipe, separated from their audio, with no training (results in\n"
       "<expdir>/test_<name>/; --expdir is made when missing)")
      ("chunk-seconds", po::value(&options.chunk_seconds)->default_value(0.0),
       "separate each test mixture from its audio in chunks of this length, as nabu separate\n"
       "does (results in <expdir>/test_chunks_<S>s/, to compare with whole utterances)")
      ("overlap-seconds", po::value(&options.overlap_seconds)->default_value(1.0),
       "overlap of the chunks of --chunk-seconds");
  std::string device;
  add_device_option(description, device, "auto",
                    "where the models compute: auto (a GPU when there is one), cpu, cuda, cuda:N;\n"
                    "reconstruction and scoring run on the CPU");
  if (!parse_command_line(
          "test",
          "Tests a trained experiment: for every task of test_evaluator.cfg, the test loss, the\n"
          "separated signals (reconstructor.cfg) written as wavs and their scores (scorer.cfg)\n"
          "written as results JSON, all in <expdir>/test/. Uses the recipe copy in --expdir\n"
          "unless --recipe is given. A run replaces its results folder when it is done.\n\n"
          "With --model=<shipped model> (or an exported file) and --recipe, tests that model on\n"
          "the recipe's test lists: the mixtures of scorer.cfg's base sections are separated\n"
          "from their audio and scored, with no experiment and no stores.\n\n"
          "Example: nabu test --expdir=exp/dc\n"
          "         nabu test --model=pit_blstm_2spk_8k --recipe=recipes/SS/DBLSTM/long_PIT_SISNR_2spk --expdir=exp/shipped",
          args, description))
    return 0;
  require(common.expdir, "expdir", "test");
  options.allow_early_testing = early;
  if (options.chunk_seconds < 0) throw Error("--chunk-seconds must not be negative");
  if (!is_experiment_model(options.model)) return test_exported(common, options, device);
  apply_common_options(common);
  fs::path expdir = common.expdir;
  if (!fs::is_directory(expdir)) throw Error(expdir.string() + ": no such experiment directory");
  Recipe recipe = common.recipe.empty() ? Recipe::load(expdir, common.overrides())
                                        : Recipe::load(common.recipe, common.overrides());
  check_task_flag(recipe, options.task);
  options.device = resolve_device(device, "--device");
  options.seed = common.seed;
  log_to_file(ExperimentLayout{expdir}.log());
  options.on_summary = [](const std::string& summary) { std::cout << summary << std::flush; };
  run_test(recipe, expdir, options);
  return 0;
}

}  // namespace nabu::cli
