#include "nabu/processing/store_record.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <vector>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/strings.h"
#include "nabu/processing/store.h"

namespace nabu {

namespace fs = std::filesystem;

StoreIdentity StoreIdentity::of(const StoreMetadata& metadata, int64_t examples) {
  StoreIdentity identity;
  identity.section = metadata.section;
  identity.recipe = metadata.recipe;
  identity.source_lines = metadata.source_lines;
  identity.processor_config_hash = fmt::format("{:016x}", stable_hash(metadata.processor_config));
  identity.writer_style = metadata.writer_style;
  identity.utterances = metadata.utterances;
  identity.examples = examples;
  return identity;
}

std::string StoreIdentity::difference_to(const StoreIdentity& now) const {
  std::vector<std::string> changes;
  if (now.utterances != utterances)
    changes.push_back(fmt::format("{} utterances (was {})", now.utterances, utterances));
  else if (now.examples != examples)
    changes.push_back(fmt::format("{} examples (was {})", now.examples, examples));
  // A store of an older build has no fingerprint: its counts and config are all there is.
  if (!source_lines.empty() && !now.source_lines.empty() && now.source_lines != source_lines)
    changes.push_back("made from other list lines or audio files");
  if (now.processor_config_hash != processor_config_hash)
    changes.push_back("made with another processor config");
  if (now.writer_style != writer_style)
    changes.push_back("writer_style " + now.writer_style + " (was " + writer_style + ")");
  if (changes.empty()) return "";
  std::string by;
  if (now.section != section) by += " for section [" + now.section + "]";
  if (!now.recipe.empty() && now.recipe != recipe) by += " by recipe " + now.recipe;
  if (!by.empty()) changes.push_back("made" + by);
  return join(changes, ", ");
}

namespace {

nlohmann::json to_json(const StoreIdentity& identity) {
  return {{"section", identity.section},
          {"recipe", identity.recipe},
          {"source_lines", identity.source_lines},
          {"processor_config", identity.processor_config_hash},
          {"writer_style", identity.writer_style},
          {"utterances", identity.utterances},
          {"examples", identity.examples}};
}

StoreIdentity from_json(const nlohmann::json& json) {
  StoreIdentity identity;
  identity.section = json.at("section").get<std::string>();
  identity.recipe = json.at("recipe").get<std::string>();
  identity.source_lines = json.at("source_lines").get<std::string>();
  identity.processor_config_hash = json.at("processor_config").get<std::string>();
  identity.writer_style = json.at("writer_style").get<std::string>();
  identity.utterances = json.at("utterances").get<int64_t>();
  identity.examples = json.at("examples").get<int64_t>();
  return identity;
}

std::string store_key(const fs::path& store) {
  return fs::absolute(store).lexically_normal().string();
}

}  // namespace

StoreRecord::StoreRecord(fs::path file, std::string experiment, bool may_write)
    : file_(std::move(file)), experiment_(std::move(experiment)), may_write_(may_write) {
  std::error_code error;
  if (!fs::exists(file_, error)) return;
  try {
    auto json = nlohmann::json::parse(read_file(file_));
    for (const auto& [store, identity] : json.at("stores").items())
      stores_.emplace(store, from_json(identity));
  } catch (const nlohmann::json::exception& e) {
    throw DataError(file_.string() + ": unreadable record of the experiment's stores (" +
                    e.what() + "); remove it to record the stores as they are now");
  }
}

void StoreRecord::check(const fs::path& store, const StoreIdentity& now) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string key = store_key(store);
  auto it = stores_.find(key);
  if (it == stores_.end()) {
    stores_.emplace(key, now);
    if (may_write_) save();
    return;
  }
  std::string difference = it->second.difference_to(now);
  if (difference.empty()) return;
  throw DataError("store " + store.string() + " is not the one experiment " + experiment_ +
                  " read: " + difference + " (recorded in " + file_.string() +
                  "); remove the store and run `nabu data --recipe=" + experiment_ +
                  " --expdir=" + experiment_ +
                  "` to make it again from the experiment's lists, or start a new experiment");
}

void StoreRecord::save() const {
  nlohmann::json stores = nlohmann::json::object();
  for (const auto& [store, identity] : stores_) stores[store] = to_json(identity);
  nlohmann::json json = {
      {"format", 1},
      {"about", "the stores this experiment read; a store made again from other data is refused"},
      {"stores", stores}};
  write_file_atomic(file_, json.dump(1) + "\n");
}

}  // namespace nabu
