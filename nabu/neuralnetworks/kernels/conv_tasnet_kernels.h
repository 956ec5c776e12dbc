// Conv-TasNet's block operations on the CPU as single autograd operations (conv_block_loops.h
// says why): the dilated depthwise convolution with its zero padding, and PReLU followed by the
// masked global layer norm (gLN). Each computes what LibTorch's operations compose
// (tests/unit/test_conv_tasnet_kernels.cpp holds them to those), in float; the callers use
// LibTorch's operations where supports() is false (a GPU, double).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace nabu::conv_kernels {

// Whether these kernels take x: a float tensor on the CPU.
bool supports(const at::Tensor& x);

// x [B, C, T] zero-padded by left and right frames, convolved per channel with weight [C, 1, K]
// dilated by `dilation`, plus bias [C]: [B, C, T + left + right - (K - 1) dilation].
at::Tensor depthwise_conv1d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            int64_t dilation, int64_t left, int64_t right);

// gLN(PReLU(x)) for x [B, C, T]: PReLU with one slope (slope [1]), then per sequence the mean and
// variance over its channels and the frames where mask [B, 1, T] is 1 (all frames when mask is
// undefined), y = mask ((p - mean) / sqrt(variance + epsilon) gain + bias), gain and bias
// [1, C, 1].
at::Tensor prelu_global_norm(const at::Tensor& x, const at::Tensor& slope, const at::Tensor& gain,
                             const at::Tensor& bias, const at::Tensor& mask, double epsilon);

}  // namespace nabu::conv_kernels
