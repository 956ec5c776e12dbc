#include "nabu/core/config.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/strings.h"

namespace nabu {

std::string Origin::str() const {
  if (file.empty()) return "<unknown>";
  return line > 0 ? file + ":" + std::to_string(line) : file;
}

// ---------------------------------------------------------------------------------------------
// ConfigSection

ConfigSection::ConfigSection(std::string name, Origin origin)
    : name_(std::move(name)), origin_(std::move(origin)) {}

bool ConfigSection::has(const std::string& key) const { return find(key) != nullptr; }

const ConfigValue* ConfigSection::find(const std::string& key) const {
  std::string lowered = to_lower(key);
  for (const auto& entry : entries_)
    if (entry.first == lowered) return &entry.second;
  return nullptr;
}

void ConfigSection::set(const std::string& key, const std::string& text, Origin origin) {
  std::string lowered = to_lower(key);
  for (auto& entry : entries_) {
    if (entry.first == lowered) {  // last one wins, position of the first kept (as Python)
      entry.second = ConfigValue{text, std::move(origin)};
      return;
    }
  }
  entries_.emplace_back(lowered, ConfigValue{text, std::move(origin)});
}

bool ConfigSection::erase(const std::string& key) {
  std::string lowered = to_lower(key);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->first == lowered) {
      entries_.erase(it);
      return true;
    }
  }
  return false;
}

std::vector<std::string> ConfigSection::keys() const {
  std::vector<std::string> out;
  for (const auto& entry : entries_) out.push_back(entry.first);
  return out;
}

std::string ConfigSection::where(const std::string& key) const {
  if (!key.empty()) {
    if (const ConfigValue* value = find(key))
      return value->origin.str() + ": [" + name_ + "] " + key;
    return origin_.str() + ": [" + name_ + "] " + key;  // a missing key: the section's line
  }
  return origin_.str() + ": [" + name_ + "]";
}

void ConfigSection::fail(const std::string& key, const std::string& message) const {
  throw ConfigError(where(key) + ": " + message);
}

std::string ConfigSection::missing_key_message(const std::string& key,
                                               const std::vector<std::string>& known) const {
  std::string wanted = to_lower(key);
  std::vector<std::string> candidates;
  for (const auto& candidate : keys())
    if (candidate != wanted && std::find(known.begin(), known.end(), candidate) == known.end())
      candidates.push_back(candidate);
  std::string message = where(wanted) + ": required key is missing";
  if (auto typo = closest_match(wanted, candidates))
    message += " (is '" + *typo + "' at " + find(*typo)->origin.str() + " a misspelling of it?)";
  return message;
}

std::string ConfigSection::get_string(const std::string& key) const {
  const ConfigValue* value = find(key);
  if (!value) throw ConfigError(missing_key_message(key));
  return value->text;
}

std::string ConfigSection::get_string(const std::string& key, const std::string& fallback) const {
  const ConfigValue* value = find(key);
  return value ? value->text : fallback;
}

long long ConfigSection::to_int(const std::string& key, const std::string& text) const {
  auto parsed = parse_int(text);
  if (!parsed) fail(key, "expected an integer, got '" + shorten(text) + "'");
  return *parsed;
}

double ConfigSection::to_double(const std::string& key, const std::string& text) const {
  auto parsed = parse_double(text);
  if (!parsed) fail(key, "expected a number, got '" + shorten(text) + "'");
  return *parsed;
}

bool ConfigSection::to_bool(const std::string& key, const std::string& text) const {
  std::string value = trim(text);
  if (value == "True" || value == "true") return true;
  if (value == "False" || value == "false") return false;
  fail(key, "expected True or False, got '" + shorten(text) + "'");
}

long long ConfigSection::get_int(const std::string& key) const {
  return to_int(key, get_string(key));
}

long long ConfigSection::get_int(const std::string& key, long long fallback) const {
  return has(key) ? get_int(key) : fallback;
}

double ConfigSection::get_double(const std::string& key) const {
  return to_double(key, get_string(key));
}

double ConfigSection::get_double(const std::string& key, double fallback) const {
  return has(key) ? get_double(key) : fallback;
}

bool ConfigSection::get_bool(const std::string& key) const { return to_bool(key, get_string(key)); }

bool ConfigSection::get_bool(const std::string& key, bool fallback) const {
  return has(key) ? get_bool(key) : fallback;
}

std::vector<std::string> ConfigSection::get_list(const std::string& key) const {
  return split_whitespace(get_string(key));
}

std::vector<std::string> ConfigSection::get_list(const std::string& key,
                                                 const std::vector<std::string>& fallback) const {
  return has(key) ? get_list(key) : fallback;
}

std::vector<long long> ConfigSection::get_int_list(const std::string& key) const {
  std::vector<long long> out;
  for (const auto& token : get_list(key)) out.push_back(to_int(key, token));
  return out;
}

std::vector<double> ConfigSection::get_double_list(const std::string& key) const {
  std::vector<double> out;
  for (const auto& token : get_list(key)) out.push_back(to_double(key, token));
  return out;
}

std::string ConfigSection::get_per_segment(const std::string& key, std::size_t index,
                                           std::size_t count, bool broadcast_single) const {
  auto values = get_list(key);
  if (broadcast_single && values.size() == 1) return values[0];
  if (values.size() != count)
    fail(key, "expected " + std::to_string(count) + " space-separated values (one per segment " +
                  "length), got " + std::to_string(values.size()));
  return values.at(index);
}

// ---------------------------------------------------------------------------------------------
// ConfigFile

namespace {

// Python 2.7 ConfigParser.OPTCRE: (?P<option>[^:=\s][^:=]*)\s*(?P<vi>[:=])\s*(?P<value>.*)$
// Comments: only when '#' or ';' is the very first character (or "rem "), and blank lines.
bool is_comment_or_blank(const std::string& line) {
  if (trim(line).empty() || line[0] == '#' || line[0] == ';') return true;
  auto words = split_whitespace(line);
  return (line[0] == 'r' || line[0] == 'R') && to_lower(words[0]) == "rem";
}

bool match_option(const std::string& line, std::string& key, std::string& value) {
  if (line.empty() || line[0] == ':' || line[0] == '=' ||
      std::isspace(static_cast<unsigned char>(line[0])))
    return false;
  std::size_t delimiter = line.find_first_of(":=");
  if (delimiter == std::string::npos) return false;
  key = line.substr(0, delimiter);
  // rstrip the key (the \s* before the delimiter), then lowercase (optionxform).
  while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();
  value = line.substr(delimiter + 1);
  // ';' starts a comment only when preceded by whitespace (first ';' only, as Python 2.7).
  std::size_t semicolon = value.find(';');
  if (semicolon != std::string::npos && semicolon > 0 &&
      std::isspace(static_cast<unsigned char>(value[semicolon - 1])))
    value = value.substr(0, semicolon);
  value = trim(value);
  if (value == "\"\"") value.clear();
  key = to_lower(key);
  return true;
}

}  // namespace

ConfigFile ConfigFile::parse(const std::string& text, const std::string& display_name) {
  if (text.find('\0') != std::string::npos)
    throw ConfigError(display_name + ": not a text file (it contains NUL bytes)");
  ConfigFile config(display_name);
  // A UTF-8 byte order mark (editors on Windows write one) is not part of the first line.
  const std::string bom = "\xEF\xBB\xBF";
  std::istringstream stream(starts_with(text, bom) ? text.substr(bom.size()) : text);
  ConfigSection* current = nullptr;
  std::string current_key;  // last option of the current section, for continuation lines
  std::string line;
  int line_number = 0;
  while (std::getline(stream, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    Origin origin{display_name, line_number};
    if (is_comment_or_blank(line)) continue;
    // Continuation: an indented line after an option extends its value.
    if (std::isspace(static_cast<unsigned char>(line[0])) && current && !current_key.empty()) {
      std::string extra = trim(line);
      const ConfigValue* previous = current->find(current_key);
      ConfigValue joined = *previous;
      joined.text += "\n" + extra;
      current->set(current_key, joined.text, joined.origin);
      config.warnings_.push_back(origin.str() + ": indented line continues the value of [" +
                                 current->name() + "] " + current_key + " ('" + shorten(extra, 60) +
                                 "'); remove the indentation if it is meant as its own key");
      continue;
    }
    if (line[0] == '[') {
      std::size_t close = line.find(']');
      if (close == std::string::npos || close == 1)
        throw ConfigError(origin.str() + ": unterminated or empty section header '" +
                          shorten(trim(line)) + "'");
      std::string name = line.substr(1, close - 1);
      // Python 2.7 merges a repeated section into the first (docs/ini_semantics.md): kept, but
      // said, since a second [main] is more often a pasted block than a wish to merge.
      if (const ConfigSection* first = config.find_section(name))
        config.warnings_.push_back(origin.str() + ": section [" + name +
                                   "] is given again (first at " + first->origin().str() +
                                   "); the two are merged, a key in both taking its last value");
      current = &config.add_section(name, origin);
      current_key.clear();
      continue;
    }
    if (!current)
      throw ConfigError(origin.str() + ": '" + shorten(trim(line)) +
                        "' appears before any [section] header");
    std::string key, value;
    if (!match_option(line, key, value))
      throw ConfigError(origin.str() + ": cannot parse '" + shorten(trim(line)) +
                        "' (expected 'key = value' or '[section]')");
    // The last of a repeated key wins, as in Python 2.7 (an original recipe relies on it).
    if (const ConfigValue* first = current->find(key))
      config.warnings_.push_back(origin.str() + ": [" + current->name() + "] " + key +
                                 " is given again (previously at " + first->origin.str() +
                                 "); this last value is used");
    current->set(key, value, origin);
    current_key = key;
  }
  return config;
}

ConfigFile ConfigFile::load(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw ConfigError(path.string() + ": file does not exist");
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError(path.string() + ": is a directory, expected a config file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path.string() + ": cannot open file for reading");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw ConfigError(path.string() + ": read error");
  return parse(buffer.str(), path.string());
}

bool ConfigFile::has_section(const std::string& name) const { return index_.count(name) > 0; }

const ConfigSection* ConfigFile::find_section(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &sections_[it->second];
}

const ConfigSection& ConfigFile::section(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end())
    throw ConfigError(path_ + ": no section [" + name + "]" + did_you_mean(name, section_names()));
  return sections_[it->second];
}

ConfigSection& ConfigFile::section(const std::string& name) {
  return const_cast<ConfigSection&>(static_cast<const ConfigFile&>(*this).section(name));
}

ConfigSection& ConfigFile::add_section(const std::string& name, Origin origin) {
  auto it = index_.find(name);
  if (it != index_.end()) return sections_[it->second];  // duplicate sections merge
  if (origin.file.empty()) origin.file = path_;
  index_[name] = sections_.size();
  sections_.emplace_back(name, std::move(origin));
  return sections_.back();
}

std::vector<std::string> ConfigFile::section_names() const {
  std::vector<std::string> names;
  for (const auto& section : sections_) names.push_back(section.name());
  return names;
}

namespace {

// "key = value", a value's further lines indented (as ConfigParser.write does).
std::string option_lines(const std::string& key, const std::string& value) {
  std::string text;
  for (char c : value) {
    text.push_back(c);
    if (c == '\n') text.push_back('\t');
  }
  return key + " = " + text + "\n";
}

}  // namespace

std::string ConfigFile::to_string() const {
  std::string out;
  for (const auto& section : sections_) {
    out += "[" + section.name() + "]\n";
    for (const auto& [key, value] : section.entries()) out += option_lines(key, value.text);
    out += "\n";
  }
  return out;
}

void ConfigFile::save(const std::filesystem::path& path) const {
  write_file_atomic(path, to_string());
}

namespace {

// One [section] of a file's text: the comment lines right above its header, the header, and the
// lines up to the next header's comment block.
struct SectionText {
  std::string name;
  std::vector<std::string> comments, body;
  std::string header;
};

// The text split into what precedes the first header, and its sections.
std::vector<SectionText> split_sections(const std::string& text, std::vector<std::string>& preamble) {
  std::vector<SectionText> sections;
  std::istringstream stream(text);
  std::string line;
  std::vector<std::string>* lines = &preamble;
  while (std::getline(stream, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::size_t close = line.find(']');
    if (line.empty() || line[0] != '[' || close == std::string::npos || close == 1) {
      lines->push_back(line);
      continue;
    }
    SectionText section;
    section.name = line.substr(1, close - 1);
    section.header = line;
    // The comment block right above the header is the section's (no blank line between).
    while (!lines->empty() && !trim(lines->back()).empty() && is_comment_or_blank(lines->back())) {
      section.comments.insert(section.comments.begin(), lines->back());
      lines->pop_back();
    }
    sections.push_back(std::move(section));
    lines = &sections.back().body;
  }
  return sections;
}

}  // namespace

std::string ConfigFile::to_string_over(const std::string& original_text) const {
  const ConfigFile original = parse(original_text, path_);
  std::vector<std::string> preamble;
  std::vector<SectionText> texts = split_sections(original_text, preamble);
  std::string out;
  for (const auto& line : preamble) out += line + "\n";
  int line_number = static_cast<int>(preamble.size());
  std::set<std::string> written_sections;
  for (const auto& text : texts) {
    const ConfigSection* edited = find_section(text.name);
    const ConfigSection* before = original.find_section(text.name);
    line_number += static_cast<int>(text.comments.size()) + 1;
    const int first_body_line = line_number + 1;
    line_number += static_cast<int>(text.body.size());
    if (!edited || !before) continue;  // removed, with its comments
    for (const auto& line : text.comments) out += line + "\n";
    out += text.header + "\n";
    // The body: each option's lines kept, rewritten or dropped; new keys after the last option.
    std::vector<std::string> body;
    std::size_t after_last_option = 0;
    std::set<std::string> written_keys;
    bool dropping = false;  // continuation lines of a dropped or rewritten option
    for (std::size_t i = 0; i < text.body.size(); ++i) {
      const std::string& line = text.body[i];
      std::string key, value;
      if (std::isspace(static_cast<unsigned char>(line.empty() ? 'x' : line[0])) &&
          !trim(line).empty()) {
        if (!dropping) body.push_back(line);
        after_last_option = body.size();
        continue;
      }
      if (is_comment_or_blank(line) || !match_option(line, key, value)) {
        body.push_back(line);
        continue;
      }
      const ConfigValue* now = edited->find(key);
      const ConfigValue* then = before->find(key);
      const bool winning = then && then->origin.line == first_body_line + static_cast<int>(i);
      dropping = !now || (winning && now->text != then->text);
      if (now && winning && now->text != then->text) {
        std::string rewritten = option_lines(key, now->text);
        rewritten.pop_back();
        body.push_back(rewritten);
      } else if (now) {
        body.push_back(line);
      }
      if (now) written_keys.insert(key);
      after_last_option = body.size();
    }
    std::vector<std::string> added;
    for (const auto& [key, value] : edited->entries())
      if (!written_keys.count(key)) {
        std::string line = option_lines(key, value.text);
        line.pop_back();
        added.push_back(line);
      }
    body.insert(body.begin() + static_cast<std::ptrdiff_t>(after_last_option), added.begin(),
                added.end());
    for (const auto& line : body) out += line + "\n";
    written_sections.insert(text.name);
  }
  for (const auto& section : sections_) {
    if (written_sections.count(section.name())) continue;
    if (!out.empty() && out.back() == '\n' && out.size() > 1 && out[out.size() - 2] != '\n')
      out += "\n";
    out += "[" + section.name() + "]\n";
    for (const auto& [key, value] : section.entries()) out += option_lines(key, value.text);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Overrides

ConfigOverride ConfigOverride::parse(const std::string& spec) {
  ConfigOverride result;
  result.spec = spec;
  std::size_t equals = spec.find('=');
  std::size_t first_colon = spec.find(':');
  std::size_t second_colon =
      first_colon == std::string::npos ? std::string::npos : spec.find(':', first_colon + 1);
  if (equals == std::string::npos || first_colon == std::string::npos ||
      second_colon == std::string::npos || second_colon > equals)
    throw ConfigError("--set '" + shorten(spec) +
                      "': expected FILE:SECTION:KEY=VALUE, e.g. model.cfg:main:num_units=64");
  result.file = trim(spec.substr(0, first_colon));
  result.section = trim(spec.substr(first_colon + 1, second_colon - first_colon - 1));
  result.key = to_lower(trim(spec.substr(second_colon + 1, equals - second_colon - 1)));
  result.value = trim(spec.substr(equals + 1));
  if (result.file.empty() || result.section.empty() || result.key.empty())
    throw ConfigError("--set '" + shorten(spec) + "': file, section and key must not be empty");
  return result;
}

int apply_overrides(ConfigFile& config, const std::string& file_name,
                    const std::vector<ConfigOverride>& overrides) {
  int applied = 0;
  for (const auto& override_ : overrides) {
    if (override_.file != file_name) continue;
    if (!config.has_section(override_.section))
      throw ConfigError("--set '" + shorten(override_.spec) + "': " + config.path() +
                        " has no section [" + override_.section + "]" +
                        did_you_mean(override_.section, config.section_names()) +
                        "; its sections: " + join(config.section_names(), ", "));
    config.section(override_.section).set(override_.key, override_.value, Origin{"--set", 0});
    ++applied;
  }
  return applied;
}

}  // namespace nabu
