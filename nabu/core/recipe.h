// A recipe: a folder of INI files (database.conf, model.cfg, trainer.cfg, ...) loaded once, with
// command-line overrides applied before anything reads them.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "nabu/core/config.h"

namespace nabu {

class Recipe {
 public:
  // Loads every *.cfg / *.conf file of `dir`, then the processor configs named by database.conf,
  // and applies `overrides` (matched by file name). An override naming a file or section that is
  // not there is an error. In an experiment's copy (save_copy), relative paths resolve against
  // `dir`, never against the current folder (docs/ini_semantics.md, "Paths").
  // With `errors`, problems (a file that does not parse, a bad override) are collected there and
  // the rest of the recipe is still loaded, for `nabu check`.
  static Recipe load(const std::filesystem::path& dir,
                     const std::vector<ConfigOverride>& overrides = {},
                     std::vector<std::string>* errors = nullptr);

  const std::filesystem::path& dir() const { return dir_; }
  bool has(const std::string& file) const;
  const ConfigFile& get(const std::string& file) const;  // throws naming the recipe
  const ConfigFile* find(const std::string& file) const;
  std::vector<std::string> file_names() const;
  const std::vector<ConfigOverride>& overrides() const { return overrides_; }
  // What relative paths inside list files are relative to: for an experiment, the folder its
  // training ran from (recorded by save_copy); empty for a recipe, whose lists are read from the
  // current folder as in the original.
  const std::string& list_root() const { return list_root_; }
  // The recipe folder this recipe comes from, absolute: the folder itself, or for an
  // experiment's copy the recipe it was trained from (recorded by save_copy).
  const std::string& origin() const { return origin_; }
  // Parser warnings of all files (continuation lines, processor_config fallbacks).
  const std::vector<std::string>& warnings() const { return warnings_; }
  // Files of the folder that did not parse (loaded with an error list, which holds their one
  // error): not missing, and not read by any check.
  const std::set<std::string>& unreadable() const { return unreadable_; }

  // Where the processor config of a database section lives (docs/ini_semantics.md): the path as
  // given (relative to the working directory), else the file of that name in the recipe folder.
  // Throws ConfigError naming the section when neither exists.
  std::filesystem::path processor_config_path(const ConfigSection& database_section) const;
  // The parsed processor config of a database section (overrides applied).
  const ConfigFile& processor_config(const ConfigSection& database_section) const;

  // Writes the recipe as used (after overrides) into `dir`, self-contained so that the experiment
  // can be used from any folder and copied to another machine (docs/ini_semantics.md, "Paths"):
  // every file under its own name; the processor configs, their alphabet files and the global
  // mean/variance statistics copied into `dir` and named relative to it; every other path (data
  // lists, stores, sources) made absolute. `sample_rates` (database section -> Hz) are recorded
  // as the sections' sample_rate, so that separating needs no data list. The result is itself a
  // loadable recipe; `<dir>/experiment.json` marks it.
  void save_copy(const std::filesystem::path& dir,
                 const std::map<std::string, int>& sample_rates = {}) const;

 private:
  // Runs an action; with an error list, a ConfigError is recorded there (false) instead of thrown.
  using Attempt = std::function<bool(const std::function<void()>&)>;
  // The processor configs database.conf points at, each loaded once, with its overrides; their
  // file names join `present` (the files an override may name).
  void load_processor_configs(const std::vector<ConfigOverride>& overrides,
                              std::set<std::string>& present, const Attempt& attempt);
  std::filesystem::path dir_;
  std::vector<ConfigOverride> overrides_;
  std::string list_root_, origin_;
  std::map<std::string, ConfigFile> files_;
  // processor configs by resolved absolute path
  std::map<std::string, ConfigFile> processor_configs_;
  std::vector<std::string> warnings_;
  std::set<std::string> unreadable_;
};

// Replaces values that are exactly "globalvars" by the same key of database.conf's [globalvars]
// section (docs/ini_semantics.md). Throws naming the section and key when [globalvars] lacks it.
ConfigSection resolve_globalvars(const ConfigSection& section, const ConfigFile& database);

}  // namespace nabu
