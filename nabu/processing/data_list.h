// List files (datafiles of database.conf): one utterance per line, "utt rest...". Several files
// are read in order; gzip files (.gz) too.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace nabu {

struct DataLine {
  std::string utterance;
  std::vector<std::string> fields;  // the rest of the line, split on spaces
  std::string origin;               // "file:line" for errors
};

// Reads every line of `files`; throws DataError naming file:line for a line with too few fields,
// a shell pipe (the original's "cmd |" lines: we never run commands from data files), or a
// duplicate utterance name. `min_fields` counts the fields after the utterance name.
// With a `root` (an experiment used from another folder: Recipe::list_root), a relative field
// that names a file under `root` becomes that file's path (docs/ini_semantics.md, "Paths").
std::vector<DataLine> read_data_lines(const std::vector<std::string>& files,
                                      std::size_t min_fields = 1, const std::string& root = "");

// Utterance name -> index into `lines`.
std::map<std::string, std::size_t> index_by_utterance(const std::vector<DataLine>& lines);

}  // namespace nabu
