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
std::vector<DataLine> read_data_lines(const std::vector<std::string>& files,
                                      std::size_t min_fields = 1);

// Utterance name -> index into `lines`.
std::map<std::string, std::size_t> index_by_utterance(const std::vector<DataLine>& lines);

}  // namespace nabu
