// dbresetlstm and dbresetlstm_insert_additional_input against a step-by-step simulation of the
// original's reset cells and layer wiring, and the property the model exists for: a limited
// context.
#include <gtest/gtest.h>

#include "nabu/core/error.h"
#include "test_model_helpers.h"

namespace nabu::testing {
namespace {

using Params = std::map<std::string, torch::Tensor>;

int64_t floor_mod(int64_t a, int64_t b) { return ((a % b) + b) % b; }
int64_t floor_div(int64_t a, int64_t b) { return (a - floor_mod(a, b)) / b; }
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

struct Replicated {
  torch::Tensor actual;    // [T, U]
  torch::Tensor replicas;  // [T, K, U]
};

// One reset direction over inputs [T, R, D] (R = 1: every replica gets the same input), in
// processing order. Follows rnn_cell.py: at the last frame of every group, replica
// (t / group) % K is zeroed before the step; the output is replica ((t + 1) / group) % K.
Replicated reset_direction(const torch::Tensor& inputs, const Params& p,
                           const std::string& prefix, int64_t t_reset, int64_t group) {
  auto kx = p.at(prefix + ".kernel_x"), kh = p.at(prefix + ".kernel_h");
  auto bias = p.at(prefix + ".bias");
  const int64_t units = kh.size(0), count = t_reset / group;
  std::vector<torch::Tensor> c(count, torch::zeros({units})), h(count, torch::zeros({units}));
  std::vector<torch::Tensor> actual, replicas;
  for (int64_t t = 0; t < inputs.size(0); ++t) {
    if (t % group == group - 1) {
      c[(t / group) % count] = torch::zeros({units});
      h[(t / group) % count] = torch::zeros({units});
    }
    for (int64_t k = 0; k < count; ++k) {
      auto x = inputs[t][inputs.size(1) == 1 ? 0 : k];
      auto z = torch::matmul(x, kx) + torch::matmul(h[k], kh) + bias;
      auto i = z.narrow(0, 0, units), j = z.narrow(0, units, units);
      auto f = z.narrow(0, 2 * units, units), o = z.narrow(0, 3 * units, units);
      c[k] = c[k] * torch::sigmoid(f + 1.0) + torch::sigmoid(i) * torch::tanh(j);
      h[k] = torch::tanh(c[k]) * torch::sigmoid(o);
    }
    actual.push_back(h[((t + 1) / group) % count]);
    replicas.push_back(torch::stack(h));
  }
  return {torch::stack(actual), torch::stack(replicas)};
}

Replicated reverse(const Replicated& r) { return {r.actual.flip({0}), r.replicas.flip({0})}; }

// permute_versions of the original for one utterance of length T, scalar index arithmetic.
std::pair<torch::Tensor, torch::Tensor> next_layer_inputs(const Replicated& forward,
                                                          const Replicated& backward,
                                                          int64_t t_reset, int64_t group,
                                                          int64_t previous_t_reset,
                                                          int64_t previous_group) {
  const int64_t frames = forward.actual.size(0), count = t_reset / group;
  const int64_t previous_count = previous_t_reset / previous_group;
  std::vector<torch::Tensor> for_forward, for_backward;
  for (int64_t t = 0; t < frames; ++t) {
    const int64_t reversed = frames - 1 - t;
    std::vector<torch::Tensor> ff, fb;
    for (int64_t k = 0; k < count; ++k) {
      int64_t tau_f = std::min(floor_mod(t - group * k, t_reset), previous_t_reset - 1);
      int64_t tau_b = std::min(floor_mod(reversed - group * k, t_reset), previous_t_reset - 1);
      auto pick = [&](int64_t steps, int64_t tau) {
        return floor_mod(ceil_div(steps - tau, previous_group), previous_count);
      };
      ff.push_back(torch::cat({forward.replicas[t][pick(t, tau_f)],
                               backward.replicas[t][pick(reversed, tau_f)]}));
      fb.push_back(torch::cat({forward.replicas[t][pick(t, tau_b)],
                               backward.replicas[t][pick(reversed, tau_b)]}));
    }
    for_forward.push_back(torch::stack(ff));
    for_backward.push_back(torch::stack(fb));
  }
  return {torch::stack(for_forward), torch::stack(for_backward)};
}

// The whole model on one utterance x [T, D].
torch::Tensor reset_model_reference(const torch::Tensor& x, const Params& p,
                                    const std::vector<int64_t>& t_resets,
                                    const std::vector<int64_t>& groups) {
  torch::Tensor for_forward = x.unsqueeze(1), for_backward = x.unsqueeze(1);
  Replicated forward, backward;
  for (std::size_t l = 0; l < t_resets.size(); ++l) {
    if (l > 0)
      std::tie(for_forward, for_backward) =
          next_layer_inputs(forward, backward, t_resets[l], groups[l], t_resets[l - 1],
                            groups[l - 1]);
    std::string prefix = "layer" + std::to_string(l);
    forward = reset_direction(for_forward, p, prefix + "_fw", t_resets[l], groups[l]);
    backward = reverse(
        reset_direction(for_backward.flip({0}), p, prefix + "_bw", t_resets[l], groups[l]));
  }
  return torch::cat({forward.actual, backward.actual}, -1);
}

TEST(ModelResetLstm, HelpersAreFloorArithmetic) {
  EXPECT_EQ(floor_mod(-3, 5), 2);
  EXPECT_EQ(ceil_div(-3, 2), -1);
  EXPECT_EQ(ceil_div(3, 2), 2);
  EXPECT_EQ(ceil_div(4, 2), 2);
}

struct ResetCase {
  std::string keys;
  std::vector<int64_t> t_resets, groups;
};

TEST(ModelResetLstm, MatchesStepByStepSimulation) {
  const std::vector<ResetCase> cases = {
      {"num_layers = 1\nt_reset = 3\n", {3}, {1}},
      {"num_layers = 2\nt_reset = 3\n", {3, 3}, {1, 1}},
      {"num_layers = 2\nt_reset = 2 4\ngroup_size = 1 2\n", {2, 4}, {1, 2}},
      {"num_layers = 2\nt_reset = 4 6\ngroup_size = 2 3\n", {4, 6}, {2, 3}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.keys);
    torch::manual_seed(21);
    auto model = make_model_from("architecture = dbresetlstm\nnum_units = 3\n" + c.keys +
                                 "input_noise = 0.2\ndropout = 1.0\nlayer_norm = False\n"
                                 "recurrent_dropout = 1.0\nsymmetric_context = True\n");
    std::vector<int64_t> lengths{9, 5, 2};
    auto x = padded_batch(lengths, 2);
    auto y = model->run({x}, lengths_of(lengths), false);
    ASSERT_EQ(y.sizes(), (std::vector<int64_t>{3, 9, 6}));
    auto p = parameters_by_name(*model);
    for (std::size_t b = 0; b < lengths.size(); ++b)
      EXPECT_LT(max_difference(y[b].narrow(0, 0, lengths[b]),
                               reset_model_reference(x[b].narrow(0, 0, lengths[b]), p,
                                                     c.t_resets, c.groups)),
                1e-5)
          << "utterance " << b;
    expect_padding_invariant(*model, x, lengths);
    expect_gradients_everywhere(*model, {x}, lengths_of(lengths));
  }
}

// The output at frame t sees at most t_reset frames on either side in one layer: changing a
// frame further away changes nothing, changing the farthest frame in reach changes it.
TEST(ModelResetLstm, ContextIsLimitedToTReset) {
  torch::manual_seed(22);
  const int64_t t_reset = 3, frames = 12, t = 6;
  auto model = make_model_from(
      "architecture = dbresetlstm\nnum_units = 4\nnum_layers = 1\nt_reset = 3\n");
  auto x = torch::randn({1, frames, 2});
  auto y = model->run({x}, lengths_of({frames}), false);
  for (int64_t changed = 0; changed < frames; ++changed) {
    auto perturbed = x.clone();
    perturbed[0][changed] += 3.0;
    auto z = model->run({perturbed}, lengths_of({frames}), false);
    double difference = max_difference(z[0][t], y[0][t]);
    if (std::abs(changed - t) >= t_reset)
      EXPECT_EQ(difference, 0.0) << "frame " << changed << " is out of reach of frame " << t;
    else
      EXPECT_GT(difference, 0.0) << "frame " << changed << " should reach frame " << t;
  }
  // Two layers: still a finite window (the layers' t_reset added up).
  auto deep = make_model_from(
      "architecture = dbresetlstm\nnum_units = 4\nnum_layers = 2\nt_reset = 2 3\n");
  auto base = deep->run({x}, lengths_of({frames}), false);
  for (int64_t changed : {0, 1, 11}) {
    auto perturbed = x.clone();
    perturbed[0][changed] += 3.0;
    EXPECT_EQ(max_difference(deep->run({perturbed}, lengths_of({frames}), false)[0][t],
                             base[0][t]),
              0.0)
        << "frame " << changed;
  }
}

TEST(ModelResetLstm, OneResettingDirectionAndSeparateDirections) {
  for (const std::string keys :
       {"forward_reset = True\nbackward_reset = False\n",
        "forward_reset = False\nbackward_reset = True\n",
        "separate_directions = True\n"}) {
    SCOPED_TRACE(keys);
    torch::manual_seed(23);
    auto model = make_model_from("architecture = dbresetlstm\nnum_units = 3\nnum_layers = 2\n"
                                 "t_reset = 3\n" + keys);
    std::vector<int64_t> lengths{7, 3};
    auto x = padded_batch(lengths, 2);
    auto y = model->run({x}, lengths_of(lengths), false);
    EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 7, 6}));
    expect_padding_invariant(*model, x, lengths);
    expect_gradients_everywhere(*model, {x}, lengths_of(lengths));
  }
}

TEST(ModelResetLstm, InsertsTheAdditionalInputAtCombineLayer) {
  torch::manual_seed(24);
  auto model = make_model_from(
      "architecture = dbresetlstm_insert_additional_input\ncombine_layer = 2\nnum_units = 3\n"
      "t_reset = 3\ngroup_size = 1\nsymmetric_context = True\nnum_layers = 2\n"
      "input_noise = 0.2\ndropout = 1.0\nrecurrent_dropout = 1.0\nlayer_norm = False\n");
  std::vector<int64_t> lengths{6, 4};
  auto x = padded_batch(lengths, 2);
  auto ivec = torch::randn({2, 5});
  auto y = model->run({x, ivec}, lengths_of(lengths), false);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 6, 6}));
  auto p = parameters_by_name(*model);
  EXPECT_EQ(p.at("layer0_fw.kernel_x").size(0), 2);      // features only
  EXPECT_EQ(p.at("layer1_fw.kernel_x").size(0), 6 + 5);  // both directions + the vector
  // The vector matters, and only through layer 2.
  auto other = ivec.clone();
  other[1] += 1.0;
  auto z = model->run({x, other}, lengths_of(lengths), false);
  EXPECT_EQ(max_difference(z[0], y[0]), 0.0);
  EXPECT_GT(max_difference(z[1].narrow(0, 0, 4), y[1].narrow(0, 0, 4)), 0.0);
  expect_padding_invariant(*model, x, lengths, true, {ivec});
  expect_gradients_everywhere(*model, {x, ivec}, lengths_of(lengths));
  EXPECT_THROW(model->run({x}, lengths_of(lengths), false), Error);
}

TEST(ModelResetLstm, RejectsInconsistentSchedules) {
  const std::string base = "architecture = dbresetlstm\nnum_units = 3\nnum_layers = 2\n";
  EXPECT_THROW(make_model_from(base + "t_reset = 5\ngroup_size = 2\n"), ConfigError);
  EXPECT_THROW(make_model_from(base + "t_reset = 6 3\n"), ConfigError);
  EXPECT_THROW(make_model_from(base + "t_reset = 6 6 6\n"), ConfigError);
  EXPECT_THROW(make_model_from(base + "t_reset = 6\ndropout = 0.5\n"), ConfigError);
  EXPECT_THROW(make_model_from(base + "t_reset = 6\nforward_reset = False\n"
                                      "backward_reset = False\n"),
               ConfigError);
  EXPECT_THROW(make_model_from(base), ConfigError);
}

}  // namespace
}  // namespace nabu::testing
