// k-means as the original's reconstructors use it (sklearn KMeans: init='k-means++', n_init=10,
// max_iter=100, tol=1e-4; docs/postprocessing.md), on tensors in double precision. Seeded from its
// own generator so results are reproducible and the global torch RNG is never touched (the original
// used no fixed seed).
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace nabu {

struct KMeansOptions {
  int64_t num_clusters = 2;
  int n_init = 10;      // restarts; the run with the lowest inertia wins
  int max_iter = 100;   // Lloyd iterations per restart
  double tol = 1e-4;    // relative to the mean per-dimension variance of the data, as sklearn
  uint64_t seed = 0;
};

struct KMeansResult {
  torch::Tensor centers;  // [k, D] double
  torch::Tensor labels;   // [N] int64, the nearest centre of every point
  double inertia = 0.0;   // sum of squared distances of the points to their centres
  int iterations = 0;     // Lloyd iterations of the winning restart
};

// Clusters `points` [N, D] (any floating dtype; computed in double). N must be >= 1. With
// k > N (or fewer distinct points than k) some centres coincide: no crash, no NaN.
KMeansResult kmeans_fit(const torch::Tensor& points, const KMeansOptions& options);

// Index of the nearest centre for every row of `points` [N, D]; ties go to the lowest index.
torch::Tensor kmeans_predict(const torch::Tensor& points, const torch::Tensor& centers);

// sklearn's greedy k-means++ seeding (2 + floor(ln k) candidate centres per step, the one that
// lowers the potential most is kept), exposed for tests. `seed` drives all random draws.
torch::Tensor kmeans_plusplus(const torch::Tensor& points, int64_t num_clusters, uint64_t seed);

}  // namespace nabu
