// dblstm, dlstm, dbrnn, dbgru and the leaky LSTMs against step-by-step references written here,
// plus the length contract (padding never leaks, padded outputs are zero).
#include <gtest/gtest.h>

#include <cmath>

#include "nabu/core/error.h"
#include "nabu/neuralnetworks/kernels/fused_lstm.h"
#include "nabu/neuralnetworks/models/recurrent.h"
#include "nabu/neuralnetworks/kernels/mixed_precision.h"
#include "test_model_helpers.h"

namespace nabu::testing {
namespace {

using Params = std::map<std::string, torch::Tensor>;

torch::Tensor reverse_frames(const torch::Tensor& x) { return x.flip({0}); }

torch::Tensor to_bf16_and_back(const torch::Tensor& t) {
  return t.to(torch::kBFloat16).to(t.scalar_type());
}

// Which products of the LSTM equations have their operands rounded to bf16, as the fused layer
// computes them under a bf16 autocast: all of them (the layer of several sequences), whose
// results stay fp32 (bf16_matmul.h), or only the input projections (one short sequence), whose
// results LibTorch's bf16 linear rounds.
enum class Bf16Products { kNone, kInput, kInputAndRecurrent };

// LibTorch's LSTM equations (gate rows i, f, g, o), one utterance x [T, D].
torch::Tensor fused_lstm_reference(const torch::Tensor& x, const Params& p,
                                   const std::string& suffix,
                                   Bf16Products bf16 = Bf16Products::kNone) {
  auto w_ih = p.at("weight_ih_l0" + suffix), w_hh = p.at("weight_hh_l0" + suffix);
  auto b = p.at("bias_ih_l0" + suffix) + p.at("bias_hh_l0" + suffix);
  // W v, with W and v rounded to bf16 when `operands`, and the result when `result`.
  auto product = [](bool operands, bool result, const torch::Tensor& w, const torch::Tensor& v) {
    if (!operands) return torch::mv(w, v);
    auto exact = torch::mv(to_bf16_and_back(w), to_bf16_and_back(v));
    return result ? to_bf16_and_back(exact) : exact;
  };
  const bool input_bf16 = bf16 != Bf16Products::kNone;
  const bool recurrent_bf16 = bf16 == Bf16Products::kInputAndRecurrent;
  const bool results_rounded = !recurrent_bf16;
  const int64_t units = w_hh.size(1);
  auto h = torch::zeros({units}, x.options()), c = torch::zeros({units}, x.options());
  std::vector<torch::Tensor> out;
  for (int64_t t = 0; t < x.size(0); ++t) {
    auto g = product(input_bf16, results_rounded, w_ih, x[t]) +
             product(recurrent_bf16, results_rounded, w_hh, h) + b;
    auto i = torch::sigmoid(g.narrow(0, 0, units)), f = torch::sigmoid(g.narrow(0, units, units));
    auto candidate = torch::tanh(g.narrow(0, 2 * units, units));
    auto o = torch::sigmoid(g.narrow(0, 3 * units, units));
    c = f * c + i * candidate;
    h = o * torch::tanh(c);
    out.push_back(h);
  }
  return torch::stack(out);
}

// The original's TensorFlow cells (gate columns i, j, f, o; forget bias 1), one direction over
// x [T, D]. variant: "full", "iz" (i and j from x only) or "none" (no gate sees h).
struct CellSpec {
  std::string variant = "full";
  bool layer_norm = false;
  std::string activation = "tanh";
  double leak = 1.0;
};

torch::Tensor act(const std::string& name, const torch::Tensor& v) {
  if (name == "relu") return torch::relu(v);
  if (name == "sigmoid") return torch::sigmoid(v);
  return torch::tanh(v);
}

torch::Tensor layer_norm_reference(const torch::Tensor& v, const torch::Tensor& gamma,
                                   const torch::Tensor& beta) {
  double mean = v.mean().item<double>();
  double variance = ((v - mean) * (v - mean)).mean().item<double>();
  return (v - mean) / std::sqrt(variance + 1e-12) * gamma + beta;
}

torch::Tensor cell_reference(const torch::Tensor& x, const Params& p, const std::string& prefix,
                             const CellSpec& spec) {
  auto kx = p.at(prefix + ".kernel_x");
  const int64_t units = kx.size(1) / 4;
  auto h = torch::zeros({units}), c = torch::zeros({units});
  auto ln = [&](const torch::Tensor& v, const std::string& name) {
    return spec.layer_norm ? layer_norm_reference(v, p.at(prefix + ".ln_" + name + "_gamma"),
                                                  p.at(prefix + ".ln_" + name + "_beta"))
                           : v;
  };
  std::vector<torch::Tensor> out;
  for (int64_t t = 0; t < x.size(0); ++t) {
    auto z = torch::matmul(x[t], kx);
    if (!spec.layer_norm) z = z + p.at(prefix + ".bias");
    if (spec.variant == "full") z = z + torch::matmul(h, p.at(prefix + ".kernel_h"));
    if (spec.variant == "iz")
      z = torch::cat({z.narrow(0, 0, 2 * units),
                      z.narrow(0, 2 * units, 2 * units) + torch::matmul(h, p.at(prefix + ".kernel_h"))});
    auto i = ln(z.narrow(0, 0, units), "input"), j = ln(z.narrow(0, units, units), "transform");
    auto f = ln(z.narrow(0, 2 * units, units), "forget");
    auto o = ln(z.narrow(0, 3 * units, units), "output");
    auto new_c = c * torch::sigmoid(f + 1.0) + torch::sigmoid(i) * act(spec.activation, j);
    new_c = ln(new_c, "state");
    h = act(spec.activation, new_c) * torch::sigmoid(o);
    out.push_back(h);
    c = new_c * spec.leak;
  }
  return torch::stack(out);
}

// A bidirectional stack of reference cells over one utterance.
torch::Tensor stack_reference(torch::Tensor x, const Params& p, int layers, const CellSpec& spec) {
  for (int l = 0; l < layers; ++l) {
    std::string prefix = "layer" + std::to_string(l);
    auto forward = cell_reference(x, p, prefix + "_fw", spec);
    auto backward = reverse_frames(cell_reference(reverse_frames(x), p, prefix + "_bw", spec));
    x = torch::cat({forward, backward}, -1);
  }
  return x;
}

TEST(ModelRecurrent, DblstmMatchesLstmEquationsOnEveryUtterance) {
  torch::manual_seed(11);
  auto model = make_model_from(
      "architecture = dblstm\nnum_layers = 2\nnum_units = 5\nfac_per_layer = 0.8\n"
      "input_noise = 0.2\ndropout = 1.0\nrecurrent_dropout = 1.0\nlayer_norm = False\n");
  std::vector<int64_t> lengths{7, 3, 5};
  auto x = padded_batch(lengths, 4);
  auto y = model->run({x}, lengths_of(lengths), false);
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{3, 7, 8}));  // ceil(5 * 0.8) = 4 units per direction
  auto all = parameters_by_name(*model);
  for (std::size_t b = 0; b < lengths.size(); ++b) {
    auto h = x[b].narrow(0, 0, lengths[b]);
    for (int l = 0; l < 2; ++l) {
      Params p;
      std::string prefix = "layer" + std::to_string(l) + ".";
      for (const auto& [name, tensor] : all)
        if (name.rfind(prefix, 0) == 0) p[name.substr(prefix.size())] = tensor;
      auto forward = fused_lstm_reference(h, p, "");
      auto backward = reverse_frames(fused_lstm_reference(reverse_frames(h), p, "_reverse"));
      h = torch::cat({forward, backward}, -1);
    }
    EXPECT_LT(max_difference(y[b].narrow(0, 0, lengths[b]), h), 1e-5) << "utterance " << b;
    if (lengths[b] < 7) {
      EXPECT_EQ(y[b].narrow(0, lengths[b], 7 - lengths[b]).abs().max().item<double>(), 0.0);
    }
  }
}

// The written-out backward pass of fused_lstm.h against autograd through the step-by-step
// equations, per utterance, in double precision: padded batch, one and two directions, with one
// and two threads (the directions run in parallel with two).
TEST(ModelRecurrent, FusedLstmGradientsMatchAutogradThroughTheEquations) {
  torch::manual_seed(13);
  const auto options = torch::TensorOptions().dtype(torch::kDouble);
  const std::vector<int64_t> lengths{6, 2, 5, 1, 0};
  const int64_t frames = 6, features = 3, units = 4, batch = 5;
  const int previous_threads = torch::get_num_threads();
  for (int threads : {1, 2}) {
    torch::set_num_threads(threads);
    for (int directions : {1, 2}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + ", directions " +
                   std::to_string(directions));
      Params p;
      std::vector<torch::Tensor> weights;
      for (int d = 0; d < directions; ++d) {
        const std::string suffix = d == 0 ? "" : "_reverse";
        for (auto [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
                 {"weight_ih_l0", {4 * units, features}},
                 {"weight_hh_l0", {4 * units, units}},
                 {"bias_ih_l0", {4 * units}},
                 {"bias_hh_l0", {4 * units}}}) {
          p[name + suffix] = torch::randn(shape, options).requires_grad_();
          weights.push_back(p[name + suffix]);
        }
      }
      auto x = torch::randn({frames, batch, features}, options).requires_grad_();
      auto upstream = torch::randn({frames, batch, directions * units}, options);
      auto fused = fused_lstm::layer(x, weights, lengths_of(lengths));
      ASSERT_EQ(fused.sizes(), (std::vector<int64_t>{frames, batch, directions * units}));

      torch::Tensor reference_loss = torch::zeros({}, options);
      for (int64_t b = 0; b < batch; ++b) {
        if (lengths[b] < frames) {  // padding is zero
          EXPECT_EQ(fused.narrow(0, lengths[b], frames - lengths[b]).select(1, b).abs().max()
                        .item<double>(), 0.0);
        }
        if (lengths[b] == 0) continue;
        auto utterance = x.select(1, b).narrow(0, 0, lengths[b]);
        auto h = fused_lstm_reference(utterance, p, "");
        if (directions == 2)
          h = torch::cat({h, reverse_frames(fused_lstm_reference(reverse_frames(utterance), p,
                                                                 "_reverse"))},
                         -1);
        EXPECT_LT(max_difference(fused.select(1, b).narrow(0, 0, lengths[b]), h), 1e-12);
        reference_loss = reference_loss +
                         (h * upstream.select(1, b).narrow(0, 0, lengths[b])).sum();
      }
      std::vector<torch::Tensor> inputs{x};
      inputs.insert(inputs.end(), weights.begin(), weights.end());
      auto expected = torch::autograd::grad({reference_loss}, inputs);
      auto got = torch::autograd::grad({(fused * upstream).sum()}, inputs);
      for (std::size_t i = 0; i < inputs.size(); ++i)
        EXPECT_LT(max_difference(got[i], expected[i]), 1e-12) << "gradient of input " << i;
    }
  }
  torch::set_num_threads(previous_threads);
}

// On a GPU the layers run on LibTorch's (cuDNN) LSTM instead of the fused CPU layer: the two
// paths give the same outputs and gradients from the same parameters (padded batch, lengths 0 to
// T), so a model trained on one device computes alike on the other.
TEST(ModelRecurrent, LibtorchLstmPathMatchesTheFusedLayer) {
  torch::manual_seed(21);
  torch::nn::LSTM layer(torch::nn::LSTMOptions(3, 5).bidirectional(true).batch_first(true));
  layer->to(torch::kDouble);
  const std::vector<int64_t> lengths{7, 3, 0, 5};
  auto x = torch::randn({4, 7, 3}, torch::kDouble).requires_grad_();
  auto upstream = torch::randn({4, 7, 10}, torch::kDouble);
  auto fused = recurrent::bidirectional_lstm(*layer, x, lengths_of(lengths), true);
  auto reference = recurrent::libtorch_bidirectional_lstm(*layer, x, lengths_of(lengths), true);
  ASSERT_EQ(fused.sizes(), reference.sizes());
  EXPECT_LT(max_difference(fused, reference), 1e-12);
  std::vector<torch::Tensor> inputs{x};
  for (const auto& weight : layer->all_weights()) inputs.push_back(weight);
  auto got = torch::autograd::grad({(fused * upstream).sum()}, inputs);
  auto expected = torch::autograd::grad({(reference * upstream).sum()}, inputs);
  for (std::size_t i = 0; i < inputs.size(); ++i)
    EXPECT_LT(max_difference(got[i], expected[i]), 1e-12) << "gradient of input " << i;
}

// bf16 (trainer.cfg precision = bf16 on the CPU): the fused layer computes every product with
// operands rounded to bf16 (results as fused_lstm_reference says), and all else in float. Against
// the LSTM equations in double with exactly those roundings it agrees far more closely than the
// fp32 layer does (so the products really are bf16), and it stays near the fp32 layer in outputs
// and gradients.
TEST(ModelRecurrent, FusedLstmUnderBf16AutocastComputesItsProductsInBf16) {
  torch::manual_seed(29);
  const std::vector<int64_t> lengths{40, 17, 33};
  const int64_t frames = 40, features = 24, units = 32, batch = 3;
  Params p;
  std::vector<torch::Tensor> weights;
  for (const std::string suffix : {"", "_reverse"})
    for (auto [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {"weight_ih_l0", {4 * units, features}},
             {"weight_hh_l0", {4 * units, units}},
             {"bias_ih_l0", {4 * units}},
             {"bias_hh_l0", {4 * units}}}) {
      p[name + suffix] = (0.3 * torch::randn(shape)).requires_grad_();
      weights.push_back(p[name + suffix]);
    }
  auto x = torch::randn({frames, batch, features}).requires_grad_();
  auto upstream = torch::randn({frames, batch, 2 * units});
  auto fp32 = fused_lstm::layer(x, weights, lengths_of(lengths));
  torch::Tensor bf16;
  {
    AutocastScope autocast(Precision::kBf16, torch::kCPU);
    bf16 = fused_lstm::layer(x, weights, lengths_of(lengths));
  }
  ASSERT_EQ(bf16.scalar_type(), torch::kFloat);
  double bf16_from_reference = 0, fp32_from_reference = 0;
  Params p_double;
  for (const auto& [name, value] : p) p_double[name] = value.detach().to(torch::kDouble);
  for (int64_t b = 0; b < batch; ++b) {
    auto utterance = x.detach().select(1, b).narrow(0, 0, lengths[b]).to(torch::kDouble);
    auto reference = torch::cat(
        {fused_lstm_reference(utterance, p_double, "", Bf16Products::kInputAndRecurrent),
         reverse_frames(fused_lstm_reference(reverse_frames(utterance), p_double, "_reverse",
                                             Bf16Products::kInputAndRecurrent))},
        -1);
    auto real = [&](const torch::Tensor& y) {
      return y.detach().select(1, b).narrow(0, 0, lengths[b]).to(torch::kDouble);
    };
    bf16_from_reference += (real(bf16) - reference).abs().mean().item<double>();
    fp32_from_reference += (real(fp32) - reference).abs().mean().item<double>();
    if (lengths[b] < frames) {
      EXPECT_EQ(bf16.narrow(0, lengths[b], frames - lengths[b]).select(1, b).abs().max()
                    .item<double>(), 0.0);
    }
  }
  EXPECT_LT(bf16_from_reference, 0.1 * fp32_from_reference);
  EXPECT_GT(max_difference(bf16, fp32), 1e-4);  // not the fp32 path
  EXPECT_LT(max_difference(bf16, fp32), 0.05);

  std::vector<torch::Tensor> inputs{x};
  inputs.insert(inputs.end(), weights.begin(), weights.end());
  auto expected = torch::autograd::grad({(fp32 * upstream).sum()}, inputs);
  auto got = torch::autograd::grad({(bf16 * upstream).sum()}, inputs);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    ASSERT_EQ(got[i].scalar_type(), torch::kFloat);
    EXPECT_LT(((got[i] - expected[i]).norm() / expected[i].norm()).item<double>(), 0.03)
        << "gradient of input " << i;
  }

  // One sequence with a small recurrent weight (nabu separate's case): its matrix-vector
  // recurrent products stay fp32, only the input projection is bf16.
  auto one = x.detach().select(1, 1).narrow(0, 0, lengths[1]);
  torch::Tensor alone;
  {
    AutocastScope autocast(Precision::kBf16, torch::kCPU);
    torch::NoGradGuard no_grad;
    alone = fused_lstm::layer(one.unsqueeze(1), weights, lengths_of({lengths[1]})).squeeze(1);
  }
  const auto one_double = one.to(torch::kDouble);
  auto forward_only = [&](Bf16Products bf16) {
    return fused_lstm_reference(one_double, p_double, "", bf16);
  };
  const auto alone_forward = alone.narrow(-1, 0, units).to(torch::kDouble);
  EXPECT_LT(
      (alone_forward - forward_only(Bf16Products::kInput)).abs().mean().item<double>(),
      0.1 * (alone_forward - forward_only(Bf16Products::kInputAndRecurrent)).abs().mean()
                .item<double>());
}

TEST(ModelRecurrent, CellVariantsOfDblstmMatchTheTensorflowCell) {
  torch::manual_seed(12);
  auto model = make_model_from(
      "architecture = dblstm\nnum_layers = 2\nnum_units = 4\nlayer_norm = True\n"
      "activation_fn = relu\nrecurrent_dropout = 0.5\n");
  std::vector<int64_t> lengths{6, 2};
  auto x = padded_batch(lengths, 3);
  auto y = model->run({x}, lengths_of(lengths), false);  // recurrent dropout: training only
  auto p = parameters_by_name(*model);
  CellSpec spec;
  spec.layer_norm = true;
  spec.activation = "relu";
  for (std::size_t b = 0; b < lengths.size(); ++b)
    EXPECT_LT(max_difference(y[b].narrow(0, 0, lengths[b]),
                             stack_reference(x[b].narrow(0, 0, lengths[b]), p, 2, spec)),
              1e-4);
  expect_padding_invariant(*model, x, lengths);
  expect_gradients_everywhere(*model, {x}, lengths_of(lengths));
}

struct LeakyCase {
  std::string architecture, variant;
};

TEST(ModelRecurrent, LeakyCellsMatchStepByStepReference) {
  for (const LeakyCase& c : {LeakyCase{"leaky_dblstm", "full"},
                             LeakyCase{"leaky_dblstm_notrec", "none"},
                             LeakyCase{"leaky_dblstm_iznotrec", "iz"}}) {
    for (bool layer_norm : {false, true}) {
      SCOPED_TRACE(c.architecture + (layer_norm ? " with layer norm" : ""));
      torch::manual_seed(13);
      auto model = make_model_from("architecture = " + c.architecture +
                                   "\nnum_layers = 2\nnum_units = 4\nleak_factor = 0.5\n"
                                   "layer_norm = " + (layer_norm ? "True" : "False") +
                                   "\ninput_noise = 0.2\ndropout = 1.0\nrecurrent_dropout = 1.0\n");
      std::vector<int64_t> lengths{5, 8, 1};
      auto x = padded_batch(lengths, 3);
      auto y = model->run({x}, lengths_of(lengths), false);
      ASSERT_EQ(y.sizes(), (std::vector<int64_t>{3, 8, 8}));
      auto p = parameters_by_name(*model);
      CellSpec spec;
      spec.variant = c.variant;
      spec.leak = 0.5;
      spec.layer_norm = layer_norm;
      for (std::size_t b = 0; b < lengths.size(); ++b)
        EXPECT_LT(max_difference(y[b].narrow(0, 0, lengths[b]),
                                 stack_reference(x[b].narrow(0, 0, lengths[b]), p, 2, spec)),
                  1e-4)
            << "utterance " << b;
      if (c.variant == "none") {
        EXPECT_EQ(p.count("layer0_fw.kernel_h"), 0u);
      }
      if (c.variant == "iz") {
        EXPECT_EQ(p.at("layer0_fw.kernel_h").sizes(), (std::vector<int64_t>{4, 8}));
      }
      expect_padding_invariant(*model, x, lengths);
      expect_gradients_everywhere(*model, {x}, lengths_of(lengths));
    }
  }
}

TEST(ModelRecurrent, EveryRecurrentArchitectureIgnoresPadding) {
  const std::vector<std::string> bodies = {
      "architecture = dblstm\nnum_layers = 2\nnum_units = 5\n",
      "architecture = dblstm\nnum_layers = 2\nnum_units = 4\nseparate_directions = True\n",
      "architecture = dlstm\nnum_layers = 2\nnum_units = 5\n",
      "architecture = dlstm\nnum_layers = 1\nnum_units = 5\nlayer_norm = True\n",
      "architecture = dbrnn\nnum_layers = 2\nnum_units = 5\n",
      "architecture = dbrnn\nnum_layers = 1\nnum_units = 5\nactivation_fn = relu\n",
      "architecture = dbgru\nnum_layers = 2\nnum_units = 5\n",
  };
  for (const auto& body : bodies) {
    SCOPED_TRACE(body);
    torch::manual_seed(14);
    auto model = make_model_from(body);
    std::vector<int64_t> lengths{9, 4, 6, 1};
    auto x = padded_batch(lengths, 3, 10);  // one frame longer than the longest utterance
    expect_padding_invariant(*model, x, lengths);
    expect_gradients_everywhere(*model, {x}, lengths_of(lengths));
  }
}

TEST(ModelRecurrent, ZeroLengthUtteranceGivesZeros) {
  torch::manual_seed(15);
  auto model = make_model_from("architecture = dblstm\nnum_layers = 1\nnum_units = 3\n");
  auto y = model->run({torch::randn({2, 4, 2})}, lengths_of({4, 0}), false);
  EXPECT_EQ(y[1].abs().max().item<double>(), 0.0);
  EXPECT_THROW(model->run({torch::randn({2, 4, 2})}, lengths_of({5, 1}), false), Error);
  EXPECT_THROW(model->run({torch::randn({2, 4, 2})}, lengths_of({4}), false), Error);
}

TEST(ModelRecurrent, DropoutAndNoiseOnlyInTraining) {
  torch::manual_seed(16);
  for (const std::string body :
       {"architecture = dblstm\nnum_layers = 2\nnum_units = 6\ndropout = 0.5\n",
        "architecture = dblstm\nnum_layers = 1\nnum_units = 6\ninput_noise = 0.5\n",
        "architecture = dblstm\nnum_layers = 1\nnum_units = 6\nrecurrent_dropout = 0.5\n",
        "architecture = leaky_dblstm\nnum_layers = 1\nnum_units = 6\ndropout = 0.5\n"
        "leak_factor = 0.9\n"}) {
    SCOPED_TRACE(body);
    auto model = make_model_from(body);
    auto x = torch::randn({2, 5, 3});
    auto eval = model->run({x}, lengths_of({5, 4}), false);
    EXPECT_TRUE(torch::equal(eval, model->run({x}, lengths_of({5, 4}), false)));
    EXPECT_GT(max_difference(model->run({x}, lengths_of({5, 4}), true), eval), 1e-3);
  }
}

TEST(ModelRecurrent, TrainableFalseFreezesEveryLayer) {
  torch::manual_seed(17);
  auto model = make_model_from(
      "architecture = dblstm\nnum_layers = 2\nnum_units = 3\ntrainable = False\n");
  auto x = torch::randn({1, 3, 2}, torch::requires_grad());
  model->run({x}, lengths_of({3}), true).sum().backward();
  ASSERT_FALSE(model->parameters().empty());
  for (const auto& parameter : model->parameters()) EXPECT_FALSE(parameter.grad().defined());
  EXPECT_TRUE(x.grad().defined());
}

TEST(ModelRecurrent, RejectsWrongShapesAndKeys) {
  auto model = make_model_from("architecture = dblstm\nnum_layers = 1\nnum_units = 3\n");
  EXPECT_THROW(model->run({torch::randn({1, 3, 2, 2})}, {}, false), Error);
  EXPECT_THROW(make_model_from("architecture = dblstm\nnum_units = 3\nactivation_fn = elu\n"),
               ConfigError);
  EXPECT_THROW(make_model_from("architecture = dbgru\nnum_units = 3\nactivation_fn = relu\n"),
               ConfigError);
  EXPECT_THROW(make_model_from("architecture = dblstm\nnum_units = 3\nnum_layer = 2\n"),
               ConfigError);
  auto identity = make_model_from("architecture = dblstm\nnum_layers = 0\nnum_units = 3\n");
  auto x = torch::randn({1, 3, 2});
  EXPECT_TRUE(torch::equal(identity->run({x}, {}, false), x));
}

}  // namespace
}  // namespace nabu::testing
