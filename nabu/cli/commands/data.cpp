#include <spdlog/spdlog.h>

#include "nabu/cli/commands/cli.h"
#include "nabu/core/logging.h"
#include "nabu/core/recipe.h"
#include "nabu/processing/data_preparation.h"

namespace nabu::cli {

int cmd_data(const std::vector<std::string>& args) {
  CommonOptions common;
  DataPreparationOptions options;
  po::options_description description("Options");
  add_common_options(description, common);
  description.add_options()
      ("workers", po::value(&options.workers)->default_value(0),
       "utterances processed in parallel (0 = --threads, or all cores)")
      ("section", po::value(&options.sections)->composing(),
       "prepare only this database.conf section (repeatable)");
  if (!parse_command_line(
          "data",
          "Prepares every database.conf section with preprocess = True into HDF5 stores\n"
          "(<store_dir>/<segment length>/store.h5): features, targets and usedbins, segmented\n"
          "for every segment length. Sections run in dependency order (dependencies and\n"
          "meanandvar_dir); complete stores are skipped, so an interrupted run resumes.\n"
          "Paths in database.conf are relative to the working directory.\n\n"
          "Example: nabu data --recipe=recipes/SS/DBLSTM/toy_DC_2spk --expdir=exp/dc",
          args, description))
    return 0;
  require(common.recipe, "recipe", "data");
  require(common.expdir, "expdir", "data");
  apply_common_options(common);
  log_to_file(std::filesystem::path(common.expdir) / "run.log");
  if (options.workers == 0) options.workers = common.threads;
  auto recipe = Recipe::load(common.recipe, common.overrides());
  for (const auto& warning : recipe.warnings()) spdlog::warn("{}", warning);
  DataPreparation preparation(recipe, common.expdir, options);
  auto summaries = preparation.run();
  int prepared = 0;
  double audio = 0, wall = 0;
  for (const auto& summary : summaries) {
    if (summary.skipped) continue;
    ++prepared;
    audio += summary.audio_seconds;
    wall += summary.wall_seconds;
  }
  spdlog::info("data: {} section(s) prepared, {} already complete; {:.0f} s of audio in {:.1f} s",
               prepared, summaries.size() - prepared, audio, wall);
  return 0;
}

}  // namespace nabu::cli
