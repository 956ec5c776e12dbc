// Speaker classification losses (crossentropy, crossentropy_multi), masked regression losses
// (mse, l1, new here) and the dummy loss of evaluation-only tasks (docs/losses.md).
#include <torch/torch.h>

#include "nabu/core/error.h"
#include "nabu/core/strings.h"
#include "nabu/neuralnetworks/loss_computers/loss_computer.h"
#include "nabu/neuralnetworks/loss_computers/loss_ops.h"

namespace nabu {

namespace {

using namespace losses;

// Mean over the time axis (1) of x [B, T, ...] using only real frames. Lengths are clipped to the
// tensor's own T, since a speaker-estimate output may have its own time resolution.
torch::Tensor mean_over_real_frames(const torch::Tensor& x, const torch::Tensor& seq_lengths,
                                    const std::string& what) {
  if (x.dim() < 3 || seq_lengths.dim() != 1 || seq_lengths.size(0) != x.size(0))
    throw Error(what + ": averaging over time needs spkest [B, T, ...] with one sequence length "
                       "per utterance");
  const int64_t frames = x.size(1);
  auto lengths = seq_lengths.to(torch::kLong).clamp_max(frames);
  auto real = real_frames(lengths, frames, x);  // [B, T]
  auto weights = real / real.sum(1, /*keepdim=*/true).clamp_min(1.0);
  std::vector<int64_t> shape = {x.size(0), frames};
  for (int64_t d = 2; d < x.dim(); ++d) shape.push_back(1);
  return (x * weights.view(shape)).sum(1);
}

// Class indices from a label tensor stored as any numeric type; they must be whole numbers in
// [0, classes).
torch::Tensor class_indices(const torch::Tensor& labels, int64_t classes, const std::string& what) {
  auto as_double = labels.to(torch::kDouble);
  if (labels.numel() > 0) {
    bool whole = (as_double - as_double.round()).abs().max().item<double>() == 0.0;
    double low = as_double.min().item<double>(), high = as_double.max().item<double>();
    if (!whole || low < 0 || high >= static_cast<double>(classes))
      throw Error(what + ": spkids must be class indices in [0, " + std::to_string(classes) +
                  "), got values in [" + std::to_string(low) + ", " + std::to_string(high) + "]");
  }
  return as_double.to(torch::kLong);
}

// ---- crossentropy ------------------------------------------------------------------------------

struct CrossEntropyOptions {
  bool av_anchors_time_flag = false;
  void declare(OptionsReader& r) {
    r("av_anchors_time_flag", av_anchors_time_flag,
      "average the spkest logits over the (real) frames first");
  }
};

// Softmax cross-entropy of spkest [B, C] (or [B, T, C] averaged over time) against spkids
// [B, 1]; norm = batch size.
class CrossEntropyLoss : public LossComputer {
 public:
  explicit CrossEntropyLoss(const CrossEntropyOptions& options) : options_(options) {}

  LossResult operator()(const TensorMap& targets, const TensorMap& outputs,
                        const torch::Tensor& seq_lengths) override {
    const std::string what = "loss crossentropy";
    auto labels = get_tensor(targets, "spkids", what);
    auto logits = get_tensor(outputs, "spkest", what);
    if (labels.dim() == 2 && labels.size(1) == 1) labels = labels.squeeze(1);
    expect_rank(labels, 1, "spkids", what, "[B, 1] or [B]");
    if (options_.av_anchors_time_flag) {
      expect_rank(logits, 3, "spkest", what, "[B, T, C] (av_anchors_time_flag)");
      logits = mean_over_real_frames(logits, seq_lengths, what);
    }
    expect_rank(logits, 2, "spkest", what, "[B, C]");
    if (logits.size(0) != labels.size(0))
      throw Error(what + ": spkest and spkids disagree on the batch size");
    auto indices = class_indices(labels, logits.size(1), what).to(logits.device());
    auto picked = logits.gather(1, indices.unsqueeze(1)).squeeze(1);
    LossResult result;
    result.loss = (torch::logsumexp(logits, 1) - picked).sum();
    result.norm = torch::full({}, static_cast<double>(logits.size(0)), logits.options()).detach();
    return result;
  }

  std::vector<std::string> target_names() const override { return {"spkids"}; }
  std::vector<std::string> output_names() const override { return {"spkest"}; }

 private:
  CrossEntropyOptions options_;
};

// ---- crossentropy_multi ------------------------------------------------------------------------

struct CrossEntropyMultiOptions {
  bool av_anchors_time_flag = false;
  bool resh_logits = false;
  bool allow_permutation = true;
  void declare(OptionsReader& r) {
    r("av_anchors_time_flag", av_anchors_time_flag,
      "average the spkest logits over the (real) frames first");
    r("resh_logits", resh_logits, "reshape spkest to [B, S, C] (S from spkids)");
    r("allow_permutation", allow_permutation,
      "take the best assignment of estimates to speakers (False: given order only)");
  }
};

// One cross-entropy per speaker slot: spkest [B, S, C] or [B, T, S, C] vs spkids [B, S]; per
// utterance the mean over slots (and real frames), minimised over slot permutations.
class CrossEntropyMultiLoss : public LossComputer {
 public:
  explicit CrossEntropyMultiLoss(const CrossEntropyMultiOptions& options) : options_(options) {}

  LossResult operator()(const TensorMap& targets, const TensorMap& outputs,
                        const torch::Tensor& seq_lengths) override {
    const std::string what = "loss crossentropy_multi";
    const auto& labels = get_tensor(targets, "spkids", what);
    auto logits = get_tensor(outputs, "spkest", what);
    expect_rank(labels, 2, "spkids", what, "[B, S]");
    const int64_t batch = labels.size(0), speakers = labels.size(1);
    if (logits.dim() < 2 || logits.size(0) != batch)
      throw Error(what + ": spkest must have the batch size of spkids (" + std::to_string(batch) +
                  ")");
    if (options_.av_anchors_time_flag) logits = mean_over_real_frames(logits, seq_lengths, what);
    if (options_.resh_logits) logits = logits.reshape({batch, speakers, -1});

    // Frame weights: 1 for [B, S, C]; 1/(real frames) on real frames for [B, T, S, C].
    torch::Tensor weights;
    if (logits.dim() == 3) {
      logits = logits.unsqueeze(1);
      weights = torch::ones({batch, 1}, logits.options());
    } else if (logits.dim() == 4) {
      if (seq_lengths.dim() != 1 || seq_lengths.size(0) != batch)
        throw Error(what + ": needs one sequence length per utterance for [B, T, S, C] spkest");
      auto lengths = seq_lengths.to(torch::kLong).clamp_max(logits.size(1));
      auto real = real_frames(lengths, logits.size(1), logits);
      weights = real / real.sum(1, /*keepdim=*/true).clamp_min(1.0);
    } else {
      throw Error(what + ": spkest must be [B, S, C] or [B, T, S, C]");
    }
    if (logits.size(2) != speakers)
      throw Error(what + ": spkest has " + std::to_string(logits.size(2)) +
                  " speaker slots but spkids has " + std::to_string(speakers));
    const int64_t frames = logits.size(1);
    auto indices = class_indices(labels, logits.size(3), what).to(logits.device());
    // picked[b, t, i, j] = logits[b, t, i, label of speaker j].
    auto picked =
        logits.gather(3, indices.view({batch, 1, 1, speakers}).expand({batch, frames, speakers,
                                                                       speakers}));
    auto cross_entropy = torch::logsumexp(logits, 3).unsqueeze(3) - picked;
    auto pairwise = (cross_entropy * weights.view({batch, frames, 1, 1})).sum(1);  // [B, S, S]
    LossResult result;
    result.loss = min_over_permutations(pairwise, options_.allow_permutation).sum() /
                  static_cast<double>(speakers);
    result.norm = torch::full({}, static_cast<double>(batch), logits.options()).detach();
    return result;
  }

  std::vector<std::string> target_names() const override { return {"spkids"}; }
  std::vector<std::string> output_names() const override { return {"spkest"}; }

 private:
  CrossEntropyMultiOptions options_;
};

// ---- mse, l1 -----------------------------------------------------------------------------------

struct RegressionOptions {
  std::string target;
  std::string output;
  void declare(OptionsReader& r) {
    r("target", target, "name of the target to regress to (default: the task's only target)");
    r("output", output, "name of the model output (default: the task's only output)");
  }
};

// Masked regression between one output and one target of the same shape [B, T, ...]:
// loss = Σ over real frames of (o − t)² (mse) or |o − t| (l1); norm = number of real elements.
class RegressionLoss : public NamedTargetLoss<RegressionOptions> {
 public:
  RegressionLoss(const RegressionOptions& options, bool absolute)
      : NamedTargetLoss(options), absolute_(absolute) {}

  LossResult operator()(const TensorMap& targets, const TensorMap& outputs,
                        const torch::Tensor& seq_lengths) override {
    const std::string what = absolute_ ? "loss l1" : "loss mse";
    auto [target_name, target] = pick_tensor(targets, options_.target, "target", what);
    auto [output_name, output] = pick_tensor(outputs, options_.output, "output", what);
    expect_same_shape(output, output_name, target, target_name, what);
    check_frames({{output_name, output}, {target_name, target}}, seq_lengths, what);
    const int64_t batch = output.size(0), frames = output.size(1);
    std::vector<int64_t> shape = {batch, frames};
    int64_t per_frame = 1;
    for (int64_t d = 2; d < output.dim(); ++d) {
      shape.push_back(1);
      per_frame *= output.size(d);
    }
    auto real = real_frames(seq_lengths, frames, output).view(shape);
    auto difference = output - as_dtype_of(target, output);
    auto per_element = absolute_ ? difference.abs() : difference.pow(2);
    LossResult result;
    result.loss = (per_element * real).sum();
    auto real_frames_total = seq_lengths.to(torch::kLong).sum().item<int64_t>();
    result.norm = torch::full({}, static_cast<double>(real_frames_total * per_frame),
                              output.options())
                      .detach();
    return result;
  }

 private:
  bool absolute_;
};

// ---- dummy -------------------------------------------------------------------------------------

// (0, 1) for tasks that are only evaluated (speaker verification tests). The loss carries no
// gradient, so a trainer must not call backward on it.
class DummyLoss : public LossComputer {
 public:
  explicit DummyLoss(const NoLossOptions&) {}
  LossResult operator()(const TensorMap&, const TensorMap&, const torch::Tensor&) override {
    return {torch::zeros({}), torch::ones({})};
  }
  std::vector<std::string> target_names() const override { return {}; }
  std::vector<std::string> output_names() const override { return {}; }
};

LossPtr make_crossentropy(const ConfigSection& section) {
  return make_configured_loss<CrossEntropyLoss, CrossEntropyOptions>(section, "crossentropy");
}
LossPtr make_crossentropy_multi(const ConfigSection& section) {
  return make_configured_loss<CrossEntropyMultiLoss, CrossEntropyMultiOptions>(
      section, "crossentropy_multi");
}
LossPtr make_mse(const ConfigSection& section) {
  return std::make_shared<RegressionLoss>(read_options<RegressionOptions>(section, "loss_type mse"),
                                          false);
}
LossPtr make_l1(const ConfigSection& section) {
  return std::make_shared<RegressionLoss>(read_options<RegressionOptions>(section, "loss_type l1"),
                                          true);
}
LossPtr make_dummy(const ConfigSection& section) {
  return make_configured_loss<DummyLoss, NoLossOptions>(section, "dummy");
}

}  // namespace

NABU_REGISTER_WITH_OPTIONS(loss_registry, "crossentropy", make_crossentropy, CrossEntropyOptions,
                           "softmax cross-entropy of spkest vs spkids; norm = batch size")
NABU_REGISTER_WITH_OPTIONS(loss_registry, "crossentropy_multi", make_crossentropy_multi,
                           CrossEntropyMultiOptions,
                           "per-speaker cross-entropy of spkest [B,(T,)S,C] vs spkids [B,S], "
                           "best slot permutation; norm = batch size")
NABU_REGISTER_WITH_OPTIONS(loss_registry, "mse", make_mse, RegressionOptions,
                           "squared error of one output vs one target on real frames; "
                           "norm = number of real elements")
NABU_REGISTER_WITH_OPTIONS(loss_registry, "l1", make_l1, RegressionOptions,
                           "absolute error of one output vs one target on real frames; "
                           "norm = number of real elements")
NABU_REGISTER_WITH_OPTIONS(loss_registry, "dummy", make_dummy, NoLossOptions,
                           "zero loss, norm 1 (evaluation-only tasks)")
NABU_REGISTER_WITH_OPTIONS(loss_registry, "dummy_loss", make_dummy, NoLossOptions,
                           "same as dummy")

}  // namespace nabu
