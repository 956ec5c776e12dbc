// Command-line interface: `nabu <command> [options]`. Each command is a function taking its own
// arguments; errors thrown anywhere are caught once in run_main, printed as one line, exit 1.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "nabu/core/config.h"
#include "nabu/core/error.h"
#include "nabu/core/recipe.h"

namespace nabu::cli {

namespace po = boost::program_options;

int run_main(int argc, char** argv);

// Options every command shares.
struct CommonOptions {
  std::string recipe, expdir;
  std::vector<std::string> sets;
  int threads = 0;  // 0 = number of cores
  std::uint64_t seed = 1234;
  std::string log_level = "info";
  std::vector<ConfigOverride> overrides() const;
};

// Adds --recipe, --expdir (described by `expdir_help`, which says what the command does with a
// folder that is missing; none when empty), --set, --threads, --seed, --log-level.
void add_common_options(po::options_description& description, CommonOptions& options,
                        const std::string& expdir_help);
// `--recipe` also as the first positional argument (nabu check recipes/SS/...).
po::positional_options_description recipe_positional();
// Parses `args` with `description`; returns false when --help was given (help printed).
bool parse_command_line(const std::string& command, const std::string& summary,
                        const std::vector<std::string>& args, po::options_description& description,
                        po::positional_options_description* positional = nullptr);
// Logging level, LibTorch threads (default: all cores) and the seed.
void apply_common_options(const CommonOptions& options);
// Adds --device (where the models compute) with `help` and its default.
void add_device_option(po::options_description& description, std::string& device,
                       const std::string& default_value, const std::string& help);
// Throws if a required option was not given.
void require(const std::string& value, const std::string& option, const std::string& command);
// A switch of every command: `--flag` alone is true, and `--flag=true|false` (True, False, 1, 0:
// the original's scripts write --allow_early_testing=True) also works.
struct Switch {
  bool on = false;
};
void validate(boost::any& value, const std::vector<std::string>& tokens, Switch*, int);
po::typed_value<Switch>* switch_value(bool* target);

// A command line that cannot be taken (an unknown or malformed flag, a required one missing):
// `nabu` exits with status 2, as for a usage error, where a failure exits with 1.
struct UsageError : Error {
  using Error::Error;
};

// What the commands that apply a trained experiment to recordings share (separate, recognize):
// the task and model, the channel, and the recording files (also positional).
struct RecordingOptions {
  std::string task, model = "final";
  bool early = false;
  int channel = 0;
  std::string device = "auto";
  std::vector<std::string> recordings;
};
// The options of a command that runs a trained experiment on recordings: the common options
// (--expdir the experiment), then --task (with `task_help`), --allow-early-testing, --model,
// --channel, --device and the positional recordings.
void add_recording_options(po::options_description& description,
                           po::positional_options_description& positional, CommonOptions& common,
                           RecordingOptions& options, const std::string& task_help);
// Throws naming what is wrong when no recording is given or --channel is negative.
void check_recording_files(const RecordingOptions& options, const std::string& command);
// Checks --expdir, the recordings and --channel, applies the common options, loads the
// experiment's recipe copy (or --recipe's) and checks --task against it. Throws naming what is
// wrong.
Recipe load_trained_recipe(const CommonOptions& common, const RecordingOptions& options,
                           const std::string& command);
// The same for a command without recordings (export): --expdir, the common options, the recipe
// copy and --task.
Recipe load_experiment_recipe(const CommonOptions& common, const std::string& task,
                              const std::string& command);
// A --task flag must name a task of the recipe's test_evaluator.cfg (a section other than
// [evaluator]); otherwise throws blaming the flag and listing the tasks. Empty: nothing to check.
void check_task_flag(const Recipe& recipe, const std::string& task);
// Runs `each` on every recording; a failure is one line and the others still run. Exit status.
int for_each_recording(const RecordingOptions& options, const std::string& command,
                       const std::string& done, const std::function<void(const std::string&)>& each);

using Command = int (*)(const std::vector<std::string>& args);
struct CommandInfo {
  const char* name;
  Command run;
  const char* summary;
};
const std::vector<CommandInfo>& commands();

int cmd_prepare(const std::vector<std::string>& args);
int cmd_data(const std::vector<std::string>& args);
int cmd_train(const std::vector<std::string>& args);
int cmd_test(const std::vector<std::string>& args);
int cmd_sweep(const std::vector<std::string>& args);
int cmd_check(const std::vector<std::string>& args);
int cmd_separate(const std::vector<std::string>& args);
int cmd_recognize(const std::vector<std::string>& args);
int cmd_export(const std::vector<std::string>& args);
int cmd_list(const std::vector<std::string>& args);
int cmd_models(const std::vector<std::string>& args);
int cmd_recipe(const std::vector<std::string>& args);

}  // namespace nabu::cli
