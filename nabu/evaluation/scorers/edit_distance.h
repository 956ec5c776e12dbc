// Word (or token) error counts of a hypothesis against a reference: Levenshtein alignment with
// unit costs for substitutions, deletions and insertions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nabu {

struct EditCounts {
  int64_t reference_length = 0;
  int64_t substitutions = 0;
  int64_t deletions = 0;   // reference tokens missing from the hypothesis
  int64_t insertions = 0;  // hypothesis tokens not in the reference

  int64_t errors() const;
  // errors / reference_length. With an empty reference: 1 if anything was inserted, else 0.
  double rate() const;
  // Accumulates counts over utterances, so the rate of a corpus weighs every reference token once.
  EditCounts& operator+=(const EditCounts& other);
};

// Counts of a minimum-cost alignment. Tie rule: among the alignments with the fewest errors, the
// one with the most substitutions is counted (one substitution rather than a deletion plus an
// insertion). The minimum error count and the reference/hypothesis lengths then fix the deletions
// and insertions too, so the counts do not depend on which such alignment is meant.
EditCounts align_edits(const std::vector<std::string>& reference,
                       const std::vector<std::string>& hypothesis);

}  // namespace nabu
