// `nabu recognize`: flags -> recognize_file (postprocessing/recognition.h) for every file; a file
// that fails is reported in one line and the others are still recognised.
#include <iostream>

#include "nabu/cli/commands/cli.h"
#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/postprocessing/recognition.h"

namespace nabu::cli {

int cmd_recognize(const std::vector<std::string>& args) {
  CommonOptions common;
  std::string task, model;
  std::vector<std::string> recordings;
  bool early = false;
  int channel = 0;
  po::options_description description("Options");
  add_common_options(description, common);
  description.add_options()
      ("task", po::value(&task), "test task with a decoder.cfg section (default: the first of "
       "test_evaluator.cfg that has one)")
      ("allow_early_testing", po::bool_switch(&early),
       "use the latest validated checkpoint of a training that has not finished")
      ("model", po::value(&model)->default_value("final"),
       "final: the full stage's model.pt; avg: its model_avg.pt (average_checkpoints)")
      ("channel", po::value(&channel)->default_value(0),
       "recognise this channel (1 = the first) of a multi-channel file; 0 mixes them down")
      ("recording", po::value(&recordings)->composing(), "audio files (also positional)");
  po::positional_options_description positional;
  positional.add("recording", -1);
  if (!parse_command_line(
          "recognize",
          "Prints the labels a trained sequence task (decoder.cfg; docs/recognition.md) hears in\n"
          "recordings of any format, sample rate and channel count, one line per file:\n"
          "<file> <label> <label> ... Change the decoder with --set, e.g.\n"
          "--set decoder.cfg:task_phones:decoder=greedy.\n\n"
          "Example: nabu recognize --expdir=exp/phones hello.wav",
          args, description, &positional))
    return 0;
  require(common.expdir, "expdir", "recognize");
  if (recordings.empty()) throw Error("no audio file given (see nabu recognize --help)");
  if (channel < 0) throw Error("--channel must be 0 (mix down) or a channel number");
  apply_common_options(common);
  fs::path expdir = common.expdir;
  if (!fs::exists(expdir / "trainer.cfg"))
    throw Error(expdir.string() + " holds no trained experiment (no recipe copy)");
  Recipe recipe = common.recipe.empty() ? Recipe::load(expdir, common.overrides())
                                        : Recipe::load(common.recipe, common.overrides());
  const ConfigFile& test_cfg = recipe.get("test_evaluator.cfg");
  const ConfigSection& evaluator = test_cfg.section("evaluator");
  if (task.empty()) {
    for (const auto& name : evaluator.get_list("tasks"))
      if (task.empty() && is_recognition_task(recipe, name)) task = name;
    if (task.empty())
      throw Error(recipe.dir().string() + ": no test task has a decoder.cfg section");
  } else if (!is_recognition_task(recipe, task)) {
    throw Error("--task " + task + ": decoder.cfg has no section [" + task + "]");
  }
  Separator trained(recipe, expdir, evaluator.get_string("segment_length", "full"), early, model);
  Decoder decoder(recipe.get("decoder.cfg").section(task), recipe);
  int failed = 0;
  for (const auto& path : recordings) {
    try {
      auto labels = recognize_file(trained, task, decoder, path, channel);
      std::cout << path << (labels.empty() ? "" : " " + join(labels, " ")) << std::endl;
    } catch (const Error& e) {
      ++failed;
      std::cerr << "nabu recognize: error: " << e.what() << std::endl;
    }
  }
  if (failed > 0)
    std::cerr << "nabu recognize: " << failed << " of " << recordings.size()
              << " file(s) failed; the others were recognised" << std::endl;
  return failed > 0 ? 1 : 0;
}

}  // namespace nabu::cli
