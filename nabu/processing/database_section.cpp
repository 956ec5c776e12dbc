#include "nabu/processing/database_section.h"

#include "nabu/core/recipe.h"
#include "nabu/core/strings.h"

namespace nabu {

void DatabaseSectionOptions::declare(OptionsReader& r) {
  r("datafiles", datafiles,
    "list file(s), one line per utterance: 'utt wav', 'utt wav begin end' or 'utt wav1 wav2 ...'");
  r("preprocess", preprocess, "True: computed by `nabu data` into store_dir");
  r("writer_style", writer_style,
    "numpy_float_array_as_tfrecord / numpy_bool_array_as_tfrecord / float_list_as_tfrecord / "
    "index_list_as_tfrecord: the stored element type");
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
  auto options = read_options<DatabaseSectionOptions>(resolved, "a database.conf section");
  if (options.preprocess) {
    if (options.store_dir.empty()) resolved.fail("store_dir", "required when preprocess = True");
    if (options.processor_config.empty())
      resolved.fail("processor_config", "required when preprocess = True");
  }
  if (options.datafiles.empty()) resolved.fail("datafiles", "required");
  return options;
}

}  // namespace nabu
