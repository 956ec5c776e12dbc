// `nabu sweep`: one training per block of a sweep file (SPEC §2.b), resumable, with a summary.
#include <iostream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "nabu/cli/commands/cli.h"
#include "nabu/cli/commands/sweep_file.h"
#include "nabu/cli/commands/training_run.h"
#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/logging.h"
#include "nabu/core/strings.h"

namespace nabu::cli {

int cmd_sweep(const std::vector<std::string>& args) {
  CommonOptions common;
  TrainingRunOptions run;
  std::string sweep_path, max_steps;
  int duplicates = 1, duplicates_offset = 0;
  po::options_description description("Options");
  add_common_options(description, common);
  description.add_options()
      ("sweep", po::value(&sweep_path), "the sweep file: blocks of 'name' then "
       "'file section option value...' lines, separated by blank lines")
      ("duplicates", po::value(&duplicates)->default_value(1),
       "independent runs per block (<name>_dupl<i>), as the original")
      ("duplicates_ind_offset", po::value(&duplicates_offset)->default_value(0),
       "first duplicate index")
      ("deterministic", po::bool_switch(&run.deterministic), "deterministic algorithms")
      ("max-steps", po::value(&max_steps)->default_value("-1"),
       "stop every stage after this many updates; one value per stage: 700,50; replaces\n"
       "trainer.cfg's max_steps (-1 = not given: that key applies)");
  if (!parse_command_line(
          "sweep",
          "Trains one experiment per block of a sweep file in <expdir>/<name>, each with the\n"
          "block's values applied to the recipe (like --set). Finished experiments are skipped\n"
          "and unfinished ones resumed, so a sweep can be rerun after an interruption. Writes\n"
          "<expdir>/sweep_summary.csv with the best validation loss per stage.\n\n"
          "Example: nabu sweep --recipe=recipes/SS/DBLSTM/toy_DC_2spk "
          "--sweep=recipes/SS/DBLSTM/toy_DC_2spk/sweep_file --expdir=exp/sweep",
          args, description))
    return 0;
  require(common.recipe, "recipe", "sweep");
  require(common.expdir, "expdir", "sweep");
  run.max_steps = parse_max_steps(max_steps);
  require(sweep_path, "sweep", "sweep");
  if (duplicates < 1) throw Error("--duplicates must be at least 1");
  apply_common_options(common);
  auto blocks = parse_sweep_file(sweep_path);
  fs::path root = common.expdir;
  ensure_directory(root);

  struct Row {
    std::string name, status;
    nlohmann::json val_sum;
  };
  std::vector<Row> rows;
  bool failures = false;
  for (const auto& block : blocks) {
    for (int d = duplicates_offset; d < duplicates_offset + duplicates; ++d) {
      std::string name = block.name;
      if (duplicates > 1 || duplicates_offset > 0) name += "_dupl" + std::to_string(d);
      fs::path expdir = root / name;
      Row row{name, "", nlohmann::json::object()};
      bool finished = fs::exists(expdir / "val_sum.json") &&
                      fs::exists(expdir / "full" / "model" / "model.pt");
      if (finished) {
        row.status = "done before";
      } else {
        TrainingRunOptions this_run = run;
        this_run.common = common;
        this_run.common.expdir = expdir.string();
        this_run.resume = fs::exists(expdir / "trainer.cfg");
        if (this_run.resume) {
          this_run.common.sets.clear();
        } else {
          for (const auto& override_ : block.overrides) this_run.common.sets.push_back(override_.spec);
        }
        this_run.common.seed = common.seed + d;
        spdlog::info("sweep: {} ({}){}", name, join(block.descriptions(), ", "),
                     this_run.resume ? ", resuming" : "");
        try {
          run_training(this_run);
          row.status = "trained";
        } catch (const std::exception& e) {
          spdlog::error("sweep: {} failed: {}", name, e.what());
          row.status = "failed: " + std::string(e.what()).substr(0, 120);
          failures = true;
        }
        log_to_file(root / "sweep.log");
      }
      if (fs::exists(expdir / "val_sum.json"))
        row.val_sum = nlohmann::json::parse(read_file(expdir / "val_sum.json"));
      rows.push_back(row);
    }
  }
  // Summary: one row per run, one column per stage (and task in acc_steps mode).
  std::vector<std::string> columns;
  for (const auto& row : rows)
    for (const auto& [stage, value] : row.val_sum.items()) {
      if (value.is_object()) {
        for (const auto& [task, unused] : value.items()) {
          (void)unused;
          std::string column = stage + "/" + task;
          if (std::find(columns.begin(), columns.end(), column) == columns.end()) columns.push_back(column);
        }
      } else if (std::find(columns.begin(), columns.end(), stage) == columns.end()) {
        columns.push_back(stage);
      }
    }
  std::string csv = "name," + join(columns, ",") + ",status\n";
  std::cout << "\nsweep summary (best validation loss per stage)\n";
  for (const auto& row : rows) {
    std::string line = row.name;
    std::cout << "  " << row.name;
    for (const auto& column : columns) {
      auto slash = column.find('/');
      nlohmann::json value = slash == std::string::npos
                                 ? row.val_sum.value(column, nlohmann::json())
                                 : row.val_sum.value(column.substr(0, slash), nlohmann::json::object())
                                       .value(column.substr(slash + 1), nlohmann::json());
      std::string text = value.is_number() ? fmt::format("{:.5g}", value.get<double>()) : "";
      line += "," + text;
      std::cout << "  " << column << "=" << (text.empty() ? "-" : text);
    }
    csv += line + "," + row.status + "\n";
    std::cout << "  [" << row.status << "]\n";
  }
  write_file_atomic(root / "sweep_summary.csv", csv);
  std::cout << "written " << (root / "sweep_summary.csv").string() << "\n";
  return failures ? 1 : 0;
}

}  // namespace nabu::cli
