// The best assignment of S estimates to S references: the order of the highest total score, by
// brute force over the S! orders (S, the number of speakers, is small). Used by the scorers and
// by chunked separation to match speakers across chunks.
#pragma once

#include <cstdint>
#include <vector>

namespace nabu {

// The assignment of estimates to references (perm[r]: the estimate of reference r) of the highest
// total of scores[r][e].
std::vector<int64_t> best_permutation(const std::vector<std::vector<double>>& scores);

}  // namespace nabu
