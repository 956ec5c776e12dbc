#include "nabu/core/recipe.h"

#include <spdlog/spdlog.h>

#include <set>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/strings.h"

namespace nabu {

namespace {

bool is_config_file(const fs::path& path) {
  auto ext = path.extension().string();
  return ext == ".cfg" || ext == ".conf";
}

}  // namespace

Recipe Recipe::load(const fs::path& dir, const std::vector<ConfigOverride>& overrides,
                    std::vector<std::string>* errors) {
  // Runs `action`; with an error list, a ConfigError is recorded there instead of thrown.
  auto attempt = [errors](const auto& action) {
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
  // Processor configs: loaded from where database.conf points, overrides matched by file name.
  if (const ConfigFile* database = recipe.find("database.conf")) {
    for (const auto& section : database->sections()) {
      if (!section.has("processor_config")) continue;
      fs::path path;
      try {
        path = recipe.processor_config_path(section);
      } catch (const ConfigError&) {
        continue;  // reported by whoever needs the section (data preparation, check)
      }
      std::string key = fs::absolute(path).lexically_normal().string();
      if (recipe.processor_configs_.count(key)) continue;
      std::string name = path.filename().string();
      present.insert(name);
      // A file of the recipe folder was warned about, or reported, above.
      std::error_code not_same;
      bool in_folder = fs::equivalent(path, dir / name, not_same);
      if (in_folder && recipe.unreadable_.count(name)) continue;
      ConfigFile* config = nullptr;
      if (!attempt([&] {
            config = &recipe.processor_configs_.emplace(key, ConfigFile::load(path)).first->second;
          })) {
        recipe.unreadable_.insert(name);
        continue;
      }
      if (!in_folder)
        for (const auto& warning : config->warnings()) recipe.warnings_.push_back(warning);
      attempt([&] { apply_overrides(*config, name, overrides); });
    }
  }
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
    spdlog::debug("{}: processor_config '{}' not found; using {} from the recipe folder",
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

void Recipe::save_copy(const fs::path& target) const {
  ensure_directory(target);
  std::map<std::string, std::string> copied;  // basename -> source key
  for (const auto& [key, config] : processor_configs_) {
    std::string name = fs::path(key).filename().string();
    if (copied.count(name) && copied[name] != key)
      throw ConfigError("two processor configs are both named " + name + " (" + copied[name] +
                        " and " + key + "); rename one so the experiment copy stays unambiguous");
    copied[name] = key;
    config.save(target / name);
  }
  for (const auto& [name, config] : files_) {
    if (copied.count(name)) continue;  // the processor config copy above is the one in use
    if (name != "database.conf") {
      config.save(target / name);
      continue;
    }
    ConfigFile database = config;
    for (const auto& section : config.sections()) {
      if (!section.has("processor_config")) continue;
      try {
        fs::path used = processor_config_path(section);
        fs::path copy = fs::absolute(target / used.filename()).lexically_normal();
        const ConfigValue* value = section.find("processor_config");
        database.section(section.name()).set("processor_config", copy.string(), value->origin);
      } catch (const ConfigError&) {
        // keep the stale path; it is reported where the section is used
      }
    }
    database.save(target / name);
  }
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
