// Which examples form which batch in an epoch: bucketing by length, seeded shuffling, sharding
// over ranks. A plan is a pure function of (lengths, options, epoch), so a position (epoch, batch)
// is all that must be saved to continue exactly where a run stopped.
#pragma once

#include <cstdint>
#include <vector>

namespace nabu {

struct BatchPlanOptions {
  int batch_size = 1;
  int numbuckets = 1;     // 1 = no bucketing
  bool shuffle = true;    // False: the examples in their file order (the original)
  uint64_t seed = 0;
  int rank = 0, world_size = 1;
};

// Bucket upper bounds (inclusive) from the sorted lengths so that every bucket holds about the
// same number of examples; the last is the maximum length.
std::vector<int64_t> bucket_boundaries(const std::vector<int64_t>& lengths, int numbuckets);

// The batches (example indices) of `epoch` for this rank. Every example appears exactly once per
// epoch when world_size is 1 (a bucket's last batch may be smaller). With several ranks, every
// rank gets the same number of batches (floor(batches / world_size)); the remaining batches of
// that epoch are left out, and ranks see disjoint examples.
std::vector<std::vector<int64_t>> plan_epoch(const std::vector<int64_t>& lengths,
                                             const BatchPlanOptions& options, int64_t epoch);

}  // namespace nabu
