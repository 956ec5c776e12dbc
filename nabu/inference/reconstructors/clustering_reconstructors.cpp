// The reconstructors that cluster time-frequency embeddings with k-means (docs/postprocessing.md):
// deepclustering (and deepclustering_flat), deepattractornet and deepclusteringnoise.
#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include <cmath>

#include "nabu/core/error.h"
#include "nabu/inference/reconstructors/kmeans.h"
#include "nabu/inference/reconstructors/reconstructor.h"

namespace nabu {

namespace {

// Reconstructors that cluster embeddings with k-means on the used bins.
struct ClusteringReconstructorOptions : ReconstructorOptions {
  std::string usedbins;  // database section of the used-bins mask (required)
  long long seed = 0;
  int n_init = 10;
  int max_iter = 100;
  double tol = 1e-4;
  void declare(OptionsReader& r);
};

struct DeepattractorReconstructorOptions : ClusteringReconstructorOptions {
  std::string activation = "softmax";
  void declare(OptionsReader& r);
};

struct DeepclusteringNoiseReconstructorOptions : ClusteringReconstructorOptions {
  double noise_threshold_for_kmeans = 0.75;
  double min_kmeans_perc = 0.05;
  void declare(OptionsReader& r);
};

void ClusteringReconstructorOptions::declare(OptionsReader& r) {
  ReconstructorOptions::declare(r);
  r("usedbins", usedbins, "database section(s) of the used-bins mask; k-means uses only these bins");
  r("seed", seed, "seed of k-means (the original used no fixed seed)");
  r("n_init", n_init, "k-means restarts; the lowest inertia wins (sklearn n_init)");
  r("max_iter", max_iter, "maximum Lloyd iterations per restart (sklearn max_iter)");
  r("tol", tol, "k-means tolerance, relative to the data variance (sklearn tol)");
  r.require(!usedbins.empty(), "usedbins", "the used-bins section is required");
  r.require(n_init >= 1, "n_init", "must be at least 1");
  r.require(max_iter >= 1, "max_iter", "must be at least 1");
  r.require(tol >= 0, "tol", "must not be negative");
}

void DeepattractorReconstructorOptions::declare(OptionsReader& r) {
  ClusteringReconstructorOptions::declare(r);
  r.choice("activation", activation, {"softmax"},
           "mask activation over the speakers; only softmax (as the original)");
}

void DeepclusteringNoiseReconstructorOptions::declare(OptionsReader& r) {
  ClusteringReconstructorOptions::declare(r);
  r("noise_threshold_for_kmeans", noise_threshold_for_kmeans,
    "bins whose noise_filter output is above this value are clustered");
  r("min_kmeans_perc", min_kmeans_perc,
    "minimum fraction of used bins to cluster; the threshold is lowered to reach it");
}


// Shared by the k-means reconstructors: options checks, the embedding layout, k-means settings.
class ClusteringReconstructor : public Reconstructor {
 public:
  std::string why_not_scripted() const override {
    return "reconstruct_type " + type() +
           " finds each recording's speakers by k-means over its embeddings (restarts, "
           "iterations to convergence), which the export does not script; mask models "
           "(stackedmasks, PIT) and waveform models export";
  }

 protected:
  ClusteringReconstructor(const ConfigSection& section,
                          const ClusteringReconstructorOptions& options,
                          std::vector<std::string> output_names)
      : Reconstructor(section, options, std::move(output_names)) {
    usedbins_ = options.usedbins;
    kmeans_.num_clusters = options.nrs;
    kmeans_.n_init = options.n_init;
    kmeans_.max_iter = options.max_iter;
    kmeans_.tol = options.tol;
    kmeans_.seed = static_cast<uint64_t>(options.seed);
  }

  // Embeddings [T, F*D] (or [T, F, D] for the flat layout) as one row per bin [T*F, D] in
  // double, bin index t*F + f (the original's row-major reshape).
  torch::Tensor bin_embeddings(const torch::Tensor& embeddings, int64_t frames,
                               int64_t bins) const {
    int64_t dimension = 0;
    if (embeddings.dim() == 3 && embeddings.size(1) == bins) {
      dimension = embeddings.size(2);
    } else if (embeddings.dim() == 2 && bins > 0 && embeddings.size(1) % bins == 0) {
      dimension = embeddings.size(1) / bins;
    }
    if (dimension == 0)
      throw Error(where_ + ": embeddings of shape " + shape_text(embeddings) +
                  " do not hold a whole number of dimensions for each of the " +
                  std::to_string(bins) + " frequency bins");
    return embeddings.to(torch::kFloat64).reshape({frames * bins, dimension});
  }

  static std::string shape_text(const torch::Tensor& tensor) {
    std::string text = "[";
    for (int64_t d = 0; d < tensor.dim(); ++d)
      text += (d ? ", " : "") + std::to_string(tensor.size(d));
    return text + "]";
  }

  static torch::Tensor l2_normalised(const torch::Tensor& rows) {
    // A zero embedding stays zero instead of becoming NaN (the original would fail in k-means).
    return rows / rows.norm(2, 1, /*keepdim=*/true).clamp_min(1e-12);
  }

  // Points to cluster: the used bins; all bins when none is used (the original would crash).
  torch::Tensor used_points(const torch::Tensor& points, const torch::Tensor& used) const {
    auto selected = points.index({used.reshape({-1})});
    if (selected.size(0) > 0) return selected;
    logger().warn("{}: no used bin in this utterance; clustering all bins", where_);
    return points;
  }

  torch::Tensor binary_masks(const torch::Tensor& labels, int64_t frames, int64_t bins) const {
    return torch::one_hot(labels, num_speakers_)
        .t()
        .reshape({num_speakers_, frames, bins})
        .to(torch::kFloat32);
  }

  KMeansOptions kmeans_;
};

class DeepclusteringReconstructor : public ClusteringReconstructor {
 public:
  explicit DeepclusteringReconstructor(const ConfigSection& section)
      : DeepclusteringReconstructor(
            section, read_options<ClusteringReconstructorOptions>(
                         section, "reconstruct_type " +
                                  section.get_string("reconstruct_type", "deepclustering"))) {}

  torch::Tensor masks(const TensorMap& outputs, const torch::Tensor& usedbins) override {
    const auto& embeddings = output(outputs, "bin_emb");
    int64_t frames = embeddings.size(0);
    auto used = checked_usedbins(usedbins, frames);
    int64_t bins = used.size(1);
    auto points = l2_normalised(bin_embeddings(embeddings, frames, bins));
    // Fit on the used bins only, then label every bin (docs/postprocessing.md).
    auto result = kmeans_fit(used_points(points, used), kmeans_);
    last_centers_ = result.centers;
    return binary_masks(kmeans_predict(points, result.centers), frames, bins);
  }

 private:
  DeepclusteringReconstructor(const ConfigSection& section,
                              const ClusteringReconstructorOptions& options)
      : ClusteringReconstructor(section, options, {"bin_emb"}) {}
};

class DeepattractorReconstructor : public ClusteringReconstructor {
 public:
  explicit DeepattractorReconstructor(const ConfigSection& section)
      : DeepattractorReconstructor(section, read_options<DeepattractorReconstructorOptions>(
                                                section, "reconstruct_type deepattractornet")) {}

  torch::Tensor masks(const TensorMap& outputs, const torch::Tensor& usedbins) override {
    const auto& embeddings = output(outputs, "bin_emb");
    int64_t frames = embeddings.size(0);
    auto used = checked_usedbins(usedbins, frames);
    int64_t bins = used.size(1);
    // Un-normalised embeddings: the k-means centres are the attractors (docs/postprocessing.md).
    auto points = bin_embeddings(embeddings, frames, bins);
    auto result = kmeans_fit(used_points(points, used), kmeans_);
    last_centers_ = result.centers;
    auto logits = result.centers.matmul(points.t());  // [S, T*F]
    return logits.softmax(0).reshape({num_speakers_, frames, bins}).to(torch::kFloat32);
  }

 private:
  DeepattractorReconstructor(const ConfigSection& section,
                             const DeepattractorReconstructorOptions& options)
      : ClusteringReconstructor(section, options, {"bin_emb"}) {}
};

class DeepclusteringNoiseReconstructor : public ClusteringReconstructor {
 public:
  explicit DeepclusteringNoiseReconstructor(const ConfigSection& section)
      : DeepclusteringNoiseReconstructor(
            section, read_options<DeepclusteringNoiseReconstructorOptions>(
                         section, "reconstruct_type deepclusteringnoise")) {}

  torch::Tensor masks(const TensorMap& outputs, const torch::Tensor& usedbins) override {
    const auto& embeddings = output(outputs, "bin_emb");
    auto found = outputs.find("noise_filter");
    if (found == outputs.end())
      throw Error(where_ + ": reconstruct_type deepclusteringnoise needs the model output "
                           "'noise_filter'");
    int64_t frames = embeddings.size(0);
    auto used = checked_usedbins(usedbins, frames).reshape({-1});
    int64_t bins = usedbins.size(1);
    auto noise_filter = found->second.to(torch::kFloat64);
    if (noise_filter.dim() != 2 || noise_filter.size(0) != frames || noise_filter.size(1) != bins)
      throw Error(where_ + ": noise_filter has shape " + shape_text(noise_filter) +
                  ", expected [" + std::to_string(frames) + ", " + std::to_string(bins) + "]");
    auto points = l2_normalised(bin_embeddings(embeddings, frames, bins));
    auto alpha = noise_filter.reshape({-1});

    // Cluster the used bins that are not too noisy; when too few remain, take the used bins
    // with the highest noise_filter output instead (the original's rule).
    auto selection = used.logical_and(alpha > noise_threshold_);
    double used_count = used.sum().item<double>();
    double fraction = selection.sum().item<double>() / used_count;  // NaN when nothing is used
    torch::Tensor selected;
    if (fraction < min_fraction_) {
      auto wanted = static_cast<int64_t>(std::ceil(used_count * min_fraction_));
      auto order = (alpha * used.to(torch::kFloat64)).argsort(0, /*descending=*/true);
      selected = points.index_select(0, order.slice(0, 0, wanted));
    } else {
      selected = points.index({selection});
    }
    if (selected.size(0) < 2) {
      last_centers_ = torch::Tensor();
      return torch::zeros({num_speakers_, frames, bins}, torch::kFloat32);
    }
    auto result = kmeans_fit(selected, kmeans_);
    last_centers_ = result.centers;
    auto labels = kmeans_predict(points, result.centers);
    return (binary_masks(labels, frames, bins) * noise_filter.unsqueeze(0)).to(torch::kFloat32);
  }

 private:
  DeepclusteringNoiseReconstructor(const ConfigSection& section,
                                   const DeepclusteringNoiseReconstructorOptions& options)
      : ClusteringReconstructor(section, options, {"bin_emb", "noise_filter"}),
        noise_threshold_(options.noise_threshold_for_kmeans),
        min_fraction_(options.min_kmeans_perc) {}

  double noise_threshold_, min_fraction_;
};

template <class T>
ReconstructorPtr make_reconstructor(const ConfigSection& section) {
  return std::make_shared<T>(section);
}

}  // namespace

NABU_REGISTER_WITH_OPTIONS(reconstructor_registry, "deepclustering",
                           make_reconstructor<DeepclusteringReconstructor>,
                           ClusteringReconstructorOptions,
                           "k-means on L2-normalised embeddings of the used bins; binary masks")
NABU_REGISTER_WITH_OPTIONS(reconstructor_registry, "deepclustering_flat",
                           make_reconstructor<DeepclusteringReconstructor>,
                           ClusteringReconstructorOptions,
                           "deepclustering for embeddings laid out [T, F, D]")
NABU_REGISTER_WITH_OPTIONS(reconstructor_registry, "deepattractornet",
                           make_reconstructor<DeepattractorReconstructor>,
                           DeepattractorReconstructorOptions,
                           "k-means centres of the used embeddings as attractors; softmax masks")
NABU_REGISTER_WITH_OPTIONS(reconstructor_registry, "deepclusteringnoise",
                           make_reconstructor<DeepclusteringNoiseReconstructor>,
                           DeepclusteringNoiseReconstructorOptions,
                           "deepclustering on the bins the noise filter keeps; masks scaled by it")

}  // namespace nabu
