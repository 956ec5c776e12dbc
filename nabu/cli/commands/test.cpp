// `nabu test`: flags -> run_test (postprocessing/evaluation_run.h); prints the score tables.
#include <iostream>

#include "nabu/cli/commands/cli.h"
#include "nabu/core/device.h"
#include "nabu/core/error.h"
#include "nabu/core/experiment_layout.h"
#include "nabu/core/fs.h"
#include "nabu/core/logging.h"
#include "nabu/core/recipe.h"
#include "nabu/postprocessing/evaluation_run.h"

namespace nabu::cli {

int cmd_test(const std::vector<std::string>& args) {
  CommonOptions common;
  TestRunOptions options;
  std::string early;
  po::options_description description("Options");
  add_common_options(description, common,
                     "the trained experiment (nabu train); it must exist");
  description.add_options()
      ("task", po::value(&options.task), "test only this task (default: [evaluator] tasks)")
      ("allow-early-testing", po::value(&early)->implicit_value("True"),
       "test the latest validated model of a training that has not finished")
      ("max-utterances", po::value(&options.max_utterances)->default_value(-1),
       "reconstruct and score at most this many utterances per task (-1 = all; results in\n"
       "<expdir>/test_first<N>/, apart from the full ones)")
      ("model", po::value(&options.model)->default_value("final"),
       "final: each stage's model.pt; avg: model_avg.pt, the average of the best validated\n"
       "models (trainer.cfg average_checkpoints = N; results in <expdir>/test_avg/); step<N>:\n"
       "the model of update N (trainer.cfg export_every; results in <expdir>/test_step<N>/);\n"
       "avg<A>-<B>: the mean of the exports of updates A to B (in <expdir>/test_avg<A>-<B>/)")
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
          "Example: nabu test --expdir=exp/dc",
          args, description))
    return 0;
  require(common.expdir, "expdir", "test");
  options.allow_early_testing = !early.empty() && parse_flag(early, "allow-early-testing");
  apply_common_options(common);
  fs::path expdir = common.expdir;
  if (!fs::is_directory(expdir)) throw Error(expdir.string() + ": no such experiment directory");
  Recipe recipe = common.recipe.empty() ? Recipe::load(expdir, common.overrides())
                                        : Recipe::load(common.recipe, common.overrides());
  check_task_flag(recipe, options.task);
  if (options.chunk_seconds < 0) throw Error("--chunk-seconds must not be negative");
  options.device = resolve_device(device, "--device");
  options.seed = common.seed;
  log_to_file(ExperimentLayout{expdir}.log());
  options.on_summary = [](const std::string& summary) { std::cout << summary << std::flush; };
  run_test(recipe, expdir, options);
  return 0;
}

}  // namespace nabu::cli
