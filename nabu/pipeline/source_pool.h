// The single-speaker utterances dynamic mixing draws from (docs/dynamic_mixing.md, "Where the
// sources come from"): lists of utterances and their speakers, and the draws of a mixture's
// speakers (uniform, by list shares, pitch-matched). pipeline/dynamic_mixing.h mixes them.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "nabu/processing/data_list.h"

namespace nabu {

// Pitch matching: with probability `share` a mixture's other speakers are drawn among all
// speakers whose median f0 lies within `semitones` of its first speaker's (the pairs a model
// separates worst: docs/results.md, "Voices of the same pitch"), leaving out lists with a share
// of 0. When fewer such speakers exist, the mixture stays as drawn.
struct NearPitch {
  double share = 0.0;
  double semitones = 3.0;
};

// The single-speaker utterances dynamic mixing draws from.
class SourcePool {
 public:
  struct Source {
    std::string name, path, speaker;
    int64_t samples = 0;
    std::size_t list = 0;  // the index of the list it came from
  };
  // Kaldi-style lists: "utt path" lines (wav.scp), and optionally "utt speaker" lines
  // (utt2spk) so that a mixture never has one speaker twice: one utt2spk for all lists, or one
  // per list (then a speaker is a speaker of its list: two lists may both have an "spk1").
  // `root`: Recipe::list_root, for relative paths in the lists. `spk2f0`: each speaker's
  // median f0 in Hz ("speaker f0" lines, as many files as utt2spk, naming the same speakers),
  // for pitch-matched draws; every speaker needs one.
  static SourcePool from_lists(const std::vector<std::string>& lists,
                               const std::vector<std::string>& utt2spk,
                               const std::string& root = "",
                               const std::vector<std::string>& spk2f0 = {});
  // Every field of every line is a source (the s1 s2 ... lists of stored mixtures); speakers
  // are unknown, so only the same file is never drawn twice for one mixture.
  static SourcePool from_source_lines(const std::vector<DataLine>& lines);

  const std::vector<Source>& sources() const { return sources_; }
  int sample_rate() const { return sample_rate_; }
  int64_t num_speakers() const { return static_cast<int64_t>(by_speaker_.size()); }
  // Speakers whose utterances come from list `list`.
  int64_t num_speakers_of_list(std::size_t list) const;
  bool has_pitch() const { return !speaker_f0_.empty(); }
  // Another utterance of the speaker of source `source` (itself when the speaker has one).
  std::size_t another_utterance(std::mt19937_64& rng, std::size_t source) const;

  // `count` sources of `count` different speakers, then one of each one's utterances. Without
  // `shares` the speakers are drawn uniformly from all lists; with one share per list, each
  // source's list is drawn with these weights first, then a speaker of that list not yet in the
  // mixture. Then `near`, if its share is positive. Throws DataError when there are too few
  // speakers.
  std::vector<std::size_t> draw(std::mt19937_64& rng, int count,
                                const std::vector<double>& shares = {},
                                const NearPitch& near = {}) const;

 private:
  void index();  // reads every header, checks the rate, groups by speaker
  void read_pitch(const std::vector<std::string>& spk2f0, const std::string& root);
  std::vector<std::size_t> draw_speakers(std::mt19937_64& rng, int count,
                                         const std::vector<double>& shares) const;
  std::vector<std::size_t> draw_by_shares(std::mt19937_64& rng, int count,
                                          const std::vector<double>& shares) const;
  void match_pitch(std::mt19937_64& rng, const NearPitch& near, const std::vector<double>& shares,
                   std::vector<std::size_t>& chosen) const;
  std::vector<Source> sources_;
  std::vector<std::vector<std::size_t>> by_speaker_;
  std::vector<std::size_t> speaker_of_source_;  // by source index
  std::vector<double> speaker_f0_;              // Hz by speaker index; empty: no spk2f0
  std::vector<std::vector<std::size_t>> speakers_of_list_;  // speaker indices per list
  int sample_rate_ = 0;
};

// Draws that do not depend on the standard library's distributions, so a mixture is the same
// on every platform: uniform in [low, high) from 53 bits, and an index below `count`.
inline double uniform_draw(std::mt19937_64& rng, double low, double high) {
  return low + (high - low) * static_cast<double>(rng() >> 11) * 0x1.0p-53;
}
inline std::size_t draw_below(std::mt19937_64& rng, std::size_t count) {
  return static_cast<std::size_t>(rng() % count);
}

}  // namespace nabu
