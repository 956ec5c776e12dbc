#include "nabu/core/options.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "nabu/core/error.h"
#include "nabu/core/strings.h"

namespace nabu {

namespace {

template <class T>
std::string join_values(const std::vector<T>& values) {
  std::ostringstream out;
  for (std::size_t i = 0; i < values.size(); ++i) out << (i ? " " : "") << values[i];
  return out.str();
}

std::string bool_text(bool value) { return value ? "True" : "False"; }

}  // namespace

const ConfigValue* OptionsReader::lookup(const std::string& key, const std::string& default_value,
                                         const std::string& help) {
  docs_.push_back({key, default_value, help});
  return section_ ? section_->find(key) : nullptr;
}

void OptionsReader::operator()(const std::string& key, int& value, const std::string& help) {
  if (auto* found = lookup(key, std::to_string(value), help))
    value = static_cast<int>(section_->to_int(key, found->text));
}

void OptionsReader::operator()(const std::string& key, long long& value, const std::string& help) {
  if (auto* found = lookup(key, std::to_string(value), help))
    value = section_->to_int(key, found->text);
}

void OptionsReader::operator()(const std::string& key, double& value, const std::string& help) {
  std::ostringstream text;
  text << value;
  if (auto* found = lookup(key, text.str(), help)) value = section_->to_double(key, found->text);
}

void OptionsReader::operator()(const std::string& key, bool& value, const std::string& help) {
  if (auto* found = lookup(key, bool_text(value), help))
    value = section_->to_bool(key, found->text);
}

void OptionsReader::operator()(const std::string& key, std::string& value,
                               const std::string& help) {
  if (auto* found = lookup(key, value, help)) value = found->text;
}

void OptionsReader::operator()(const std::string& key, std::vector<std::string>& value,
                               const std::string& help) {
  if (auto* found = lookup(key, join(value, " "), help)) value = split_whitespace(found->text);
}

void OptionsReader::operator()(const std::string& key, std::vector<int>& value,
                               const std::string& help) {
  if (auto* found = lookup(key, join_values(value), help)) {
    value.clear();
    for (const auto& token : split_whitespace(found->text))
      value.push_back(static_cast<int>(section_->to_int(key, token)));
  }
}

void OptionsReader::operator()(const std::string& key, std::vector<double>& value,
                               const std::string& help) {
  if (auto* found = lookup(key, join_values(value), help)) {
    value.clear();
    for (const auto& token : split_whitespace(found->text))
      value.push_back(section_->to_double(key, token));
  }
}

void OptionsReader::operator()(const std::string& key, std::vector<bool>& value,
                               const std::string& help) {
  std::vector<std::string> defaults;
  for (bool flag : value) defaults.push_back(bool_text(flag));
  if (auto* found = lookup(key, join(defaults, " "), help)) {
    value.clear();
    for (const auto& token : split_whitespace(found->text))
      value.push_back(section_->to_bool(key, token));
  }
}

void OptionsReader::accepted(const std::string& key, const std::string& help) {
  docs_.push_back({key, "", help + " (accepted for compatibility; no effect)"});
}

void OptionsReader::accept_if(bool (*predicate)(const std::string&), const std::string& pattern,
                              const std::string& help) {
  patterns_.emplace_back(predicate, pattern);
  docs_.push_back({pattern, "", help});
}

void OptionsReader::require(bool condition, const std::string& key,
                            const std::string& message) const {
  if (condition || !section_) return;
  // A rule fails on `key`, or on a key its message names ("... but segment_lengths has 1"). When
  // that key is not given and the section holds a look-alike that was not declared, the rule saw
  // a default: the misspelling is the likely culprit, so it is what is reported.
  auto known = known_keys();
  std::vector<std::string> unknown;
  for (const auto& candidate : section_->keys())
    if (std::find(known.begin(), known.end(), candidate) == known.end())
      unknown.push_back(candidate);
  auto names = [&message](const std::string& subject) {
    for (auto at = message.find(subject); at != std::string::npos;
         at = message.find(subject, at + 1)) {
      auto is_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
      bool starts = at == 0 || !is_word(message[at - 1]);
      bool ends = at + subject.size() == message.size() || !is_word(message[at + subject.size()]);
      if (starts && ends) return true;
    }
    return false;
  };
  std::vector<std::string> subjects{key};
  for (const auto& other : known)
    if (other != key && names(other)) subjects.push_back(other);
  for (const auto& subject : subjects)
    if (!section_->has(subject) && closest_match(subject, unknown))
      throw ConfigError(section_->missing_key_message(subject, known));
  section_->fail(key, message);
}

void OptionsReader::choice(const std::string& key, std::string& value,
                           const std::vector<std::string>& allowed, const std::string& help) {
  auto* found = lookup(key, value, help + " (one of: " + join(allowed, ", ") + ")");
  if (!found) return;
  std::string text = trim(found->text);
  if (std::find(allowed.begin(), allowed.end(), text) == allowed.end())
    section_->fail(key, "'" + shorten(text) + "' is not one of " + join(allowed, ", ") +
                            did_you_mean(text, allowed));
  value = text;
}

std::vector<std::string> OptionsReader::known_keys() const {
  std::vector<std::string> keys;
  for (const auto& doc : docs_) keys.push_back(doc.key);
  return keys;
}

std::vector<std::string> OptionsReader::unknown_key_problems(const std::string& what) const {
  std::vector<std::string> problems;
  if (!section_) return problems;
  auto keys = known_keys();
  for (const auto& key : section_->keys()) {
    bool known = false;
    for (const auto& doc : docs_) known = known || doc.key == key;
    for (const auto& [predicate, pattern] : patterns_) known = known || predicate(key);
    if (!known)
      problems.push_back(section_->where(key) + ": unknown key for " + what +
                         did_you_mean(key, keys));
  }
  return problems;
}

void OptionsReader::reject_unknown(const std::string& what) const {
  auto problems = unknown_key_problems(what);
  if (!problems.empty()) throw ConfigError(problems.front());
}

std::string OptionsReader::help_text() const {
  std::ostringstream out;
  for (const auto& doc : docs_) {
    out << "  " << doc.key;
    if (!doc.default_value.empty()) out << " = " << doc.default_value;
    out << "\n      " << doc.help << "\n";
  }
  return out.str();
}

}  // namespace nabu
