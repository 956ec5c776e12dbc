#include "nabu/catalog/recipe_from_corpus.h"

#include <cmath>
#include <map>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "nabu/catalog/recipe_check.h"
#include "nabu/catalog/recipe_sections.h"
#include "nabu/core/config.h"
#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/recipe.h"
#include "nabu/core/strings.h"
#include "nabu/processing/feature_computer.h"
#include "nabu/processing/processor.h"

namespace nabu {

namespace fs = std::filesystem;

namespace {

// --data as a recipe names it: relative paths stay relative (without "./" or a trailing '/').
fs::path listed_folder(const fs::path& data) {
  if (data.is_absolute()) return absolute_folder(data);
  fs::path normal = data.lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();
  return normal.empty() ? fs::path(".") : normal;
}

// The role of a split by its name in the corpora nabu prepares.
std::string split_role(const std::string& split) {
  if (split == "tr" || starts_with(split, "train")) return "train";
  if (split == "cv" || split == "dev") return "valid";
  if (split == "tt" || split == "test") return "test";
  return "";
}

// The rate a list path names (".../wav8k/...": 8000), 0 when it names none.
int rate_in_path(const std::string& path) {
  static const std::regex pattern("(^|/)wav([0-9]+)k(/|$)");
  std::smatch match;
  return std::regex_search(path, match, pattern) ? std::stoi(match[2]) * 1000 : 0;
}

class RecipeMaker {
 public:
  explicit RecipeMaker(const RecipeFromCorpusOptions& options)
      : options_(options), prepared_(absolute_folder(options.prepared)),
        listed_(listed_folder(options.prepared)) {
    if (prepared_.string().find_first_of(" \t") != std::string::npos)
      throw Error("--data=" + options.prepared.string() + ": database.conf separates list files "
                  "by spaces, so their path cannot hold one; move or link the prepared folder");
    const fs::path record = prepared_ / "prepared.json";
    if (!fs::exists(record))
      throw Error("--data=" + options.prepared.string() + ": no prepared.json (prepare the "
                  "corpus first: nabu prepare folder|librimix|wham|wsj0-mix ROOT)");
    try {
      auto json = nlohmann::json::parse(read_file(record));
      rate_ = json.at("sample_rate").get<int>();
      for (const auto& [split, summary] : json.at("splits").items()) splits_.push_back(split);
    } catch (const nlohmann::json::exception& e) {
      throw Error(record.string() + ": unreadable (" + std::string(e.what()) + ")");
    }
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(options.from, ec))
      if (entry.is_regular_file() &&
          (entry.path().extension() == ".cfg" || entry.path().extension() == ".conf")) {
        files_.emplace(entry.path().filename().string(), ConfigFile::load(entry.path()));
        texts_.emplace(entry.path().filename().string(), read_file(entry.path()));
      }
    if (ec || !files_.count("database.conf") || !files_.count("trainer.cfg"))
      throw Error("--from=" + options.from.string() +
                  ": not a recipe folder (no database.conf and trainer.cfg)");
    name_ = fs::absolute(options.out).lexically_normal().filename().string();
    if (name_.empty())
      name_ = fs::absolute(options.out).lexically_normal().parent_path().filename().string();
  }

  RecipeFromCorpusResult make() {
    map_lists();
    drop_tasks_on_other_corpora();
    give_stores_their_own_folder();
    fit_frames_to_rate();
    scale_model_outputs();
    scale_sample_segments();
    point_dynamic_mixing_at_corpus();
    leave_out_scorers_of_other_rates();
    write();
    return {rate_, changes_};
  }

 private:
  ConfigFile& file(const std::string& name) { return files_.at(name); }

  // The database.conf sections the training tasks' inputs read.
  std::vector<std::string> training_input_sections() {
    std::vector<std::string> sections;
    const ConfigFile& trainer = file("trainer.cfg");
    for (const auto& task : trainer.section("trainer").get_list("tasks")) {
      const ConfigSection& section = trainer.section(task);
      for (const auto& input : section.get_list("inputs", {}))
        if (section.has(input))
          for (const auto& name : section.get_list(input)) sections.push_back(name);
    }
    return sections;
  }

  // The folder holding the recipe's training splits (data/corpus/2speakers/wav8k/min): the
  // grandparent of the first list of the first training task's first input section.
  fs::path training_root() {
    for (const auto& name : training_input_sections()) {
      const ConfigSection* data = file("database.conf").find_section(name);
      if (!data || !data->has("datafiles")) continue;
      auto lists = data->get_list("datafiles");
      if (!lists.empty()) return fs::path(lists.front()).parent_path().parent_path();
    }
    throw Error(file("trainer.cfg").path() + ": no training task input names a database.conf "
                "section with datafiles; nothing to point at the prepared corpus");
  }

  std::string prepared_split(const std::string& recipe_split) {
    for (const auto& split : splits_)
      if (split == recipe_split) return split;
    for (const auto& split : splits_)
      if (split_role(split) == split_role(recipe_split) && !split_role(split).empty())
        return split;
    return "";
  }

  // Every datafiles entry under the training root names the prepared corpus's list of the
  // same split and name; a section reading another corpus is foreign.
  void map_lists() {
    root_ = training_root();
    original_rate_ = rate_in_path(root_.string());
    ConfigFile& database = file("database.conf");
    for (const auto& name : database.section_names()) {
      ConfigSection& section = database.section(name);
      if (!section.has("datafiles")) continue;
      std::vector<std::string> mapped;
      for (const auto& list : section.get_list("datafiles")) {
        const fs::path path(list);
        if (path.parent_path().parent_path() != root_) {
          foreign_.insert(name);
          break;
        }
        const std::string recipe_split = path.parent_path().filename().string();
        const std::string split = prepared_split(recipe_split);
        const fs::path target = listed_ / split / path.filename();
        if (split.empty() || !fs::exists(target))
          throw Error(section.where("datafiles") + ": names " + list + ", and " +
                      prepared_.string() + " has no " +
                      (split.empty() ? "split for '" + recipe_split + "'"
                                     : split + "/" + path.filename().string()) +
                      " to replace it with");
        mapped.push_back(target.string());
      }
      if (foreign_.count(name)) continue;
      section.set("datafiles", join(mapped, " "), section.find("datafiles")->origin);
    }
    changes_.push_back("database.conf: the lists under " + root_.string() + " -> " +
                       listed_.string() + "/<split>/");
  }

  // Test tasks that read another corpus (the toy recipes' recorded test sets) are left out;
  // a training or validation task that does is an error.
  void drop_tasks_on_other_corpora() {
    if (foreign_.empty()) return;
    Recipe recipe = Recipe::load(options_.from);
    std::set<std::string> dropped;
    for (const auto& [section, uses] : sections_used_by_tasks(recipe)) {
      if (!foreign_.count(section)) continue;
      for (const auto& use : uses) {
        const std::string task = use.substr(use.find('[') + 1, use.find(']') - use.find('[') - 1);
        const std::string used_by = use.substr(0, use.find(' '));
        if (used_by == "trainer.cfg" || used_by == "validation_evaluator.cfg")
          throw Error(use + " reads database.conf [" + section + "], whose lists are not under " +
                      root_.string() + "; nabu recipe new points one corpus at the prepared one");
        dropped.insert(task);
      }
    }
    // Test sections not in [evaluator] tasks (run with --task) that read a foreign section go too.
    for (const char* name : {"test_evaluator.cfg", "reconstructor.cfg", "scorer.cfg"}) {
      if (!files_.count(name)) continue;
      for (const auto& section : files_.at(name).sections())
        for (const auto& [key, value] : section.entries())
          for (const auto& word : split_whitespace(value.text))
            if (foreign_.count(word)) dropped.insert(section.name());
    }
    ConfigFile& test = file("test_evaluator.cfg");
    std::vector<std::string> kept;
    for (const auto& task : test.section("evaluator").get_list("tasks"))
      if (!dropped.count(task)) kept.push_back(task);
    if (kept.empty())
      throw Error(test.path() + ": every test task reads another corpus than the training's");
    test.section("evaluator").set("tasks", join(kept, " "), {});
    for (const char* name : {"test_evaluator.cfg", "reconstructor.cfg", "scorer.cfg"})
      if (files_.count(name)) files_[name] = without_sections(files_.at(name), dropped);
    files_["database.conf"] = without_sections(file("database.conf"), foreign_);
    changes_.push_back("test tasks left out (they test another corpus): " +
                       join({dropped.begin(), dropped.end()}, ", ") +
                       "; database.conf sections left out: " +
                       join({foreign_.begin(), foreign_.end()}, ", "));
  }

  static ConfigFile without_sections(const ConfigFile& from, const std::set<std::string>& names) {
    ConfigFile out(from.path());
    for (const auto& section : from.sections()) {
      if (names.count(section.name())) continue;
      ConfigSection& copy = out.add_section(section.name(), section.origin());
      for (const auto& [key, value] : section.entries()) copy.set(key, value.text, value.origin);
    }
    return out;
  }

  // data/stores/toy2spk/features/tr -> data/stores/<recipe name>/toy2spk/features/tr: the
  // recipe's stores never meet another recipe's (docs/data_layout.md).
  void give_stores_their_own_folder() {
    ConfigFile& database = file("database.conf");
    const std::string prefix = "data/stores/";
    for (const auto& name : database.section_names()) {
      ConfigSection& section = database.section(name);
      for (const char* key : {"store_dir", "meanandvar_dir", "label2index_dir"}) {
        const ConfigValue* value = section.find(key);
        if (!value || trim(value->text).empty() || trim(value->text) == "globalvars") continue;
        std::string text = trim(value->text);
        if (starts_with(text, prefix)) text = text.substr(prefix.size());
        section.set(key, prefix + name_ + "/" + text, value->origin);
      }
    }
    changes_.push_back("database.conf: stores under data/stores/" + name_ + "/");
  }

  // A frame of winlen seconds at the corpus's rate must fit nfft (FeatureOptions::frame_problem).
  void fit_frames_to_rate() {
    for (auto& [name, config] : files_) {
      if (!config.has_section("processor") || !config.section("processor").has("nfft")) continue;
      const FeatureOptions* features = nullptr;
      ProcessorPtr processor;
      try {
        processor = make_processor(config);
        features = processor->feature_options();
      } catch (const Error&) {
        continue;  // nabu check names it when the recipe is checked
      }
      if (!features || features->frame_problem(rate_).empty()) continue;
      ConfigSection& section = config.section("processor");
      const int fitting = features->fitting_nfft(rate_);
      section.set("nfft", std::to_string(fitting), section.find("nfft")->origin);
      bins_before_ = features->nfft / 2 + 1;
      bins_after_ = fitting / 2 + 1;
      changes_.push_back(name + ": nfft " + std::to_string(features->nfft) + " -> " +
                         std::to_string(fitting) + " (" + features->frame_problem(rate_) + ")");
    }
    // Other sections that frame the signal themselves (pit_sisnr_masks's loss.cfg section: its
    // sample_rate, winlen and nfft must be the features').
    for (auto& [name, config] : files_)
      for (const auto& section_name : config.section_names()) {
        ConfigSection& section = config.section(section_name);
        if (section_name == "processor" || !section.has("sample_rate")) continue;
        if (section.get_string("sample_rate") != std::to_string(rate_)) {
          changes_.push_back(name + " [" + section_name + "]: sample_rate " +
                             section.get_string("sample_rate") + " -> " + std::to_string(rate_));
          section.set("sample_rate", std::to_string(rate_), section.find("sample_rate")->origin);
        }
        if (!section.has("winlen") || !section.has("nfft")) continue;
        FeatureOptions framing;
        framing.winlen = section.get_double("winlen");
        framing.nfft = static_cast<int>(section.get_int("nfft"));
        if (framing.frame_problem(rate_).empty()) continue;
        section.set("nfft", std::to_string(framing.fitting_nfft(rate_)), section.find("nfft")->origin);
        changes_.push_back(name + " [" + section_name + "]: nfft " + std::to_string(framing.nfft) +
                           " -> " + std::to_string(framing.fitting_nfft(rate_)));
      }
  }

  // Output layers sized by the frequency bins (a mask per bin and speaker, an embedding per bin:
  // output_dims = F x k) follow F when nfft changed; other sizes (speakers, classes) stay.
  void scale_model_outputs() {
    if (bins_before_ == bins_after_ || !files_.count("model.cfg")) return;
    ConfigFile& models = file("model.cfg");
    for (const auto& name : models.section_names()) {
      ConfigSection& section = models.section(name);
      const ConfigValue* value = section.find("output_dims");
      auto dims = value ? parse_int(trim(value->text)) : std::nullopt;
      if (!dims || *dims % bins_before_ != 0) continue;
      const long long scaled = *dims / bins_before_ * bins_after_;
      section.set("output_dims", std::to_string(scaled), value->origin);
      changes_.push_back("model.cfg [" + name + "]: output_dims " + std::to_string(*dims) +
                         " -> " + std::to_string(scaled) + " (" + std::to_string(bins_after_) +
                         " frequency bins, was " + std::to_string(bins_before_) + ")");
    }
  }

  // Segment lengths count samples where the training inputs are waveforms (feature = raw): they
  // keep their duration at the corpus's rate. Frames need nothing (winstep is in seconds): a
  // spectrogram model's segments stay, whatever raw targets (a loss's waveforms) it has.
  void scale_sample_segments() {
    if (original_rate_ == 0 || original_rate_ == rate_) return;
    bool samples = false;
    for (const auto& section : training_input_sections()) {
      const ConfigSection* data = file("database.conf").find_section(section);
      if (!data || !data->has("processor_config")) continue;
      const std::string processor = fs::path(data->get_string("processor_config")).filename();
      if (files_.count(processor) && files_.at(processor).has_section("processor") &&
          files_.at(processor).section("processor").get_string("feature", "") == "raw")
        samples = true;
    }
    const ConfigFile& trainer_cfg = file("trainer.cfg");
    bool numeric_stage = false;
    for (const auto& stage : trainer_cfg.section("trainer").get_list("segment_lengths", {"full"}))
      if (stage != "full") numeric_stage = true;
    if (!samples || !numeric_stage) return;
    auto scale = [&](ConfigSection& section) {
      const ConfigValue* value = section.find("segment_lengths");
      if (!value || trim(value->text) == "globalvars") return;
      std::vector<std::string> scaled;
      for (const auto& length : split_whitespace(value->text)) {
        auto number = parse_int(length);
        scaled.push_back(number ? std::to_string(*number * rate_ / original_rate_) : length);
      }
      section.set("segment_lengths", join(scaled, " "), value->origin);
    };
    for (const auto& name : file("database.conf").section_names())
      scale(file("database.conf").section(name));
    scale(file("trainer.cfg").section("trainer"));
    changes_.push_back("segment lengths in samples scaled by " + std::to_string(rate_) + "/" +
                       std::to_string(original_rate_) + " (they keep their duration)");
  }

  void point_dynamic_mixing_at_corpus() {
    ConfigSection& trainer = file("trainer.cfg").section("trainer");
    if (!trainer.has("dynamic_mixing_sources")) return;
    const std::string train = prepared_split("tr");
    trainer.set("dynamic_mixing_sources", (listed_ / train / "sources_wav.scp").string(),
                trainer.find("dynamic_mixing_sources")->origin);
    if (trainer.has("dynamic_mixing_utt2spk"))
      trainer.set("dynamic_mixing_utt2spk", (listed_ / train / "sources_utt2spk").string(),
                  trainer.find("dynamic_mixing_utt2spk")->origin);
    trainer.erase("dynamic_mixing_shares");
    changes_.push_back("trainer.cfg: dynamic mixing of " + (listed_ / train).string() +
                       "/sources_wav.scp");
  }

  // pesq scores 8 and 16 kHz signals only (P.862, P.862.2); at another rate it is left out.
  void leave_out_scorers_of_other_rates() {
    if (rate_ == 8000 || rate_ == 16000 || !files_.count("scorer.cfg")) return;
    for (const auto& name : file("scorer.cfg").section_names()) {
      ConfigSection& section = file("scorer.cfg").section(name);
      const ConfigValue* value = section.find("score_type");
      if (!value) continue;
      std::vector<std::string> kept;
      for (const auto& type : split_whitespace(value->text))
        if (type != "pesq") kept.push_back(type);
      if (kept.size() == split_whitespace(value->text).size()) continue;
      section.set("score_type", join(kept, " "), value->origin);
      changes_.push_back("scorer.cfg [" + name + "]: pesq left out (it scores 8 or 16 kHz signals, "
                         "not " + std::to_string(rate_) + " Hz)");
    }
  }

  void write() {
    std::error_code ec;
    if (fs::exists(options_.out, ec))
      throw Error(options_.out.string() + " already exists; nabu recipe new writes a new folder");
    if (!options_.out.parent_path().empty()) ensure_directory(options_.out.parent_path());
    AtomicPath staged(options_.out);
    ensure_directory(staged.temporary());
    // Written over the copied text, so that its comments (what each key is for) stay.
    for (const auto& [name, config] : files_)
      write_file(staged.temporary() / name, config.to_string_over(texts_.at(name)));
    std::string readme = "# " + name_ + "\n\nMade by `nabu recipe new --from=" +
                         options_.from.string() + " --data=" + prepared_.string() + "` for " +
                         std::to_string(rate_) + " Hz data. What differs from " +
                         options_.from.string() + ":\n\n";
    for (const auto& change : changes_) readme += "- " + change + "\n";
    write_file(staged.temporary() / "README.md", readme);
    auto report = check_recipe(staged.temporary(), {});
    if (!report.problems.empty())
      throw Error("the recipe made for " + prepared_.string() + " does not pass nabu check: " +
                  report.problems.front() +
                  (report.problems.size() > 1
                       ? " (and " + std::to_string(report.problems.size() - 1) + " more)"
                       : std::string()));
    staged.commit();
  }

  const RecipeFromCorpusOptions& options_;
  fs::path prepared_, root_;
  // The prepared folder as the recipe names it: as --data gave it (relative to where nabu runs,
  // as the shipped recipes' paths are), absolute when --data was.
  fs::path listed_;
  int rate_ = 0, original_rate_ = 0;
  int bins_before_ = 0, bins_after_ = 0;  // the features' frequency bins, when nfft changed
  std::vector<std::string> splits_;
  std::map<std::string, ConfigFile> files_;
  std::map<std::string, std::string> texts_;  // each file's text as copied
  std::string name_;
  std::set<std::string> foreign_;
  std::vector<std::string> changes_;
};

}  // namespace

RecipeFromCorpusResult make_recipe_from_corpus(const RecipeFromCorpusOptions& options) {
  return RecipeMaker(options).make();
}

}  // namespace nabu
