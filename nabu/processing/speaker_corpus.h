// `nabu prepare folder` on single-speaker recordings, ROOT/<speaker>/*.wav (docs/own_data.md):
// the speakers are split into tr, cv and tt (deterministic, by a hash of their names), every
// split gets two-speaker mixtures of its own speakers' recordings (written as wavs next to the
// lists), and the mixtures are prepared as a folder of mixtures with the real speakers named.
#pragma once

#include <filesystem>
#include <vector>

#include "nabu/processing/corpus_preparation.h"

namespace nabu {

struct SpeakerCorpusOptions {
  std::filesystem::path root;
  std::filesystem::path out = "data";
  int cv_speakers = 0, tt_speakers = 0;  // 0: max(2, a tenth of the speakers) each
  int workers = 0;
};

// Whether ROOT holds speaker folders of wavs (and no tr/cv/tt split folders).
bool is_speaker_folder_corpus(const std::filesystem::path& root);

// Checks every recording (a readable mono wav, one rate, not silent, no space in its name; one
// line per folder and kind, then nothing written), splits the speakers, writes
// <out>/<root name>_mixtures/{tr,cv,tt}/{mix,s1,s2}/ and prepares it as
// <out>/<root name>/ (prepare_corpus, kind folder). Throws DataError naming what is wrong.
std::vector<PreparedVariant> prepare_speaker_corpus(const SpeakerCorpusOptions& options);

}  // namespace nabu
