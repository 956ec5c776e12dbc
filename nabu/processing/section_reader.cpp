#include "nabu/processing/section_reader.h"

#include "nabu/core/error.h"
#include "nabu/core/strings.h"
#include "nabu/processing/database_section.h"
#include "nabu/processing/audio.h"
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
    statistics_ =
        MvnStatistics::load(std::filesystem::path(options.meanandvar_dir) / "mvn_stats.h5");
    processor_->set_statistics(*statistics_);
  }
  datafiles_ = options.datafiles;
  datafiles_where_ = section.where("datafiles");
  recorded_sample_rate_ = options.sample_rate;
  list_root_ = recipe.list_root();
}

void SectionReader::load_list() const {
  if (loaded_) return;
  try {
    lines_ = read_data_lines(datafiles_, 1, list_root_);
  } catch (const DataError& e) {
    throw DataError(datafiles_where_ + ": " + e.what());
  }
  index_ = index_by_utterance(lines_);
  loaded_ = true;
}

const std::vector<DataLine>& SectionReader::lines() const {
  load_list();
  return lines_;
}

bool SectionReader::has(const std::string& utterance) const {
  load_list();
  return index_.count(utterance) > 0;
}

namespace {

int first_line_sample_rate(const std::vector<DataLine>& lines, const std::string& section) {
  if (lines.empty()) throw DataError("[" + section + "]: its datafiles list no utterance");
  const auto& fields = lines.front().fields;
  // A line of several wavs (sources, or the channels of a multi-channel recording) is at the rate
  // of its first; 'path begin end' is a slice of one.
  bool slice = fields.size() == 3 && parse_double(fields[1]) && parse_double(fields[2]);
  return (fields.size() == 1 || slice ? read_audio_fields(fields) : read_audio(fields[0]))
      .sample_rate;
}

}  // namespace

int SectionReader::list_sample_rate() const {
  if (recorded_sample_rate_ > 0) return recorded_sample_rate_;
  load_list();
  return first_line_sample_rate(lines_, section_);
}

std::map<std::string, int> list_sample_rates(const Recipe& recipe) {
  std::map<std::string, int> rates;
  const ConfigFile& database = recipe.get("database.conf");
  for (const auto& section : database.sections()) {
    if (section.name() == "globalvars" || !section.has("datafiles")) continue;
    try {
      auto options = read_database_section(section, database);
      if (options.sample_rate > 0) {
        rates[section.name()] = options.sample_rate;
        continue;
      }
      rates[section.name()] =
          first_line_sample_rate(read_data_lines(options.datafiles, 1, recipe.list_root()),
                                 section.name());
    } catch (const Error&) {
      // Not a list of audio (labels, text), or not readable here: nothing to record.
    }
  }
  return rates;
}

torch::Tensor SectionReader::process_audio(const torch::Tensor& samples, int sample_rate) const {
  try {
    return processor_->process_audio(samples, sample_rate);
  } catch (const DataError& e) {
    throw DataError("[" + section_ + "]: " + e.what());
  }
}

const DataLine& SectionReader::line(const std::string& utterance) const {
  load_list();
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
