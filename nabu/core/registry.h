// name -> factory, one registry per component family (models, losses, processors, ...).
// A class registers itself with one line next to its definition:
//
//   NABU_REGISTER(ModelRegistry, "dblstm", make_dblstm, "stacked bidirectional LSTM");
//
// The library is built as a shared library so these static registrars are always kept.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/core/error.h"
#include "nabu/core/options.h"
#include "nabu/core/strings.h"

namespace nabu {

template <class Product, class... Args>
class Registry {
 public:
  using Factory = std::function<Product(Args...)>;
  // Validates a config section for this class without building it (for `nabu check`): returns
  // one message per problem (type errors, unknown keys).
  using Checker = std::function<std::vector<std::string>(const ConfigSection&)>;
  using Documenter = std::function<std::vector<OptionDoc>()>;
  struct Entry {
    Factory factory;
    std::string help;
    Checker checker;
    Documenter documenter;
  };

  explicit Registry(std::string family) : family_(std::move(family)) {}

  bool add(const std::string& name, Factory factory, const std::string& help,
           Checker checker = {}, Documenter documenter = {}) {
    entries_[name] = Entry{std::move(factory), help, std::move(checker), std::move(documenter)};
    return true;
  }

  // Problems of `section` for the class `name` (empty when it has no checker).
  std::vector<std::string> check(const std::string& name, const ConfigSection& section) const {
    auto it = entries_.find(name);
    if (it == entries_.end()) return {unknown_message(name)};
    return it->second.checker ? it->second.checker(section) : std::vector<std::string>{};
  }

  std::vector<OptionDoc> options(const std::string& name) const {
    auto it = entries_.find(name);
    if (it == entries_.end() || !it->second.documenter) return {};
    return it->second.documenter();
  }

  bool contains(const std::string& name) const { return entries_.count(name) > 0; }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& entry : entries_) out.push_back(entry.first);
    return out;
  }

  const std::string& family() const { return family_; }
  std::string help(const std::string& name) const {
    auto it = entries_.find(name);
    return it == entries_.end() ? "" : it->second.help;
  }

  // "unknown model 'dbslstm' (did you mean 'dblstm'?); known: dblstm, linear, ..."
  std::string unknown_message(const std::string& name) const {
    return "unknown " + family_ + " '" + name + "'" + did_you_mean(name, names()) +
           "; known: " + join(names(), ", ");
  }

  Product create(const std::string& name, Args... args) const {
    auto it = entries_.find(name);
    if (it == entries_.end()) throw Error(unknown_message(name));
    return it->second.factory(std::forward<Args>(args)...);
  }

 private:
  std::string family_;
  std::map<std::string, Entry> entries_;
};

// A Checker for an options struct with a `declare(OptionsReader&)` member.
template <class Options>
std::function<std::vector<std::string>(const ConfigSection&)> options_checker(std::string what) {
  return [what](const ConfigSection& section) {
    std::vector<std::string> problems;
    Options options;
    OptionsReader reader(&section);
    try {
      options.declare(reader);
    } catch (const ConfigError& e) {
      // declare stopped at this key: the keys after it were never declared, so reporting
      // unknown keys now would name good ones.
      problems.push_back(e.what());
      return problems;
    }
    for (auto& problem : reader.unknown_key_problems(what)) problems.push_back(problem);
    return problems;
  };
}

template <class Options>
std::function<std::vector<OptionDoc>()> options_documenter() {
  return [] { return describe_options<Options>(); };
}

#define NABU_CONCAT_INNER(a, b) a##b
#define NABU_CONCAT(a, b) NABU_CONCAT_INNER(a, b)
// REGISTRY_FN is a function returning the family's registry (a function-local static, so the
// order of static initialisation across files does not matter). The flag is numbered by
// __COUNTER__, not __LINE__: the unity build puts several files into one translation unit.
#define NABU_REGISTER(REGISTRY_FN, NAME, FACTORY, HELP)                  \
  namespace {                                                            \
  [[maybe_unused]] const bool NABU_CONCAT(nabu_registered_, __COUNTER__) = \
      REGISTRY_FN().add(NAME, FACTORY, HELP);                            \
  }
// Same, for a class configured by an options struct: `nabu check` validates its section and
// `nabu list` documents its keys.
#define NABU_REGISTER_WITH_OPTIONS(REGISTRY_FN, NAME, FACTORY, OPTIONS, HELP)           \
  namespace {                                                                            \
  [[maybe_unused]] const bool NABU_CONCAT(nabu_registered_, __COUNTER__) =                 \
      REGISTRY_FN().add(NAME, FACTORY, HELP,                                             \
                        ::nabu::options_checker<OPTIONS>(std::string(NAME)),             \
                        ::nabu::options_documenter<OPTIONS>());                          \
  }

// Same, documenting the keys of OPTIONS without checking a section with them (for components whose
// keys share a section with others, such as an evaluator's in a task section).
#define NABU_REGISTER_DOCUMENTED(REGISTRY_FN, NAME, FACTORY, OPTIONS, HELP)               \
  namespace {                                                                            \
  [[maybe_unused]] const bool NABU_CONCAT(nabu_registered_, __COUNTER__) =                 \
      REGISTRY_FN().add(NAME, FACTORY, HELP, {}, ::nabu::options_documenter<OPTIONS>()); \
  }

}  // namespace nabu
