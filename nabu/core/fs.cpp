#include "nabu/core/fs.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "nabu/core/error.h"

namespace nabu {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open file for reading");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

fs::path temporary_sibling(const fs::path& path) {
  static std::atomic<int> counter{0};
  return fs::path(path.string() + ".tmp." + std::to_string(::getpid()) + "." +
                  std::to_string(counter++));
}

void rename_replace(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) throw Error(to.string() + ": cannot move into place: " + ec.message());
}

void write_file_atomic(const fs::path& path, const std::string& content) {
  if (path.has_parent_path()) ensure_directory(path.parent_path());
  AtomicPath target(path);
  {
    std::ofstream out(target.temporary(), std::ios::binary | std::ios::trunc);
    if (!out) throw Error(path.string() + ": cannot open for writing");
    out << content;
    out.flush();
    if (!out) throw Error(path.string() + ": write failed (disk full?)");
  }
  target.commit();
}

void ensure_directory(const fs::path& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec && !fs::is_directory(path))
    throw Error(path.string() + ": cannot create directory: " + ec.message());
}

AtomicPath::AtomicPath(fs::path final_path)
    : final_(std::move(final_path)), temporary_(temporary_sibling(final_)) {}

AtomicPath::~AtomicPath() {
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(temporary_, ec);
  }
}

void AtomicPath::commit() {
  rename_replace(temporary_, final_);
  committed_ = true;
}

}  // namespace nabu
