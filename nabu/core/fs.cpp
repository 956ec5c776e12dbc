#include "nabu/core/fs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

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

std::string working_directory_note(const fs::path& path) {
  if (path.is_absolute()) return "";
  std::error_code ec;
  const fs::path here = fs::current_path(ec);
  return " (relative to the working directory " + (ec ? std::string("?") : here.string()) +
         "; a recipe's paths are read from where nabu runs: the project root for the shipped "
         "recipes)";
}

std::string generation_hint(const fs::path& file) {
  std::vector<std::string> parts;
  for (const auto& part : file.lexically_normal()) parts.push_back(part.string());
  const std::string demo = "; ./run demo makes every corpus and test set the shipped recipes read)";
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    if (parts[i] != "data") continue;
    const std::string& folder = parts[i + 1];
    if (folder == "recorded")
      return " (generate the recorded test set first: tools/make_recorded_eval_set" + demo;
    if (folder == "recorded_corpus")
      return " (generate the recorded corpus first: tools/make_recorded_corpus" + demo;
    // The sets mixed from the recorded corpus's held-out (tt) and validation (cv) speakers.
    if (folder == "recorded_heldout" || folder == "recorded_cv")
      return " (generate it first: tools/make_recorded_corpus, then tools/make_recorded_eval_set"
             " --from-corpus=data/recorded_corpus" +
             std::string(folder == "recorded_cv" ? " --split=cv" : "") + demo;
    // The lists nabu prepare writes for a standard corpus (docs/corpora.md).
    static const std::vector<std::pair<std::string, std::string>> corpora{
        {"Libri", "librimix"}, {"WHAM", "wham"}, {"wsj0-", "wsj0-mix"}};
    for (const auto& [prefix, kind] : corpora)
      if (folder.rfind(prefix, 0) == 0)
        return " (write the corpus's lists first: nabu prepare " + kind +
               " <corpus root>, docs/corpora.md)";
    if (folder != "corpus") continue;
    bool babble = i + 2 < parts.size() && parts[i + 2].find("_babble") != std::string::npos;
    return (babble ? " (generate the corpus first: tools/make_toy_corpus, then "
                     "tools/make_noisy_corpus"
                   : " (generate the corpus first: tools/make_toy_corpus") + demo;
  }
  return "";
}

fs::path absolute_folder(const fs::path& folder) {
  fs::path normal = fs::absolute(folder).lexically_normal();
  return normal.filename().empty() ? normal.parent_path() : normal;
}

void write_file(const fs::path& path, const std::string& content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(path.string() + ": cannot open for writing: " + std::strerror(errno));
  std::size_t done = 0;
  while (done < content.size()) {
    ssize_t count = ::write(fd, content.data() + done, content.size() - done);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) {
      int error = count < 0 ? errno : ENOSPC;
      ::close(fd);
      throw Error(path.string() + ": write failed after " + std::to_string(done) + " of " +
                  std::to_string(content.size()) + " bytes: " + std::strerror(error));
    }
    done += static_cast<std::size_t>(count);
  }
  // On the disk before it is renamed into place: a crash then leaves the old or the new file.
  if (::fsync(fd) != 0 || ::close(fd) != 0)
    throw Error(path.string() + ": write failed: " + std::strerror(errno));
}

void write_file_atomic(const fs::path& path, const std::string& content) {
  if (path.has_parent_path()) ensure_directory(path.parent_path());
  AtomicPath target(path);
  write_file(target.temporary(), content);
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
