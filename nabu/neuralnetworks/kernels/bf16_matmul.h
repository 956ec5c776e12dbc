// Matrix products in bf16 with fp32 accumulation on the CPU, for the layers that run their own
// loops under precision = bf16 (fused_lstm.h): the operands are rounded to bf16, the sums and the
// results are fp32.
//
// Why not at::mm on bf16 tensors: LibTorch hands them to oneDNN, which repacks the right-hand
// matrix into the layout of the CPU's matrix units (AMX tiles, avx512_bf16 pairs) at every call
// and rounds the result to bf16. A recurrence multiplies by the same weight at every frame: on an
// Intel Xeon with AMX the [16, 200] x [200, 800] frame product took 90 us through at::mm, 100 us in
// fp32 and 20 us with the weight packed once (docs/results.md, "Mixed precision on the CPU").
// Where the build has oneDNN (NABU_WITH_ONEDNN: the same library Debian's LibTorch calls) and
// oneDNN has bf16 kernels for this CPU, the weight is packed once. Elsewhere the rounded operands
// are multiplied in fp32: on a CPU without AVX-512, LibTorch's own bf16 matmul accumulates in
// bf16 (errors of 1 to 3 % of the largest value; LibTorch 1.13) and is slower than fp32.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

namespace nabu::bf16_matmul {

// Whether this build calls oneDNN (NABU_WITH_ONEDNN).
bool built_with_onednn();
// Whether products here go through oneDNN: this build has oneDNN and it has bf16 kernels for
// this CPU (AVX-512 at least). Otherwise they are fp32 products of the rounded operands.
bool packed_available();

// out = a w, or out += a w (accumulate), for many a [rows, K] of one shape against one w [K, N]
// (float, any strides), which is rounded to bf16 and packed once.
class RepeatedProduct {
 public:
  RepeatedProduct(const at::Tensor& weight, int64_t rows, bool accumulate);
  ~RepeatedProduct();
  RepeatedProduct(const RepeatedProduct&) = delete;
  RepeatedProduct& operator=(const RepeatedProduct&) = delete;
  RepeatedProduct(RepeatedProduct&&) noexcept;
  RepeatedProduct& operator=(RepeatedProduct&&) noexcept;

  // a: bf16 [rows, K] (the upper halves of floats, as c10::BFloat16), row-major; out: float
  // [rows, N], row-major. One thread at a time.
  void multiply(const uint16_t* a, float* out);

 private:
  struct Packed;
  std::unique_ptr<Packed> packed_;  // oneDNN's primitive and packed weight, where available
  at::Tensor rounded_weight_;       // otherwise: the weight rounded to bf16, kept in fp32
  int64_t rows_ = 0;
  bool accumulate_ = false;
};

// a b with a [M, K] and b [K, N] (float or bf16, any strides) rounded to bf16, accumulated in
// fp32; the result [M, N] is float.
at::Tensor product(const at::Tensor& a, const at::Tensor& b);
// The same written into out (float [M, N], contiguous), plus bias (float [N]) where defined.
void product_into(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias,
                  const at::Tensor& out);

}  // namespace nabu::bf16_matmul
