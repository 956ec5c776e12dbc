// Mask-based reconstruction losses: permutation invariant training (pit) and the deep attractor
// network (deepattractornet). Both compare masked mixtures with the source spectra and normalise
// by Σ_b seq_len_b · S · F (docs/losses.md).
#include <torch/torch.h>

#include <algorithm>

#include "nabu/core/error.h"
#include "nabu/neuralnetworks/loss_computers/loss_computer.h"
#include "nabu/neuralnetworks/loss_computers/loss_ops.h"

namespace nabu {

namespace {

using namespace losses;

// sqrt with a zero (not NaN) gradient at 0, for the frame energies of silent frames.
torch::Tensor safe_sqrt(const torch::Tensor& x) {
  auto positive = x > 0;
  return torch::where(positive, torch::sqrt(torch::where(positive, x, torch::ones_like(x))),
                      torch::zeros_like(x));
}

torch::Tensor mask_norm(const torch::Tensor& seq_lengths, int64_t speakers, int64_t features,
                        const torch::Tensor& like) {
  auto frames = seq_lengths.to(torch::kLong).sum().to(like.scalar_type());
  return (frames * static_cast<double>(speakers * features)).to(like.device()).detach();
}

// ---- pit ---------------------------------------------------------------------------------------

struct PitOptions {
  bool rescale_recs = false;
  bool overspeakerized = false;
  bool no_perm = false;
  std::vector<int> transpose_order;
  std::string logits_name = "bin_est";
  MaskActivation mask_activation = MaskActivation::kSoftmax;

  void declare(OptionsReader& r) {
    declare_mask_activation(r, "activation", mask_activation, "mask activation over the speakers");
    r("rescale_recs", rescale_recs,
      "rescale each reconstruction so that its max |.| equals its target's");
    r("overspeakerized", overspeakerized,
      "the output has more speakers than the targets; the extra ones are pushed to silence");
    r("no_perm", no_perm, "compare outputs and targets in their given order only");
    r("transpose_order", transpose_order,
      "permute the axes of the output before use (space separated axis order)");
    r("logits_name", logits_name, "name of the model output holding the mask logits");
  }
};

class PitLoss : public LossComputer {
 public:
  explicit PitLoss(const PitOptions& options) : options_(options) {}

  LossResult operator()(const TensorMap& targets, const TensorMap& outputs,
                        const torch::Tensor& seq_lengths) override {
    const std::string what = "loss pit";
    const auto& sources = get_tensor(targets, "multi_targets", what);
    const auto& mixture = get_tensor(targets, "mix_to_mask", what);
    auto logits = get_tensor(outputs, options_.logits_name, what);
    if (!options_.transpose_order.empty()) logits = transposed(logits, what);
    expect_rank(sources, 4, "multi_targets", what, "[B, T, F, S]");
    expect_rank(mixture, 3, "mix_to_mask", what, "[B, T, F]");
    const int64_t batch = sources.size(0), frames = sources.size(1);
    const int64_t features = sources.size(2), speakers = sources.size(3);
    if (mixture.size(2) != features)
      throw Error(what + ": mix_to_mask has " + std::to_string(mixture.size(2)) +
                  " bins but multi_targets has " + std::to_string(features));
    check_frames({{"multi_targets", sources}, {"mix_to_mask", mixture}, {options_.logits_name, logits}},
                 seq_lengths, what);

    int64_t estimates = 0;
    if (logits.dim() == 3) {
      // Speaker-major columns s*F+f (docs/losses.md).
      estimates = divide_exactly(logits.size(2), features, options_.logits_name + "'s last dim",
                                 "F of multi_targets", what);
      logits = logits.reshape({batch, frames, estimates, features}).transpose(2, 3);
    } else if (logits.dim() == 4 && logits.size(2) == features) {
      estimates = logits.size(3);
    } else {
      throw Error(what + ": " + options_.logits_name + " must be [B, T, F*S] or [B, T, F, S]");
    }
    if (estimates < speakers || (estimates != speakers && !options_.overspeakerized))
      throw Error(what + ": " + options_.logits_name + " has " + std::to_string(estimates) +
                  " speakers but multi_targets has " + std::to_string(speakers) +
                  (estimates > speakers ? " (set overspeakerized = True to allow more)" : ""));

    auto real = real_frames(seq_lengths, frames, logits).view({batch, frames, 1, 1});
    auto masks = apply_activation(logits, options_.mask_activation, 3);
    // The original relies on zero-padded mixtures; masking makes padding irrelevant.
    auto reconstructions = masks * as_dtype_of(mixture, logits).unsqueeze(-1) * real;
    auto clean = as_dtype_of(sources, logits) * real;
    if (options_.rescale_recs) {
      if (estimates != speakers)
        throw Error(what + ": rescale_recs needs as many outputs as targets");
      auto peak = reconstructions.abs().amax({1, 2}, /*keepdim=*/true).clamp_min(1e-12);
      reconstructions = reconstructions / peak * clean.abs().amax({1, 2}, /*keepdim=*/true);
    }
    auto matched = reconstructions.narrow(3, 0, speakers);
    // pairwise[b, i, j] = Σ_{t,f} (R_i − X_j)²; a permutation's cost is a sum of these.
    auto pairwise = (matched.unsqueeze(4) - clean.unsqueeze(3)).pow(2).sum({1, 2});
    LossResult result;
    result.loss = min_over_permutations(pairwise, !options_.no_perm).sum();
    if (estimates > speakers)
      result.loss = result.loss + reconstructions.narrow(3, speakers, estimates - speakers)
                                      .pow(2)
                                      .sum();
    result.norm = mask_norm(seq_lengths, speakers, features, logits);
    return result;
  }

  std::vector<std::string> target_names() const override {
    return {"multi_targets", "mix_to_mask"};
  }
  std::vector<std::string> output_names() const override { return {options_.logits_name}; }

 private:
  torch::Tensor transposed(const torch::Tensor& logits, const std::string& what) const {
    std::vector<int64_t> order(options_.transpose_order.begin(), options_.transpose_order.end());
    std::vector<int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    bool valid = static_cast<int64_t>(order.size()) == logits.dim();
    for (std::size_t i = 0; valid && i < sorted.size(); ++i)
      valid = sorted[i] == static_cast<int64_t>(i);
    if (!valid)
      throw Error(what + ": transpose_order must be a permutation of the " +
                  std::to_string(logits.dim()) + " axes of " + options_.logits_name);
    return logits.permute(order);
  }

  PitOptions options_;
};

// ---- deepattractornet --------------------------------------------------------------------------

struct DeepAttractorOptions {
  bool frame_based = false;
  MaskActivation mask_activation = MaskActivation::kSoftmax;

  void declare(OptionsReader& r) {
    declare_mask_activation(r, "activation", mask_activation,
                            "mask activation of attractor·embedding over the speakers (required "
                            "by the original; softmax here when absent)");
    r("frame_based", frame_based,
      "compare per-frame L2 norms over frequency instead of single bins");
  }
};

// DANet (Chen et al.): oracle attractors are the mean embedding of the used bins each speaker
// dominates; masks come from their similarity to every embedding (docs/losses.md).
class DeepAttractorLoss : public LossComputer {
 public:
  explicit DeepAttractorLoss(const DeepAttractorOptions& options) : options_(options) {}

  LossResult operator()(const TensorMap& targets, const TensorMap& outputs,
                        const torch::Tensor& seq_lengths) override {
    const std::string what = "loss deepattractornet";
    const auto& binary = get_tensor(targets, "binary_targets", what);
    const auto& sources = get_tensor(targets, "multi_targets", what);
    const auto& mixture = get_tensor(targets, "mix_to_mask", what);
    const auto& usedbins = get_tensor(targets, "usedbins", what);
    const auto& embeddings = get_tensor(outputs, "bin_emb", what);
    expect_rank(binary, 3, "binary_targets", what, "[B, T, F*S]");
    expect_rank(sources, 4, "multi_targets", what, "[B, T, F, S]");
    expect_rank(mixture, 3, "mix_to_mask", what, "[B, T, F]");
    expect_rank(usedbins, 3, "usedbins", what, "[B, T, F]");
    expect_rank(embeddings, 3, "bin_emb", what, "[B, T, F*D]");
    check_frames({{"binary_targets", binary},
                  {"multi_targets", sources},
                  {"mix_to_mask", mixture},
                  {"usedbins", usedbins},
                  {"bin_emb", embeddings}},
                 seq_lengths, what);
    const int64_t batch = usedbins.size(0), frames = usedbins.size(1);
    const int64_t features = usedbins.size(2), speakers = sources.size(3);
    const int64_t bins = frames * features;
    expect_same_shape(mixture, "mix_to_mask", usedbins, "usedbins", what);
    if (sources.size(2) != features || binary.size(2) != features * speakers)
      throw Error(what + ": multi_targets [B,T,F,S] and binary_targets [B,T,F*S] disagree with "
                         "F = " + std::to_string(features) + " of usedbins");
    const int64_t dims =
        divide_exactly(embeddings.size(2), features, "bin_emb's last dim", "F of usedbins", what);

    auto real = real_frames(seq_lengths, frames, embeddings);  // [B, T]
    auto weights = (as_dtype_of(usedbins, embeddings) * real.unsqueeze(2)).reshape({batch, bins, 1});
    auto vectors = embeddings.reshape({batch, bins, dims}) * weights;  // no L2 normalisation
    auto labels = as_dtype_of(binary, embeddings).reshape({batch, bins, speakers}) * weights;
    auto attractors = mean_vector_per_speaker(vectors, labels);        // [B, S, D]
    auto similarity = torch::bmm(attractors, vectors.transpose(1, 2));      // [B, S, N]
    auto masks = apply_activation(similarity, options_.mask_activation, 1);
    auto reconstructions = masks * as_dtype_of(mixture, embeddings).reshape({batch, 1, bins});
    auto clean = as_dtype_of(sources, embeddings).reshape({batch, bins, speakers}).transpose(1, 2);
    auto real_bins = real.unsqueeze(2).expand({batch, frames, features}).reshape({batch, 1, bins});
    reconstructions = reconstructions * real_bins;
    clean = clean * real_bins;

    LossResult result;
    if (options_.frame_based) {
      // Per-frame L2 norm over frequency (the original's docstring intent; docs/losses.md).
      auto energy = [&](const torch::Tensor& x) {
        return safe_sqrt(x.reshape({batch, speakers, frames, features}).pow(2).sum(-1));
      };
      result.loss = (energy(clean) - energy(reconstructions)).pow(2).sum();
    } else {
      result.loss = (clean - reconstructions).pow(2).sum();
    }
    result.norm = mask_norm(seq_lengths, speakers, features, embeddings);
    return result;
  }

  std::vector<std::string> target_names() const override {
    return {"binary_targets", "multi_targets", "mix_to_mask", "usedbins"};
  }
  std::vector<std::string> output_names() const override { return {"bin_emb"}; }

 private:
  DeepAttractorOptions options_;
};

LossPtr make_pit(const ConfigSection& section) {
  return make_configured_loss<PitLoss, PitOptions>(section, "pit");
}
// The name one original recipe uses (its factory had no such entry): pit whose masks default
// to sigmoids, so several sources may claim the same bin.
struct PitSigmoidOptions : PitOptions {
  PitSigmoidOptions() { mask_activation = MaskActivation::kSigmoid; }
};
LossPtr make_pit_sigmoid(const ConfigSection& section) {
  return make_configured_loss<PitLoss, PitSigmoidOptions>(section, "pit_sigmoid");
}
LossPtr make_deepattractornet(const ConfigSection& section) {
  return make_configured_loss<DeepAttractorLoss, DeepAttractorOptions>(section,
                                                                       "deepattractornet");
}

}  // namespace

NABU_REGISTER_WITH_OPTIONS(loss_registry, "pit", make_pit, PitOptions,
                           "permutation invariant training: masked mixture vs multi_targets, "
                           "minimum over speaker permutations; norm = sum seq_len*S*F")
NABU_REGISTER_WITH_OPTIONS(loss_registry, "pit_sigmoid", make_pit_sigmoid, PitSigmoidOptions,
                           "pit with sigmoid masks by default (activation = sigmoid)")
NABU_REGISTER_WITH_OPTIONS(loss_registry, "deepattractornet", make_deepattractornet,
                           DeepAttractorOptions,
                           "deep attractor network: masks from oracle attractors of bin_emb; "
                           "norm = sum seq_len*S*F")

}  // namespace nabu
