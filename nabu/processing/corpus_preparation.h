// `nabu prepare`: the list files a recipe's database.conf names, written for a speech-separation
// corpus as it lies on disk (LibriMix, WHAM!/WHAMR!, wsj0-2mix/3mix), after checking every file
// of it. docs/corpora.md gives the layouts and the lists.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace nabu {

struct CorpusPreparationOptions {
  std::string kind;                 // librimix, wham (also whamr) or wsj0-mix
  std::filesystem::path root;       // the corpus as it was generated
  std::filesystem::path out = "data";
  std::vector<std::string> rates;   // "8k", "16k"; empty: every one there
  std::vector<std::string> modes;   // "min", "max"; empty: every one there
  std::filesystem::path speaker_genders;  // optional "speaker ... M|F" lines
  int workers = 0;                  // header readers in parallel; 0: all cores
  // Kind folder: the name of the lists' folder under `out` (default: the root's name), and the
  // speakers of each mixture when they are known (default: each source its own speaker).
  std::string name;
  std::map<std::string, std::vector<std::string>> mixture_speakers;
};

struct PreparedSplit {
  std::string name;
  int64_t utterances = 0;
  double hours = 0;
  int64_t speakers = 0;
  std::vector<std::string> lists;  // file names written in the split's folder
};

struct PreparedVariant {
  std::string corpus;  // Libri2Mix, WHAM, WHAMR, wsj0-2mix, ...
  std::string rate_folder, mode;
  int sample_rate = 0;
  int speakers_per_mixture = 0;
  std::filesystem::path out;  // <out>/<corpus>/<rate_folder>/<mode>
  std::vector<PreparedSplit> splits;
};

// Checks every file of the chosen rates and modes (present, RIFF/WAVE, mono, at the folder's
// rate, not truncated, as long as the other files of its utterance, as long as LibriMix's
// metadata says) and writes, only when nothing is wrong, one folder per split under
// <out>/<corpus>/<rate>/<mode>/ with <folder>_wav.scp for every folder of the split,
// allS[_variant]_wav.scp, utt_spkinfo.txt, sources_wav.scp and sources_utt2spk, and
// prepared.json. Problems are logged one line each (grouped per folder and kind) and end in one
// DataError; an earlier preparation of the same variant is then left as it was.
std::vector<PreparedVariant> prepare_corpus(const CorpusPreparationOptions& options);

// The kinds prepare_corpus knows.
const std::vector<std::string>& corpus_kinds();

}  // namespace nabu
