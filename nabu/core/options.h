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
// rejects unknown keys with a suggestion, so typos never pass silently. Value rules live in
// `declare` too, as `r.require(...)` and `r.choice(...)`: that is the only way a component
// validates its options, so every bad value names file:line [section] key and `nabu check` finds
// it without building anything.
#pragma once

#include <string>
#include <utility>
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

  // A rule on values already read: when `condition` is false, a ConfigError
  // "file:line: [section] key: message". A missing required key that looks misspelt names the
  // likely culprit. Nothing happens while only documenting (no section).
  void require(bool condition, const std::string& key, const std::string& message) const;
  // A key whose value is one of `allowed` (compared exactly, as the original compares strings);
  // anything else is a ConfigError listing them, with "did you mean".
  void choice(const std::string& key, std::string& value, const std::vector<std::string>& allowed,
              const std::string& help);
  // The same for a value with an enum type: names -> values.
  template <class Enum>
  void choice(const std::string& key, Enum& value,
              const std::vector<std::pair<std::string, Enum>>& names, const std::string& help) {
    std::string name;
    std::vector<std::string> allowed;
    for (const auto& [candidate, mapped] : names) {
      allowed.push_back(candidate);
      if (name.empty() && mapped == value) name = candidate;
    }
    choice(key, name, allowed, help);
    for (const auto& [candidate, mapped] : names)
      if (candidate == name) value = mapped;
  }

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
