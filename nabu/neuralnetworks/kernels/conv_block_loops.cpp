#include "nabu/neuralnetworks/kernels/conv_block_loops.h"

#include <algorithm>

namespace nabu::conv_loops {
namespace {

#define NABU_ROW_KERNEL __attribute__((target_clones("avx512f", "avx2", "default")))
#define NABU_INLINE inline __attribute__((always_inline))

// sum over t < n of term(t), in 16 float lanes (which the compiler turns into vectors) added in
// double: the order is fixed, so a result does not depend on the CPU or the threads.
template <class Term>
NABU_INLINE double lane_sum(int64_t n, Term term) {
  constexpr int kLanes = 16;
  float lanes[kLanes] = {};
  int64_t t = 0;
  for (; t + kLanes <= n; t += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += term(t + l);
  double total = 0;
  for (int l = 0; l < kLanes; ++l) total += lanes[l];
  for (; t < n; ++t) total += term(t);
  return total;
}

NABU_INLINE float prelu(float x, float slope) { return x > 0.0F ? x : slope * x; }

template <bool kMasked>
NABU_INLINE float weight_at(const float* mask, int64_t t) {
  if constexpr (kMasked) return mask[t];
  return 1.0F;
}

// The frames t < out_frames for which t + offset is a frame of x.
struct Overlap {
  int64_t begin, end;
};
NABU_INLINE Overlap overlap(int64_t offset, int64_t frames, int64_t out_frames) {
  const int64_t begin = std::max<int64_t>(0, -offset);
  const int64_t end = std::min(out_frames, frames - offset);
  return {begin, std::max(begin, end)};
}

template <bool kMasked>
NABU_INLINE double masked_prelu_sum_of(const float* __restrict x, const float* __restrict mask,
                                       int64_t n, float slope) {
  return lane_sum(n, [&](int64_t t) { return weight_at<kMasked>(mask, t) * prelu(x[t], slope); });
}

template <bool kMasked>
NABU_INLINE double masked_prelu_squares_of(const float* __restrict x,
                                           const float* __restrict mask, int64_t n, float slope,
                                           float mean) {
  return lane_sum(n, [&](int64_t t) {
    const float centred = prelu(x[t], slope) - mean;
    return weight_at<kMasked>(mask, t) * centred * centred;
  });
}

template <bool kMasked>
NABU_INLINE void prelu_norm_forward_of(const float* __restrict x, const float* __restrict mask,
                                       int64_t n, float slope, float mean, float rstd, float gain,
                                       float bias, float* __restrict y) {
  const float scale = rstd * gain;
  for (int64_t t = 0; t < n; ++t)
    y[t] = weight_at<kMasked>(mask, t) * ((prelu(x[t], slope) - mean) * scale + bias);
}

template <bool kMasked>
NABU_INLINE void prelu_norm_row_sums_of(const float* __restrict x, const float* __restrict dy,
                                        const float* __restrict mask, int64_t n, float slope,
                                        float mean, float rstd, double* dy_xhat, double* dy_sum) {
  *dy_xhat = lane_sum(n, [&](int64_t t) {
    return weight_at<kMasked>(mask, t) * dy[t] * ((prelu(x[t], slope) - mean) * rstd);
  });
  *dy_sum = lane_sum(n, [&](int64_t t) { return weight_at<kMasked>(mask, t) * dy[t]; });
}

template <bool kMasked>
NABU_INLINE double prelu_norm_backward_of(const float* __restrict x, const float* __restrict dy,
                                          const float* __restrict mask, int64_t n, float slope,
                                          float mean, float rstd, float gain, float mean_g,
                                          float mean_gx, float* __restrict dx) {
  // One pass: dx, and the slope's gradient (x dp where x <= 0) as the sum's terms.
  return lane_sum(n, [&](int64_t t) {
    const float xhat = (prelu(x[t], slope) - mean) * rstd;
    const float dp =
        weight_at<kMasked>(mask, t) * rstd * (dy[t] * gain - mean_g - xhat * mean_gx);
    const bool positive = x[t] > 0.0F;
    dx[t] = positive ? dp : slope * dp;
    return positive ? 0.0F : x[t] * dp;
  });
}

}  // namespace

NABU_ROW_KERNEL
void depthwise_forward(const float* __restrict x, int64_t frames,
                       const float* __restrict weight, int64_t taps, int64_t dilation,
                       int64_t left, float bias, float* __restrict y, int64_t out_frames) {
  std::fill(y, y + out_frames, bias);
  for (int64_t k = 0; k < taps; ++k) {
    const int64_t offset = k * dilation - left;
    const auto [begin, end] = overlap(offset, frames, out_frames);
    const float w = weight[k];
    for (int64_t t = begin; t < end; ++t) y[t] += w * x[t + offset];
  }
}

NABU_ROW_KERNEL
void depthwise_backward(const float* __restrict x, int64_t frames, const float* __restrict dy,
                        int64_t out_frames, const float* __restrict weight, int64_t taps,
                        int64_t dilation, int64_t left, float* __restrict dx, double* dweight,
                        double* dbias) {
  std::fill(dx, dx + frames, 0.0F);
  for (int64_t k = 0; k < taps; ++k) {
    const int64_t offset = k * dilation - left;
    const auto [begin, end] = overlap(offset, frames, out_frames);
    const float w = weight[k];
    for (int64_t t = begin; t < end; ++t) dx[t + offset] += w * dy[t];
    const float* shifted = x + offset;
    dweight[k] += lane_sum(end - begin, [&](int64_t i) {
      return dy[begin + i] * shifted[begin + i];
    });
  }
  *dbias += lane_sum(out_frames, [&](int64_t t) { return dy[t]; });
}

NABU_ROW_KERNEL
double masked_prelu_sum(const float* x, const float* mask, int64_t n, float slope) {
  return mask ? masked_prelu_sum_of<true>(x, mask, n, slope)
              : masked_prelu_sum_of<false>(x, mask, n, slope);
}

NABU_ROW_KERNEL
double masked_prelu_squares(const float* x, const float* mask, int64_t n, float slope,
                            float mean) {
  return mask ? masked_prelu_squares_of<true>(x, mask, n, slope, mean)
              : masked_prelu_squares_of<false>(x, mask, n, slope, mean);
}

NABU_ROW_KERNEL
void prelu_norm_forward(const float* x, const float* mask, int64_t n, float slope, float mean,
                        float rstd, float gain, float bias, float* y) {
  if (mask) prelu_norm_forward_of<true>(x, mask, n, slope, mean, rstd, gain, bias, y);
  else prelu_norm_forward_of<false>(x, mask, n, slope, mean, rstd, gain, bias, y);
}

NABU_ROW_KERNEL
void prelu_norm_row_sums(const float* x, const float* dy, const float* mask, int64_t n,
                         float slope, float mean, float rstd, double* dy_xhat, double* dy_sum) {
  if (mask) prelu_norm_row_sums_of<true>(x, dy, mask, n, slope, mean, rstd, dy_xhat, dy_sum);
  else prelu_norm_row_sums_of<false>(x, dy, mask, n, slope, mean, rstd, dy_xhat, dy_sum);
}

NABU_ROW_KERNEL
double prelu_norm_backward(const float* x, const float* dy, const float* mask, int64_t n,
                           float slope, float mean, float rstd, float gain, float mean_g,
                           float mean_gx, float* dx) {
  return mask ? prelu_norm_backward_of<true>(x, dy, mask, n, slope, mean, rstd, gain, mean_g,
                                             mean_gx, dx)
              : prelu_norm_backward_of<false>(x, dy, mask, n, slope, mean, rstd, gain, mean_g,
                                              mean_gx, dx);
}

}  // namespace nabu::conv_loops
