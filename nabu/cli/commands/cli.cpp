#include "nabu/cli/commands/cli.h"

#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <csignal>
#include <iostream>
#include <thread>

#include <spdlog/spdlog.h>

#include "nabu/core/allocator.h"
#include "nabu/core/error.h"
#include "nabu/core/interrupted.h"
#include "nabu/core/logging.h"
#include "nabu/core/openblas_core.h"
#include "nabu/core/strings.h"
#include "nabu/experiment/trained_experiment.h"
#include "nabu_commit.h"  // generated: NABU_VERSION, NABU_COMMIT

namespace nabu::cli {

std::vector<ConfigOverride> CommonOptions::overrides() const {
  std::vector<ConfigOverride> out;
  for (const auto& spec : sets) out.push_back(ConfigOverride::parse(spec));
  return out;
}

void add_common_options(po::options_description& description, CommonOptions& options,
                        const std::string& expdir_help) {
  description.add_options()("recipe", po::value(&options.recipe),
                            "recipe folder (database.conf, model.cfg, ...)");
  if (!expdir_help.empty())
    description.add_options()("expdir", po::value(&options.expdir), expdir_help.c_str());
  description.add_options()
      ("set", po::value(&options.sets)->composing(),
       "override a config value before anything reads it: FILE:SECTION:KEY=VALUE, "
       "e.g. --set model.cfg:main:num_units=64 (repeatable)")
      ("threads", po::value(&options.threads)->default_value(0),
       "LibTorch intra-op threads (0 = all cores)")
      ("seed", po::value(&options.seed)->default_value(1234), "random seed")
      ("log-level", po::value(&options.log_level)->default_value("info"),
       "trace, debug, info, warn or error");
}

namespace {

// Long options are hyphenated; the original's scripts write some with underscores
// (--allow_early_testing, --duplicates_ind_offset), so `--a_b[=v]` is read as `--a-b[=v]`.
std::vector<std::string> hyphenated(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const auto& arg : args) {
    if (arg.rfind("--", 0) != 0) {
      out.push_back(arg);
      continue;
    }
    auto end = std::min(arg.find('='), arg.size());
    std::string name = arg.substr(0, end);
    std::replace(name.begin() + 2, name.end(), '_', '-');
    out.push_back(name + arg.substr(end));
  }
  return out;
}

// A switch standing alone ("--resume") becomes "--resume=true": Boost would otherwise take
// the next word as its value ("list --options decoder" reading "decoder" as the switch's value).
std::vector<std::string> switches_explicit(std::vector<std::string> args,
                                           const po::options_description& description) {
  for (auto& arg : args) {
    if (arg.rfind("--", 0) != 0 || arg.size() < 3 || arg.find('=') != std::string::npos) continue;
    const auto* option = description.find_nothrow(arg.substr(2), false);
    if (option && dynamic_cast<const po::typed_value<Switch>*>(option->semantic().get()))
      arg += "=true";
  }
  return args;
}

}  // namespace

// The positionals a usage line names after [options]: " [RECIPE]", " [ACTION] [OUT...]".
std::string positional_usage(const po::positional_options_description* positional) {
  if (!positional || positional->max_total_count() == 0) return "";
  const unsigned total = positional->max_total_count();
  const bool unbounded = total == std::numeric_limits<unsigned>::max();
  std::vector<std::string> names;
  for (unsigned i = 0; i < (unbounded ? 8u : total); ++i) names.push_back(positional->name_for_position(i));
  std::string usage;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0 && names[i] == names[i - 1]) continue;
    std::string name = names[i];
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) {
      return c == '-' ? '_' : static_cast<char>(std::toupper(c));
    });
    const bool repeats = unbounded && names.back() == names[i];
    usage += " [" + name + (repeats ? "..." : "") + "]";
    if (repeats) break;
  }
  return usage;
}

po::positional_options_description recipe_positional() {
  po::positional_options_description positional;
  positional.add("recipe", 1);
  return positional;
}

bool parse_command_line(const std::string& command, const std::string& summary,
                        const std::vector<std::string>& args, po::options_description& description,
                        po::positional_options_description* positional) {
  description.add_options()("help,h", "show this help");
  po::variables_map variables;
  try {
    po::command_line_parser parser(switches_explicit(hyphenated(args), description));
    parser.options(description);
    if (positional) parser.positional(*positional);
    po::store(parser.run(), variables);
    if (variables.count("help")) {
      std::cout << "Usage: nabu " << command << " [options]" << positional_usage(positional)
                << "\n" << summary << "\n\n" << description << "\n";
      return false;
    }
    po::notify(variables);
  } catch (const po::error& e) {
    throw UsageError(std::string(e.what()) + " (see nabu " + command + " --help)");
  }
  return true;
}

void apply_common_options(const CommonOptions& options) {
  setup_logging(options.log_level);
  // Shown with --log-level=debug and by nabu --version: a line on every command would be noise.
  if (auto note = take_openblas_restart_note(); !note.empty()) logger().debug(note);
  if (options.threads < 0) throw Error("--threads must be >= 0");
  int threads = options.threads > 0 ? options.threads
                                    : std::max(1u, std::thread::hardware_concurrency());
  torch::set_num_threads(threads);
  torch::manual_seed(options.seed);
}

void add_recording_options(po::options_description& description,
                           po::positional_options_description& positional, CommonOptions& common,
                           RecordingOptions& options, const std::string& task_help) {
  add_common_options(description, common, "the trained experiment (nabu train); it must exist");
  description.add_options()
      ("task", po::value(&options.task), task_help.c_str())
      ("allow-early-testing", switch_value(&options.early),
       "use the latest validated checkpoint of a training that has not finished")
      ("model", po::value(&options.model)->default_value("final"),
       "final: the full stage's model.pt; avg: its model_avg.pt (average_checkpoints);\n"
       "step<N>: the model of update N (export_every); avg<A>-<B>: the mean of the exports\n"
       "of updates A to B; without --expdir (nabu separate): a shipped model's name\n"
       "(nabu models) or a file nabu export wrote")
      ("channel", po::value(&options.channel)->default_value(0),
       "use this channel (1 = the first) of a multi-channel file; 0 mixes them down")
      ("recording", po::value(&options.recordings)->composing(), "audio files (also positional)");
  positional.add("recording", -1);
  add_device_option(description, options.device, "auto",
                    "where the model computes: auto (a GPU when there is one), cpu, cuda, cuda:N");
}

void add_device_option(po::options_description& description, std::string& device,
                       const std::string& default_value, const std::string& help) {
  auto value = po::value(&device);
  if (!default_value.empty()) value->default_value(default_value);
  description.add_options()("device", value, help.c_str());
}

void check_recording_files(const RecordingOptions& options, const std::string& command) {
  if (options.recordings.empty())
    throw Error("no audio file given (see nabu " + command + " --help)");
  if (options.channel < 0) throw Error("--channel must be 0 (mix down) or a channel number");
}

Recipe load_trained_recipe(const CommonOptions& common, const RecordingOptions& options,
                           const std::string& command) {
  require(common.expdir, "expdir", command);
  check_recording_files(options, command);
  return load_experiment_recipe(common, options.task, command);
}

Recipe load_experiment_recipe(const CommonOptions& common, const std::string& task,
                              const std::string& command) {
  require(common.expdir, "expdir", command);
  apply_common_options(common);
  std::filesystem::path expdir = common.expdir;
  require_trained_experiment(expdir);
  Recipe recipe = common.recipe.empty() ? Recipe::load(expdir, common.overrides())
                                        : Recipe::load(common.recipe, common.overrides());
  check_task_flag(recipe, task);
  return recipe;
}

void check_task_flag(const Recipe& recipe, const std::string& task) {
  if (task.empty()) return;
  const ConfigFile& test_cfg = recipe.get("test_evaluator.cfg");
  if (task != "evaluator" && test_cfg.has_section(task)) return;
  std::vector<std::string> tasks;
  for (const auto& name : test_cfg.section_names())
    if (name != "evaluator") tasks.push_back(name);
  throw Error("--task=" + task + ": no such task" + did_you_mean(task, tasks) + "; tasks of " +
              test_cfg.path() + ": " + join(tasks, ", "));
}

int for_each_recording(const RecordingOptions& options, const std::string& command,
                       const std::string& done,
                       const std::function<void(const std::string&)>& each) {
  int failed = 0;
  for (const auto& path : options.recordings) {
    try {
      each(path);
    } catch (const Error& e) {
      ++failed;
      std::cerr << "nabu " << command << ": error: " << e.what() << std::endl;
    }
  }
  if (failed > 0)
    std::cerr << "nabu " << command << ": " << failed << " of " << options.recordings.size()
              << " file(s) failed; the others were " << done << std::endl;
  return failed > 0 ? 1 : 0;
}

void require(const std::string& value, const std::string& option, const std::string& command) {
  if (value.empty())
    throw UsageError("--" + option + " is required (see nabu " + command + " --help)");
}

void validate(boost::any& value, const std::vector<std::string>& tokens, Switch*, int) {
  const std::string text = po::validators::get_single_string(tokens, true);
  if (text.empty() || text == "True" || text == "true" || text == "1")
    value = Switch{true};
  else if (text == "False" || text == "false" || text == "0")
    value = Switch{false};
  else
    throw po::invalid_option_value(text);  // "the argument ('x') for option '--y' is invalid"
}

po::typed_value<Switch>* switch_value(bool* target) {
  return po::value<Switch>()
      ->implicit_value(Switch{true}, "true")
      ->default_value(Switch{*target}, *target ? "true" : "false")
      ->notifier([target](const Switch& value) { *target = value.on; });
}

namespace {

// nabu --version: what a bug report needs.
void print_version() {
  std::cout << "nabu " << NABU_VERSION << " (commit " << NABU_COMMIT << ")\n"
            << "LibTorch " << TORCH_VERSION << ", CUDA: "
            << (torch::cuda::is_available()
                    ? "yes, " + std::to_string(torch::cuda::device_count()) + " GPU(s) visible"
                    : std::string(at::hasCUDA() ? "built with it, no GPU visible" : "no"))
            << "\n"
            << "BLAS: " << blas_description() << "\n";
}

void print_usage() {
  std::cout << "Usage: nabu <command> [options]   (nabu <command> --help for details;\n"
               "       nabu --version)\n\n"
               "Commands:\n";
  for (const auto& info : commands())
    std::cout << "  " << info.name << std::string(10 - std::string(info.name).size(), ' ')
              << info.summary << "\n";
}

}  // namespace

const std::vector<CommandInfo>& commands() {
  static const std::vector<CommandInfo> table = {
      {"prepare", cmd_prepare, "check a corpus (LibriMix, WHAM!/WHAMR!, wsj0-mix, your own folder), write its lists"},
      {"recipe", cmd_recipe, "write a recipe for a prepared corpus from a shipped one (recipe new)"},
      {"data", cmd_data, "prepare features and targets of a recipe into HDF5 stores"},
      {"train", cmd_train, "train the models of a recipe (segment-length curriculum)"},
      {"test", cmd_test, "test loss, reconstruction of separated signals and scoring"},
      {"sweep", cmd_sweep, "train one experiment per block of a sweep file"},
      {"check", cmd_check, "check a recipe without running it; lists all problems"},
      {"separate", cmd_separate, "separate new mixtures with a trained model"},
      {"recognize", cmd_recognize, "print the labels a trained sequence task hears in recordings"},
      {"export", cmd_export, "write a trained separation model as one TorchScript or ONNX file"},
      {"list", cmd_list, "list the registered components (models, losses, ...); list models: the shipped ones"},
      {"models", cmd_models, "the shipped trained models (nabu separate --model=<name>): nabu list models"},
  };
  return table;
}

int run_main(int argc, char** argv) {
  restart_for_openblas_core(argv);
  // A write beyond a file-size limit (ulimit -f, quotas) fails with an error we report, instead
  // of killing the process mid-write.
  std::signal(SIGXFSZ, SIG_IGN);
  keep_freed_buffers_for_reuse();
  // The program's lines: info and above on stderr until a command's --log-level says otherwise
  // (the library alone logs only warnings).
  setup_logging("info");
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_usage();
    return args.empty() ? 1 : 0;
  }
  if (args[0] == "--version" || args[0] == "version") {
    print_version();
    return 0;
  }
  std::string name = args[0];
  args.erase(args.begin());
  for (const auto& info : commands()) {
    if (name != info.name) continue;
    try {
      return info.run(args);
    } catch (const UsageError& usage) {
      logger().flush();
      std::cerr << "nabu " << name << ": error: " << usage.what() << std::endl;
      return 2;
    } catch (const Interrupted& interrupted) {
      spdlog::shutdown();
      std::cerr << "nabu " << name << ": " << interrupted.what() << std::endl;
      return interrupted.exit_status;
    } catch (const std::exception& e) {
      std::string message = e.what();
      // LibTorch messages carry a C++ backtrace after the first line; users need the first.
      auto newline = message.find("\nException raised from");
      if (newline != std::string::npos) message = message.substr(0, newline);
      spdlog::shutdown();
      std::cerr << "nabu " << name << ": error: " << message << std::endl;
      return 1;
    }
  }
  std::vector<std::string> names;
  for (const auto& info : commands()) names.push_back(info.name);
  std::cerr << "nabu: unknown command '" << name << "'" << did_you_mean(name, names)
            << "; commands: " << join(names, ", ") << std::endl;
  return 2;
}

}  // namespace nabu::cli
