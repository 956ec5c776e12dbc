#include "test_helpers.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

namespace nabu::testing {

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  std::random_device device;
  path_ = fs::temp_directory_path() /
          ("nabu_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" +
           std::to_string(device() % 100000));
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void write_text(const fs::path& path, const std::string& text) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

CommandResult run_nabu(const std::string& args, const fs::path& cwd) {
  std::string command = "cd '" + cwd.string() + "' && '" + std::string(NABU_BINARY) + "' " + args +
                        " 2>&1";
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed");
  std::array<char, 4096> buffer{};
  std::size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.output.append(buffer.data(), n);
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

fs::path source_dir() { return fs::path(NABU_SOURCE_DIR); }

fs::path reference_recipe_dir() {
  fs::path candidate = source_dir() / "tests" / "fixtures" / "MERL_DC_2spk";
  return fs::exists(candidate) ? candidate : fs::path();
}

}  // namespace nabu::testing
