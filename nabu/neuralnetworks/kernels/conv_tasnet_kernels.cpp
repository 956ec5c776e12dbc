#include "nabu/neuralnetworks/kernels/conv_tasnet_kernels.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "nabu/neuralnetworks/kernels/conv_block_loops.h"

namespace nabu::conv_kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct DepthwiseConv : public torch::autograd::Function<DepthwiseConv> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input,
                            const at::Tensor& weight, const at::Tensor& bias, int64_t dilation,
                            int64_t left, int64_t right) {
    const at::Tensor x = input.contiguous();
    const at::Tensor w = weight.contiguous();
    const at::Tensor b = bias.contiguous();
    const int64_t batch = x.size(0), channels = x.size(1), frames = x.size(2), taps = w.size(2);
    const int64_t out_frames = frames + left + right - (taps - 1) * dilation;
    TORCH_CHECK(out_frames >= 0, "depthwise convolution: ", frames, " frames padded by ", left,
                " and ", right, " are fewer than the ", taps, " taps dilated by ", dilation);
    at::Tensor y = at::empty({batch, channels, out_frames}, x.options());
    const float *xd = x.data_ptr<float>(), *wd = w.data_ptr<float>(), *bd = b.data_ptr<float>();
    float* yd = y.data_ptr<float>();
    at::parallel_for(0, batch * channels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t c = row % channels;
        conv_loops::depthwise_forward(xd + row * frames, frames, wd + c * taps, taps, dilation,
                                      left, bd[c], yd + row * out_frames, out_frames);
      }
    });
    ctx->save_for_backward({x, w});
    ctx->saved_data["dilation"] = dilation;
    ctx->saved_data["left"] = left;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1];
    const at::Tensor dy = grads[0].contiguous();
    const int64_t dilation = ctx->saved_data["dilation"].toInt();
    const int64_t left = ctx->saved_data["left"].toInt();
    const int64_t batch = x.size(0), channels = x.size(1), frames = x.size(2), taps = w.size(2);
    const int64_t out_frames = dy.size(2);
    at::Tensor dx = at::empty_like(x);
    at::Tensor dweight = at::zeros({channels, taps}, x.options().dtype(at::kDouble));
    at::Tensor dbias = at::zeros({channels}, x.options().dtype(at::kDouble));
    const float *xd = x.data_ptr<float>(), *wd = w.data_ptr<float>(), *dyd = dy.data_ptr<float>();
    float* dxd = dx.data_ptr<float>();
    double *dwd = dweight.data_ptr<double>(), *dbd = dbias.data_ptr<double>();
    // By channel, so that each channel's weight gradient sums its sequences in one order.
    at::parallel_for(0, channels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c)
        for (int64_t s = 0; s < batch; ++s) {
          const int64_t row = s * channels + c;
          conv_loops::depthwise_backward(xd + row * frames, frames, dyd + row * out_frames,
                                         out_frames, wd + c * taps, taps, dilation, left,
                                         dxd + row * frames, dwd + c * taps, dbd + c);
        }
    });
    return {dx, dweight.to(at::kFloat).view_as(w), dbias.to(at::kFloat), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

// Per sequence of a [B, C, T] tensor: the frames' weights (the mask's row, or null) and the count
// of the values gLN averages over.
struct SequenceFrames {
  const float* mask = nullptr;
  double count = 1;
};

std::vector<SequenceFrames> sequence_frames(const at::Tensor& mask, int64_t batch,
                                            int64_t channels, int64_t frames) {
  std::vector<SequenceFrames> sequences(batch);
  const at::Tensor counts = mask.defined() ? mask.sum(at::IntArrayRef{1, 2}).to(at::kDouble).contiguous()
                                           : at::Tensor();
  for (int64_t b = 0; b < batch; ++b) {
    if (mask.defined()) sequences[b].mask = mask.data_ptr<float>() + b * frames;
    const double valid = mask.defined() ? counts.data_ptr<double>()[b] : double(frames);
    sequences[b].count = std::max(valid * double(channels), 1.0);
  }
  return sequences;
}

struct PreluGlobalNorm : public torch::autograd::Function<PreluGlobalNorm> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input,
                            const at::Tensor& slope_weight, const at::Tensor& gain_weight,
                            const at::Tensor& bias_weight, const at::Tensor& frame_mask,
                            double epsilon) {
    const at::Tensor x = input.contiguous();
    // No mask comes as an empty tensor: autograd functions take defined tensors only.
    const at::Tensor mask = frame_mask.numel() > 0 ? frame_mask.contiguous() : at::Tensor();
    const int64_t batch = x.size(0), channels = x.size(1), frames = x.size(2);
    const float slope = slope_weight.item<float>();
    const at::Tensor gain = gain_weight.contiguous(), bias = bias_weight.contiguous();
    const float *xd = x.data_ptr<float>(), *gd = gain.data_ptr<float>(),
                *bd = bias.data_ptr<float>();
    const auto sequences = sequence_frames(mask, batch, channels, frames);
    // Two passes for the statistics (the mean, then the squares about it), as LibTorch's
    // composition computes them, and one for the output.
    std::vector<double> row_sums(batch * channels);
    at::parallel_for(0, batch * channels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row)
        row_sums[row] = conv_loops::masked_prelu_sum(xd + row * frames,
                                                     sequences[row / channels].mask, frames, slope);
    });
    at::Tensor mean = at::empty({batch}, x.options()), rstd = at::empty({batch}, x.options());
    float *md = mean.data_ptr<float>(), *rd = rstd.data_ptr<float>();
    auto sequence_total = [&](int64_t b) {
      double total = 0;
      for (int64_t c = 0; c < channels; ++c) total += row_sums[b * channels + c];
      return total;
    };
    for (int64_t b = 0; b < batch; ++b) md[b] = float(sequence_total(b) / sequences[b].count);
    at::parallel_for(0, batch * channels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row)
        row_sums[row] = conv_loops::masked_prelu_squares(
            xd + row * frames, sequences[row / channels].mask, frames, slope, md[row / channels]);
    });
    for (int64_t b = 0; b < batch; ++b)
      rd[b] = float(1.0 / std::sqrt(sequence_total(b) / sequences[b].count + epsilon));
    at::Tensor y = at::empty_like(x);
    float* yd = y.data_ptr<float>();
    at::parallel_for(0, batch * channels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t b = row / channels, c = row % channels;
        conv_loops::prelu_norm_forward(xd + row * frames, sequences[b].mask, frames, slope, md[b],
                                       rd[b], gd[c], bd[c], yd + row * frames);
      }
    });
    ctx->save_for_backward({x, slope_weight, gain, frame_mask, mean, rstd});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &gain = saved[2], &mean = saved[4], &rstd = saved[5];
    const at::Tensor mask = saved[3].numel() > 0 ? saved[3].contiguous() : at::Tensor();
    const at::Tensor dy = grads[0].contiguous();
    const int64_t batch = x.size(0), channels = x.size(1), frames = x.size(2);
    const float slope = saved[1].item<float>();
    const float *xd = x.data_ptr<float>(), *dyd = dy.data_ptr<float>(),
                *gd = gain.data_ptr<float>(), *md = mean.data_ptr<float>(),
                *rd = rstd.data_ptr<float>();
    const auto sequences = sequence_frames(mask, batch, channels, frames);
    std::vector<double> dy_xhat(batch * channels), dy_sum(batch * channels);
    at::parallel_for(0, batch * channels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t b = row / channels;
        conv_loops::prelu_norm_row_sums(xd + row * frames, dyd + row * frames, sequences[b].mask,
                                        frames, slope, md[b], rd[b], &dy_xhat[row], &dy_sum[row]);
      }
    });
    at::Tensor dgain = at::empty_like(gain), dbias = at::empty_like(gain);
    float *dgd = dgain.data_ptr<float>(), *dbd = dbias.data_ptr<float>();
    for (int64_t c = 0; c < channels; ++c) {
      double g = 0, b_sum = 0;
      for (int64_t b = 0; b < batch; ++b) {
        g += dy_xhat[b * channels + c];
        b_sum += dy_sum[b * channels + c];
      }
      dgd[c] = float(g);
      dbd[c] = float(b_sum);
    }
    std::vector<float> mean_g(batch), mean_gx(batch);
    for (int64_t b = 0; b < batch; ++b) {
      double g = 0, gx = 0;
      for (int64_t c = 0; c < channels; ++c) {
        g += gd[c] * dy_sum[b * channels + c];
        gx += gd[c] * dy_xhat[b * channels + c];
      }
      mean_g[b] = float(g / sequences[b].count);
      mean_gx[b] = float(gx / sequences[b].count);
    }
    at::Tensor dx = at::empty_like(x);
    float* dxd = dx.data_ptr<float>();
    std::vector<double> slope_parts(batch * channels);
    at::parallel_for(0, batch * channels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t b = row / channels, c = row % channels;
        slope_parts[row] = conv_loops::prelu_norm_backward(
            xd + row * frames, dyd + row * frames, sequences[b].mask, frames, slope, md[b], rd[b],
            gd[c], mean_g[b], mean_gx[b], dxd + row * frames);
      }
    });
    double dslope = 0;
    for (double part : slope_parts) dslope += part;
    return {dx, at::full_like(saved[1], dslope), dgain, dbias, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

bool supports(const at::Tensor& x) {
  return x.defined() && x.device().is_cpu() && x.scalar_type() == at::kFloat;
}

at::Tensor depthwise_conv1d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            int64_t dilation, int64_t left, int64_t right) {
  TORCH_CHECK(x.dim() == 3 && weight.dim() == 3 && weight.size(0) == x.size(1) &&
                  weight.size(1) == 1 && bias.numel() == x.size(1),
              "depthwise convolution of ", x.sizes(), " by ", weight.sizes());
  return DepthwiseConv::apply(x, weight, bias, dilation, left, right);
}

at::Tensor prelu_global_norm(const at::Tensor& x, const at::Tensor& slope, const at::Tensor& gain,
                             const at::Tensor& bias, const at::Tensor& mask, double epsilon) {
  TORCH_CHECK(x.dim() == 3 && slope.numel() == 1 && gain.numel() == x.size(1) &&
                  bias.numel() == x.size(1),
              "PReLU and gLN of ", x.sizes(), " with ", slope.numel(), " slope(s) and ",
              gain.numel(), " gains");
  TORCH_CHECK(!mask.defined() || (mask.scalar_type() == at::kFloat &&
                                  mask.sizes() == at::IntArrayRef({x.size(0), 1, x.size(2)})),
              "gLN: a float mask [B, 1, T], got ", mask.sizes());
  return PreluGlobalNorm::apply(x, slope, gain, bias,
                                mask.defined() ? mask : at::empty({0}, x.options()), epsilon);
}

}  // namespace nabu::conv_kernels
