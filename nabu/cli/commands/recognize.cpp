// `nabu recognize`: flags -> recognize_file (evaluation/recognition.h) for every file; a file
// that fails is reported in one line and the others are still recognised.
#include <iostream>

#include "nabu/cli/commands/cli.h"
#include "nabu/core/device.h"
#include "nabu/core/error.h"
#include "nabu/core/strings.h"
#include "nabu/evaluation/recognition.h"
#include "nabu/experiment/trained_experiment.h"

namespace nabu::cli {

int cmd_recognize(const std::vector<std::string>& args) {
  CommonOptions common;
  RecordingOptions recordings;
  po::options_description description("Options");
  po::positional_options_description positional;
  add_recording_options(description, positional, common, recordings,
                        "test task with a decoder.cfg section (default: the first of "
                        "test_evaluator.cfg that has one)");
  if (!parse_command_line(
          "recognize",
          "Prints the labels a trained sequence task (decoder.cfg; docs/recognition.md) hears in\n"
          "recordings of any format, sample rate and channel count, one line per file:\n"
          "<file> <label> <label> ... Each file is recognised whole. Change the decoder with\n"
          "--set, e.g. --set decoder.cfg:task_phones:decoder=greedy.\n\n"
          "Example: nabu recognize --expdir=exp/phones hello.wav",
          args, description, &positional))
    return 0;
  Recipe recipe = load_trained_recipe(common, recordings, "recognize");
  const ConfigSection& evaluator = recipe.get("test_evaluator.cfg").section("evaluator");
  std::string task = recordings.task;
  if (task.empty()) {
    for (const auto& name : evaluator.get_list("tasks"))
      if (task.empty() && is_recognition_task(recipe, name)) task = name;
    if (task.empty())
      throw Error(recipe.dir().string() + ": no test task has a decoder.cfg section");
  } else if (!is_recognition_task(recipe, task)) {
    throw Error("--task " + task + ": decoder.cfg has no section [" + task + "]");
  }
  TrainedExperiment trained(recipe, common.expdir, experiment_task(recipe, task).segment,
                            recordings.early, recordings.model,
                            resolve_device(recordings.device, "--device"));
  Decoder decoder(recipe.get("decoder.cfg").section(task), recipe);
  return for_each_recording(recordings, "recognize", "recognised", [&](const std::string& path) {
    auto labels = recognize_file(trained, task, decoder, path, recordings.channel);
    std::cout << path << (labels.empty() ? "" : " " + join(labels, " ")) << std::endl;
  });
}

}  // namespace nabu::cli
