// bf16_matmul.h: the bf16 products of the fused CPU LSTM, against products in double of the
// operands rounded to bf16.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "nabu/core/cpu_features.h"
#include "nabu/neuralnetworks/kernels/bf16_matmul.h"
#include "nabu/neuralnetworks/kernels/mixed_precision.h"
#include "test_model_helpers.h"

namespace nabu::testing {
namespace {

torch::Tensor rounded(const torch::Tensor& t) {
  return t.to(torch::kBFloat16).to(torch::kDouble);
}

// What a product must give: the operands rounded to bf16, multiplied exactly (double).
torch::Tensor expected_product(const torch::Tensor& a, const torch::Tensor& b) {
  return torch::mm(rounded(a), rounded(b));
}

// Results differ from the exact product by fp32 accumulation only (1e-6), through oneDNN or not:
// rounded to bf16 they would be 2e-3 away, accumulated in bf16 (LibTorch 1.13's bf16 matmul
// without AVX-512) 1e-2.
double tolerance() { return 1e-5; }

// The fraction of values that are exactly bf16 numbers: about all after rounding, few otherwise.
double fraction_representable_in_bf16(const torch::Tensor& t) {
  return (t == t.to(torch::kBFloat16).to(t.scalar_type())).to(torch::kDouble).mean()
      .item<double>();
}

TEST(Bf16Matmul, RepeatedProductsRoundTheOperandsAndAccumulateInFp32) {
  torch::manual_seed(3);
  for (int64_t rows : {1, 7, 16}) {
    const auto a = torch::randn({rows, 45});
    const auto weight = torch::randn({45, 33});
    // As the recurrence holds its weights: w_hh [4H, H] used as is and transposed.
    const auto transposed_weight = torch::randn({33, 45}).t();
    for (const auto& w : {weight, transposed_weight}) {
      bf16_matmul::RepeatedProduct overwrite(w, rows, /*accumulate=*/false);
      bf16_matmul::RepeatedProduct accumulate(w, rows, /*accumulate=*/true);
      const auto a_bf16 = a.to(torch::kBFloat16);
      auto out = torch::full({rows, 33}, 7.0f);
      const auto start = torch::randn({rows, 33});
      auto sum = start.clone();
      const auto* a_bits = reinterpret_cast<const uint16_t*>(a_bf16.data_ptr<c10::BFloat16>());
      for (int repeat = 0; repeat < 3; ++repeat) {  // the same primitive, called again
        overwrite.multiply(a_bits, out.data_ptr<float>());
        EXPECT_LT(max_relative_error(out, expected_product(a, w)), tolerance()) << "rows " << rows;
      }
      accumulate.multiply(a_bits, sum.data_ptr<float>());
      const auto sum_expected = start.to(torch::kDouble) + expected_product(a, w);
      EXPECT_LT(max_relative_error(sum, sum_expected), tolerance()) << "rows " << rows;
      EXPECT_LT(fraction_representable_in_bf16(out), 0.2);
    }
  }
}

TEST(Bf16Matmul, OneProductOfStridedFloatOrBf16Operands) {
  torch::manual_seed(4);
  // The weight gradient's shape: [4H, T B]^T-like views of [T B, 4H] buffers.
  const auto g = torch::randn({300, 64}), h = torch::randn({300, 24});
  const auto got = bf16_matmul::product(g.t(), h);
  ASSERT_EQ(got.scalar_type(), torch::kFloat);
  ASSERT_EQ(got.sizes(), (std::vector<int64_t>{64, 24}));
  EXPECT_LT(max_relative_error(got, expected_product(g.t(), h)), tolerance());
  const auto from_bf16 = bf16_matmul::product(g.t().to(torch::kBFloat16), h.to(torch::kBFloat16));
  EXPECT_LT(max_relative_error(from_bf16, expected_product(g.t(), h)), tolerance());
  // Empty operands give an empty (or zero) product, not an error.
  const auto empty = bf16_matmul::product(torch::randn({0, 5}), torch::randn({5, 3}));
  EXPECT_EQ(empty.sizes(), (std::vector<int64_t>{0, 3}));
  const auto zero = bf16_matmul::product(torch::randn({4, 0}), torch::randn({0, 3}));
  EXPECT_EQ(zero.abs().sum().item<double>(), 0.0);
}

// A build with oneDNN on a CPU with bf16 instructions packs: that is the speed the fused LSTM's
// bf16 counts on (docs/devices.md).
TEST(Bf16Matmul, PacksWhereTheBuildHasOneDnnAndTheCpuBf16Instructions) {
  const CpuFeatures cpu = cpu_features();
  const bool bf16_cpu = cpu.avx512_bf16 || cpu.amx_bf16;
  if (!bf16_matmul::built_with_onednn()) {
    EXPECT_FALSE(bf16_matmul::packed_available());
  } else if (bf16_cpu) {
    EXPECT_TRUE(bf16_matmul::packed_available());
  }
}

}  // namespace
}  // namespace nabu::testing
