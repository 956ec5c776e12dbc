#include "nabu/inference/reconstructors/kmeans.h"

#include <cmath>
#include <limits>
#include <random>

#include "nabu/core/error.h"

namespace nabu {

namespace {

// Squared Euclidean distances [N, K] from precomputed squared norms; clamped at 0 because the
// expansion |x|^2 - 2x.c + |c|^2 can go slightly negative by rounding.
torch::Tensor squared_distances(const torch::Tensor& points, const torch::Tensor& point_norms,
                                const torch::Tensor& centers) {
  auto center_norms = centers.square().sum(1);
  return (point_norms.unsqueeze(1) - 2.0 * points.matmul(centers.t()) + center_norms.unsqueeze(0))
      .clamp_min(0.0);
}

torch::Tensor as_double_matrix(const torch::Tensor& points, const char* what) {
  if (!points.defined() || points.dim() != 2)
    throw Error(std::string(what) + ": expected points of shape [N, D]");
  return points.to(torch::kFloat64).contiguous();
}

torch::Tensor plusplus(const torch::Tensor& x, const torch::Tensor& norms, int64_t k,
                       std::mt19937_64& rng) {
  const int64_t n = x.size(0);
  const int trials = 2 + static_cast<int>(std::log(static_cast<double>(k)));
  auto centers = torch::empty({k, x.size(1)}, x.options());
  std::uniform_int_distribution<int64_t> pick(0, n - 1);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);

  centers[0] = x[pick(rng)];
  auto closest = squared_distances(x, norms, centers.slice(0, 0, 1)).squeeze(1);  // [N]
  double potential = closest.sum().item<double>();
  for (int64_t c = 1; c < k; ++c) {
    // Candidates drawn with probability proportional to their distance to the chosen centres.
    std::vector<double> draws(trials);
    for (auto& draw : draws) draw = uniform(rng) * potential;
    auto thresholds = torch::tensor(draws, x.options());
    auto candidates =
        torch::searchsorted(closest.cumsum(0), thresholds).clamp_max(n - 1);  // [trials]
    auto candidate_points = x.index_select(0, candidates);
    auto to_candidates =
        squared_distances(x, norms, candidate_points).t();            // [trials, N]
    auto candidate_closest = torch::minimum(closest.unsqueeze(0), to_candidates);
    auto potentials = candidate_closest.sum(1);
    int64_t best = potentials.argmin().item<int64_t>();
    centers[c] = candidate_points[best];
    closest = candidate_closest[best].clone();
    potential = potentials[best].item<double>();
  }
  return centers;
}

struct LloydRun {
  torch::Tensor centers, labels;
  double inertia = 0.0;
  int iterations = 0;
};

// New centres as the means of their points; a cluster left empty takes the point farthest from
// its current centre (sklearn's relocation), which is removed from the cluster it came from.
torch::Tensor update_centers(const torch::Tensor& x, const torch::Tensor& labels,
                             const torch::Tensor& old_centers, const torch::Tensor& distances) {
  const int64_t k = old_centers.size(0);
  auto sums = torch::zeros_like(old_centers).index_add_(0, labels, x);
  auto counts = torch::zeros({k}, x.options()).index_add_(0, labels, torch::ones({x.size(0)}, x.options()));
  auto empty = (counts == 0).nonzero().flatten();
  const int64_t num_empty = empty.numel();
  if (num_empty > 0) {
    auto own_distance = distances.gather(1, labels.unsqueeze(1)).squeeze(1);
    int64_t movable = std::min<int64_t>(num_empty, x.size(0));
    auto far = std::get<1>(own_distance.topk(movable));
    for (int64_t i = 0; i < movable; ++i) {
      int64_t point = far[i].item<int64_t>();
      int64_t source = labels[point].item<int64_t>();
      int64_t target = empty[i].item<int64_t>();
      if (counts[source].item<double>() <= 1.0) continue;  // never empty another cluster
      sums[source] -= x[point];
      counts[source] -= 1.0;
      sums[target] = x[point];
      counts[target] = 1.0;
    }
  }
  auto has_points = (counts > 0).unsqueeze(1);
  return torch::where(has_points, sums / counts.clamp_min(1.0).unsqueeze(1), old_centers);
}

LloydRun lloyd(const torch::Tensor& x, const torch::Tensor& norms, torch::Tensor centers,
               int max_iter, double tolerance) {
  LloydRun run;
  torch::Tensor labels;
  bool strict = false;
  for (int iteration = 0; iteration < max_iter; ++iteration) {
    auto distances = squared_distances(x, norms, centers);
    auto new_labels = distances.argmin(1);
    auto new_centers = update_centers(x, new_labels, centers, distances);
    run.iterations = iteration + 1;
    bool same_labels = labels.defined() && torch::equal(labels, new_labels);
    double shift = (new_centers - centers).square().sum().item<double>();
    labels = new_labels;
    centers = new_centers;
    // sklearn: stop when the assignment no longer changes, or the centres barely move.
    if (same_labels) {
      strict = true;
      break;
    }
    if (shift <= tolerance) break;
  }
  auto distances = squared_distances(x, norms, centers);
  if (!strict || !labels.defined()) labels = distances.argmin(1);
  run.inertia = distances.gather(1, labels.unsqueeze(1)).sum().item<double>();
  run.centers = centers;
  run.labels = labels;
  return run;
}

}  // namespace

torch::Tensor kmeans_plusplus(const torch::Tensor& points, int64_t num_clusters, uint64_t seed) {
  auto x = as_double_matrix(points, "k-means++");
  if (x.size(0) < 1) throw Error("k-means++: no points to choose centres from");
  if (num_clusters < 1) throw Error("k-means++: the number of clusters must be at least 1");
  std::mt19937_64 rng(seed);
  return plusplus(x, x.square().sum(1), num_clusters, rng);
}

KMeansResult kmeans_fit(const torch::Tensor& points, const KMeansOptions& options) {
  auto x = as_double_matrix(points, "k-means");
  if (x.size(0) < 1) throw Error("k-means: no points to cluster");
  if (options.num_clusters < 1) throw Error("k-means: the number of clusters must be at least 1");
  if (options.n_init < 1 || options.max_iter < 1)
    throw Error("k-means: n_init and max_iter must be at least 1");
  auto norms = x.square().sum(1);
  // sklearn scales the tolerance by the data's mean per-dimension (population) variance.
  double tolerance = x.var(0, /*unbiased=*/false).mean().item<double>() * options.tol;

  std::mt19937_64 rng(options.seed);
  KMeansResult best;
  best.inertia = std::numeric_limits<double>::infinity();
  for (int run_index = 0; run_index < options.n_init; ++run_index) {
    auto initial = plusplus(x, norms, options.num_clusters, rng);
    auto run = lloyd(x, norms, initial, options.max_iter, tolerance);
    if (!best.centers.defined() || run.inertia < best.inertia) {
      best.centers = run.centers;
      best.labels = run.labels;
      best.inertia = run.inertia;
      best.iterations = run.iterations;
    }
  }
  return best;
}

torch::Tensor kmeans_predict(const torch::Tensor& points, const torch::Tensor& centers) {
  auto x = as_double_matrix(points, "k-means predict");
  auto c = as_double_matrix(centers, "k-means predict (centres)");
  if (x.size(1) != c.size(1))
    throw Error("k-means predict: points have " + std::to_string(x.size(1)) +
                " dimensions, centres " + std::to_string(c.size(1)));
  if (x.size(0) == 0) return torch::empty({0}, torch::kLong);
  return squared_distances(x, x.square().sum(1), c).argmin(1);
}

}  // namespace nabu
