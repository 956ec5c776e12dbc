// `nabu sweep`: flags -> run_sweep (neuralnetworks/trainers/sweep.h), then the summary table.
#include <iostream>

#include "nabu/cli/commands/cli.h"
#include "nabu/core/error.h"
#include "nabu/neuralnetworks/trainers/sweep.h"

namespace nabu::cli {

int cmd_sweep(const std::vector<std::string>& args) {
  CommonOptions common;
  SweepOptions sweep;
  std::string sweep_path, max_steps;
  po::options_description description("Options");
  add_common_options(description, common,
                     "the folder of the sweep's experiments, one per block (created if missing)");
  description.add_options()
      ("sweep", po::value(&sweep_path), "the sweep file: blocks of 'name' then "
       "'file section option value...' lines, separated by blank lines")
      ("duplicates", po::value(&sweep.duplicates)->default_value(1),
       "independent runs per block (<name>_dupl<i>), as the original")
      ("duplicates-ind-offset", po::value(&sweep.duplicates_offset)->default_value(0),
       "first duplicate index")
      ("deterministic", switch_value(&sweep.run.deterministic), "deterministic algorithms")
      ("max-steps", po::value(&max_steps)->default_value("-1"),
       "stop every stage after this many updates; one value per stage: 700,50; replaces\n"
       "trainer.cfg's max_steps (-1 = not given: that key applies)");
  po::positional_options_description positional = recipe_positional();
  if (!parse_command_line(
          "sweep",
          "Trains one experiment per block of a sweep file in <expdir>/<name>, each with the\n"
          "block's values applied to the recipe (like --set). Finished experiments are skipped\n"
          "and unfinished ones resumed, so a sweep can be rerun after an interruption. Writes\n"
          "<expdir>/sweep_summary.csv with the best validation loss per stage.\n\n"
          "Example: nabu sweep --recipe=recipes/SS/DBLSTM/toy_DC_2spk "
          "--sweep=recipes/SS/DBLSTM/toy_DC_2spk/sweep_file --expdir=exp/sweep",
          args, description, &positional))
    return 0;
  require(common.recipe, "recipe", "sweep");
  require(common.expdir, "expdir", "sweep");
  require(sweep_path, "sweep", "sweep");
  sweep.run.max_steps = parse_max_steps(max_steps);
  apply_common_options(common);
  sweep.run.recipe = common.recipe;
  sweep.run.expdir = common.expdir;
  sweep.run.seed = common.seed;
  sweep.run.sets = common.sets;
  sweep.sweep_file = sweep_path;
  SweepSummary summary = run_sweep(sweep);
  std::cout << summary.table_text()
            << "written " << (std::filesystem::path(common.expdir) / "sweep_summary.csv").string() << "\n";
  return summary.failures ? 1 : 0;
}

}  // namespace nabu::cli
