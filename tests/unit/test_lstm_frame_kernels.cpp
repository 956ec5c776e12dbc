// lstm_frame_kernels.h: one frame of the bf16 LSTM's elementwise work against the LSTM
// equations in double, and its rounding against c10::BFloat16.
#include <gtest/gtest.h>

#include <c10/util/BFloat16.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "nabu/neuralnetworks/kernels/lstm_frame_kernels.h"

namespace nabu::testing {
namespace {

double sigmoid_reference(double x) { return 1.0 / (1.0 + std::exp(-x)); }

uint16_t bf16_of(float x) { return c10::BFloat16(x).x; }

std::vector<float> random_values(std::size_t n, float scale, unsigned seed) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(n);
  for (auto& v : values) v = normal(generator);
  return values;
}

TEST(LstmFrameKernels, SigmoidAndTanhAreWithinAFewUlpOfTheExactFunctions) {
  double worst_sigmoid = 0, worst_tanh = 0;
  for (float x = -30.0f; x <= 30.0f; x += 0.00137f) {
    worst_sigmoid =
        std::max(worst_sigmoid, std::abs(lstm_frames::sigmoid(x) - sigmoid_reference(x)));
    worst_tanh = std::max(worst_tanh, std::abs(lstm_frames::tanh(x) - std::tanh(double(x))));
  }
  // Absolute errors of a few fp32 ulp (measured 8.8e-8 and 1.8e-7; 1 / (1 + std::exp(-x)) in
  // fp32 gives the same 8.8e-8).
  EXPECT_LT(worst_sigmoid, 1.5e-7);
  EXPECT_LT(worst_tanh, 3e-7);
  // Saturation without NaN or overflow.
  for (float x : {-1e4f, -200.0f, -88.7f, 88.7f, 200.0f, 1e4f}) {
    EXPECT_EQ(lstm_frames::sigmoid(x), x < 0 ? 0.0f : 1.0f) << x;
    EXPECT_EQ(lstm_frames::tanh(x), x < 0 ? -1.0f : 1.0f) << x;
  }
  EXPECT_TRUE(std::isnan(lstm_frames::sigmoid(std::numeric_limits<float>::quiet_NaN())));
}

// Three sequences of H units (H not a multiple of any vector width), the second already past its
// length: gates, cells and outputs as the LSTM equations give them, zeros on the padded one, and
// the bf16 copy rounded exactly as c10::BFloat16 rounds.
TEST(LstmFrameKernels, ForwardFrameComputesTheLstmEquations) {
  const int64_t B = 3, H = 37;
  const std::vector<int64_t> lengths{5, 2, 9};
  const int64_t frame = 3;
  auto gates = random_values(B * 4 * H, 2.0f, 1);
  const auto pre_activations = gates;
  const auto previous = random_values(B * H, 1.0f, 2);
  std::vector<float> cells(B * H, 7), tanh_cells(B * H, 7), hidden(B * H, 7);
  std::vector<uint16_t> rounded(B * H, 7);
  lstm_frames::forward({gates.data(), previous.data(), cells.data(), tanh_cells.data(),
                        hidden.data(), rounded.data()},
                       B, H, lengths.data(), frame);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j = 0; j < H; ++j) {
      const float* a = &pre_activations[b * 4 * H];
      const float* got = &gates[b * 4 * H];
      const int64_t u = b * H + j;
      if (frame >= lengths[b]) {
        for (int64_t k = 0; k < 4; ++k) EXPECT_EQ(got[k * H + j], 0.0f);
        EXPECT_EQ(cells[u], 0.0f);
        EXPECT_EQ(hidden[u], 0.0f);
        EXPECT_EQ(rounded[u], 0);
        continue;
      }
      const double i = sigmoid_reference(a[j]), f = sigmoid_reference(a[H + j]);
      const double g = std::tanh(double(a[2 * H + j])), o = sigmoid_reference(a[3 * H + j]);
      const double c = f * previous[u] + i * g;
      EXPECT_NEAR(got[j], i, 1e-6);
      EXPECT_NEAR(got[H + j], f, 1e-6);
      EXPECT_NEAR(got[2 * H + j], g, 1e-6);
      EXPECT_NEAR(got[3 * H + j], o, 1e-6);
      EXPECT_NEAR(cells[u], c, 2e-6);
      EXPECT_NEAR(tanh_cells[u], std::tanh(c), 2e-6);
      EXPECT_NEAR(hidden[u], o * std::tanh(c), 2e-6);
      EXPECT_EQ(rounded[u], bf16_of(hidden[u]));
    }
  }
}

// The gradients of the gate pre-activations and of the previous cell from the saved
// activations, against the LSTM's derivatives written out in double.
TEST(LstmFrameKernels, BackwardFrameComputesTheLstmDerivatives) {
  const int64_t B = 2, H = 21;
  const std::vector<int64_t> lengths{4, 1};
  const int64_t frame = 2;
  std::vector<float> gates(B * 4 * H);
  for (std::size_t k = 0; k < gates.size(); ++k) {  // activations in their ranges
    const float v = random_values(1, 1.0f, 10 + k)[0];
    gates[k] = ((k / H) % 4 == 2) ? std::tanh(v) : 1.0f / (1.0f + std::exp(-v));
  }
  const auto previous = random_values(B * H, 1.0f, 3);
  std::vector<float> tanh_cells = random_values(B * H, 0.5f, 4);
  for (auto& t : tanh_cells) t = std::tanh(t);
  const auto grad_hidden = random_values(B * H, 1.0f, 5);
  const auto grad_recurrent = random_values(B * H, 1.0f, 6);
  auto grad_cells = random_values(B * H, 1.0f, 7);
  const auto grad_cells_in = grad_cells;
  std::vector<float> grad_gates(B * 4 * H, 7);
  std::vector<uint16_t> rounded(B * 4 * H, 7);
  lstm_frames::backward({gates.data(), previous.data(), tanh_cells.data(), grad_hidden.data(),
                         grad_recurrent.data(), grad_cells.data(), grad_gates.data(),
                         rounded.data()},
                        B, H, lengths.data(), frame);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j = 0; j < H; ++j) {
      const int64_t u = b * H + j;
      const float* d = &grad_gates[b * 4 * H];
      if (frame >= lengths[b]) {
        for (int64_t k = 0; k < 4; ++k) EXPECT_EQ(d[k * H + j], 0.0f);
        EXPECT_EQ(grad_cells[u], 0.0f);
        continue;
      }
      const float* a = &gates[b * 4 * H];
      const double i = a[j], f = a[H + j], g = a[2 * H + j], o = a[3 * H + j];
      const double tc = tanh_cells[u];
      const double dh = double(grad_hidden[u]) + grad_recurrent[u];
      const double dc = grad_cells_in[u] + dh * o * (1 - tc * tc);
      EXPECT_NEAR(d[j], dc * g * i * (1 - i), 1e-5);
      EXPECT_NEAR(d[H + j], dc * previous[u] * f * (1 - f), 1e-5);
      EXPECT_NEAR(d[2 * H + j], dc * i * (1 - g * g), 1e-5);
      EXPECT_NEAR(d[3 * H + j], dh * tc * o * (1 - o), 1e-5);
      EXPECT_NEAR(grad_cells[u], dc * f, 1e-5);
    }
  }
  for (std::size_t k = 0; k < grad_gates.size(); ++k)
    EXPECT_EQ(rounded[k], bf16_of(grad_gates[k])) << k;
}

// Ties round to even, the largest floats to infinity, a NaN stays a NaN (of either sign, even
// one whose upper half alone would read as infinity), as c10::BFloat16 rounds.
TEST(LstmFrameKernels, RoundingIsThatOfC10BFloat16) {
  std::vector<float> values;
  for (uint32_t bits : {0x3F808000u, 0x3F818000u, 0x3F807FFFu, 0x7F7FFFFFu, 0x00000001u,
                        0x80008000u, 0x7FC00000u, 0x7F800001u, 0xFF800000u, 0xFFFFFFFFu}) {
    float v;
    std::memcpy(&v, &bits, sizeof v);
    values.push_back(v);
  }
  std::vector<uint16_t> rounded(values.size());
  lstm_frames::round_to_bf16(values.data(), rounded.data(), static_cast<int64_t>(values.size()));
  for (std::size_t k = 0; k < values.size(); ++k) EXPECT_EQ(rounded[k], bf16_of(values[k])) << k;
}

}  // namespace
}  // namespace nabu::testing
