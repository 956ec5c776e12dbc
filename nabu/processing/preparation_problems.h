// Problems found while a corpus is checked (nabu prepare), grouped per place and kind: a 16 kHz
// tree under wav8k is one line per folder, not one per file.
#pragma once

#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include "nabu/core/error.h"
#include "nabu/core/strings.h"

namespace nabu {

class Problems {
 public:
  void add(const std::string& where, const std::string& what, const std::string& example = "") {
    std::lock_guard<std::mutex> lock(mutex_);
    auto key = std::make_pair(where, what);
    auto found = entries_.find(key);
    if (found == entries_.end()) {
      order_.push_back(key);
      entries_[key] = Entry{1, example};
    } else {
      ++found->second.count;
    }
  }
  std::size_t size() const { return order_.size(); }
  // Forgets the problems of every place under `prefix` (a whole tree summed up in one line).
  void remove_under(const std::string& prefix) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::pair<std::string, std::string>> kept;
    for (const auto& key : order_) {
      if (key.first == prefix || starts_with(key.first, prefix + "/"))
        entries_.erase(key);
      else
        kept.push_back(key);
    }
    order_ = std::move(kept);
  }
  void report() const {
    for (const auto& key : order_) {
      const Entry& entry = entries_.at(key);
      std::string tail;
      if (entry.count > 1)
        tail = " (" + std::to_string(entry.count) + " files, first: " + entry.example + ")";
      else if (!entry.example.empty())
        tail = " (" + entry.example + ")";
      logger().error("{}: {}{}", key.first, key.second, tail);
    }
  }

 private:
  struct Entry {
    std::size_t count = 0;
    std::string example;
  };
  std::mutex mutex_;
  std::vector<std::pair<std::string, std::string>> order_;
  std::map<std::pair<std::string, std::string>, Entry> entries_;
};

// List files separate their fields by spaces: a corpus root whose path holds one cannot be
// listed. Throws DataError naming it.
inline void refuse_space_in_path(const std::filesystem::path& root) {
  if (root.string().find_first_of(" \t") != std::string::npos)
    throw DataError(root.string() + ": a path with a space cannot go into list files, which "
                    "separate their fields by spaces; rename or link the folder");
}

}  // namespace nabu
