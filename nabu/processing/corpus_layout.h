// How a speech-separation corpus lies on disk, for `nabu prepare` (corpus_preparation.cpp): the
// kinds and their splits, the folders and files of a split, the variants (rate and mode folders),
// and the scans that list and check them, each problem reported through Problems. Internal to
// processing/.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "nabu/processing/preparation_problems.h"

namespace nabu {

class ProgressReporter;

namespace corpus {

namespace fs = std::filesystem;

// How a corpus names its splits, and which it must have.
struct CorpusKind {
  std::string name;
  std::vector<std::string> splits;    // in report order
  std::vector<std::string> required;  // each must be there
  std::vector<std::string> one_of;    // at least one must be there (LibriMix's training sets)
  std::string speaker_folders;        // children of the root that hold wavNk folders
};

const std::vector<CorpusKind>& kinds();

const CorpusKind& kind_named(const std::string& name);

struct Folder {
  std::string name;
  std::map<std::string, fs::path> files;  // utterance -> file
};

struct Split {
  std::string name;
  fs::path dir;
  std::vector<Folder> folders;
  std::vector<std::string> utterances;
  std::size_t primary = 0;                // the mixture folder utt_spkinfo.txt names
  std::map<std::string, int64_t> frames;  // of the primary mixture
  std::map<std::string, std::vector<std::string>> speakers;
};

struct Variant {
  std::string corpus, rate_folder, mode;
  std::string first_file;  // kind folder: the file whose rate is the corpus's
  int sample_rate = 0, sources = 0;
  double shortest_seconds = 0;  // kind folder: files shorter than this are refused
  fs::path dir;
  std::vector<Split> splits;
};

// The rates of a variant's files: a tree of another rate in the wrong folder is one problem.
struct RateTally {
  std::mutex mutex;
  std::size_t files = 0, wrong = 0;
  std::set<int> wrong_rates;
  void add(int rate, int expected) {
    std::lock_guard<std::mutex> lock(mutex);
    ++files;
    if (rate != expected) {
      ++wrong;
      wrong_rates.insert(rate);
    }
  }
};

// mix, mix_clean, mix_both, ...
bool is_mixture_folder(const std::string& name);

// "s2" -> (2, ""), "s1_reverb" -> (1, "_reverb"); (0, "") for anything else.
std::pair<int, std::string> source_folder(const std::string& name);

// A mixture, source or noise folder.
bool is_corpus_folder(const std::string& name);

// The folders in `dir`, sorted.
std::vector<fs::path> subfolders(const fs::path& dir);

// wav8k -> 8000; 0 for a name that is not a rate folder.
int rate_of(const std::string& rate_folder);

bool has_rate_folders(const fs::path& dir);

// The folders that hold wav8k/wav16k: the root itself, or its Libri2Mix/2speakers children.
std::vector<fs::path> speaker_dirs(const CorpusKind& kind, const fs::path& root);

// --rates' 8k, 8000, wav8k -> wav8k; throws for anything else.
std::string canonical_rate(const std::string& rate);

// Speakers from a mixture's name: LibriMix joins LibriSpeech utterances (speaker-chapter-index)
// with '_'; wsj0-2mix, WHAM! and WHAMR! join (utterance, gain) pairs, the speaker being the
// utterance's first three characters.
std::vector<std::string> speakers_of(const std::string& kind, const std::string& utterance,
                                     int sources);

// "speaker ... M|F ..." lines: LibriSpeech's SPEAKERS.TXT ('|' separated), wsj0's spkrinfo.txt,
// or two columns; ';' and '#' start comments.
std::map<std::string, std::string> read_genders(const fs::path& file);

// LibriMix's metadata/mixture_<split>_<mixture folder>.csv: utterance -> length in samples.
std::map<std::string, int64_t> read_librimix_metadata(const fs::path& csv, Problems& problems);

// `path` as the problems name it: from the root's parent.
std::string relative_name(const fs::path& path, const fs::path& root);

// Lists the split's folders and files and reports what is missing.
Split scan_split(const std::string& name, const fs::path& dir, const fs::path& root,
                 Problems& problems);

// LibriMix's lengths of every mixture folder that has metadata: folder -> utterance -> samples.
using LengthsByFolder = std::map<std::string, std::map<std::string, int64_t>>;

// Checks the files of one utterance (each must be mono, at the variant's rate, whole, as long as
// the primary mixture and as LibriMix's metadata says); returns the primary mixture's frames, -1
// when none could be read. `done` counts the files read.
int64_t check_utterance_files(const Split& split, const std::string& utterance,
                              const Variant& variant, const fs::path& root,
                              const LengthsByFolder& metadata, Problems& problems,
                              std::atomic<std::size_t>& done, RateTally& rates);

// The same for every utterance of the split, `workers` in parallel; fills split.frames.
void check_split_files(Split& split, const Variant& variant, const fs::path& root,
                       const LengthsByFolder& metadata, int workers, Problems& problems,
                       ProgressReporter& progress, std::atomic<std::size_t>& done,
                       RateTally& rates);

// Libri2Mix, wsj0-2mix, WHAM or WHAMR (reverberant folders).
std::string corpus_name(const std::string& kind, int sources, const std::vector<Split>& splits);

// One rate and mode folder: its splits scanned, the source folders they must share checked; the
// kind folder is named after its root and has the rate of its first mixture file.
Variant scan_variant(const CorpusKind& kind, const fs::path& mode_dir, const fs::path& root,
                     Problems& problems);

}  // namespace corpus

}  // namespace nabu
