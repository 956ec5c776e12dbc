// encoder_decoder_cnn (docs/models.md; the original's models/encoder_decoder_cnn.py and
// components/layer.py Conv2D/unpool): a U-shaped 2-D CNN over [time, frequency].
//
// Input [B, T, F] -> output [B, T, F, num_output_filters] (channels last, as the original).
// Encoder layers: 'same' convolution + activation, then 2x max pooling in time every
// t_pool_rate layers and in frequency every f_pool_rate layers; the kernel of the layer after a
// pooling is scaled by filter_size_*_fac_after_pool. Centre layers keep the size. Decoder layers
// mirror the encoder with transposed convolutions: with bypass = unpool the values go back to the
// positions of the encoder's maxima (max-unpooling), otherwise the transposed convolution
// upsamples with the pooling stride (bypass = True also concatenates the encoder output). Sizes
// lost by pooling odd lengths are refilled by repeating the last slice.
//
// Unlike the original, every layer's padded frames are kept at zero and the refill repeats each
// sequence's own last frame, so a padded batch gives exactly the outputs of each utterance alone.
#include <cmath>

#include "nabu/core/error.h"
#include "nabu/neuralnetworks/models/model.h"
#include "nabu/neuralnetworks/models/recurrent.h"

namespace nabu {
namespace {

struct EncoderDecoderCnnOptions {
  std::string architecture;
  bool trainable = true;
  std::vector<int> filters;
  int filter_size_t = 0, filter_size_f = 0;
  double filter_size_t_fac_after_pool = 1.0, filter_size_f_fac_after_pool = 1.0;
  int f_pool_rate = 1, t_pool_rate = 1;
  int num_encoder_layers = 0, num_centre_layers = 0;
  int num_filters_1st_layer = 0, num_output_filters = 0;
  double fac_per_layer = 1.0;
  std::string bypass = "False";
  bool layer_norm = false;
  Activation activation = Activation::kRelu;
  double input_noise = 0.0, dropout = 1.0;

  void declare(OptionsReader& r) {
    declare_common(r, architecture, trainable);
    r("filters", filters, "kernel size 'time freq' of the first layer (takes precedence)");
    r("filter_size_t", filter_size_t, "kernel size in time of the first layer");
    r("filter_size_f", filter_size_f, "kernel size in frequency of the first layer");
    r("filter_size_t_fac_after_pool", filter_size_t_fac_after_pool,
      "time kernel factor after a time pooling (used when filter_size_t/_f are given)");
    r("filter_size_f_fac_after_pool", filter_size_f_fac_after_pool,
      "frequency kernel factor after a frequency pooling (used when filter_size_t/_f are given)");
    r("t_pool_rate", t_pool_rate, "pool 2x in time after every t_pool_rate-th encoder layer");
    r("f_pool_rate", f_pool_rate, "pool 2x in frequency after every f_pool_rate-th layer");
    r("num_encoder_layers", num_encoder_layers, "encoder (and decoder) layers");
    r("num_centre_layers", num_centre_layers, "layers between encoder and decoder");
    r("num_filters_1st_layer", num_filters_1st_layer, "channels of the first layer");
    r("fac_per_layer", fac_per_layer,
      "encoder layer l has ceil(num_filters_1st_layer * fac_per_layer^l) channels");
    r("num_output_filters", num_output_filters,
      "channels of the last decoder layer (default: num_filters_1st_layer)");
    r.choice("bypass", bypass, {"unpool", "True", "False"},
             "unpool: max-unpooling to the encoder's maxima; True: concatenate the encoder "
             "output; False: neither");
    r("layer_norm", layer_norm,
      "True: per-channel scale and shift after each convolution (the original's "
      "batch_normalization in inference mode)");
    declare_activation(r, "activation_fn", activation, {"relu", "tanh", "sigmoid"},
                       "activation of every layer");
    r("input_noise", input_noise, "stddev of Gaussian noise added to the input in training");
    r("dropout", dropout, "must be 1.0: dropout is not implemented (as in the original)");
    rules(r);
  }

  void rules(const OptionsReader& r) const {
    r.require(num_encoder_layers >= 0, "num_encoder_layers", "must be >= 0");
    r.require(num_centre_layers >= 0, "num_centre_layers", "must be >= 0");
    r.require(t_pool_rate >= 1, "t_pool_rate", "must be >= 1");
    r.require(f_pool_rate >= 1, "f_pool_rate", "must be >= 1");
    r.require(fac_per_layer > 0.0, "fac_per_layer", "must be > 0");
    r.require(dropout == 1.0, "dropout",
                   "dropout is not implemented for encoder_decoder_cnn (as in the original)");
    if (num_encoder_layers + num_centre_layers == 0) return;
    r.require(num_filters_1st_layer > 0, "num_filters_1st_layer",
                   "required: must be > 0");
    if (!filters.empty()) {
      r.require(filters.size() == 2 && filters[0] > 0 && filters[1] > 0, "filters",
                     "expected two positive sizes 'time freq'");
    } else {
      r.require(filter_size_t > 0 && filter_size_f > 0, "filter_size_t",
                     "give the kernel size with 'filters' or filter_size_t and filter_size_f");
    }
  }

  bool sizes_given() const { return filter_size_t > 0 && filter_size_f > 0; }
};

struct ConvLayer {
  torch::Tensor weight, bias, gamma, beta;
  int64_t kernel_t = 1, kernel_f = 1;
  int64_t pool_t = 1, pool_f = 1;  // encoder: pooling after; decoder: upsampling stride
};

// TF's initial moving variance (1) plus its epsilon (1e-3): batch_normalization in inference
// mode with statistics that are never updated scales by 1/sqrt(1.001).
const double kBatchNormScale = 1.0 / std::sqrt(1.0 + 1e-3);

class EncoderDecoderCnnModel : public Model {
 public:
  EncoderDecoderCnnModel(const std::string& name, const std::string& where,
                         EncoderDecoderCnnOptions options)
      : Model(name, "encoder_decoder_cnn", options.trainable, where),
        options_(std::move(options)) {}

 protected:
  void build(const std::vector<torch::Tensor>& inputs) override {
    expect_inputs(inputs, 1, 1);
    expect_rank(inputs[0], 3, "the input [B, T, F]");
    if (options_.num_encoder_layers + options_.num_centre_layers == 0) return;
    device_ = inputs[0].device();
    const auto& o = options_;
    std::vector<double> ideal = o.filters.empty()
                                    ? std::vector<double>{double(o.filter_size_t),
                                                          double(o.filter_size_f)}
                                    : std::vector<double>{double(o.filters[0]),
                                                          double(o.filters[1])};
    const double fac_t = o.sizes_given() ? o.filter_size_t_fac_after_pool : 1.0;
    const double fac_f = o.sizes_given() ? o.filter_size_f_fac_after_pool : 1.0;
    auto channels = sizes_per_layer(o.num_filters_1st_layer, o.fac_per_layer,
                                    o.num_encoder_layers);
    int64_t in = 1;
    for (int l = 0; l < o.num_encoder_layers; ++l) {
      ConvLayer layer;
      layer.kernel_t = static_cast<int64_t>(std::ceil(ideal[0]));
      layer.kernel_f = static_cast<int64_t>(std::ceil(ideal[1]));
      if ((l + 1) % o.t_pool_rate == 0) layer.pool_t = 2, ideal[0] *= fac_t;
      if ((l + 1) % o.f_pool_rate == 0) layer.pool_f = 2, ideal[1] *= fac_f;
      encoder_.push_back(make_layer("encoder" + std::to_string(l), layer, in, channels[l], false));
      in = channels[l];
    }
    // The original's centre layers call math.ceil() without an argument (a crash); the intent,
    // the last encoder kernel rounded up, is used here.
    const int64_t centre_channels =
        channels.empty() ? o.num_filters_1st_layer : channels.back();
    for (int l = 0; l < o.num_centre_layers; ++l) {
      ConvLayer layer;
      layer.kernel_t = static_cast<int64_t>(std::ceil(ideal[0]));
      layer.kernel_f = static_cast<int64_t>(std::ceil(ideal[1]));
      centre_.push_back(make_layer("centre" + std::to_string(l), layer, in, centre_channels,
                                   false));
      in = centre_channels;
    }
    std::vector<int64_t> decoder_channels(channels.rbegin(), channels.rend());
    if (!decoder_channels.empty()) decoder_channels.erase(decoder_channels.begin());
    decoder_channels.push_back(o.num_output_filters > 0 ? o.num_output_filters
                                                        : o.num_filters_1st_layer);
    for (int l = 0; l < o.num_encoder_layers; ++l) {
      const auto& mirror = encoder_[o.num_encoder_layers - 1 - l];
      ConvLayer layer;
      layer.kernel_t = mirror.kernel_t, layer.kernel_f = mirror.kernel_f;
      if (o.bypass != "unpool") layer.pool_t = mirror.pool_t, layer.pool_f = mirror.pool_f;
      if (concatenates(l)) in += mirror.weight.size(0);
      decoder_.push_back(
          make_layer("decoder" + std::to_string(l), layer, in, decoder_channels[l], true));
      in = decoder_channels[l];
    }
  }

  torch::Tensor forward_impl(const std::vector<torch::Tensor>& inputs,
                             const torch::Tensor& seq_lengths, bool training) override {
    expect_inputs(inputs, 1, 1);
    expect_rank(inputs[0], 3, "the input [B, T, F]");
    auto lengths = recurrent::checked_lengths(seq_lengths, inputs[0], describe());
    auto x = add_input_noise(inputs[0], options_.input_noise, training);
    if (options_.num_encoder_layers + options_.num_centre_layers == 0) return x;

    auto h = mask(x.unsqueeze(1), lengths);  // [B, 1, T, F]
    std::vector<torch::Tensor> outputs, indices, level_lengths;
    std::vector<std::pair<int64_t, int64_t>> input_sizes, pooled_sizes;
    for (const auto& layer : encoder_) {
      input_sizes.emplace_back(h.size(2), h.size(3));
      level_lengths.push_back(lengths);
      h = mask(activate(layer, convolve_same(h, layer)), lengths);
      torch::Tensor where;
      if (layer.pool_t * layer.pool_f > 1) {
        // Fewer frames (bins) than the pooling window: zero frames make one pooled frame, which
        // the lengths then mark as padding (TensorFlow would give an empty tensor).
        const int64_t short_t = std::max<int64_t>(layer.pool_t - h.size(2), 0);
        const int64_t short_f = std::max<int64_t>(layer.pool_f - h.size(3), 0);
        if (short_t + short_f > 0) h = torch::constant_pad_nd(h, {0, short_f, 0, short_t});
        // max_unpool2d reads the flat indices with the width of the pooled plane.
        pooled_sizes.emplace_back(h.size(2), h.size(3));
        std::tie(h, where) = torch::max_pool2d_with_indices(h, {layer.pool_t, layer.pool_f},
                                                            {layer.pool_t, layer.pool_f});
        lengths = torch::div(lengths, layer.pool_t, "floor");
        h = mask(h, lengths);
      } else {
        pooled_sizes.emplace_back(h.size(2), h.size(3));
      }
      outputs.push_back(h);
      indices.push_back(where);
    }
    for (const auto& layer : centre_) h = mask(activate(layer, convolve_same(h, layer)), lengths);

    const int count = options_.num_encoder_layers;
    for (int l = 0; l < count; ++l) {
      const int mirror = count - 1 - l;
      const auto& pooling = encoder_[mirror];
      auto input = concatenates(l) ? torch::cat({h, outputs[mirror]}, 1) : h;
      const auto [wanted_t, wanted_f] = input_sizes[mirror];
      if (options_.bypass == "unpool" && pooling.pool_t * pooling.pool_f > 1)
        input = torch::max_unpool2d(input, indices[mirror],
                                    {pooled_sizes[mirror].first, pooled_sizes[mirror].second})
                    .narrow(2, 0, wanted_t)
                    .narrow(3, 0, wanted_f);
      const auto& layer = decoder_[l];
      h = activate(layer, transpose_convolve_same(input, layer));
      // After unpooling the frames are already at the encoder level; after a strided transposed
      // convolution each sequence has its pooled length times the stride.
      auto produced = options_.bypass == "unpool" ? level_lengths[mirror] : lengths * layer.pool_t;
      h = refill(h, produced, wanted_t, wanted_f);
      lengths = level_lengths[mirror];
      h = mask(h, lengths);
    }
    return h.permute({0, 2, 3, 1}).contiguous();  // [B, T, F, C]
  }

 private:
  // The original concatenates the encoder output for bypass = True, except into the first
  // decoder layer when there are no centre layers (it would be its own input).
  bool concatenates(int decoder_layer) const {
    return options_.bypass == "True" && (options_.num_centre_layers > 0 || decoder_layer > 0);
  }

  ConvLayer make_layer(const std::string& prefix, ConvLayer layer, int64_t in, int64_t out,
                       bool transposed) {
    auto on = torch::TensorOptions().device(device_);
    const int64_t area = layer.kernel_t * layer.kernel_f;
    auto weight = transposed ? torch::empty({in, out, layer.kernel_t, layer.kernel_f}, on)
                             : torch::empty({out, in, layer.kernel_t, layer.kernel_f}, on);
    glorot_uniform_(weight, in * area, out * area);
    layer.weight = register_parameter(prefix + "_kernel", weight);
    layer.bias = register_parameter(prefix + "_bias", torch::zeros({out}, on));
    if (options_.layer_norm) {
      layer.gamma = register_parameter(prefix + "_gamma", torch::ones({out}, on));
      layer.beta = register_parameter(prefix + "_beta", torch::zeros({out}, on));
    }
    return layer;
  }

  torch::Tensor activate(const ConvLayer& layer, const torch::Tensor& h) const {
    auto y = apply_activation(options_.activation, h);
    if (options_.layer_norm)
      y = y * (layer.gamma * kBatchNormScale).view({1, -1, 1, 1}) + layer.beta.view({1, -1, 1, 1});
    return y;
  }

  static torch::Tensor mask(const torch::Tensor& h, const torch::Tensor& lengths) {
    auto steps = torch::arange(h.size(2), lengths.options()).unsqueeze(0);
    auto keep = (steps < lengths.unsqueeze(1)).to(h.dtype());
    return h * keep.view({h.size(0), 1, h.size(2), 1});
  }

  // TensorFlow's 'same' padding at stride 1: the odd extra pad goes after.
  static torch::Tensor convolve_same(const torch::Tensor& h, const ConvLayer& layer) {
    const int64_t pad_t = layer.kernel_t - 1, pad_f = layer.kernel_f - 1;
    auto padded = torch::constant_pad_nd(h, {pad_f / 2, pad_f - pad_f / 2, pad_t / 2,
                                             pad_t - pad_t / 2});
    return torch::conv2d(padded, layer.weight, layer.bias);
  }

  // TensorFlow's conv2d_transpose with 'same' padding: output size = input size * stride, the
  // full transposed convolution cropped from max(kernel - stride, 0) / 2.
  static torch::Tensor transpose_convolve_same(const torch::Tensor& h, const ConvLayer& layer) {
    auto full = torch::conv_transpose2d(h, layer.weight, {}, {layer.pool_t, layer.pool_f});
    auto crop = [](torch::Tensor y, int64_t dim, int64_t in, int64_t kernel, int64_t stride) {
      const int64_t out = in * stride;
      const int64_t before = std::max<int64_t>(kernel - stride, 0) / 2;
      if (y.size(dim) < before + out) {
        std::vector<int64_t> pad(2 * (y.dim() - dim), 0);
        pad[pad.size() - 1] = before + out - y.size(dim);  // at the end of `dim`
        y = torch::constant_pad_nd(y, pad);
      }
      return y.narrow(dim, before, out);
    };
    full = crop(full, 2, h.size(2), layer.kernel_t, layer.pool_t);
    full = crop(full, 3, h.size(3), layer.kernel_f, layer.pool_f);
    return full + layer.bias.view({1, -1, 1, 1});
  }

  // Brings a decoder output to the encoder level's size [wanted_t, wanted_f]. In time, every
  // sequence repeats its own last upsampled frame up to its length at that level (what the
  // original does for a sequence alone); in frequency the last bin is repeated.
  static torch::Tensor refill(const torch::Tensor& h, const torch::Tensor& produced_lengths,
                              int64_t wanted_t, int64_t wanted_f) {
    auto y = h;
    if (y.size(3) < wanted_f) {
      auto last = y.narrow(3, y.size(3) - 1, 1);
      y = torch::cat({y, last.expand({y.size(0), y.size(1), y.size(2), wanted_f - y.size(3)})},
                     3);
    } else if (y.size(3) > wanted_f) {
      y = y.narrow(3, 0, wanted_f);
    }
    auto produced = produced_lengths.clamp_max(y.size(2)).unsqueeze(1);  // [B, 1]
    auto steps = torch::arange(wanted_t, produced_lengths.options()).unsqueeze(0);
    auto index = torch::where(steps < produced, steps, (produced - 1).clamp_min(0))
                     .clamp_max(y.size(2) - 1);
    auto expanded = index.view({y.size(0), 1, wanted_t, 1}).expand(
        {y.size(0), y.size(1), wanted_t, y.size(3)});
    return y.gather(2, expanded);
  }

  EncoderDecoderCnnOptions options_;
  torch::Device device_ = torch::kCPU;
  std::vector<ConvLayer> encoder_, centre_, decoder_;
};

NABU_REGISTER_WITH_OPTIONS(model_registry, "encoder_decoder_cnn",
                           (make_model<EncoderDecoderCnnModel, EncoderDecoderCnnOptions>),
                           EncoderDecoderCnnOptions,
                           "U-shaped 2-D CNN over time and frequency, output [B, T, F, C]")

}  // namespace
}  // namespace nabu
