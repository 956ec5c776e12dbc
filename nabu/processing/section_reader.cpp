#include "nabu/processing/section_reader.h"

#include "nabu/core/error.h"
#include "nabu/processing/database_section.h"
#include "nabu/processing/store.h"

namespace nabu {

SectionReader::SectionReader(const Recipe& recipe, const std::string& section_name)
    : section_(section_name) {
  const ConfigFile& database = recipe.get("database.conf");
  const ConfigSection& section = database.section(section_name);
  auto options = read_database_section(section, database);
  processor_ = make_processor(recipe.processor_config(section));
  if (processor_->needs_statistics()) {
    if (options.meanandvar_dir.empty())
      section.fail("meanandvar_dir", "required for mvn_type = global");
    processor_->set_statistics(
        MvnStatistics::load(std::filesystem::path(options.meanandvar_dir) / "mvn_stats.h5"));
  }
  lines_ = read_data_lines(options.datafiles);
  index_ = index_by_utterance(lines_);
}

const DataLine& SectionReader::line(const std::string& utterance) const {
  auto it = index_.find(utterance);
  if (it == index_.end())
    throw DataError("[" + section_ + "]: utterance '" + utterance + "' is not in its datafiles");
  return lines_[it->second];
}

torch::Tensor SectionReader::read(const std::string& utterance, int* sample_rate) const {
  return process(line(utterance), sample_rate);
}

torch::Tensor SectionReader::process(const DataLine& line, int* sample_rate) const {
  try {
    return processor_->process(line, sample_rate);
  } catch (const std::exception& e) {
    throw DataError("[" + section_ + "] utterance '" + line.utterance + "' (" + line.origin +
                    "): " + e.what());
  }
}

}  // namespace nabu
