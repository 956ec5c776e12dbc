#include <spdlog/spdlog.h>

#include "nabu/catalog/recipe_sections.h"
#include "nabu/cli/commands/cli.h"
#include "nabu/core/error.h"
#include "nabu/core/experiment_layout.h"
#include "nabu/core/logging.h"
#include "nabu/core/recipe.h"
#include "nabu/processing/data_preparation.h"

namespace nabu::cli {

int cmd_data(const std::vector<std::string>& args) {
  CommonOptions common;
  DataPreparationOptions options;
  bool all_sections = false;
  po::options_description description("Options");
  add_common_options(description, common,
                     "the experiment the data is prepared for: run.log and a record of every section\n"
                     "used go there (created if missing)");
  description.add_options()
      ("workers", po::value(&options.workers)->default_value(0),
       "utterances processed in parallel (0 = --threads, or all cores)")
      ("section", po::value(&options.sections)->composing(),
       "prepare only this database.conf section (repeatable)")
      ("all-sections", switch_value(&all_sections),
       "prepare every section with preprocess = True, as the original does, also those no\n"
       "task of this recipe uses");
  po::positional_options_description positional = recipe_positional();
  if (!parse_command_line(
          "data",
          "Prepares the database.conf sections the recipe's tasks use (trainer.cfg,\n"
          "validation_evaluator.cfg, test_evaluator.cfg, reconstructor.cfg, scorer.cfg) and\n"
          "the sections that compute their statistics, into HDF5 stores\n"
          "(<store_dir>/<segment length>/store.h5): features, targets and usedbins, segmented\n"
          "for every segment length; every other section is listed as skipped (a recipe without\n"
          "trainer.cfg and test_evaluator.cfg prepares all). Sections run in\n"
          "dependency order (dependencies and meanandvar_dir); complete stores are skipped, so\n"
          "an interrupted run resumes.\n"
          "Paths in database.conf are relative to the working directory.\n\n"
          "Example: nabu data --recipe=recipes/SS/DBLSTM/toy_DC_2spk --expdir=exp/dc",
          args, description, &positional))
    return 0;
  require(common.recipe, "recipe", "data");
  require(common.expdir, "expdir", "data");
  apply_common_options(common);
  log_to_file(ExperimentLayout{common.expdir}.log());
  if (options.workers == 0) options.workers = common.threads;
  auto recipe = Recipe::load(common.recipe, common.overrides());
  for (const auto& warning : recipe.warnings()) logger().warn("{}", warning);
  if (all_sections && !options.sections.empty())
    throw Error("--all-sections and --section exclude each other");
  // A recipe of data alone (no task files yet) prepares every section.
  bool has_tasks = recipe.has("trainer.cfg") || recipe.has("test_evaluator.cfg");
  if (!all_sections && options.sections.empty() && has_tasks) {
    options.only_used_sections = true;
    options.used_sections = sections_used_by_tasks(recipe);
  }
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
  logger().info("data: {} section(s) prepared, {} already complete; {:.0f} s of audio in {:.1f} s",
               prepared, summaries.size() - prepared, audio, wall);
  return 0;
}

}  // namespace nabu::cli
