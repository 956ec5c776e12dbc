#include "nabu/pipeline/batch_plan.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "nabu/core/error.h"

namespace nabu {

std::vector<int64_t> bucket_boundaries(const std::vector<int64_t>& lengths, int numbuckets) {
  std::vector<int64_t> sorted = lengths;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> boundaries;
  if (sorted.empty()) return boundaries;
  numbuckets = std::max(1, std::min<int>(numbuckets, static_cast<int>(sorted.size())));
  for (int b = 1; b < numbuckets; ++b) {
    int64_t bound = sorted[sorted.size() * b / numbuckets - 1];
    if (boundaries.empty() || bound > boundaries.back()) boundaries.push_back(bound);
  }
  if (boundaries.empty() || boundaries.back() < sorted.back()) boundaries.push_back(sorted.back());
  return boundaries;
}

std::vector<std::vector<int64_t>> plan_epoch(const std::vector<int64_t>& lengths,
                                             const BatchPlanOptions& options, int64_t epoch) {
  if (options.batch_size <= 0) throw Error("batch_size must be positive");
  // One generator per epoch, derived from the seed: the plan never depends on history.
  std::seed_seq seed{static_cast<uint32_t>(options.seed), static_cast<uint32_t>(options.seed >> 32),
                     static_cast<uint32_t>(epoch), static_cast<uint32_t>(epoch >> 32)};
  std::mt19937_64 generator(seed);
  std::vector<int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  if (options.shuffle) std::shuffle(order.begin(), order.end(), generator);

  std::vector<std::vector<int64_t>> buckets;
  if (options.numbuckets <= 1) {
    buckets.push_back(order);
  } else {
    auto boundaries = bucket_boundaries(lengths, options.numbuckets);
    buckets.resize(boundaries.size());
    for (int64_t index : order) {
      auto bucket = std::lower_bound(boundaries.begin(), boundaries.end(), lengths[index]) -
                    boundaries.begin();
      buckets[bucket].push_back(index);
    }
  }
  std::vector<std::vector<int64_t>> batches;
  for (const auto& bucket : buckets)
    for (std::size_t start = 0; start < bucket.size(); start += options.batch_size)
      batches.emplace_back(bucket.begin() + start,
                           bucket.begin() + std::min(bucket.size(), start + options.batch_size));
  if (options.shuffle) std::shuffle(batches.begin(), batches.end(), generator);
  if (options.world_size <= 1) return batches;
  std::size_t per_rank = batches.size() / options.world_size;
  if (per_rank == 0)
    throw Error("an epoch has " + std::to_string(batches.size()) + " batches, fewer than the " +
                std::to_string(options.world_size) + " workers");
  std::vector<std::vector<int64_t>> mine;
  for (std::size_t i = 0; i < per_rank; ++i)
    mine.push_back(batches[i * options.world_size + options.rank]);
  return mine;
}

}  // namespace nabu
