// A data section of database.conf (docs/data_layout.md, §2.e).
#pragma once

#include <string>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/core/options.h"

namespace nabu {

struct DatabaseSectionOptions {
  std::vector<std::string> datafiles;
  bool preprocess = false;
  std::string writer_style;
  std::string store_dir;
  std::string processor_config;
  std::vector<std::string> segment_lengths{"full"};
  std::string meanandvar_dir;
  bool meta_info = false;
  bool optional = false;
  std::vector<std::string> dependencies;
  std::string label2index_dir;
  int sample_rate = 0;  // recorded in an experiment's copy; 0: the rate of the list's audio

  void declare(OptionsReader& r);
  // Dependencies without the "None" placeholder.
  std::vector<std::string> dependency_names() const;
};

// Reads a database section after globalvars substitution (throws ConfigError naming the key).
DatabaseSectionOptions read_database_section(const ConfigSection& section,
                                             const ConfigFile& database);

// Throws ConfigError naming the section's segment_lengths unless `nabu data` stores the section
// cut at `segment_length`, the segment length of a stage that `reader` (e.g. "'features' of
// task_2spk") reads it in: trainer.cfg's segment_lengths and database.conf's must agree.
void require_stored_segment_length(const ConfigSection& section,
                                   const DatabaseSectionOptions& options,
                                   const std::string& segment_length, const std::string& reader);

}  // namespace nabu
