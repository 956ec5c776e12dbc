// What a separation knows of its own weak spots (docs/postprocessing.md, "When a result is
// likely poor"): the separated signals' median pitches against the range in which the model is
// known to separate poorly (its card's), so that `nabu separate` and the C++ API can say so
// beside the signals.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "nabu/processing/pitch.h"

namespace nabu {

// Outputs whose median f0 lie fewer than `semitones` apart are voices the model separates
// poorly; `explained` says where that is measured. The default holds for every model the project
// has measured (docs/results.md, "Voices of the same pitch").
struct WeakPitchRange {
  double semitones = 4.0;  // 0: never cautioned
  std::string explained = "docs/results.md, \"Voices of the same pitch\"";
};

struct Caution {
  std::string kind;     // "near_pitch"
  std::string message;  // one line
};

// The cautions of one separation from its outputs' pitch estimates: the closest two voiced
// outputs within the weak range.
std::vector<Caution> separation_cautions(const std::vector<PitchEstimate>& outputs,
                                         const WeakPitchRange& weak);

}  // namespace nabu
