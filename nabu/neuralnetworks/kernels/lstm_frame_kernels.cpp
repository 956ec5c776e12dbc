// Compiled alone with -O3 (nabu/CMakeLists.txt): GCC vectorizes these loops only there.
#include "nabu/neuralnetworks/kernels/lstm_frame_kernels.h"

#include <algorithm>
#include <cstring>

// One copy of each kernel per instruction set; the dynamic loader picks the CPU's.
#define NABU_FRAME_KERNEL __attribute__((target_clones("avx512f", "avx2", "default")))
#define NABU_INLINE inline __attribute__((always_inline))

namespace nabu::lstm_frames {
namespace {

NABU_INLINE float from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

NABU_INLINE uint32_t to_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// exp(x) as Cephes' expf computes it: x = n ln 2 + r with |r| <= ln 2 / 2, a degree-6 polynomial
// for exp(r), times 2^n built in the exponent bits. Beyond +-88.4 it saturates to 0 or infinity,
// which sigmoid() turns into 1 or 0.
NABU_INLINE float exp_polynomial(float x) {
  x = std::min(std::max(x, -87.0f), 88.5f);
  const float scaled = x * 1.44269504088896341f;
  // Adding and taking away 1.5 * 2^23 rounds to the nearest integer (|scaled| < 2^22 here).
  const float n = (scaled + 12582912.0f) - 12582912.0f;
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  const float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r2 + r + 1.0f;
  const uint32_t power = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  return p * from_bits(power);
}

NABU_INLINE float sigmoid_of(float x) { return 1.0f / (1.0f + exp_polynomial(-x)); }
NABU_INLINE float tanh_of(float x) { return 2.0f * sigmoid_of(2.0f * x) - 1.0f; }

// Round to nearest even, as c10::BFloat16 does (a NaN stays a NaN). A loop of its own: GCC does
// not vectorize the 16-bit stores inside the loops of float arithmetic.
NABU_INLINE void round_units(const float* __restrict values, uint16_t* __restrict out,
                             int64_t count) {
  for (int64_t k = 0; k < count; ++k) {
    const uint32_t bits = to_bits(values[k]);
    const uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
    out[k] = values[k] != values[k] ? uint16_t{0x7FC0} : static_cast<uint16_t>(rounded);
  }
}

// One sequence's H units of a frame.
NABU_INLINE void forward_units(float* __restrict a, const float* __restrict c_prev,
                               float* __restrict c, float* __restrict tanh_c,
                               float* __restrict h, int64_t H) {
  for (int64_t j = 0; j < H; ++j) {
    const float i = sigmoid_of(a[j]), f = sigmoid_of(a[H + j]);
    const float g = tanh_of(a[2 * H + j]), o = sigmoid_of(a[3 * H + j]);
    const float cell = f * c_prev[j] + i * g;
    const float tc = tanh_of(cell);
    a[j] = i;
    a[H + j] = f;
    a[2 * H + j] = g;
    a[3 * H + j] = o;
    c[j] = cell;
    tanh_c[j] = tc;
    h[j] = o * tc;
  }
}

NABU_INLINE void backward_units(const float* __restrict a, const float* __restrict c_prev,
                                const float* __restrict tanh_c, const float* __restrict gh,
                                const float* __restrict dh_rec, float* __restrict dc,
                                float* __restrict d, int64_t H) {
  for (int64_t j = 0; j < H; ++j) {
    const float i = a[j], f = a[H + j], g = a[2 * H + j], o = a[3 * H + j];
    const float dh = gh[j] + dh_rec[j];
    const float d_cell = dc[j] + dh * o * (1.0f - tanh_c[j] * tanh_c[j]);
    const float d_i = d_cell * g * i * (1.0f - i);
    const float d_f = d_cell * c_prev[j] * f * (1.0f - f);
    const float d_g = d_cell * i * (1.0f - g * g);
    const float d_o = dh * tanh_c[j] * o * (1.0f - o);
    d[j] = d_i;
    d[H + j] = d_f;
    d[2 * H + j] = d_g;
    d[3 * H + j] = d_o;
    dc[j] = d_cell * f;
  }
}

}  // namespace

float sigmoid(float x) { return sigmoid_of(x); }
float tanh(float x) { return tanh_of(x); }
void round_to_bf16(const float* values, uint16_t* out, int64_t count) {
  round_units(values, out, count);
}

NABU_FRAME_KERNEL
void forward(const Forward& frame, int64_t batch, int64_t units, const int64_t* lengths,
             int64_t frame_index) {
  const int64_t H = units;
  for (int64_t b = 0; b < batch; ++b) {
    float* a = frame.gates + b * 4 * H;
    float* c = frame.cells + b * H;
    float* tanh_c = frame.tanh_cells + b * H;
    float* h = frame.hidden + b * H;
    uint16_t* h_bf16 = frame.hidden_bf16 + b * H;
    if (frame_index >= lengths[b]) {
      std::fill(a, a + 4 * H, 0.0f);
      std::fill(c, c + H, 0.0f);
      std::fill(tanh_c, tanh_c + H, 0.0f);
      std::fill(h, h + H, 0.0f);
      std::fill(h_bf16, h_bf16 + H, uint16_t{0});
      continue;
    }
    forward_units(a, frame.previous_cells + b * H, c, tanh_c, h, H);
    round_units(h, h_bf16, H);
  }
}

NABU_FRAME_KERNEL
void backward(const Backward& frame, int64_t batch, int64_t units, const int64_t* lengths,
              int64_t frame_index) {
  const int64_t H = units;
  for (int64_t b = 0; b < batch; ++b) {
    float* d = frame.grad_gates + b * 4 * H;
    uint16_t* d_bf16 = frame.grad_gates_bf16 + b * 4 * H;
    float* dc = frame.grad_cells + b * H;
    if (frame_index >= lengths[b]) {
      std::fill(d, d + 4 * H, 0.0f);
      std::fill(d_bf16, d_bf16 + 4 * H, uint16_t{0});
      std::fill(dc, dc + H, 0.0f);
      continue;
    }
    backward_units(frame.gates + b * 4 * H, frame.previous_cells + b * H,
                   frame.tanh_cells + b * H, frame.grad_hidden + b * H,
                   frame.grad_recurrent + b * H, dc, d, H);
    round_units(d, d_bf16, 4 * H);
  }
}

}  // namespace nabu::lstm_frames
