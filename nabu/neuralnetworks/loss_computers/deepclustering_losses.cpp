// Embedding losses over time-frequency bins: deep clustering (and its flat and noise variants)
// and the Lab41 loss (docs/losses.md).
#include <torch/torch.h>

#include "nabu/core/error.h"
#include "nabu/neuralnetworks/loss_computers/loss_computer.h"
#include "nabu/neuralnetworks/loss_computers/loss_ops.h"

namespace nabu {

namespace {

using namespace losses;

// usedbins restricted to real frames, in the dtype of `like`: [B, T, F].
torch::Tensor used_real_bins(const torch::Tensor& usedbins, const torch::Tensor& seq_lengths,
                             const torch::Tensor& like) {
  auto frames = real_frames(seq_lengths, usedbins.size(1), like);
  return as_dtype_of(usedbins, like) * frames.unsqueeze(2);
}

// The tensors every deep clustering variant reads, checked and reshaped to per-bin rows.
struct BinRows {
  int64_t batch = 0, bins = 0, features = 0, speakers = 0, dims = 0;
  torch::Tensor embeddings;  // [B, T*F, D]
  torch::Tensor labels;      // [B, T*F, S] float
  torch::Tensor used;        // [B, T, F] float, 0 on padded frames
};

BinRows bin_rows(const TensorMap& targets, const TensorMap& outputs,
                 const torch::Tensor& seq_lengths, bool flat, const std::string& what,
                 std::vector<std::pair<std::string, torch::Tensor>> extra_frames = {}) {
  const auto& binary = get_tensor(targets, "binary_targets", what);
  const auto& usedbins = get_tensor(targets, "usedbins", what);
  const auto& embeddings = get_tensor(outputs, "bin_emb", what);
  expect_rank(usedbins, 3, "usedbins", what, "[B, T, F]");
  expect_rank(binary, 3, "binary_targets", what, "[B, T, F*S]");
  expect_rank(embeddings, flat ? 4 : 3, "bin_emb", what, flat ? "[B, T, F, D]" : "[B, T, F*D]");
  extra_frames.insert(extra_frames.begin(), {{"binary_targets", binary},
                                             {"usedbins", usedbins},
                                             {"bin_emb", embeddings}});
  check_frames(extra_frames, seq_lengths, what);

  BinRows rows;
  rows.batch = usedbins.size(0);
  rows.features = usedbins.size(2);  // F comes from usedbins (docs/losses.md)
  rows.bins = usedbins.size(1) * rows.features;
  rows.speakers = divide_exactly(binary.size(2), rows.features, "binary_targets' last dim",
                                 "F of usedbins", what);
  if (flat) {
    if (embeddings.size(2) != rows.features)
      throw Error(what + ": bin_emb has " + std::to_string(embeddings.size(2)) +
                  " frequency bins but usedbins has " + std::to_string(rows.features));
    rows.dims = embeddings.size(3);
  } else {
    rows.dims = divide_exactly(embeddings.size(2), rows.features, "bin_emb's last dim",
                               "F of usedbins", what);
  }
  // Layouts: bin_emb column f*D+d, binary_targets column f*S+s, so a plain reshape gives rows
  // per (t, f).
  rows.embeddings = embeddings.reshape({rows.batch, rows.bins, rows.dims});
  rows.labels = as_dtype_of(binary, embeddings).reshape({rows.batch, rows.bins, rows.speakers});
  rows.used = used_real_bins(usedbins, seq_lengths, embeddings);
  return rows;
}

// ---- deepclustering, deepclustering_flat -------------------------------------------------------

class DeepClusteringLoss : public LossComputer {
 public:
  DeepClusteringLoss(const NoLossOptions&, bool flat) : flat_(flat) {}

  LossResult operator()(const TensorMap& targets, const TensorMap& outputs,
                        const torch::Tensor& seq_lengths) override {
    const std::string what = flat_ ? "loss deepclustering_flat" : "loss deepclustering";
    BinRows rows = bin_rows(targets, outputs, seq_lengths, flat_, what);
    auto weights = rows.used.reshape({rows.batch, rows.bins, 1});
    LossResult result;
    result.loss = deep_clustering_loss(rows.embeddings, weights, rows.labels).sum();
    // Σ_b (used bins of b)²: the number of entries of each utterance's affinity matrix.
    result.norm = rows.used.sum({1, 2}).pow(2).sum().detach();
    return result;
  }

  std::vector<std::string> target_names() const override {
    return {"binary_targets", "usedbins"};
  }
  std::vector<std::string> output_names() const override { return {"bin_emb"}; }

 private:
  bool flat_;
};


// ---- deepclusteringnoise -----------------------------------------------------------------------

// Deep clustering on the speech-dominated used bins plus the noise-filter regression towards the
// ideal ratio mask. Both parts are normalised here, so norm = 1 (docs/losses.md).
class DeepClusteringNoiseLoss : public LossComputer {
 public:
  explicit DeepClusteringNoiseLoss(const NoLossOptions&) {}

  LossResult operator()(const TensorMap& targets, const TensorMap& outputs,
                        const torch::Tensor& seq_lengths) override {
    const std::string what = "loss deepclusteringnoise";
    const auto& noisybins = get_tensor(targets, "noisybins", what);
    const auto& ratio = get_tensor(targets, "rel_speech_targets", what);
    const auto& alpha = get_tensor(outputs, "noise_filter", what);
    BinRows rows = bin_rows(targets, outputs, seq_lengths, false, what,
                            {{"noisybins", noisybins},
                             {"rel_speech_targets", ratio},
                             {"noise_filter", alpha}});
    const auto& like = rows.embeddings;
    for (const auto& [name, tensor] :
         {std::pair<std::string, torch::Tensor>{"noisybins", noisybins},
          {"rel_speech_targets", ratio},
          {"noise_filter", alpha}})
      expect_same_shape(tensor, name, rows.used, "usedbins", what);

    auto speech = (1.0 - as_dtype_of(noisybins, like)) * rows.used;
    auto weights = speech.reshape({rows.batch, rows.bins, 1});
    auto separation = deep_clustering_loss(rows.embeddings, weights, rows.labels).sum();
    auto separation_norm = speech.sum({1, 2}).pow(2).sum().clamp_min(1.0).detach();

    auto error = (as_dtype_of(ratio, like) - alpha) * rows.used;
    // The original divides by Σ usedbins unguarded; max(., 1) keeps an empty batch finite.
    auto noise_norm = rows.used.sum().clamp_min(1.0).detach();
    LossResult result;
    result.loss = separation / separation_norm + error.pow(2).sum() / noise_norm;
    result.norm = torch::ones({}, like.options()).detach();
    return result;
  }

  std::vector<std::string> target_names() const override {
    return {"binary_targets", "usedbins", "noisybins", "rel_speech_targets"};
  }
  std::vector<std::string> output_names() const override { return {"bin_emb", "noise_filter"}; }
};

// ---- l41 ---------------------------------------------------------------------------------------

// Lab41 / source-contrastive loss: −log σ(y·⟨v̂_tf, ô_s⟩) with y = ±1 from binary_targets, on
// used bins of real frames; norm = Σ used · S (docs/losses.md).
class L41Loss : public LossComputer {
 public:
  explicit L41Loss(const NoLossOptions&) {}

  LossResult operator()(const TensorMap& targets, const TensorMap& outputs,
                        const torch::Tensor& seq_lengths) override {
    const std::string what = "loss l41";
    BinRows rows = bin_rows(targets, outputs, seq_lengths, false, what);
    auto speaker_embeddings = get_tensor(outputs, "spk_emb", what);
    if (speaker_embeddings.dim() == 3 && speaker_embeddings.size(1) == 1)
      speaker_embeddings = speaker_embeddings.squeeze(1);
    expect_rank(speaker_embeddings, 2, "spk_emb", what, "[B, 1, D*S] or [B, D*S]");
    if (speaker_embeddings.size(0) != rows.batch ||
        speaker_embeddings.size(1) != rows.dims * rows.speakers)
      throw Error(what + ": spk_emb must have D*S = " + std::to_string(rows.dims * rows.speakers) +
                  " values per utterance (layout s*D+d)");
    // [B, N, 1, D] against [B, 1, S, D].
    auto bins = l2_normalize_last(rows.embeddings).unsqueeze(2);
    auto speakers =
        l2_normalize_last(speaker_embeddings.reshape({rows.batch, 1, rows.speakers, rows.dims}));
    auto dot = (bins * speakers).sum(-1);  // [B, N, S]
    auto sign = rows.labels * 2.0 - 1.0;
    // softplus(−x) = −log σ(x), without the overflow of the literal form.
    auto per_bin = torch::softplus(-sign * dot);
    auto weights = rows.used.reshape({rows.batch, rows.bins, 1});
    LossResult result;
    result.loss = (per_bin * weights).sum();
    result.norm = (rows.used.sum() * static_cast<double>(rows.speakers)).detach();
    return result;
  }

  std::vector<std::string> target_names() const override {
    return {"binary_targets", "usedbins"};
  }
  std::vector<std::string> output_names() const override { return {"bin_emb", "spk_emb"}; }
};

LossPtr make_deepclustering(const ConfigSection& section) {
  return std::make_shared<DeepClusteringLoss>(
      read_options<NoLossOptions>(section, "loss_type deepclustering"), false);
}
LossPtr make_deepclustering_flat(const ConfigSection& section) {
  return std::make_shared<DeepClusteringLoss>(
      read_options<NoLossOptions>(section, "loss_type deepclustering_flat"), true);
}
LossPtr make_deepclusteringnoise(const ConfigSection& section) {
  return make_configured_loss<DeepClusteringNoiseLoss, NoLossOptions>(section,
                                                                      "deepclusteringnoise");
}
LossPtr make_l41(const ConfigSection& section) {
  return make_configured_loss<L41Loss, NoLossOptions>(section, "l41");
}

}  // namespace

NABU_REGISTER_WITH_OPTIONS(loss_registry, "deepclustering", make_deepclustering, NoLossOptions,
                           "deep clustering (Hershey 2016): bin_emb [B,T,F*D] vs binary_targets "
                           "on usedbins; norm = sum_b (used bins)^2")
NABU_REGISTER_WITH_OPTIONS(loss_registry, "deepclustering_flat", make_deepclustering_flat,
                           NoLossOptions,
                           "deep clustering with bin_emb [B,T,F,D] (CNN outputs keeping F)")
NABU_REGISTER_WITH_OPTIONS(loss_registry, "deepclusteringnoise", make_deepclusteringnoise,
                           NoLossOptions,
                           "deep clustering on speech-dominated bins plus noise_filter vs "
                           "rel_speech_targets; already normalised (norm = 1)")
NABU_REGISTER_WITH_OPTIONS(loss_registry, "l41", make_l41, NoLossOptions,
                           "Lab41 source-contrastive loss: bin_emb vs spk_emb [B,1,D*S]")

}  // namespace nabu
