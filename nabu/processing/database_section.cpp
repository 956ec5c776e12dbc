#include "nabu/processing/database_section.h"

#include <algorithm>

#include "nabu/core/recipe.h"
#include "nabu/core/strings.h"

namespace nabu {

void DatabaseSectionOptions::declare(OptionsReader& r) {
  r("datafiles", datafiles,
    "list file(s), one line per utterance: 'utt wav', 'utt wav begin end' or 'utt wav1 wav2 ...'");
  r("preprocess", preprocess, "True: computed by `nabu data` into store_dir");
  r.choice("writer_style", writer_style,
           {"numpy_float_array_as_tfrecord", "numpy_bool_array_as_tfrecord",
            "float_list_as_tfrecord", "index_list_as_tfrecord"},
           "the stored element type (float32, bool, float32, int32)");
  r("store_dir", store_dir, "where the HDF5 stores go (one per segment length)");
  r("processor_config", processor_config, "the processor config file");
  r("segment_lengths", segment_lengths, "segment lengths to store (frames, or full)");
  r("meanandvar_dir", meanandvar_dir,
    "where global mean/variance statistics live; computed here when equal to store_dir");
  r("meta_info", meta_info, "documentation only, as in the original");
  r("optional", optional, "documentation only, as in the original");
  r("dependencies", dependencies,
    "sections that must be prepared first (None for none); also derived from meanandvar_dir");
  r("label2index_dir", label2index_dir, "label index directory (string label processors)");
  r("sample_rate", sample_rate,
    "new: the rate of the section's audio, written into an experiment's copy by nabu train so "
    "that separating a recording needs no data list (0: read from the list's first file)");
  for (const auto& segment : segment_lengths)
    r.require(segment == "full" || (parse_int(segment) && *parse_int(segment) > 0),
              "segment_lengths", "'" + segment + "' is neither full nor a positive integer");
  r.require(!preprocess || !store_dir.empty(), "store_dir", "required when preprocess = True");
  r.require(!preprocess || !processor_config.empty(), "processor_config",
            "required when preprocess = True");
  r.require(!datafiles.empty(), "datafiles", "required");
}

void require_stored_segment_length(const ConfigSection& section,
                                   const DatabaseSectionOptions& options,
                                   const std::string& segment_length, const std::string& reader) {
  const auto& stored = options.segment_lengths;
  if (std::find(stored.begin(), stored.end(), segment_length) != stored.end()) return;
  // Whole utterances are read by every command (test, separate, a `full` stage); only a length in
  // frames or samples comes from trainer.cfg's stages, the other place to change it.
  const bool whole = segment_length == "full";
  section.fail("segment_lengths",
               "'" + join(stored, " ") + "' has no " + segment_length +
                   (whole ? ", the whole utterances " : ", the segment length of a trainer.cfg "
                                                        "stage in which ") +
                   reader + (whole ? " reads" : " reads this section") +
                   "; add it here (then run `nabu data`)" +
                   (whole ? "" : " or change trainer.cfg's segment_lengths"));
}

std::vector<std::string> DatabaseSectionOptions::dependency_names() const {
  std::vector<std::string> names;
  for (const auto& name : dependencies)
    if (name != "None") names.push_back(name);
  return names;
}

DatabaseSectionOptions read_database_section(const ConfigSection& section,
                                             const ConfigFile& database) {
  ConfigSection resolved = resolve_globalvars(section, database);
  return read_options<DatabaseSectionOptions>(resolved, "a database.conf section");
}

}  // namespace nabu
