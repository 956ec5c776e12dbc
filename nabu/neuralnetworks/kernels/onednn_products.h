// oneDNN's bf16 matrix products behind a header with neither oneDNN nor LibTorch in it
// (bf16_matmul.h is the interface the layers use).
//
// Why a header of its own: onednn_products.cpp is compiled in a target of its own
// (nabu/CMakeLists.txt) that sees no LibTorch include directory, so the oneDNN header it compiles
// against is the one of the library it links. The torch wheel carries the headers of the oneDNN
// it links statically (3.x, symbols hidden) in its include directory, ahead of Debian's (2.x).
#pragma once

#include <cstdint>
#include <memory>

namespace nabu::onednn {

// A matrix in memory: its sizes and its strides in elements (both positive).
struct MatrixLayout {
  int64_t rows = 0, columns = 0, row_stride = 0, column_stride = 1;
};
inline MatrixLayout row_major(int64_t rows, int64_t columns) {
  return {rows, columns, columns, 1};
}

// Whether oneDNN has the CPU's own bf16 kernels here (AVX-512 at least), not only its reference
// ones, which are far slower than LibTorch's bf16 matmul.
bool bf16_kernels_available();

// out = a w or out += a w (accumulate) for many a [rows, K] (bf16, row-major) against one float
// w [K, N], rounded to bf16 and laid out for the kernel once.
class PackedProduct {
 public:
  PackedProduct(const float* weight, const MatrixLayout& layout, int64_t rows, bool accumulate);
  ~PackedProduct();
  PackedProduct(const PackedProduct&) = delete;
  PackedProduct& operator=(const PackedProduct&) = delete;

  // a: bf16 [rows, K] row-major; out: float [rows, N] row-major. One thread at a time.
  void multiply(const uint16_t* a, float* out);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// out = a b (+ bias): a [M, K] and b [K, N] bf16, out float [M, N], bias float [N] or null.
void product(const uint16_t* a, const MatrixLayout& a_layout, const uint16_t* b,
             const MatrixLayout& b_layout, const float* bias, float* out,
             const MatrixLayout& out_layout);

}  // namespace nabu::onednn
