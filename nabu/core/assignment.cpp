#include "nabu/core/assignment.h"

#include <algorithm>
#include <limits>

namespace nabu {

std::vector<int64_t> best_permutation(const std::vector<std::vector<double>>& scores) {
  const int64_t speakers = static_cast<int64_t>(scores.size());
  std::vector<int64_t> order(speakers), best;
  for (int64_t s = 0; s < speakers; ++s) order[s] = s;
  double best_total = -std::numeric_limits<double>::infinity();
  do {
    double total = 0;
    for (int64_t r = 0; r < speakers; ++r) total += scores[r][order[r]];
    if (best.empty() || total > best_total) {
      best_total = total;
      best = order;
    }
  } while (std::next_permutation(order.begin(), order.end()));
  return best;
}

}  // namespace nabu
