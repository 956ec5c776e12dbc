// Options structs read from one INI section in one place (the Kaldi "Register" shape):
//
//   struct DBLSTMOptions {
//     int num_layers = 2, num_units = 600;
//     void declare(OptionsReader& r) {
//       r("num_layers", num_layers, "number of stacked BLSTM layers");
//       r("num_units", num_units, "units per direction");
//     }
//   };
//
// The same `declare` fills the struct from a section, documents the keys (help, defaults) and
// rejects unknown keys with a suggestion, so typos never pass silently.
#pragma once

#include <string>
#include <vector>

#include "nabu/core/config.h"

namespace nabu {

struct OptionDoc {
  std::string key, default_value, help;
};

class OptionsReader {
 public:
  // `section` may be nullptr: then nothing is read and only the documentation is collected.
  explicit OptionsReader(const ConfigSection* section) : section_(section) {}

  void operator()(const std::string& key, int& value, const std::string& help);
  void operator()(const std::string& key, long long& value, const std::string& help);
  void operator()(const std::string& key, double& value, const std::string& help);
  void operator()(const std::string& key, bool& value, const std::string& help);
  void operator()(const std::string& key, std::string& value, const std::string& help);
  void operator()(const std::string& key, std::vector<std::string>& value,
                  const std::string& help);
  void operator()(const std::string& key, std::vector<int>& value, const std::string& help);
  void operator()(const std::string& key, std::vector<double>& value, const std::string& help);
  void operator()(const std::string& key, std::vector<bool>& value, const std::string& help);
  // A key the original accepts that has no effect here (documented so recipes keep working).
  void accepted(const std::string& key, const std::string& help);
  // Keys matching a pattern that the caller interprets itself (e.g. "<node>_model").
  void accept_if(bool (*predicate)(const std::string&), const std::string& pattern,
                 const std::string& help);

  const ConfigSection* section() const { return section_; }
  const std::vector<OptionDoc>& docs() const { return docs_; }
  std::vector<std::string> known_keys() const;
  // Keys of the section not declared; each with "did you mean".
  std::vector<std::string> unknown_key_problems(const std::string& what) const;
  // Throws ConfigError on the first unknown key.
  void reject_unknown(const std::string& what) const;
  std::string help_text() const;

 private:
  const ConfigValue* lookup(const std::string& key, const std::string& default_value,
                            const std::string& help);
  const ConfigSection* section_;
  std::vector<OptionDoc> docs_;
  std::vector<std::pair<bool (*)(const std::string&), std::string>> patterns_;
};

// Fills an options struct from a section and rejects unknown keys.
template <class Options>
Options read_options(const ConfigSection& section, const std::string& what) {
  Options options;
  OptionsReader reader(&section);
  options.declare(reader);
  reader.reject_unknown(what);
  return options;
}

// The documentation of an options struct (keys, defaults, help).
template <class Options>
std::vector<OptionDoc> describe_options() {
  Options options;
  OptionsReader reader(nullptr);
  options.declare(reader);
  return reader.docs();
}

}  // namespace nabu
