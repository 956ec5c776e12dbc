#include "nabu/neuralnetworks/kernels/bf16_matmul.h"

#include <torch/torch.h>

#include "nabu_onednn.h"  // NABU_WITH_ONEDNN (generated: nabu/CMakeLists.txt)

#if NABU_WITH_ONEDNN
#include "nabu/neuralnetworks/kernels/onednn_products.h"
#endif

namespace nabu::bf16_matmul {
namespace {

// A float tensor of t's values rounded to bf16.
at::Tensor rounded_to_bf16(const at::Tensor& t) {
  return t.to(at::kBFloat16).to(at::kFloat);
}

#if NABU_WITH_ONEDNN
// oneDNN wants positive strides: a broadcast view is copied first.
at::Tensor with_positive_strides(const at::Tensor& t) {
  return t.stride(0) > 0 && t.stride(1) > 0 ? t : t.contiguous();
}

onednn::MatrixLayout layout_of(const at::Tensor& t) {
  return {t.size(0), t.size(1), t.stride(0), t.stride(1)};
}

const uint16_t* bf16_data(const at::Tensor& t) {
  return reinterpret_cast<const uint16_t*>(t.data_ptr<at::BFloat16>());
}
#endif

}  // namespace

bool built_with_onednn() { return NABU_WITH_ONEDNN != 0; }

bool packed_available() {
#if NABU_WITH_ONEDNN
  return onednn::bf16_kernels_available();
#else
  return false;
#endif
}

#if NABU_WITH_ONEDNN
struct RepeatedProduct::Packed : onednn::PackedProduct {
  using onednn::PackedProduct::PackedProduct;
};
#else
struct RepeatedProduct::Packed {};
#endif

RepeatedProduct::RepeatedProduct(const at::Tensor& weight, int64_t rows, bool accumulate)
    : rows_(rows), accumulate_(accumulate) {
  TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == at::kFloat && weight.device().is_cpu(),
              "bf16 product: a float CPU matrix, got ", weight.sizes());
  if (!packed_available() || rows == 0 || weight.numel() == 0) {
    rounded_weight_ = rounded_to_bf16(weight);
    return;
  }
#if NABU_WITH_ONEDNN
  const at::Tensor fp32_weight = with_positive_strides(weight);
  packed_ = std::make_unique<Packed>(fp32_weight.data_ptr<float>(), layout_of(fp32_weight), rows,
                                     accumulate);
#endif
}

void RepeatedProduct::multiply(const uint16_t* a, float* out) {
  if (!packed_) {
    const at::Tensor left =
        at::from_blob(const_cast<uint16_t*>(a), {rows_, rounded_weight_.size(0)},
                      at::TensorOptions().dtype(at::kBFloat16)).to(at::kFloat);
    at::Tensor result = at::from_blob(out, {rows_, rounded_weight_.size(1)},
                                      at::TensorOptions().dtype(at::kFloat));
    if (accumulate_) result.addmm_(left, rounded_weight_);
    else at::mm_out(result, left, rounded_weight_);
    return;
  }
#if NABU_WITH_ONEDNN
  packed_->multiply(a, out);
#endif
}

at::Tensor product(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options().dtype(at::kFloat));
  product_into(a, b, at::Tensor(), out);
  return out;
}

void product_into(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias,
                  const at::Tensor& out) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0),
              "bf16 product of ", a.sizes(), " and ", b.sizes());
  TORCH_CHECK(out.scalar_type() == at::kFloat && out.is_contiguous() &&
                  out.sizes() == at::IntArrayRef({a.size(0), b.size(1)}),
              "bf16 product: a contiguous float [", a.size(0), ", ", b.size(1), "] output");
  if (!packed_available() || a.numel() == 0 || b.numel() == 0) {
    const at::Tensor left = rounded_to_bf16(a), right = rounded_to_bf16(b);
    at::Tensor result = out;  // the same storage: at::*_out take a non-const tensor
    if (bias.defined()) at::addmm_out(result, bias.to(at::kFloat), left, right);
    else at::mm_out(result, left, right);
    return;
  }
#if NABU_WITH_ONEDNN
  const at::Tensor left = with_positive_strides(a.to(at::kBFloat16));
  const at::Tensor right = with_positive_strides(b.to(at::kBFloat16));
  const at::Tensor shift = bias.defined() ? bias.to(at::kFloat).contiguous() : at::Tensor();
  onednn::product(bf16_data(left), layout_of(left), bf16_data(right), layout_of(right),
                  shift.defined() ? shift.data_ptr<float>() : nullptr, out.data_ptr<float>(),
                  layout_of(out));
#endif
}

RepeatedProduct::~RepeatedProduct() = default;
RepeatedProduct::RepeatedProduct(RepeatedProduct&&) noexcept = default;
RepeatedProduct& RepeatedProduct::operator=(RepeatedProduct&&) noexcept = default;

}  // namespace nabu::bf16_matmul
