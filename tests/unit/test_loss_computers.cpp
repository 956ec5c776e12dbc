// Loss computers against slow, obvious reference implementations (docs/losses.md): deep clustering
// through explicit TF×TF affinity matrices, PIT by looping over permutations, DANet attractors by
// explicit sums, Lab41 per bin. Padded frames hold random garbage that must not matter.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <vector>

#include "nabu/core/error.h"
#include "nabu/neuralnetworks/loss_computers/loss_computer.h"
#include "nabu/neuralnetworks/loss_computers/loss_ops.h"
#include "test_loss_helpers.h"

using namespace nabu;
using namespace nabu::testing;

namespace {

// ---- deep clustering -------------------------------------------------------------------------

struct DcBatch {
  int64_t batch, frames, features, speakers, dims;
  std::vector<int64_t> lengths;
  torch::Tensor binary, used, embeddings;  // embeddings double [B, T, F*D]
  TensorMap targets() const { return {{"binary_targets", binary}, {"usedbins", used}}; }
  TensorMap outputs() const { return {{"bin_emb", embeddings}}; }
};

DcBatch dc_batch(std::vector<int64_t> lengths, int64_t frames, int64_t features, int64_t speakers,
                 int64_t dims) {
  DcBatch d{static_cast<int64_t>(lengths.size()), frames, features, speakers, dims, lengths, {},
            {}, {}};
  d.binary = random_binary_targets(d.batch, frames, features, speakers);
  d.used = random_usedbins(d.batch, frames, features);
  d.embeddings = torch::randn({d.batch, frames, features * dims}, f64());
  return d;
}

// ‖A − B‖²_F with A_ij = v̂_i·v̂_j, B_ij = y_i·y_j over the used bins of real frames of one
// utterance; `norm` gets (number of those bins)². `weights` (optional, [T, F]) scales both sides.
double dc_reference(const torch::Tensor& binary, const torch::Tensor& used,
                    const torch::Tensor& embeddings, int64_t length, int64_t speakers,
                    double* norm, const torch::Tensor& weights = {}) {
  const int64_t features = used.size(1);
  const int64_t dims = embeddings.size(1) / features;
  auto binary_values = binary.to(torch::kDouble);
  auto used_values = used.to(torch::kDouble);
  auto embedding_values = embeddings.to(torch::kDouble);
  auto y = binary_values.accessor<double, 2>();
  auto u = used_values.accessor<double, 2>();
  auto v = embedding_values.accessor<double, 2>();
  std::vector<std::vector<double>> vectors, labels;
  double count = 0;
  for (int64_t t = 0; t < length; ++t)
    for (int64_t f = 0; f < features; ++f) {
      double w = u[t][f];
      if (weights.defined()) w *= weights[t][f].item<double>();
      if (w == 0) continue;
      count += w;
      double squared = 0;
      for (int64_t d = 0; d < dims; ++d) squared += v[t][f * dims + d] * v[t][f * dims + d];
      double scale = w / std::sqrt(std::max(squared, 1e-12));
      std::vector<double> vec(dims), lab(speakers);
      for (int64_t d = 0; d < dims; ++d) vec[d] = v[t][f * dims + d] * scale;
      for (int64_t s = 0; s < speakers; ++s) lab[s] = y[t][f * speakers + s] * w;
      vectors.push_back(vec);
      labels.push_back(lab);
    }
  double loss = 0;
  for (std::size_t i = 0; i < vectors.size(); ++i)
    for (std::size_t j = 0; j < vectors.size(); ++j) {
      double a = 0, b = 0;
      for (int64_t d = 0; d < dims; ++d) a += vectors[i][d] * vectors[j][d];
      for (int64_t s = 0; s < speakers; ++s) b += labels[i][s] * labels[j][s];
      loss += (a - b) * (a - b);
    }
  *norm += count * count;
  return loss;
}

TEST(LossDeepClustering, MatchesExplicitAffinitiesOnPaddedBatch) {
  torch::manual_seed(1);
  auto d = dc_batch({6, 3, 5}, 6, 4, 2, 3);
  auto result = (*make_test_loss("deepclustering"))(d.targets(), d.outputs(),
                                                    lengths_tensor(d.lengths));
  double loss = 0, norm = 0;
  for (int64_t b = 0; b < d.batch; ++b)
    loss += dc_reference(d.binary[b], d.used[b], d.embeddings[b], d.lengths[b], d.speakers, &norm);
  EXPECT_EQ(result.loss.dim(), 0);
  EXPECT_EQ(result.norm.dim(), 0);
  EXPECT_NEAR(result.loss.item<double>(), loss, 1e-9 * loss);
  EXPECT_DOUBLE_EQ(result.norm.item<double>(), norm);
}

TEST(LossDeepClustering, ThreeSpeakersFloatMatchesReference) {
  torch::manual_seed(2);
  auto d = dc_batch({5, 4}, 5, 3, 3, 4);
  auto outputs = TensorMap{{"bin_emb", d.embeddings.to(torch::kFloat)}};
  auto result =
      (*make_test_loss("deepclustering"))(d.targets(), outputs, lengths_tensor(d.lengths));
  double loss = 0, norm = 0;
  for (int64_t b = 0; b < d.batch; ++b)
    loss += dc_reference(d.binary[b], d.used[b], d.embeddings[b], d.lengths[b], d.speakers, &norm);
  EXPECT_EQ(result.loss.scalar_type(), torch::kFloat);
  EXPECT_NEAR(result.loss.item<double>(), loss, 1e-4 * loss);
  EXPECT_DOUBLE_EQ(result.norm.item<double>(), norm);
}

TEST(LossDeepClustering, BatchEqualsSumOfUnpaddedUtterances) {
  torch::manual_seed(3);
  auto d = dc_batch({7, 2, 4}, 7, 5, 2, 3);
  auto loss = make_test_loss("deepclustering");
  auto whole = (*loss)(d.targets(), d.outputs(), lengths_tensor(d.lengths));
  double sum_loss = 0, sum_norm = 0;
  for (int64_t b = 0; b < d.batch; ++b) {
    int64_t n = d.lengths[b];
    auto one = (*loss)({{"binary_targets", d.binary.narrow(0, b, 1).narrow(1, 0, n)},
                        {"usedbins", d.used.narrow(0, b, 1).narrow(1, 0, n)}},
                       {{"bin_emb", d.embeddings.narrow(0, b, 1).narrow(1, 0, n)}},
                       lengths_tensor({n}));
    sum_loss += one.loss.item<double>();
    sum_norm += one.norm.item<double>();
  }
  EXPECT_NEAR(whole.loss.item<double>(), sum_loss, 1e-9 * sum_loss);
  EXPECT_DOUBLE_EQ(whole.norm.item<double>(), sum_norm);
}

TEST(LossDeepClustering, FlatLayoutEqualsFlattenedLayout) {
  torch::manual_seed(4);
  auto d = dc_batch({4, 3}, 4, 5, 2, 3);
  auto flat = (*make_test_loss("deepclustering_flat"))(
      d.targets(), {{"bin_emb", d.embeddings.reshape({d.batch, d.frames, d.features, d.dims})}},
      lengths_tensor(d.lengths));
  auto plain =
      (*make_test_loss("deepclustering"))(d.targets(), d.outputs(), lengths_tensor(d.lengths));
  EXPECT_NEAR(flat.loss.item<double>(), plain.loss.item<double>(), 1e-9 * plain.loss.item<double>());
  EXPECT_EQ(flat.norm.item<double>(), plain.norm.item<double>());
}

TEST(LossDeepClustering, GradientMatchesFiniteDifferencesAndIgnoresPadding) {
  torch::manual_seed(5);
  auto d = dc_batch({4, 2}, 4, 3, 2, 3);
  auto loss = make_test_loss("deepclustering");
  auto gradient = expect_gradient_matches(
      [&](const torch::Tensor& x) {
        return (*loss)(d.targets(), {{"bin_emb", x}}, lengths_tensor(d.lengths)).loss;
      },
      d.embeddings);
  expect_zero_on_padding(gradient, d.lengths);
}

TEST(LossDeepClustering, RejectsInconsistentShapes) {
  torch::manual_seed(6);
  auto d = dc_batch({3}, 3, 4, 2, 3);
  auto loss = make_test_loss("deepclustering");
  auto bad = torch::randn({1, 3, 4 * 3 + 1}, f64());
  EXPECT_THROW((*loss)(d.targets(), {{"bin_emb", bad}}, lengths_tensor({3})), Error);
  EXPECT_THROW((*loss)(d.targets(), d.outputs(), lengths_tensor({4})), Error);  // > T
  EXPECT_THROW((*loss)(d.targets(), {{"emb", d.embeddings}}, lengths_tensor({3})), Error);
}

TEST(LossDeepClustering, NoiseVariantMatchesReference) {
  torch::manual_seed(7);
  auto d = dc_batch({5, 3}, 5, 4, 2, 3);
  auto noisy = torch::rand({d.batch, d.frames, d.features}, f64()) < 0.3;
  auto ratio = torch::rand({d.batch, d.frames, d.features}, f64());
  auto alpha = torch::rand({d.batch, d.frames, d.features}, f64());
  auto targets = d.targets();
  targets["noisybins"] = noisy;
  targets["rel_speech_targets"] = ratio;
  auto result = (*make_test_loss("deepclusteringnoise"))(
      targets, {{"bin_emb", d.embeddings}, {"noise_filter", alpha}}, lengths_tensor(d.lengths));
  double separation = 0, separation_norm = 0, noise = 0, used = 0;
  for (int64_t b = 0; b < d.batch; ++b) {
    separation += dc_reference(d.binary[b], d.used[b], d.embeddings[b], d.lengths[b], d.speakers,
                               &separation_norm, 1.0 - noisy[b].to(torch::kDouble));
    for (int64_t t = 0; t < d.lengths[b]; ++t)
      for (int64_t f = 0; f < d.features; ++f)
        if (d.used[b][t][f].item<bool>()) {
          double e = ratio[b][t][f].item<double>() - alpha[b][t][f].item<double>();
          noise += e * e;
          used += 1;
        }
  }
  double expected = separation / std::max(separation_norm, 1.0) + noise / used;
  EXPECT_NEAR(result.loss.item<double>(), expected, 1e-9 * expected);
  EXPECT_EQ(result.norm.item<double>(), 1.0);
}

// ---- l41 ---------------------------------------------------------------------------------------

TEST(LossL41, MatchesPerBinReferenceAndGradient) {
  torch::manual_seed(8);
  auto d = dc_batch({4, 2}, 4, 3, 2, 3);
  auto speakers = torch::randn({d.batch, 1, d.dims * d.speakers}, f64());
  auto loss = make_test_loss("l41");
  auto result = (*loss)(d.targets(), {{"bin_emb", d.embeddings}, {"spk_emb", speakers}},
                        lengths_tensor(d.lengths));
  double expected = 0, norm = 0;
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t t = 0; t < d.lengths[b]; ++t)
      for (int64_t f = 0; f < d.features; ++f) {
        if (!d.used[b][t][f].item<bool>()) continue;
        norm += d.speakers;
        std::vector<double> v(d.dims);
        double vn = 0;
        for (int64_t k = 0; k < d.dims; ++k) {
          v[k] = d.embeddings[b][t][f * d.dims + k].item<double>();
          vn += v[k] * v[k];
        }
        for (int64_t s = 0; s < d.speakers; ++s) {
          double dot = 0, on = 0;
          for (int64_t k = 0; k < d.dims; ++k) {
            double o = speakers[b][0][s * d.dims + k].item<double>();
            dot += v[k] * o;
            on += o * o;
          }
          dot /= std::sqrt(vn) * std::sqrt(on);
          double y = d.binary[b][t][f * d.speakers + s].item<bool>() ? 1.0 : -1.0;
          expected += -std::log(1.0 / (1.0 + std::exp(-y * dot)));
        }
      }
  EXPECT_NEAR(result.loss.item<double>(), expected, 1e-9 * expected);
  EXPECT_DOUBLE_EQ(result.norm.item<double>(), norm);
  auto gradient = expect_gradient_matches(
      [&](const torch::Tensor& x) {
        return (*loss)(d.targets(), {{"bin_emb", x}, {"spk_emb", speakers}},
                       lengths_tensor(d.lengths))
            .loss;
      },
      d.embeddings);
  expect_zero_on_padding(gradient, d.lengths);
}

// ---- pit ---------------------------------------------------------------------------------------

struct PitBatch {
  int64_t batch, frames, features, speakers, estimates;
  std::vector<int64_t> lengths;
  torch::Tensor sources, mixture, logits;  // [B,T,F,S], [B,T,F], [B,T,Sout*F] speaker-major
  TensorMap targets() const { return {{"multi_targets", sources}, {"mix_to_mask", mixture}}; }
  TensorMap outputs() const { return {{"bin_est", logits}}; }
};

PitBatch pit_batch(std::vector<int64_t> lengths, int64_t frames, int64_t features,
                   int64_t speakers, int64_t estimates = 0) {
  if (estimates == 0) estimates = speakers;
  PitBatch p{static_cast<int64_t>(lengths.size()), frames, features, speakers, estimates, lengths,
             {}, {}, {}};
  p.sources = torch::rand({p.batch, frames, features, speakers}, f64());
  p.mixture = p.sources.sum(3) + 0.1 * torch::rand({p.batch, frames, features}, f64());
  p.logits = torch::randn({p.batch, frames, estimates * features}, f64());
  return p;
}

double activate(const std::vector<double>& z, std::size_t i, const std::string& activation) {
  if (activation == "sigmoid") return 1.0 / (1.0 + std::exp(-z[i]));
  if (activation == "None") return z[i];
  double total = 0;
  for (double value : z) total += std::exp(value);
  return std::exp(z[i]) / total;
}

// Loops over every permutation of the target speakers; R_s = mask_s · mixture.
double pit_reference(const PitBatch& p, const std::string& activation, bool permute = true,
                     bool rescale = false) {
  double total = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t n = p.lengths[b];
    // recs[s][t][f]
    std::vector<std::vector<std::vector<double>>> recs(
        p.estimates, std::vector<std::vector<double>>(n, std::vector<double>(p.features)));
    for (int64_t t = 0; t < n; ++t)
      for (int64_t f = 0; f < p.features; ++f) {
        std::vector<double> z(p.estimates);
        for (int64_t s = 0; s < p.estimates; ++s)
          z[s] = p.logits[b][t][s * p.features + f].item<double>();
        for (int64_t s = 0; s < p.estimates; ++s)
          recs[s][t][f] = activate(z, s, activation) * p.mixture[b][t][f].item<double>();
      }
    if (rescale)
      for (int64_t s = 0; s < p.speakers; ++s) {
        double peak_rec = 0, peak_src = 0;
        for (int64_t t = 0; t < n; ++t)
          for (int64_t f = 0; f < p.features; ++f) {
            peak_rec = std::max(peak_rec, std::abs(recs[s][t][f]));
            peak_src = std::max(peak_src, std::abs(p.sources[b][t][f][s].item<double>()));
          }
        for (int64_t t = 0; t < n; ++t)
          for (int64_t f = 0; f < p.features; ++f) recs[s][t][f] *= peak_src / peak_rec;
      }
    double best = std::numeric_limits<double>::infinity();
    auto orders = permutations_of(p.speakers);
    if (!permute) orders.resize(1);
    for (const auto& order : orders) {
      double cost = 0;
      for (int64_t s = 0; s < p.speakers; ++s)
        for (int64_t t = 0; t < n; ++t)
          for (int64_t f = 0; f < p.features; ++f) {
            double e = recs[order[s]][t][f] - p.sources[b][t][f][s].item<double>();
            cost += e * e;
          }
      best = std::min(best, cost);
    }
    total += best;
    for (int64_t s = p.speakers; s < p.estimates; ++s)
      for (int64_t t = 0; t < n; ++t)
        for (int64_t f = 0; f < p.features; ++f) total += recs[s][t][f] * recs[s][t][f];
  }
  return total;
}

double pit_norm(const PitBatch& p) {
  double frames = 0;
  for (auto n : p.lengths) frames += n;
  return frames * p.speakers * p.features;
}

TEST(LossPit, MatchesPermutationLoopsForEachActivation) {
  torch::manual_seed(10);
  for (int64_t speakers : {2, 3}) {
    auto p = pit_batch({5, 3, 4}, 5, 4, speakers);
    for (std::string activation : {"softmax", "sigmoid", "None"}) {
      auto result = (*make_test_loss("pit", "activation = " + activation + "\n"))(
          p.targets(), p.outputs(), lengths_tensor(p.lengths));
      double expected = pit_reference(p, activation);
      EXPECT_NEAR(result.loss.item<double>(), expected, 1e-9 * expected)
          << activation << " S=" << speakers;
      EXPECT_DOUBLE_EQ(result.norm.item<double>(), pit_norm(p));
    }
  }
}

TEST(LossPit, PitSigmoidIsPitWithSigmoidMasksByDefault) {
  torch::manual_seed(12);
  auto p = pit_batch({4, 3}, 4, 3, 2);
  auto result = (*make_test_loss("pit_sigmoid"))(p.targets(), p.outputs(), lengths_tensor(p.lengths));
  double expected = pit_reference(p, "sigmoid");
  EXPECT_NEAR(result.loss.item<double>(), expected, 1e-9 * expected);
  auto softmax = (*make_test_loss("pit_sigmoid", "activation = softmax\n"))(
      p.targets(), p.outputs(), lengths_tensor(p.lengths));
  EXPECT_NEAR(softmax.loss.item<double>(), pit_reference(p, "softmax"), 1e-9 * expected);
}

TEST(LossPit, DefaultsToSoftmaxAndAcceptsFourDimensionalLogits) {
  torch::manual_seed(11);
  auto p = pit_batch({4, 2}, 4, 3, 2);
  auto loss = make_test_loss("pit");
  auto flat = (*loss)(p.targets(), p.outputs(), lengths_tensor(p.lengths));
  EXPECT_NEAR(flat.loss.item<double>(), pit_reference(p, "softmax"), 1e-9 * flat.loss.item<double>());
  // [B,T,F,S] logits: the same values in the un-flattened layout.
  auto four = p.logits.reshape({p.batch, p.frames, p.speakers, p.features}).transpose(2, 3);
  auto result = (*loss)(p.targets(), {{"bin_est", four}}, lengths_tensor(p.lengths));
  EXPECT_NEAR(result.loss.item<double>(), flat.loss.item<double>(), 1e-12 * flat.loss.item<double>());
}

TEST(LossPit, InvariantToPermutingTargetSpeakers) {
  torch::manual_seed(12);
  auto p = pit_batch({5, 4}, 5, 3, 3);
  auto loss = make_test_loss("pit");
  auto base = (*loss)(p.targets(), p.outputs(), lengths_tensor(p.lengths)).loss.item<double>();
  for (const auto& order : permutations_of(3)) {
    auto permuted = p.sources.index_select(3, torch::tensor(order, torch::kLong));
    auto value = (*loss)({{"multi_targets", permuted}, {"mix_to_mask", p.mixture}}, p.outputs(),
                         lengths_tensor(p.lengths))
                     .loss.item<double>();
    EXPECT_NEAR(value, base, 1e-12 * base);
  }
}

TEST(LossPit, NoPermUsesGivenOrderOnly) {
  torch::manual_seed(13);
  auto p = pit_batch({4, 4}, 4, 3, 2);
  auto loss = make_test_loss("pit", "no_perm = True\n");
  auto result = (*loss)(p.targets(), p.outputs(), lengths_tensor(p.lengths));
  double expected = pit_reference(p, "softmax", /*permute=*/false);
  EXPECT_NEAR(result.loss.item<double>(), expected, 1e-9 * expected);
  EXPECT_GE(expected, pit_reference(p, "softmax") - 1e-12);
}

TEST(LossPit, RescaleAndOverspeakerized) {
  torch::manual_seed(14);
  auto p = pit_batch({4, 3}, 4, 3, 2);
  auto rescaled = (*make_test_loss("pit", "activation = sigmoid\nrescale_recs = True\n"))(
      p.targets(), p.outputs(), lengths_tensor(p.lengths));
  double expected = pit_reference(p, "sigmoid", true, true);
  EXPECT_NEAR(rescaled.loss.item<double>(), expected, 1e-9 * expected);

  auto over = pit_batch({4, 3}, 4, 3, 2, /*estimates=*/3);
  auto result = (*make_test_loss("pit", "overspeakerized = True\n"))(
      over.targets(), over.outputs(), lengths_tensor(over.lengths));
  double over_expected = pit_reference(over, "softmax");
  EXPECT_NEAR(result.loss.item<double>(), over_expected, 1e-9 * over_expected);
  EXPECT_DOUBLE_EQ(result.norm.item<double>(), pit_norm(over));
  // Without the option an extra output speaker is an error, not silently ignored.
  EXPECT_THROW((*make_test_loss("pit"))(over.targets(), over.outputs(), lengths_tensor(over.lengths)),
               Error);
}

TEST(LossPit, FourSpeakersUseAssignmentAndMatchBruteForce) {
  torch::manual_seed(15);
  auto p = pit_batch({3, 2, 3}, 3, 2, 4);
  auto result = (*make_test_loss("pit"))(p.targets(), p.outputs(), lengths_tensor(p.lengths));
  double expected = pit_reference(p, "softmax");
  EXPECT_NEAR(result.loss.item<double>(), expected, 1e-9 * expected);
}

TEST(LossPit, LogitsNameAndTransposeOrder) {
  torch::manual_seed(16);
  auto p = pit_batch({3, 2}, 3, 2, 2);
  auto loss = make_test_loss("pit", "logits_name = masks\ntranspose_order = 1 0 2\n");
  EXPECT_EQ(loss->output_names(), std::vector<std::string>{"masks"});
  auto result = (*loss)(p.targets(), {{"masks", p.logits.transpose(0, 1)}},
                        lengths_tensor(p.lengths));
  double expected = pit_reference(p, "softmax");
  EXPECT_NEAR(result.loss.item<double>(), expected, 1e-9 * expected);
}

TEST(LossPit, GradientMatchesFiniteDifferences) {
  torch::manual_seed(17);
  for (std::string activation : {"softmax", "sigmoid"}) {
    auto p = pit_batch({4, 2}, 4, 3, 2);
    auto loss = make_test_loss("pit", "activation = " + activation + "\n");
    auto gradient = expect_gradient_matches(
        [&](const torch::Tensor& x) {
          return (*loss)(p.targets(), {{"bin_est", x}}, lengths_tensor(p.lengths)).loss;
        },
        p.logits);
    expect_zero_on_padding(gradient, p.lengths);
  }
  auto p = pit_batch({3, 2}, 3, 2, 4);  // the assignment path
  auto loss = make_test_loss("pit");
  expect_gradient_matches(
      [&](const torch::Tensor& x) {
        return (*loss)(p.targets(), {{"bin_est", x}}, lengths_tensor(p.lengths)).loss;
      },
      p.logits);
}

// ---- deepattractornet --------------------------------------------------------------------------

struct DanetBatch {
  DcBatch dc;
  torch::Tensor sources, mixture;
  TensorMap targets() const {
    auto t = dc.targets();
    t["multi_targets"] = sources;
    t["mix_to_mask"] = mixture;
    return t;
  }
};

DanetBatch danet_batch(std::vector<int64_t> lengths, int64_t frames, int64_t features,
                       int64_t speakers, int64_t dims) {
  DanetBatch d{dc_batch(lengths, frames, features, speakers, dims), {}, {}};
  d.sources = torch::rand({d.dc.batch, frames, features, speakers}, f64());
  d.mixture = d.sources.sum(3);
  return d;
}

// Attractors A_s = Σ_used y_s v / max(Σ_used y_s, 1); masks = activation over s of A_s·(u v).
double danet_reference(const DanetBatch& d, const std::string& activation, bool frame_based) {
  const auto& c = d.dc;
  double total = 0;
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t n = c.lengths[b];
    std::vector<std::vector<double>> attractor(c.speakers, std::vector<double>(c.dims, 0.0));
    std::vector<double> count(c.speakers, 0.0);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t f = 0; f < c.features; ++f) {
        if (!c.used[b][t][f].item<bool>()) continue;
        for (int64_t s = 0; s < c.speakers; ++s) {
          if (!c.binary[b][t][f * c.speakers + s].item<bool>()) continue;
          count[s] += 1;
          for (int64_t k = 0; k < c.dims; ++k)
            attractor[s][k] += c.embeddings[b][t][f * c.dims + k].item<double>();
        }
      }
    for (int64_t s = 0; s < c.speakers; ++s)
      for (int64_t k = 0; k < c.dims; ++k) attractor[s][k] /= std::max(count[s], 1.0);
    // rec[s][t][f]
    std::vector<std::vector<std::vector<double>>> rec(
        c.speakers, std::vector<std::vector<double>>(n, std::vector<double>(c.features)));
    for (int64_t t = 0; t < n; ++t)
      for (int64_t f = 0; f < c.features; ++f) {
        double u = c.used[b][t][f].item<bool>() ? 1.0 : 0.0;
        std::vector<double> z(c.speakers, 0.0);
        for (int64_t s = 0; s < c.speakers; ++s)
          for (int64_t k = 0; k < c.dims; ++k)
            z[s] += attractor[s][k] * u * c.embeddings[b][t][f * c.dims + k].item<double>();
        for (int64_t s = 0; s < c.speakers; ++s)
          rec[s][t][f] = activate(z, s, activation) * d.mixture[b][t][f].item<double>();
      }
    for (int64_t s = 0; s < c.speakers; ++s)
      for (int64_t t = 0; t < n; ++t) {
        if (frame_based) {
          double r = 0, x = 0;
          for (int64_t f = 0; f < c.features; ++f) {
            r += rec[s][t][f] * rec[s][t][f];
            x += std::pow(d.sources[b][t][f][s].item<double>(), 2);
          }
          total += std::pow(std::sqrt(x) - std::sqrt(r), 2);
        } else {
          for (int64_t f = 0; f < c.features; ++f)
            total += std::pow(d.sources[b][t][f][s].item<double>() - rec[s][t][f], 2);
        }
      }
  }
  return total;
}

TEST(LossDeepAttractor, MatchesExplicitSums) {
  torch::manual_seed(20);
  auto d = danet_batch({5, 3, 4}, 5, 4, 2, 3);
  for (std::string activation : {"softmax", "sigmoid", "None"}) {
    for (bool frame_based : {false, true}) {
      auto loss = make_test_loss("deepattractornet",
                                 "activation = " + activation + "\nframe_based = " +
                                     (frame_based ? "True" : "False") + "\n");
      auto result = (*loss)(d.targets(), d.dc.outputs(), lengths_tensor(d.dc.lengths));
      double expected = danet_reference(d, activation, frame_based);
      EXPECT_NEAR(result.loss.item<double>(), expected, 1e-9 * expected)
          << activation << " frame_based=" << frame_based;
      EXPECT_DOUBLE_EQ(result.norm.item<double>(), 12.0 * 2 * 4);
    }
  }
}

TEST(LossDeepAttractor, ThreeSpeakersBatchEqualsSumOfUtterancesAndGradient) {
  torch::manual_seed(21);
  auto d = danet_batch({4, 2}, 4, 3, 3, 2);
  auto loss = make_test_loss("deepattractornet", "activation = softmax\n");
  auto whole = (*loss)(d.targets(), d.dc.outputs(), lengths_tensor(d.dc.lengths));
  double sum = 0;
  for (int64_t b = 0; b < d.dc.batch; ++b) {
    int64_t n = d.dc.lengths[b];
    TensorMap one;
    for (const auto& [name, tensor] : d.targets()) one[name] = tensor.narrow(0, b, 1).narrow(1, 0, n);
    sum += (*loss)(one, {{"bin_emb", d.dc.embeddings.narrow(0, b, 1).narrow(1, 0, n)}},
                   lengths_tensor({n}))
               .loss.item<double>();
  }
  EXPECT_NEAR(whole.loss.item<double>(), sum, 1e-9 * sum);
  EXPECT_NEAR(whole.loss.item<double>(), danet_reference(d, "softmax", false), 1e-9 * sum);
  for (bool frame_based : {false, true}) {
    auto graded = make_test_loss("deepattractornet",
                                 std::string("frame_based = ") + (frame_based ? "True" : "False"));
    auto gradient = expect_gradient_matches(
        [&](const torch::Tensor& x) {
          return (*graded)(d.targets(), {{"bin_emb", x}}, lengths_tensor(d.dc.lengths)).loss;
        },
        d.dc.embeddings);
    expect_zero_on_padding(gradient, d.dc.lengths);
  }
}

// ---- assignment ------------------------------------------------------------------------------

double assignment_cost(const std::vector<double>& cost, int64_t n,
                       const std::vector<int64_t>& column_of_row) {
  double total = 0;
  for (int64_t r = 0; r < n; ++r) total += cost[r * n + column_of_row[r]];
  return total;
}

TEST(LossAssignment, HungarianMatchesBruteForce) {
  torch::manual_seed(30);
  for (int64_t n : {1, 2, 4, 5}) {
    for (int trial = 0; trial < 50; ++trial) {
      auto values = torch::rand({n * n}, f64()) * 10;
      if (trial % 5 == 0) values = values.round();  // ties
      std::vector<double> cost(values.data_ptr<double>(), values.data_ptr<double>() + n * n);
      auto solution = losses::solve_assignment(cost, n);
      std::vector<int64_t> sorted = solution;
      std::sort(sorted.begin(), sorted.end());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i);  // a permutation
      double best = std::numeric_limits<double>::infinity();
      for (const auto& order : permutations_of(n)) best = std::min(best, assignment_cost(cost, n, order));
      EXPECT_NEAR(assignment_cost(cost, n, solution), best, 1e-9);
    }
  }
  EXPECT_TRUE(losses::solve_assignment({}, 0).empty());
}

TEST(LossAssignment, MinOverPermutationsEnumeratedAndSolvedAgreeWithBruteForce) {
  torch::manual_seed(31);
  for (int64_t speakers : {2, 3, 4, 5}) {
    auto pairwise = torch::rand({6, speakers, speakers}, f64());
    auto result = losses::min_over_permutations(pairwise, true);
    auto identity = losses::min_over_permutations(pairwise, false);
    for (int64_t b = 0; b < 6; ++b) {
      double best = std::numeric_limits<double>::infinity(), diagonal = 0;
      for (const auto& order : permutations_of(speakers)) {
        double cost = 0;
        for (int64_t j = 0; j < speakers; ++j) cost += pairwise[b][order[j]][j].item<double>();
        best = std::min(best, cost);
      }
      for (int64_t j = 0; j < speakers; ++j) diagonal += pairwise[b][j][j].item<double>();
      EXPECT_NEAR(result[b].item<double>(), best, 1e-12);
      EXPECT_NEAR(identity[b].item<double>(), diagonal, 1e-12);
    }
  }
}

}  // namespace

// The softmax over the speakers of a speaker-major view (the speakers last, the bins innermost
// in memory) runs over the memory's order; it must give what the plain softmax of the same
// values gives, forward and backward, in float and in double.
TEST(LossMaskActivation, SoftmaxOverATransposedViewEqualsThePlainSoftmax) {
  torch::manual_seed(3);
  for (auto dtype : {torch::kFloat32, torch::kFloat64}) {
    auto speaker_major = torch::randn({3, 7, 2, 129}, dtype).mul_(4).requires_grad_();
    auto plain = speaker_major.detach().transpose(2, 3).contiguous().requires_grad_();
    auto fast = losses::apply_activation(speaker_major.transpose(2, 3), losses::MaskActivation::kSoftmax, 3);
    auto reference = torch::softmax(plain, 3);
    ASSERT_EQ(fast.sizes(), reference.sizes());
    const double tolerance = dtype == torch::kFloat32 ? 1e-6 : 1e-14;
    EXPECT_LT((fast - reference).abs().max().item<double>(), tolerance);
    EXPECT_LT((fast.sum(3) - 1).abs().max().item<double>(), 10 * tolerance);
    auto weights = torch::randn(reference.sizes(), dtype);
    (fast * weights).sum().backward();
    (reference * weights).sum().backward();
    EXPECT_LT((speaker_major.grad().transpose(2, 3) - plain.grad()).abs().max().item<double>(),
              tolerance);
  }
  // Three speakers and a contiguous [B, T, F, S] input take the plain path: the same values.
  auto contiguous = torch::randn({2, 5, 9, 3}, torch::kFloat64);
  EXPECT_TRUE(torch::equal(losses::apply_activation(contiguous, losses::MaskActivation::kSoftmax, 3),
                           torch::softmax(contiguous, 3)));
}
