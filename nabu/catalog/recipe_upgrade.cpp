#include "nabu/catalog/recipe_upgrade.h"

#include "nabu/catalog/recipe_check.h"
#include "nabu/core/config.h"
#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/strings.h"
#include "nabu/neuralnetworks/models/model.h"
#include "nabu/neuralnetworks/models/model_bank.h"

namespace nabu {

namespace fs = std::filesystem;

namespace {

// The files whose task sections get the task graph.
const std::vector<std::string> kTaskFiles = {"trainer.cfg", "validation_evaluator.cfg",
                                             "test_evaluator.cfg"};
// [trainer] keys of that time that Nabu does not read: one model makes single_1to1 the only
// layout, and a stage resumes with `nabu train --resume`.
const std::vector<std::string> kDroppedTrainerKeys = {"multi_trainer", "resume_training"};
// What the trainer of that time did where today's default differs (seed 001: the task losses'
// tf.reduce_mean, each minibatch's gradient clipped before it is accumulated); written unless
// trainer.cfg sets the key itself (docs/README.md, "Differences from the original").
const std::vector<std::pair<std::string, std::string>> kOlderTrainerKeys = {
    {"task_loss_combination", "mean"}, {"clip_grad_value_per_minibatch", "True"}};

bool documents_key(const std::string& architecture, const std::string& key) {
  for (const auto& option : model_registry().options(architecture))
    if (option.key == key) return true;
  return false;
}

class RecipeUpgrader {
 public:
  RecipeUpgrader(fs::path old_recipe, fs::path new_recipe)
      : old_(std::move(old_recipe)), new_(std::move(new_recipe)) {}

  RecipeUpgradeResult upgrade() {
    if (!fs::is_directory(old_)) throw Error(old_.string() + ": no such recipe folder");
    if (fs::exists(new_))
      throw Error(new_.string() + " already exists; nabu recipe upgrade writes a new folder");
    const ConfigFile old_model = ConfigFile::load(old_ / "model.cfg");
    if (!is_single_model_format(old_model))
      throw Error(old_model.path() + " has [hyper] model_names: the recipe is in the current "
                  "format already");
    files_["model.cfg"] = convert_model(old_model);
    for (const auto& name : kTaskFiles)
      if (fs::exists(old_ / name)) files_[name] = ConfigFile::load(old_ / name);
    drop_old_trainer_keys();
    keep_older_trainer_semantics();
    for (auto& [name, config] : files_)
      if (name != "model.cfg") add_task_graphs(name, config);
    return write();
  }

 private:
  ConfigFile convert_model(const ConfigFile& old) {
    const ConfigSection* io = old.find_section("io");
    const ConfigSection* model = old.find_section("model");
    if (!io || !model)
      throw Error(old.path() + ": the older format needs both [io] and [model] (found " +
                  (io ? "[io]" : "[model]") + " alone)");
    inputs_ = io->get_list("inputs");
    auto outputs = io->get_list("outputs");
    if (inputs_.empty()) io->fail("inputs", "names no input");
    if (outputs.size() != 1)
      io->fail("outputs", "names " + std::to_string(outputs.size()) +
                              " outputs; the upgrade converts models of one output (convert "
                              "the others by hand: docs/models.md)");
    output_ = outputs.front();
    const std::string architecture = model->get_string("architecture");
    // The older recurrent models ended in their own linear output layer (output_dims); here
    // that layer is a model of its own.
    split_ = model->has("output_dims") && !documents_key(architecture, "output_dims");
    ConfigFile converted(old.path());
    auto& hyper = converted.add_section("hyper");
    hyper.set("model_names", split_ ? "main outlayer" : "main", {});
    auto& main = converted.add_section("main");
    for (const auto& key : model->keys())
      if (!(split_ && key == "output_dims")) main.set(key, model->get_string(key), {});
    if (split_) {
      auto& outlayer = converted.add_section("outlayer");
      outlayer.set("architecture", "linear", {});
      outlayer.set("output_dims", model->get_string("output_dims"), {});
      changes_.push_back("model.cfg: [model] (" + architecture + " with output_dims " +
                         model->get_string("output_dims") + ") became [main] (" + architecture +
                         ") and [outlayer] (linear, output_dims " +
                         model->get_string("output_dims") + "); [hyper] model_names = main "
                         "outlayer");
    } else {
      changes_.push_back("model.cfg: [model] (" + architecture +
                         ") became [main]; [hyper] model_names = main");
    }
    return converted;
  }

  void drop_old_trainer_keys() {
    auto it = files_.find("trainer.cfg");
    if (it == files_.end() || !it->second.has_section("trainer")) return;
    ConfigSection& trainer = it->second.section("trainer");
    for (const auto& key : kDroppedTrainerKeys)
      if (trainer.erase(key))
        changes_.push_back("trainer.cfg: [trainer] " + key + " dropped (" +
                           (key == "multi_trainer" ? "one model: the only layout"
                                                   : "resume with nabu train --resume") +
                           ")");
  }

  void keep_older_trainer_semantics() {
    auto it = files_.find("trainer.cfg");
    if (it == files_.end() || !it->second.has_section("trainer")) return;
    ConfigSection& trainer = it->second.section("trainer");
    for (const auto& [key, value] : kOlderTrainerKeys) {
      if (trainer.has(key)) continue;
      trainer.set(key, value, {});
      changes_.push_back("trainer.cfg: [trainer] " + key + " = " + value + " added (" +
                         (key == "task_loss_combination"
                              ? "the older trainer averaged the task losses; today's default sums "
                                "them"
                              : "the older trainer clipped each minibatch's gradient; today's "
                                "default clips their sum") +
                         ")");
    }
  }

  // A task section names a data section for every model input (`features = trainspec`);
  // those (also the ones [evaluator] tasks does not list yet) without a graph get the one the
  // single model made implicit: inputs -> main (-> outlayer) -> the output.
  bool is_task_section(const ConfigSection& section) const {
    if (section.name() == "trainer" || section.name() == "evaluator") return false;
    for (const auto& input : inputs_)
      if (!section.has(input)) return false;
    return !section.has("nodes");
  }

  void add_task_graphs(const std::string& name, ConfigFile& config) {
    std::vector<std::string> changed;
    for (const auto& task : config.section_names()) {
      ConfigSection& section = config.section(task);
      if (!is_task_section(section)) continue;
      add_graph(section);
      changed.push_back("[" + task + "]");
    }
    if (!changed.empty())
      changes_.push_back(name + ": " + join(changed, " ") + " got inputs, outputs and nodes");
  }

  void add_graph(ConfigSection& section) {
    const std::string inputs = join(inputs_, " ");
    section.set("inputs", inputs, {});
    section.set("outputs", output_, {});
    if (split_) {
      section.set("nodes", "n0 " + output_, {});
      section.set("n0_model", "main", {});
      section.set("n0_inputs", inputs, {});
      section.set(output_ + "_model", "outlayer", {});
      section.set(output_ + "_inputs", "n0", {});
    } else {
      section.set("nodes", output_, {});
      section.set(output_ + "_model", "main", {});
      section.set(output_ + "_inputs", inputs, {});
    }
  }

  RecipeUpgradeResult write() {
    if (!new_.parent_path().empty()) ensure_directory(new_.parent_path());
    AtomicPath staged(new_);
    fs::copy(old_, staged.temporary(), fs::copy_options::recursive);
    for (const auto& [name, config] : files_) config.save(staged.temporary() / name);
    std::string readme = "# " + new_.filename().string() + "\n\nMade by `nabu recipe upgrade " +
                         old_.string() + " " + new_.string() +
                         "` from the older single-model format. What changed (comments of the "
                         "rewritten files are not kept; the originals are in " +
                         old_.string() + "):\n\n";
    for (const auto& change : changes_) readme += "- " + change + "\n";
    write_file(staged.temporary() / "UPGRADE.md", readme);
    staged.commit();
    RecipeUpgradeResult result;
    result.changes = changes_;
    result.problems = check_recipe(new_, {}).problems;
    return result;
  }

  fs::path old_, new_;
  std::map<std::string, ConfigFile> files_;
  std::vector<std::string> inputs_;
  std::string output_;
  bool split_ = false;
  std::vector<std::string> changes_;
};

}  // namespace

RecipeUpgradeResult upgrade_recipe(const fs::path& old_recipe, const fs::path& new_recipe) {
  return RecipeUpgrader(old_recipe, new_recipe).upgrade();
}

}  // namespace nabu
