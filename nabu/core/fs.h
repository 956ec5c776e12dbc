// Filesystem helpers: files are written to a temporary name and renamed into place, so a killed
// run never leaves a half-written file under the final name.
#pragma once

#include <filesystem>
#include <string>

namespace nabu {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path);  // throws Error naming the path
// Writes (and fsyncs) `content` to `path`; throws Error naming the path and the system's reason
// (a full disk, a file-size limit). Not atomic: see write_file_atomic.
void write_file(const fs::path& path, const std::string& content);
void write_file_atomic(const fs::path& path, const std::string& content);
void ensure_directory(const fs::path& path);  // throws Error naming the path
// A unique temporary sibling of `path` ("<path>.tmp.<pid>.<n>").
fs::path temporary_sibling(const fs::path& path);
// Renames `from` to `to` (same filesystem), replacing `to`; throws Error on failure.
void rename_replace(const fs::path& from, const fs::path& to);
// `folder` absolute and normal, without a trailing separator ("data/x/" -> "/.../data/x"), so
// that its filename() is the folder's name.
fs::path absolute_folder(const fs::path& folder);
// For an error about a missing file: where a relative `path` was looked for (" (relative to the
// working directory /x; ...)"), since a recipe's paths are read from where nabu runs; "" for an
// absolute path.
std::string working_directory_note(const fs::path& path);
// The shipped recipes read lists that tools/ generate (data/README.md) or nabu prepare writes
// (docs/corpora.md): for a missing one under data/corpus, data/recorded, data/recorded_corpus or
// data/<corpus>, " (generate ... first: <the tool that makes it>)"; "" for any other path.
std::string generation_hint(const fs::path& file);

// Deletes the file on destruction unless commit() renamed it into place.
class AtomicPath {
 public:
  explicit AtomicPath(fs::path final_path);
  ~AtomicPath();
  AtomicPath(const AtomicPath&) = delete;
  AtomicPath& operator=(const AtomicPath&) = delete;
  const fs::path& temporary() const { return temporary_; }
  const fs::path& final_path() const { return final_; }
  void commit();

 private:
  fs::path final_, temporary_;
  bool committed_ = false;
};

}  // namespace nabu
