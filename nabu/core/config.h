// INI configuration with the semantics of Python 2.7 ConfigParser, which every original recipe
// was written for (docs/ini_semantics.md): keys lowercased, section names kept, last duplicate
// wins, indented lines continue the previous value (joined with '\n'), '#'/';' comment lines, ';'
// inline comments after whitespace, lines of any length, no interpolation. Every value remembers
// where it came from so that errors can name file:line, section and key.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace nabu {

struct Origin {
  std::string file;  // path as given, or "--set" for command-line overrides
  int line = 0;      // 0 = unknown
  std::string str() const;
};

struct ConfigValue {
  std::string text;
  Origin origin;
};

class ConfigSection {
 public:
  ConfigSection(std::string name, Origin origin);

  const std::string& name() const { return name_; }
  const Origin& origin() const { return origin_; }

  bool has(const std::string& key) const;
  const ConfigValue* find(const std::string& key) const;
  void set(const std::string& key, const std::string& text, Origin origin);
  bool erase(const std::string& key);
  std::vector<std::string> keys() const;  // in file order
  const std::vector<std::pair<std::string, ConfigValue>>& entries() const { return entries_; }

  // Typed getters. Without a default the key is required. Errors name file:line [section] key.
  std::string get_string(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  long long get_int(const std::string& key) const;
  long long get_int(const std::string& key, long long fallback) const;
  double get_double(const std::string& key) const;
  double get_double(const std::string& key, double fallback) const;
  // Exactly "True" or "False" as in the original (which compares strings); "true"/"false" too.
  bool get_bool(const std::string& key) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::vector<std::string> get_list(const std::string& key) const;
  std::vector<std::string> get_list(const std::string& key,
                                    const std::vector<std::string>& fallback) const;
  std::vector<long long> get_int_list(const std::string& key) const;
  std::vector<double> get_double_list(const std::string& key) const;

  // Per-segment lists of [trainer] (docs/ini_semantics.md): the `index`-th of `count`
  // space-separated values. With `broadcast_single`, a single value serves every segment
  // (learning_rate_decay).
  std::string get_per_segment(const std::string& key, std::size_t index, std::size_t count,
                              bool broadcast_single = false) const;

  // "file:line: [section] key" for messages; "file: [section]" without a key.
  std::string where(const std::string& key = "") const;
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  // The one-line error for a required `key` that the section lacks: "file:line: [section] key:
  // required key is missing", the line being the section's; a key of the section that is not in
  // `known` and looks like `key` is named with its line as the likely misspelling.
  std::string missing_key_message(const std::string& key,
                                  const std::vector<std::string>& known = {}) const;

  // Value parsers usable on any string with a location for errors.
  long long to_int(const std::string& key, const std::string& text) const;
  double to_double(const std::string& key, const std::string& text) const;
  bool to_bool(const std::string& key, const std::string& text) const;

 private:
  std::string name_;
  Origin origin_;
  std::vector<std::pair<std::string, ConfigValue>> entries_;
};

class ConfigFile {
 public:
  ConfigFile() = default;
  explicit ConfigFile(std::string path) : path_(std::move(path)) {}

  // Reads and parses a file; throws ConfigError with file:line for syntax errors, a missing or
  // unreadable file, or a binary file.
  static ConfigFile load(const std::filesystem::path& path);
  // Parses text; `display_name` is used as the file name in origins and errors.
  static ConfigFile parse(const std::string& text, const std::string& display_name);

  const std::string& path() const { return path_; }
  bool has_section(const std::string& name) const;
  const ConfigSection& section(const std::string& name) const;  // throws, with a suggestion
  ConfigSection& section(const std::string& name);
  const ConfigSection* find_section(const std::string& name) const;
  ConfigSection& add_section(const std::string& name, Origin origin = {});
  std::vector<std::string> section_names() const;
  const std::vector<ConfigSection>& sections() const { return sections_; }

  // Warnings found while parsing (continuation lines, a key or section given twice), each
  // "file:line: message".
  const std::vector<std::string>& warnings() const { return warnings_; }

  // The original's ConfigParser.write shape: "[section]", "key = value" lines ('\n' in a value
  // written as "\n\t"), a blank line after each section. Comments are not kept.
  std::string to_string() const;
  void save(const std::filesystem::path& path) const;  // atomic
  // This file written over `original_text`, the text it was read from and then edited: its
  // comments, blank lines and unchanged lines stay as they are; a changed value is rewritten in
  // its place; a removed key goes, and a removed section with the comment block right above it;
  // a new key is added after its section's last key, a new section at the end (nabu recipe new).
  std::string to_string_over(const std::string& original_text) const;

 private:
  std::string path_;
  std::vector<ConfigSection> sections_;
  std::map<std::string, std::size_t> index_;
  std::vector<std::string> warnings_;
};

// A command-line override "FILE:SECTION:KEY=VALUE", e.g. "model.cfg:main:num_units=64".
struct ConfigOverride {
  std::string file, section, key, value;
  std::string spec;  // as given
  static ConfigOverride parse(const std::string& spec);
};

// Applies the overrides whose `file` equals `file_name` to `config`; the section must exist.
// Returns how many were applied.
int apply_overrides(ConfigFile& config, const std::string& file_name,
                    const std::vector<ConfigOverride>& overrides);

}  // namespace nabu
