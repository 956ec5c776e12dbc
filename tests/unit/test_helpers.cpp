#include "test_helpers.h"

#include "nabu/core/error.h"

#include <gtest/gtest.h>

#include <sndfile.h>
#include <unistd.h>

#include <algorithm>
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

void write_pcm16_wav(const fs::path& path, const std::vector<short>& samples, int rate) {
  fs::create_directories(path.parent_path());
  SF_INFO info{};
  info.samplerate = rate;
  info.channels = 1;
  info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
  SNDFILE* file = sf_open(path.c_str(), SFM_WRITE, &info);
  if (!file) throw std::runtime_error("cannot write " + path.string());
  sf_writef_short(file, samples.data(), static_cast<sf_count_t>(samples.size()));
  sf_close(file);
}

void write_multichannel_wav(const fs::path& path, const std::vector<std::vector<double>>& channels,
                            int rate) {
  fs::create_directories(path.parent_path());
  SF_INFO info{};
  info.samplerate = rate;
  info.channels = static_cast<int>(channels.size());
  info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
  SNDFILE* file = sf_open(path.c_str(), SFM_WRITE, &info);
  if (!file) throw std::runtime_error("cannot write " + path.string());
  const std::size_t frames = channels.front().size();
  std::vector<double> interleaved;
  interleaved.reserve(frames * channels.size());
  for (std::size_t n = 0; n < frames; ++n)
    for (const auto& channel : channels) interleaved.push_back(channel[n]);
  sf_writef_double(file, interleaved.data(), static_cast<sf_count_t>(frames));
  sf_close(file);
}

void write_noise_wav(const fs::path& path, int length, unsigned seed, int rate) {
  std::mt19937 generator(seed);
  std::normal_distribution<double> normal(0.0, 3000.0);
  std::vector<short> pcm(length);
  for (auto& x : pcm) x = static_cast<short>(std::max(-32000.0, std::min(32000.0, normal(generator))));
  write_pcm16_wav(path, pcm, rate);
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

CommandResult run_shell(const std::string& command, const fs::path& cwd) {
  std::string line = "cd '" + cwd.string() + "' && " + command + " 2>&1";
  CommandResult result;
  FILE* pipe = ::popen(line.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed");
  std::array<char, 4096> buffer{};
  std::size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.output.append(buffer.data(), n);
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

CommandResult run_nabu(const std::string& args, const fs::path& cwd) {
  return run_shell("'" + std::string(NABU_BINARY) + "' " + args, cwd);
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

fs::path source_dir() { return fs::path(NABU_SOURCE_DIR); }

fs::path reference_recipe_dir() {
  fs::path candidate = source_dir() / "tests" / "fixtures" / "MERL_DC_2spk";
  return fs::exists(candidate) ? candidate : fs::path();
}

fs::path copy_recipe(const fs::path& from, const TempDir& dir,
                     const std::multimap<std::string, std::pair<std::string, std::string>>& edits) {
  fs::create_directories(dir / "recipe");
  for (const auto& entry : fs::directory_iterator(from)) {
    if (!entry.is_regular_file()) continue;
    std::string name = entry.path().filename().string();
    std::string text = read_text(entry.path());
    auto range = edits.equal_range(name);
    for (auto it = range.first; it != range.second; ++it) {
      auto at = text.find(it->second.first);
      EXPECT_NE(at, std::string::npos) << name << ": " << it->second.first;
      if (at != std::string::npos) text.replace(at, it->second.first.size(), it->second.second);
    }
    write_text(dir / "recipe" / name, text);
  }
  return dir / "recipe";
}

fs::path copy_fixture(const TempDir& dir,
                      const std::multimap<std::string, std::pair<std::string, std::string>>& edits) {
  return copy_recipe(source_dir() / "tests" / "fixtures" / "MERL_DC_2spk", dir, edits);
}

}  // namespace nabu::testing
