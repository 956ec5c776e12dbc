// What the writers of the time-domain models (conv_tasnet, dprnn; export/writers/) share: the
// codec, the input norm and the bottleneck of waveform_mask_model.h as TorchScript source and as
// ONNX nodes, op by op (ONNX opset 17).
#pragma once

#include <string>

#include "nabu/export/model_writers.h"
#include "nabu/neuralnetworks/models/waveform_options.h"

namespace nabu::waveform {

class WaveformWriter {
 public:
  WaveformWriter(const Model& model, const WaveformOptions& options)
      : options_(options), parameters_(model) {}

  const ModelParameters& parameters() const { return parameters_; }

  // TorchScript of the shared parts (model_torchscript), for one unpadded batch x [B, N]: the
  // method _norm(x, gain, bias) of the model's norm; script_encode() sets `samples`, `encoded`
  // [B, N_f, K] and `features` [B, B_c, K]; script_decode() turns `logits` [B, S N_f, K] into
  // the returned waveforms [B, N, S]. Parameters are attributes named as named_parameters()
  // with '.' -> '_'.
  std::string script_norm_method() const {
    std::string body;
    switch (options_.norm) {
      case Norm::kGlobal:
        body =
            "    count = max(float(x.size(2)) * float(x.size(1)), 1.0)\n"
            "    mean = x.sum([1, 2], keepdim=True) / count\n"
            "    variance = (x - mean).pow(2).sum([1, 2], keepdim=True) / count\n";
        break;
      case Norm::kCumulative:
        body =
            "    count = torch.arange(1, x.size(2) + 1, dtype=x.dtype, device=x.device)"
            ".view([1, 1, -1]) * float(x.size(1))\n"
            "    mean = x.sum(1, keepdim=True).cumsum(2) / count\n"
            "    variance = (x.pow(2).sum(1, keepdim=True).cumsum(2) / count - mean.pow(2))"
            ".clamp_min(0.0)\n";
        break;
      case Norm::kChannel:
        body =
            "    mean = x.mean(1, keepdim=True)\n"
            "    variance = (x - mean).pow(2).mean(1, keepdim=True)\n";
        break;
    }
    return "def _norm(self, x: Tensor, gain: Tensor, bias: Tensor) -> Tensor:\n" + body +
           "    return (x - mean) * torch.rsqrt(variance + 1e-08) * gain + bias\n\n";
  }

  // _masked_norm(x, mask, gain, bias): the norm over the frames where mask [B, 1, T] is 1, zero
  // elsewhere (FrameNorm with a mask).
  std::string script_masked_norm_method() const {
    std::string body;
    if (options_.norm == Norm::kGlobal)
      body =
          "    count = (mask.sum([1, 2], keepdim=True) * float(x.size(1))).clamp_min(1.0)\n"
          "    mean = (x * mask).sum([1, 2], keepdim=True) / count\n"
          "    variance = ((x - mean).pow(2) * mask).sum([1, 2], keepdim=True) / count\n";
    else  // chanLN (dprnn allows no other with a mask)
      body =
          "    mean = x.mean(1, keepdim=True)\n"
          "    variance = (x - mean).pow(2).mean(1, keepdim=True)\n";
    return "def _masked_norm(self, x: Tensor, mask: Tensor, gain: Tensor, bias: Tensor) -> "
           "Tensor:\n" + body +
           "    return ((x - mean) * torch.rsqrt(variance + 1e-08) * gain + bias) * mask\n\n";
  }

  std::string script_encode() const {
    const auto& o = options_;
    const std::string kernel = std::to_string(o.kernel_size);
    const std::string stride = std::to_string(o.kernel_size / 2);
    return "    samples = x.size(1)\n"
           "    frames = (max(samples - " + kernel + ", 0) + " + stride + " - 1) // " + stride +
           " + 1\n"
           "    padded = (frames - 1) * " + stride + " + " + kernel + "\n"
           "    signal = torch.constant_pad_nd(x, [0, padded - samples], 0.0).unsqueeze(1)\n"
           "    encoded = torch.relu(torch.conv1d(signal, self.encoder_weight, None, [" + stride +
           "]))\n"
           "    features = torch.conv1d(self._norm(encoded, self.input_norm_gain, "
           "self.input_norm_bias), self.bottleneck_weight, self.bottleneck_bias)\n";
  }

  std::string script_decode() const {
    const auto& o = options_;
    const std::string speakers = std::to_string(o.num_speakers);
    const std::string filters = std::to_string(o.encoder_filters);
    std::string activation = "torch.relu(logits)";
    if (o.mask_nonlinearity == MaskNonlinearity::kSigmoid) activation = "torch.sigmoid(logits)";
    if (o.mask_nonlinearity == MaskNonlinearity::kSoftmax) activation = "torch.softmax(logits, 1)";
    return "    logits = logits.reshape([logits.size(0), " + speakers + ", " + filters +
           ", logits.size(2)])\n"
           "    masked = " + activation + " * encoded.unsqueeze(1)\n"
           "    flat = masked.reshape([masked.size(0) * " + speakers + ", " + filters +
           ", masked.size(3)])\n"
           "    signals = torch.conv_transpose1d(flat, self.decoder_weight, None, [" +
           std::to_string(o.kernel_size / 2) + "]).reshape([masked.size(0), " + speakers +
           ", -1])\n"
           "    return signals.narrow(2, 0, samples).transpose(1, 2)\n";
  }

  // ONNX of the shared parts, for one unpadded batch: the model's parameter `name` as an
  // initializer; the norm of x [B, C, T]; onnx_encode() turns the waveform [B, N] into `encoded`
  // [B, N_f, K] and `features` [B, B_c, K]; onnx_decode() the mask logits [B, S N_f, K] into the
  // waveforms [B, S, N].
  struct OnnxEncoded {
    std::string samples, encoded, features;
  };
  std::string onnx_parameter(onnx::Graph& graph, const std::string& name) const {
    return parameters_.onnx(graph, name);
  }
  std::string onnx_norm(onnx::Graph& graph, const std::string& x, const std::string& prefix) const;
  OnnxEncoded onnx_encode(onnx::Graph& graph, const std::string& waveform) const;
  std::string onnx_decode(onnx::Graph& graph, const std::string& logits,
                          const OnnxEncoded& encoded, const std::string& waveform) const;

 private:
  const WaveformOptions& options_;
  ModelParameters parameters_;
};

}  // namespace nabu::waveform
