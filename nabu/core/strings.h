// Small string helpers shared by the config system and the components.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nabu {

std::string trim(const std::string& text);
std::string to_lower(std::string text);
bool starts_with(const std::string& text, const std::string& prefix);
bool ends_with(const std::string& text, const std::string& suffix);

// Splits on runs of whitespace; no empty tokens.
std::vector<std::string> split_whitespace(const std::string& text);
// Splits on one character, keeping empty tokens.
std::vector<std::string> split(const std::string& text, char separator);
std::string join(const std::vector<std::string>& parts, const std::string& separator);

// Python int()/float() on a config value: the whole (trimmed) text must be the number.
std::optional<long long> parse_int(const std::string& text);
std::optional<double> parse_double(const std::string& text);

std::size_t edit_distance(const std::string& a, const std::string& b);
// The candidate closest to `word` if it is close enough to be a plausible typo.
std::optional<std::string> closest_match(const std::string& word,
                                         const std::vector<std::string>& candidates);
// " (did you mean 'x'?)" or "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

// FNV-1a: a hash that is the same in every build (std::hash is not), for seeds derived from names.
std::uint64_t stable_hash(const std::string& text);

// Cuts long text for error messages (a 1 MB line must not become a 1 MB error).
std::string shorten(const std::string& text, std::size_t max_chars = 80);

}  // namespace nabu
