#include "nabu/neuralnetworks/kernels/onednn_products.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <string>
#include <unordered_map>

namespace nabu::onednn {
namespace {

using DataType = dnnl::memory::data_type;
using Desc = dnnl::memory::desc;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Each thread its own in-order stream: the two directions of a layer run on two threads.
dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

Desc matrix_desc(const MatrixLayout& layout, DataType type) {
  return Desc({layout.rows, layout.columns}, type, {layout.row_stride, layout.column_stride});
}

// The matmul's primitive descriptor: oneDNN 3 dropped the operation descriptor of oneDNN 2.
dnnl::matmul::primitive_desc matmul_desc(const Desc& source, const Desc& weights, const Desc* bias,
                                         const Desc& destination,
                                         const dnnl::primitive_attr& attributes = {}) {
#if DNNL_VERSION_MAJOR >= 3
  if (bias) {
    return {cpu_engine(), source, weights, *bias, destination, attributes};
  }
  return {cpu_engine(), source, weights, destination, attributes};
#else
  if (bias) {
    return {dnnl::matmul::desc(source, weights, *bias, destination), attributes, cpu_engine()};
  }
  return {dnnl::matmul::desc(source, weights, destination), attributes, cpu_engine()};
#endif
}

void run(const dnnl::primitive& primitive, const std::unordered_map<int, dnnl::memory>& args) {
  auto& stream = thread_stream();
  primitive.execute(stream, args);
  stream.wait();
}

}  // namespace

bool bf16_kernels_available() {
  static const bool available = [] {
    // A header of another major version than the loaded library's would misread its structures
    // (CMake checks the pair it builds with; this, the library found at run time).
    if (dnnl_version()->major != DNNL_VERSION_MAJOR) return false;
    try {
      const auto pd = matmul_desc(matrix_desc(row_major(16, 64), DataType::bf16),
                                  matrix_desc(row_major(64, 64), DataType::bf16), nullptr,
                                  matrix_desc(row_major(16, 64), DataType::f32));
      return std::string(pd.impl_info_str()).rfind("ref", 0) != 0;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return available;
}

struct PackedProduct::State {
  dnnl::matmul primitive;
  dnnl::memory weight, source, destination;
};

PackedProduct::PackedProduct(const float* weight, const MatrixLayout& layout, int64_t rows,
                             bool accumulate)
    : state_(std::make_unique<State>()) {
  dnnl::primitive_attr attributes;
  if (accumulate) {
    dnnl::post_ops sum;
    sum.append_sum(1.0f);
    attributes.set_post_ops(sum);
  }
  const Desc any_layout({layout.rows, layout.columns}, DataType::bf16,
                        dnnl::memory::format_tag::any);
  const auto pd = matmul_desc(matrix_desc(row_major(rows, layout.rows), DataType::bf16),
                              any_layout, nullptr,
                              matrix_desc(row_major(rows, layout.columns), DataType::f32),
                              attributes);
  auto& engine = cpu_engine();
  dnnl::memory user(matrix_desc(layout, DataType::f32), engine, const_cast<float*>(weight));
  state_->weight = dnnl::memory(pd.weights_desc(), engine);
  // One reorder rounds the fp32 weight to bf16 and lays it out for the kernel.
  run(dnnl::reorder(user, state_->weight), {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, state_->weight}});
  state_->primitive = dnnl::matmul(pd);
  state_->source = dnnl::memory(pd.src_desc(), engine, DNNL_MEMORY_NONE);
  state_->destination = dnnl::memory(pd.dst_desc(), engine, DNNL_MEMORY_NONE);
}

PackedProduct::~PackedProduct() = default;

void PackedProduct::multiply(const uint16_t* a, float* out) {
  state_->source.set_data_handle(const_cast<uint16_t*>(a));
  state_->destination.set_data_handle(out);
  run(state_->primitive, {{DNNL_ARG_SRC, state_->source},
                          {DNNL_ARG_WEIGHTS, state_->weight},
                          {DNNL_ARG_DST, state_->destination}});
}

void product(const uint16_t* a, const MatrixLayout& a_layout, const uint16_t* b,
             const MatrixLayout& b_layout, const float* bias, float* out,
             const MatrixLayout& out_layout) {
  auto& engine = cpu_engine();
  const Desc source = matrix_desc(a_layout, DataType::bf16);
  const Desc weights = matrix_desc(b_layout, DataType::bf16);
  const Desc destination = matrix_desc(out_layout, DataType::f32);
  const Desc bias_desc = matrix_desc(row_major(1, b_layout.columns), DataType::f32);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, dnnl::memory(source, engine, const_cast<uint16_t*>(a))},
      {DNNL_ARG_WEIGHTS, dnnl::memory(weights, engine, const_cast<uint16_t*>(b))},
      {DNNL_ARG_DST, dnnl::memory(destination, engine, out)}};
  if (bias) args[DNNL_ARG_BIAS] = dnnl::memory(bias_desc, engine, const_cast<float*>(bias));
  run(dnnl::matmul(matmul_desc(source, weights, bias ? &bias_desc : nullptr, destination)), args);
}

}  // namespace nabu::onednn
