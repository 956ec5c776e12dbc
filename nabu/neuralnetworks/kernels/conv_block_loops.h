// The per-row loops of Conv-TasNet's blocks (conv_tasnet_kernels.h): a dilated depthwise
// convolution and PReLU followed by a masked global layer norm, forward and backward, over one
// row (one channel of one sequence) of float frames at a time.
//
// Why: in LibTorch 1.13 on the CPU the depthwise convolution's backward took 8.6 ms for one
// [8, 128, 1000] tensor of the toy recipe (mkldnn; the data is 4 MB), and gLN with its mask is
// some fifteen elementwise operations, each a pass over the tensor forward and again backward:
// together more than half of the toy recipe's update (docs/results.md, "Conv-TasNet's blocks on
// the CPU").
// These loops make one to three passes instead. They are compiled for AVX-512, AVX2 and plain
// x86-64, the CPU picking its own at load time; the sums run in 16 float lanes added in double.
#pragma once

#include <cstdint>

namespace nabu::conv_loops {

// One row of a depthwise convolution with `taps` weights `dilation` frames apart, the input
// zero-padded by `left` frames before it (and as many as out_frames needs after):
// y[t] = bias + sum_k weight[k] x[t + k dilation - left] over the x that exist.
void depthwise_forward(const float* x, int64_t frames, const float* weight, int64_t taps,
                       int64_t dilation, int64_t left, float bias, float* y, int64_t out_frames);
// Its backward pass for one row: dx (frames values) is written; the weight's (taps values) and
// the bias's gradients are added to.
void depthwise_backward(const float* x, int64_t frames, const float* dy, int64_t out_frames,
                        const float* weight, int64_t taps, int64_t dilation, int64_t left,
                        float* dx, double* dweight, double* dbias);

// p = PReLU(x) = x where x > 0, slope x elsewhere; mask: the frames' weights (0 or 1), or null
// for all 1. Sums over one row of n frames:
double masked_prelu_sum(const float* x, const float* mask, int64_t n, float slope);
double masked_prelu_squares(const float* x, const float* mask, int64_t n, float slope,
                            float mean);
// y = mask ((p - mean) rstd gain + bias).
void prelu_norm_forward(const float* x, const float* mask, int64_t n, float slope, float mean,
                        float rstd, float gain, float bias, float* y);
// The backward pass's row sums of dy mask xhat and of dy mask, xhat = (p - mean) rstd.
void prelu_norm_row_sums(const float* x, const float* dy, const float* mask, int64_t n,
                         float slope, float mean, float rstd, double* dy_xhat, double* dy_sum);
// dx = PReLU'(x) mask rstd (dy gain - mean_g - xhat mean_gx), mean_g and mean_gx the sequence's
// means of dy gain and dy gain xhat over its masked frames and channels; returns this row's part
// of the slope's gradient, the sum of x dp where x <= 0.
double prelu_norm_backward(const float* x, const float* dy, const float* mask, int64_t n,
                           float slope, float mean, float rstd, float gain, float mean_g,
                           float mean_gx, float* dx);

}  // namespace nabu::conv_loops
