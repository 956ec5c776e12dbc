// What an experiment read: the identity of every store it trained or was tested on, kept in
// <expdir>/stores.json (docs/data_layout.md, "Stores bound to what made them"). A store that was
// made again from other data since then is refused in one line, never read silently.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>

namespace nabu {

struct StoreMetadata;

// What makes two stores hold the same data: the fingerprint of their list lines and files, the
// processor config and writer style, and what came out (utterances, examples). The section and
// recipe that made it name it in messages.
struct StoreIdentity {
  std::string section, recipe, source_lines, processor_config_hash, writer_style;
  int64_t utterances = 0, examples = 0;

  static StoreIdentity of(const StoreMetadata& metadata, int64_t examples);
  // "" when `now` holds the same data; else what changed, for a message ("2 utterances (was 4),
  // other list lines, made by recipe R").
  std::string difference_to(const StoreIdentity& now) const;
};

class StoreRecord {
 public:
  // Loads `file` when it exists (an unreadable file is a DataError naming it). With `may_write`
  // (the one process of a run that writes the experiment) a store read for the first time is
  // added and the file rewritten atomically; otherwise it is only compared.
  StoreRecord(std::filesystem::path file, std::string experiment, bool may_write);

  // Throws DataError when `store` was recorded with another identity: one line naming the
  // store, what changed and how to go on. Records it when it was not recorded yet.
  void check(const std::filesystem::path& store, const StoreIdentity& now);

 private:
  void save() const;
  std::filesystem::path file_;
  std::string experiment_;
  bool may_write_;
  std::mutex mutex_;
  std::map<std::string, StoreIdentity> stores_;  // absolute store path -> identity
};

}  // namespace nabu
