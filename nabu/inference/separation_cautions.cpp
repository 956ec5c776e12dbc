#include "nabu/inference/separation_cautions.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace nabu {

std::vector<Caution> separation_cautions(const std::vector<PitchEstimate>& outputs,
                                         const WeakPitchRange& weak) {
  std::vector<Caution> cautions;
  if (!(weak.semitones > 0)) return cautions;
  double closest = std::numeric_limits<double>::infinity();
  std::size_t first = 0, second = 0;
  for (std::size_t a = 0; a < outputs.size(); ++a)
    for (std::size_t b = a + 1; b < outputs.size(); ++b) {
      const double apart = semitones_apart(outputs[a].median_f0_hz, outputs[b].median_f0_hz);
      if (apart < closest) closest = apart, first = a, second = b;
    }
  if (closest < weak.semitones)
    cautions.push_back(
        {"near_pitch",
         fmt::format("voices of one pitch: outputs {} and {} have median f0 {:.0f} and {:.0f} Hz, "
                     "{:.1f} semitones apart; this model separates voices within {:g} semitones "
                     "of each other poorly, and one voice left in both outputs reads the same "
                     "({})",
                     first + 1, second + 1, outputs[first].median_f0_hz,
                     outputs[second].median_f0_hz, closest, weak.semitones, weak.explained)});
  return cautions;
}

}  // namespace nabu
