#include "nabu/processing/data_list.h"

#include <zlib.h>

#include <filesystem>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/strings.h"

namespace nabu {

namespace {

// Whole file content, transparently gunzipped for *.gz.
std::string read_list_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw DataError("list file '" + path + "' does not exist" + generation_hint(path) +
                    working_directory_note(path));
  gzFile file = gzopen(path.c_str(), "rb");
  if (!file) throw DataError("cannot open list file '" + path + "'");
  std::string content;
  char buffer[1 << 16];
  int read;
  while ((read = gzread(file, buffer, sizeof(buffer))) > 0) content.append(buffer, read);
  int error = 0;
  const char* message = gzerror(file, &error);
  gzclose(file);
  if (read < 0 || error < 0)
    throw DataError("cannot read list file '" + path + "': " + (message ? message : "error"));
  if (content.find('\0') != std::string::npos)
    throw DataError("list file '" + path + "' is not a text file");
  return content;
}

}  // namespace

std::vector<DataLine> read_data_lines(const std::vector<std::string>& files,
                                      std::size_t min_fields, const std::string& root) {
  std::vector<DataLine> lines;
  std::map<std::string, std::string> seen;
  for (const auto& path : files) {
    auto content = read_list_file(path);
    int number = 0;
    for (const auto& raw : split(content, '\n')) {
      ++number;
      auto tokens = split_whitespace(raw);
      if (tokens.empty()) continue;
      std::string origin = path + ":" + std::to_string(number);
      if (tokens.back().back() == '|')
        throw DataError(origin + ": utterance '" + tokens[0] +
                        "' is a shell pipe; commands are never run from data files — write "
                        "the audio to a file and list its path");
      if (tokens.size() < min_fields + 1)
        throw DataError(origin + ": utterance '" + tokens[0] + "' has " +
                        std::to_string(tokens.size() - 1) + " fields after its name; expected " +
                        "at least " + std::to_string(min_fields));
      auto [it, inserted] = seen.emplace(tokens[0], origin);
      if (!inserted)
        throw DataError(origin + ": utterance '" + tokens[0] + "' is listed twice (also at " +
                        it->second + ")");
      DataLine line;
      line.utterance = tokens[0];
      line.fields.assign(tokens.begin() + 1, tokens.end());
      if (!root.empty())
        for (auto& field : line.fields) {
          std::filesystem::path under_root = std::filesystem::path(root) / field;
          std::error_code ec;
          if (std::filesystem::path(field).is_relative() &&
              std::filesystem::is_regular_file(under_root, ec))
            field = under_root.string();
        }
      line.origin = origin;
      lines.push_back(std::move(line));
    }
  }
  return lines;
}

std::map<std::string, std::size_t> index_by_utterance(const std::vector<DataLine>& lines) {
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < lines.size(); ++i) index[lines[i].utterance] = i;
  return index;
}

}  // namespace nabu
