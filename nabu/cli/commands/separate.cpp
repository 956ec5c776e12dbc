// `nabu separate`: separates new mixtures with a trained experiment, using the recipe's
// processors (and normalisation statistics), model and reconstructor; no database section or
// target is needed (the original needs a config-editing procedure for this).
#include <iostream>

#include <spdlog/spdlog.h>

#include "nabu/cli/commands/cli.h"
#include "nabu/postprocessing/separation.h"
#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/processing/audio.h"

namespace nabu::cli {

int cmd_separate(const std::vector<std::string>& args) {
  CommonOptions common;
  std::string out, task;
  std::vector<std::string> mixtures;
  bool early = false;
  po::options_description description("Options");
  add_common_options(description, common);
  description.add_options()
      ("out", po::value(&out), "folder for the separated signals (<name>_s1.wav, ...)")
      ("task", po::value(&task), "test task whose graph and reconstructor to use "
       "(default: the first of test_evaluator.cfg)")
      ("allow_early_testing", po::bool_switch(&early),
       "use the latest validated checkpoint of a training that has not finished")
      ("mixture", po::value(&mixtures)->composing(), "mixture wav files (also positional)");
  po::positional_options_description positional;
  positional.add("mixture", -1);
  if (!parse_command_line(
          "separate",
          "Separates mixtures with a trained experiment.\n\n"
          "Example: nabu separate --expdir=exp/dc --out=sep/ mix1.wav mix2.wav",
          args, description, &positional))
    return 0;
  require(common.expdir, "expdir", "separate");
  require(out, "out", "separate");
  if (mixtures.empty()) throw Error("nabu separate: no mixture given (see nabu separate --help)");
  apply_common_options(common);
  fs::path expdir = common.expdir;
  if (!fs::exists(expdir / "trainer.cfg"))
    throw Error(expdir.string() + " holds no trained experiment (no recipe copy)");
  Recipe recipe = common.recipe.empty() ? Recipe::load(expdir, common.overrides())
                                        : Recipe::load(common.recipe, common.overrides());
  const ConfigFile& test_cfg = recipe.get("test_evaluator.cfg");
  if (task.empty()) task = test_cfg.section("evaluator").get_list("tasks").at(0);
  std::string segment = test_cfg.section("evaluator").get_string("segment_length", "full");
  Separator separator(recipe, expdir, segment, early);
  auto separation = separator.task(task, /*with_test_data=*/false);
  ensure_directory(out);
  for (const auto& path : mixtures) {
    std::string name = fs::path(path).stem().string();
    auto result = separation->separate(DataLine{name, {path}, path});
    for (int64_t s = 0; s < result.signals.size(0); ++s) {
      fs::path target = fs::path(out) / (name + "_s" + std::to_string(s + 1) + ".wav");
      write_audio(target.string(), result.signals[s], result.sample_rate);
      std::cout << target.string() << "\n";
    }
  }
  return 0;
}

}  // namespace nabu::cli
