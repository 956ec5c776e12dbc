// Helpers shared by the unit tests: temporary directories, writing files, running the CLI.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace nabu::testing {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

void write_text(const fs::path& path, const std::string& text);
// A mono 16-bit PCM wav (creating its folder).
void write_pcm16_wav(const fs::path& path, const std::vector<short>& samples, int rate = 8000);
// A 16-bit PCM wav of as many channels as `channels` holds, each in [-1, 1] and as long as the
// first (creating its folder).
void write_multichannel_wav(const fs::path& path, const std::vector<std::vector<double>>& channels,
                            int rate);
// Gaussian noise of standard deviation 3000 (int16 scale), seeded.
void write_noise_wav(const fs::path& path, int length, unsigned seed, int rate = 8000);
std::string read_text(const fs::path& path);

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};
// Runs a shell command line in `cwd`, collecting stdout and stderr.
CommandResult run_shell(const std::string& command, const fs::path& cwd);
// Runs the nabu binary with `args` (a shell-quoted string) in `cwd`.
CommandResult run_nabu(const std::string& args, const fs::path& cwd = fs::current_path());

// The message of the nabu::Error that `action` throws ("" when it throws none).
std::string error_of(const std::function<void()>& action);

// A copy of the recipe folder `from` in <dir>/recipe with `edits` (file -> (text, replacement))
// applied; a text that is not found fails the test.
fs::path copy_recipe(const fs::path& from, const TempDir& dir,
                     const std::multimap<std::string, std::pair<std::string, std::string>>& edits);
// copy_recipe of tests/fixtures/MERL_DC_2spk.
fs::path copy_fixture(const TempDir& dir,
                      const std::multimap<std::string, std::pair<std::string, std::string>>& edits);

// The source tree (for shipped recipes and reference fixtures).
fs::path source_dir();
// ../shared/reference/nabu-msss-recipe-MERL_DC_2spk when present (empty path otherwise).
fs::path reference_recipe_dir();

}  // namespace nabu::testing
