#include "nabu/neuralnetworks/models/bf16_matmul.h"

#include <torch/torch.h>

#include <optional>
#include <string>
#include <unordered_map>

#include "nabu_onednn.h"  // NABU_WITH_ONEDNN (generated: nabu/CMakeLists.txt)

#if NABU_WITH_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace nabu::bf16_matmul {
namespace {

// LibTorch's path: at::mm on bf16 tensors, its result rounded to bf16.
at::Tensor rounded_product(const at::Tensor& a, const at::Tensor& b) {
  return at::mm(a.to(at::kBFloat16), b.to(at::kBFloat16)).to(at::kFloat);
}

#if NABU_WITH_ONEDNN
using DataType = dnnl::memory::data_type;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Each thread its own in-order stream: the two directions of a layer run on two threads.
dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

// A 2-D tensor as oneDNN sees it: its sizes and strides.
dnnl::memory::desc matrix_desc(const at::Tensor& t, DataType type) {
  return dnnl::memory::desc({t.size(0), t.size(1)}, type, {t.stride(0), t.stride(1)});
}

dnnl::memory::desc plain_desc(int64_t rows, int64_t columns, DataType type) {
  return dnnl::memory::desc({rows, columns}, type, dnnl::memory::format_tag::ab);
}

// oneDNN wants positive strides: a broadcast view is copied first.
at::Tensor with_positive_strides(const at::Tensor& t) {
  return t.stride(0) > 0 && t.stride(1) > 0 ? t : t.contiguous();
}

void run(const dnnl::primitive& primitive, const std::unordered_map<int, dnnl::memory>& args) {
  auto& stream = thread_stream();
  primitive.execute(stream, args);
  stream.wait();
}
#endif

}  // namespace

bool built_with_onednn() { return NABU_WITH_ONEDNN != 0; }

bool packed_available() {
#if NABU_WITH_ONEDNN
  // Where oneDNN has only its reference kernels for bf16 (no AVX-512), they are far slower than
  // LibTorch's path: packing pays only with the CPU's own bf16 kernels.
  static const bool available = [] {
    try {
      dnnl::matmul::primitive_desc pd(
          dnnl::matmul::desc(plain_desc(16, 64, DataType::bf16), plain_desc(64, 64, DataType::bf16),
                             plain_desc(16, 64, DataType::f32)),
          cpu_engine());
      return std::string(pd.impl_info_str()).rfind("ref", 0) != 0;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return available;
#else
  return false;
#endif
}

#if NABU_WITH_ONEDNN
struct RepeatedProduct::Packed {
  dnnl::matmul primitive;
  dnnl::memory weight, source, destination;
};
#else
struct RepeatedProduct::Packed {};
#endif

RepeatedProduct::RepeatedProduct(const at::Tensor& weight, int64_t rows, bool accumulate)
    : rows_(rows), accumulate_(accumulate) {
  TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == at::kFloat && weight.device().is_cpu(),
              "bf16 product: a float CPU matrix, got ", weight.sizes());
  if (!packed_available() || rows == 0 || weight.numel() == 0) {
    weight_bf16_ = weight.to(at::kBFloat16);
    return;
  }
#if NABU_WITH_ONEDNN
  const int64_t k = weight.size(0), n = weight.size(1);
  dnnl::primitive_attr attributes;
  if (accumulate) {
    dnnl::post_ops sum;
    sum.append_sum(1.0f);
    attributes.set_post_ops(sum);
  }
  const dnnl::memory::desc any_layout({k, n}, DataType::bf16, dnnl::memory::format_tag::any);
  dnnl::matmul::primitive_desc pd(
      dnnl::matmul::desc(plain_desc(rows, k, DataType::bf16), any_layout,
                         plain_desc(rows, n, DataType::f32)),
      attributes, cpu_engine());
  auto& engine = cpu_engine();
  const at::Tensor fp32_weight = with_positive_strides(weight);
  dnnl::memory user(matrix_desc(fp32_weight, DataType::f32), engine, fp32_weight.data_ptr());
  packed_ = std::make_unique<Packed>();
  packed_->weight = dnnl::memory(pd.weights_desc(), engine);
  // One reorder rounds the fp32 weight to bf16 and lays it out for the kernel.
  run(dnnl::reorder(user, packed_->weight),
      {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, packed_->weight}});
  packed_->primitive = dnnl::matmul(pd);
  packed_->source = dnnl::memory(pd.src_desc(), engine, DNNL_MEMORY_NONE);
  packed_->destination = dnnl::memory(pd.dst_desc(), engine, DNNL_MEMORY_NONE);
#endif
}

void RepeatedProduct::multiply(const uint16_t* a, float* out) {
  if (!packed_) {
    const auto bf16 = at::TensorOptions().dtype(at::kBFloat16);
    const at::Tensor left =
        at::from_blob(const_cast<uint16_t*>(a), {rows_, weight_bf16_.size(0)}, bf16);
    at::Tensor result = at::from_blob(out, {rows_, weight_bf16_.size(1)},
                                      at::TensorOptions().dtype(at::kFloat));
    const at::Tensor product = at::mm(left, weight_bf16_).to(at::kFloat);
    if (accumulate_) result.add_(product);
    else result.copy_(product);
    return;
  }
#if NABU_WITH_ONEDNN
  packed_->source.set_data_handle(const_cast<uint16_t*>(a));
  packed_->destination.set_data_handle(out);
  run(packed_->primitive, {{DNNL_ARG_SRC, packed_->source},
                           {DNNL_ARG_WEIGHTS, packed_->weight},
                           {DNNL_ARG_DST, packed_->destination}});
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
    out.copy_(rounded_product(a, b));
    if (bias.defined()) out.add_(bias);
    return;
  }
#if NABU_WITH_ONEDNN
  const at::Tensor left = with_positive_strides(a.to(at::kBFloat16));
  const at::Tensor right = with_positive_strides(b.to(at::kBFloat16));
  const at::Tensor shift = bias.defined() ? bias.to(at::kFloat).contiguous() : at::Tensor();
  const auto source_desc = matrix_desc(left, DataType::bf16);
  const auto weights_desc = matrix_desc(right, DataType::bf16);
  const auto destination_desc = matrix_desc(out, DataType::f32);
  auto& engine = cpu_engine();
  std::unordered_map<int, dnnl::memory> args;
  std::optional<dnnl::matmul::primitive_desc> pd;
  if (shift.defined()) {
    const dnnl::memory::desc bias_desc = plain_desc(1, b.size(1), DataType::f32);
    pd.emplace(dnnl::matmul::desc(source_desc, weights_desc, bias_desc, destination_desc), engine);
    args[DNNL_ARG_BIAS] = dnnl::memory(bias_desc, engine, shift.data_ptr());
  } else {
    pd.emplace(dnnl::matmul::desc(source_desc, weights_desc, destination_desc), engine);
  }
  args[DNNL_ARG_SRC] = dnnl::memory(source_desc, engine, left.data_ptr());
  args[DNNL_ARG_WEIGHTS] = dnnl::memory(weights_desc, engine, right.data_ptr());
  args[DNNL_ARG_DST] = dnnl::memory(destination_desc, engine, out.data_ptr());
  run(dnnl::matmul(*pd), args);
#endif
}

RepeatedProduct::~RepeatedProduct() = default;
RepeatedProduct::RepeatedProduct(RepeatedProduct&&) noexcept = default;
RepeatedProduct& RepeatedProduct::operator=(RepeatedProduct&&) noexcept = default;

}  // namespace nabu::bf16_matmul
