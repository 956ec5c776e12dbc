#include "nabu/neuralnetworks/trainers/sweep.h"

#include <spdlog/spdlog.h>

#include "nabu/core/error.h"
#include "nabu/core/experiment_layout.h"
#include "nabu/core/fs.h"
#include "nabu/core/logging.h"
#include "nabu/core/strings.h"
#include "nabu/neuralnetworks/trainers/sweep_file.h"

namespace nabu {

namespace {

std::string cell(const SweepRow& row, const std::string& column) {
  auto slash = column.find('/');
  nlohmann::json value = slash == std::string::npos
                             ? row.val_sum.value(column, nlohmann::json())
                             : row.val_sum.value(column.substr(0, slash), nlohmann::json::object())
                                   .value(column.substr(slash + 1), nlohmann::json());
  return value.is_number() ? fmt::format("{:.5g}", value.get<double>()) : "";
}

void add_column(std::vector<std::string>& columns, const std::string& column) {
  if (std::find(columns.begin(), columns.end(), column) == columns.end()) columns.push_back(column);
}

}  // namespace

std::string SweepSummary::table_text() const {
  std::string text = "\nsweep summary (best validation loss per stage)\n";
  for (const auto& row : rows) {
    text += "  " + row.name;
    for (const auto& column : columns) {
      std::string value = cell(row, column);
      text += "  " + column + "=" + (value.empty() ? "-" : value);
    }
    text += "  [" + row.status + "]\n";
  }
  return text;
}

std::string SweepSummary::csv() const {
  std::string text = "name," + join(columns, ",") + ",status\n";
  for (const auto& row : rows) {
    text += row.name;
    for (const auto& column : columns) text += "," + cell(row, column);
    text += "," + row.status + "\n";
  }
  return text;
}

SweepSummary run_sweep(const SweepOptions& options) {
  if (options.duplicates < 1) throw Error("--duplicates must be at least 1");
  auto blocks = parse_sweep_file(options.sweep_file.string());
  const fs::path root = options.run.expdir;
  ensure_directory(root);
  SweepSummary summary;
  for (const auto& block : blocks) {
    for (int d = options.duplicates_offset; d < options.duplicates_offset + options.duplicates;
         ++d) {
      std::string name = block.name;
      if (options.duplicates > 1 || options.duplicates_offset > 0)
        name += "_dupl" + std::to_string(d);
      fs::path expdir = root / name;
      SweepRow row{name, "", nlohmann::json::object()};
      const ExperimentLayout layout{expdir};
      bool finished = fs::exists(layout.val_sum()) && fs::exists(layout.final_model());
      if (finished) {
        row.status = "done before";
      } else {
        TrainingRunOptions run = options.run;
        run.expdir = expdir;
        run.resume = fs::exists(expdir / "trainer.cfg");
        // The sweep's own --set values first, then the block's; a resume repeats them.
        if (run.resume) run.sets.clear();
        else
          for (const auto& override_ : block.overrides) run.sets.push_back(override_.spec);
        run.seed = options.run.seed + d;
        logger().info("sweep: {} ({}){}", name, join(block.descriptions(), ", "),
                     run.resume ? ", resuming" : "");
        try {
          run_training(run);
          row.status = "trained";
        } catch (const std::exception& e) {
          logger().error("sweep: {} failed: {}", name, e.what());
          row.status = "failed: " + std::string(e.what()).substr(0, 120);
          summary.failures = true;
        }
        log_to_file(root / "sweep.log");
      }
      if (fs::exists(layout.val_sum()))
        row.val_sum = nlohmann::json::parse(read_file(layout.val_sum()));
      summary.rows.push_back(row);
    }
  }
  // One column per stage (and task with validate_per_task).
  for (const auto& row : summary.rows)
    for (const auto& [stage, value] : row.val_sum.items()) {
      if (!value.is_object()) {
        add_column(summary.columns, stage);
        continue;
      }
      for (const auto& [task, unused] : value.items()) {
        (void)unused;
        add_column(summary.columns, stage + "/" + task);
      }
    }
  write_file_atomic(root / "sweep_summary.csv", summary.csv());
  return summary;
}

}  // namespace nabu
