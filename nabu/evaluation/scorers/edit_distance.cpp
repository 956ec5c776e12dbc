#include "nabu/evaluation/scorers/edit_distance.h"

#include <algorithm>

namespace nabu {

int64_t EditCounts::errors() const { return substitutions + deletions + insertions; }

double EditCounts::rate() const {
  if (reference_length == 0) return errors() > 0 ? 1.0 : 0.0;
  return static_cast<double>(errors()) / static_cast<double>(reference_length);
}

EditCounts& EditCounts::operator+=(const EditCounts& other) {
  reference_length += other.reference_length;
  substitutions += other.substitutions;
  deletions += other.deletions;
  insertions += other.insertions;
  return *this;
}

namespace {

// The tie rule of align_edits as an order: fewer errors, then more substitutions. It is compatible
// with adding edits, so the dynamic programme below finds the best alignment under it.
bool better(const EditCounts& a, const EditCounts& b) {
  if (a.errors() != b.errors()) return a.errors() < b.errors();
  return a.substitutions > b.substitutions;
}

}  // namespace

EditCounts align_edits(const std::vector<std::string>& reference,
                       const std::vector<std::string>& hypothesis) {
  // Each cell holds the counts of the best alignment of a reference prefix with a hypothesis
  // prefix; the counts themselves replace a backtrace. Two rows suffice.
  const size_t hypothesis_length = hypothesis.size();
  std::vector<EditCounts> previous(hypothesis_length + 1), current(hypothesis_length + 1);
  for (size_t j = 0; j <= hypothesis_length; ++j) previous[j].insertions = static_cast<int64_t>(j);

  for (size_t i = 1; i <= reference.size(); ++i) {
    current[0] = previous[0];
    ++current[0].deletions;
    for (size_t j = 1; j <= hypothesis_length; ++j) {
      EditCounts diagonal = previous[j - 1];
      if (reference[i - 1] != hypothesis[j - 1]) ++diagonal.substitutions;
      EditCounts deletion = previous[j];
      ++deletion.deletions;
      EditCounts insertion = current[j - 1];
      ++insertion.insertions;
      // Listed in order of preference, so exact ties are also resolved the same way every time.
      EditCounts best = diagonal;
      if (better(deletion, best)) best = deletion;
      if (better(insertion, best)) best = insertion;
      current[j] = best;
    }
    std::swap(previous, current);
  }

  EditCounts counts = previous[hypothesis_length];
  counts.reference_length = static_cast<int64_t>(reference.size());
  return counts;
}

}  // namespace nabu
