#include "nabu/core/recipe.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include <set>

#include "nabu/core/error.h"
#include "nabu/core/experiment_layout.h"
#include "nabu/core/fs.h"
#include "nabu/core/strings.h"

namespace nabu {

namespace {

bool is_config_file(const fs::path& path) {
  auto ext = path.extension().string();
  return ext == ".cfg" || ext == ".conf";
}

// The keys whose values are paths (or lists of paths), by file: these are what an experiment's
// copy rewrites and what loading it resolves (docs/ini_semantics.md, "Paths"). Processor configs
// are matched by their alphabet_file key.
bool is_path_key(const std::string& file, const std::string& key) {
  if (file == "database.conf")
    return key == "datafiles" || key == "store_dir" || key == "meanandvar_dir" ||
           key == "label2index_dir" || key == "processor_config";
  if (file == "trainer.cfg")
    return key == "dynamic_mixing_sources" || key == "dynamic_mixing_utt2spk" ||
           key == "dynamic_mixing_spk2f0" ||
           key == "init_file";
  return key == "alphabet_file";
}

// Placeholders that name no path.
bool names_a_path(const std::string& value) {
  return !value.empty() && value != "None" && value != "globalvars";
}

// `value` (space-separated paths) with every relative path replaced by `resolve(path)`.
template <typename Resolve>
std::string map_paths(const std::string& value, const Resolve& resolve) {
  std::vector<std::string> out;
  for (const auto& token : split_whitespace(value))
    out.push_back(names_a_path(token) && fs::path(token).is_relative() ? resolve(token) : token);
  return join(out, " ");
}

// A string field of an experiment's record (experiment.json): "list_root", the folder relative
// paths in list files were relative to when the experiment was trained, or "recipe", the recipe
// folder it was trained from. "" when the record has none.
std::string read_record_field(const fs::path& record, const std::string& field) {
  try {
    return nlohmann::json::parse(read_file(record)).value(field, std::string());
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(record.string() + ": unreadable (" + e.what() + ")");
  }
}

// In an experiment's copy, relative paths are relative to the experiment folder.
void resolve_paths_against(std::map<std::string, ConfigFile>& files, const fs::path& dir) {
  const fs::path base = fs::absolute(dir).lexically_normal();
  for (auto& [name, file] : files) {
    std::string file_name = fs::path(name).filename().string();
    for (const auto& section_name : file.section_names()) {
      ConfigSection& section = file.section(section_name);
      for (const auto& [key, value] : section.entries()) {
        if (!is_path_key(file_name, key)) continue;
        std::string resolved = map_paths(value.text, [&](const std::string& path) {
          return (base / path).lexically_normal().string();
        });
        if (resolved != value.text) section.set(key, resolved, value.origin);
      }
    }
  }
}

}  // namespace

Recipe Recipe::load(const fs::path& dir, const std::vector<ConfigOverride>& overrides,
                    std::vector<std::string>* errors) {
  const Attempt attempt = [errors](const std::function<void()>& action) {
    if (!errors) return action(), true;
    try {
      action();
      return true;
    } catch (const ConfigError& e) {
      errors->push_back(e.what());
      return false;
    }
  };
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw ConfigError(dir.string() + ": recipe folder does not exist or is not a directory");
  Recipe recipe;
  recipe.dir_ = dir;
  recipe.overrides_ = overrides;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file() || !is_config_file(entry.path())) continue;
    auto name = entry.path().filename().string();
    if (!attempt([&] { recipe.files_.emplace(name, ConfigFile::load(entry.path())); }))
      recipe.unreadable_.insert(name);
  }
  if (ec) throw ConfigError(dir.string() + ": cannot list recipe folder: " + ec.message());

  // The files an override may name: a file that is there but does not parse is not missing.
  std::set<std::string> present = recipe.unreadable_;
  for (auto& [name, file] : recipe.files_) {
    present.insert(name);
    attempt([&, &name = name, &file = file] { apply_overrides(file, name, overrides); });
    for (const auto& warning : file.warnings()) recipe.warnings_.push_back(warning);
  }
  const ExperimentLayout layout{dir};
  const bool experiment = fs::exists(layout.record(), ec);
  if (experiment) {
    resolve_paths_against(recipe.files_, dir);
    recipe.list_root_ = read_record_field(layout.record(), "list_root");
    recipe.origin_ = read_record_field(layout.record(), "recipe");
  }
  if (recipe.origin_.empty()) {
    fs::path folder = fs::absolute(dir).lexically_normal();
    // "recipes/X/" and "recipes/X" are one recipe.
    recipe.origin_ = (folder.has_filename() ? folder : folder.parent_path()).string();
  }
  recipe.load_processor_configs(overrides, present, attempt);
  if (experiment) resolve_paths_against(recipe.processor_configs_, dir);
  for (const auto& override_ : overrides) {
    if (present.count(override_.file)) continue;
    std::vector<std::string> known = recipe.file_names();
    attempt([&] {
      throw ConfigError("--set '" + shorten(override_.spec) + "': the recipe " + dir.string() +
                      " has no file '" + override_.file + "'" +
                      did_you_mean(override_.file, known));
    });
  }
  return recipe;
}

void Recipe::load_processor_configs(const std::vector<ConfigOverride>& overrides,
                                    std::set<std::string>& present, const Attempt& attempt) {
  // Loaded from where database.conf points, overrides matched by file name.
  const ConfigFile* database = find("database.conf");
  if (!database) return;
  for (const auto& section : database->sections()) {
    if (!section.has("processor_config")) continue;
    fs::path path;
    try {
      path = processor_config_path(section);
    } catch (const ConfigError&) {
      continue;  // reported by whoever needs the section (data preparation, check)
    }
    std::string key = fs::absolute(path).lexically_normal().string();
    if (processor_configs_.count(key)) continue;
    std::string name = path.filename().string();
    present.insert(name);
    // A file of the recipe folder was warned about, or reported, above.
    std::error_code not_same;
    bool in_folder = fs::equivalent(path, dir_ / name, not_same);
    if (in_folder && unreadable_.count(name)) continue;
    ConfigFile* config = nullptr;
    if (!attempt([&] {
          config = &processor_configs_.emplace(key, ConfigFile::load(path)).first->second;
        })) {
      unreadable_.insert(name);
      continue;
    }
    if (!in_folder)
      for (const auto& warning : config->warnings()) warnings_.push_back(warning);
    attempt([&] { apply_overrides(*config, name, overrides); });
  }
}

bool Recipe::has(const std::string& file) const { return files_.count(file) > 0; }

const ConfigFile* Recipe::find(const std::string& file) const {
  auto it = files_.find(file);
  return it == files_.end() ? nullptr : &it->second;
}

const ConfigFile& Recipe::get(const std::string& file) const {
  const ConfigFile* config = find(file);
  if (!config)
    throw ConfigError(dir_.string() + ": the recipe has no " + file +
                      did_you_mean(file, file_names()));
  return *config;
}

std::vector<std::string> Recipe::file_names() const {
  std::vector<std::string> names;
  for (const auto& entry : files_) names.push_back(entry.first);
  return names;
}

fs::path Recipe::processor_config_path(const ConfigSection& section) const {
  std::string given = section.get_string("processor_config");
  std::error_code ec;
  fs::path as_given(given);
  if (fs::is_regular_file(as_given, ec)) return as_given;
  fs::path in_recipe = dir_ / as_given.filename();
  if (!as_given.filename().empty() && fs::is_regular_file(in_recipe, ec)) {
    logger().debug("{}: processor_config '{}' not found; using {} from the recipe folder",
                  section.where("processor_config"), given, in_recipe.string());
    return in_recipe;
  }
  section.fail("processor_config", "'" + given + "' does not exist, nor does " +
                                       in_recipe.string());
}

const ConfigFile& Recipe::processor_config(const ConfigSection& section) const {
  fs::path path = processor_config_path(section);
  std::string key = fs::absolute(path).lexically_normal().string();
  auto it = processor_configs_.find(key);
  if (it == processor_configs_.end())
    section.fail("processor_config", "'" + path.string() + "' was not loaded with the recipe");
  return it->second;
}

namespace {

// Copies the regular files at the top of `from` (the statistics of a store: mvn_stats.h5, a label
// index; not the store's segment folders) into `to`, each atomically.
void copy_top_level_files(const fs::path& from, const fs::path& to) {
  ensure_directory(to);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(from, ec))
    if (entry.is_regular_file() && entry.path().string().find(".tmp.") == std::string::npos)
      write_file_atomic(to / entry.path().filename(), read_file(entry.path()));
  if (ec) throw Error(from.string() + ": cannot list: " + ec.message());
}

std::string absolute_path(const std::string& path) {
  return fs::absolute(path).lexically_normal().string();
}

}  // namespace

void Recipe::save_copy(const fs::path& target, const std::map<std::string, int>& sample_rates) const {
  ensure_directory(target);
  std::map<std::string, std::string> copied;  // basename -> source key
  for (const auto& [key, config] : processor_configs_) {
    std::string name = fs::path(key).filename().string();
    if (copied.count(name) && copied[name] != key)
      throw ConfigError("two processor configs are both named " + name + " (" + copied[name] +
                        " and " + key + "); rename one so the experiment copy stays unambiguous");
    copied[name] = key;
    ConfigFile copy = config;
    for (const auto& section : config.sections()) {
      const ConfigValue* alphabet = section.find("alphabet_file");
      if (!alphabet || !names_a_path(alphabet->text) || !fs::is_regular_file(alphabet->text))
        continue;  // a missing file is reported where it is read
      std::string file = fs::path(alphabet->text).filename().string();
      write_file_atomic(target / file, read_file(alphabet->text));
      copy.section(section.name()).set("alphabet_file", file, alphabet->origin);
    }
    copy.save(target / name);
  }
  for (const auto& [name, config] : files_) {
    if (copied.count(name)) continue;  // the processor config copy above is the one in use
    ConfigFile copy = config;
    std::map<std::string, std::string> statistics;  // meanandvar_dir -> its copy's folder
    for (const auto& section : config.sections()) {
      ConfigSection& written = copy.section(section.name());
      for (const auto& [key, value] : section.entries()) {
        if (!is_path_key(name, key)) continue;
        std::string text = value.text;
        if (key == "processor_config") {
          try {
            text = processor_config_path(section).filename().string();
          } catch (const ConfigError&) {
            continue;  // keep the stale path; it is reported where the section is used
          }
        } else if (key == "meanandvar_dir" && section.name() != "globalvars") {
          // The statistics a processor normalises with, copied: separating needs them.
          const ConfigSection* globals = config.find_section("globalvars");
          if (text == "globalvars" && globals && globals->has(key))
            text = globals->get_string(key);
          std::error_code ec;
          if (names_a_path(text) && fs::is_directory(text, ec)) {
            std::string source = absolute_path(text);
            if (!statistics.count(source)) {
              fs::path copy = ExperimentLayout{target}.statistics_dir() / section.name();
              statistics[source] = copy.lexically_relative(target).string();
              copy_top_level_files(source, copy);
            }
            text = statistics[source];
          } else {
            text = map_paths(text, absolute_path);
          }
        } else {
          text = map_paths(text, absolute_path);
        }
        if (text != value.text) written.set(key, text, value.origin);
      }
      auto rate = sample_rates.find(section.name());
      if (name == "database.conf" && rate != sample_rates.end())
        written.set("sample_rate", std::to_string(rate->second), section.origin());
    }
    copy.save(target / name);
  }
  nlohmann::json record = {
      {"format", 1},
      {"recipe", origin_.empty() ? absolute_path(dir_.string()) : origin_},
      {"list_root", list_root_.empty() ? fs::current_path().string() : list_root_},
      {"paths", "relative paths in this folder's files are relative to this folder"}};
  write_file_atomic(ExperimentLayout{target}.record(), record.dump(2) + "\n");
}

ConfigSection resolve_globalvars(const ConfigSection& section, const ConfigFile& database) {
  ConfigSection resolved(section.name(), section.origin());
  const ConfigSection* globals = database.find_section("globalvars");
  for (const auto& [key, value] : section.entries()) {
    if (trim(value.text) != "globalvars") {
      resolved.set(key, value.text, value.origin);
      continue;
    }
    if (!globals || !globals->has(key))
      section.fail(key, "value 'globalvars' but [globalvars] has no '" + key + "'");
    resolved.set(key, globals->get_string(key), globals->find(key)->origin);
  }
  return resolved;
}

}  // namespace nabu
