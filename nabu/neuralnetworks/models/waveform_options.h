// The options of the time-domain separation models (conv_tasnet, dprnn; waveform_mask_model.h),
// apart from the models so that export/ can write a built model's forward pass from them and its
// parameters (export/model_writers.h) without seeing the model classes.
#pragma once

#include <string>

#include "nabu/neuralnetworks/models/model.h"

namespace nabu::waveform {

enum class Norm { kGlobal, kCumulative, kChannel };

inline void declare_norm(OptionsReader& r, const std::string& key, Norm& value,
                         const std::string& help) {
  r.choice(key, value,
           {{"gLN", Norm::kGlobal}, {"cLN", Norm::kCumulative}, {"chanLN", Norm::kChannel}}, help);
}

enum class MaskNonlinearity { kRelu, kSigmoid, kSoftmax };

inline void declare_mask_nonlinearity(OptionsReader& r, MaskNonlinearity& value) {
  r.choice("mask_nonlinearity", value,
           {{"relu", MaskNonlinearity::kRelu},
            {"sigmoid", MaskNonlinearity::kSigmoid},
            {"softmax", MaskNonlinearity::kSoftmax}},
           "activation of the masks (softmax: over the speakers)");
}

// Keys both architectures share.
struct WaveformOptions {
  std::string architecture;
  bool trainable = true;
  int num_speakers = 2;
  int kernel_size = 16;
  int encoder_filters = 512;
  int bottleneck_channels = 128;
  MaskNonlinearity mask_nonlinearity = MaskNonlinearity::kRelu;
  Norm norm = Norm::kGlobal;

  void declare_waveform(OptionsReader& r) {
    declare_common(r, architecture, trainable);
    r("num_speakers", num_speakers, "number of separated waveforms (S)");
    r("kernel_size", kernel_size,
      "encoder/decoder kernel L in samples (the stride is L/2; 16 = 2 ms at 8 kHz)");
    r("encoder_filters", encoder_filters, "encoder channels N");
    r("bottleneck_channels", bottleneck_channels, "channels B the separator works on");
    declare_mask_nonlinearity(r, mask_nonlinearity);
    declare_norm(r, "norm", norm,
                 "layer normalisation: gLN (global), cLN (cumulative, causal), chanLN (per "
                 "frame)");
    r.require(num_speakers >= 1, "num_speakers", "must be >= 1");
    r.require(kernel_size >= 2 && kernel_size % 2 == 0, "kernel_size", "must be even and >= 2");
    r.require(encoder_filters >= 1, "encoder_filters", "must be >= 1");
    r.require(bottleneck_channels >= 1, "bottleneck_channels", "must be >= 1");
  }
};

}  // namespace nabu::waveform

namespace nabu {

struct ConvTasNetOptions : waveform::WaveformOptions {
  int hidden_channels = 512;
  int skip_channels = 128;
  int conv_kernel_size = 3;
  int blocks_per_repeat = 8;
  int repeats = 3;
  bool causal = false;

  void declare(OptionsReader& r) {
    declare_waveform(r);
    r("hidden_channels", hidden_channels, "channels H inside each convolution block");
    r("skip_channels", skip_channels, "channels Sc of the skip connections");
    r("conv_kernel_size", conv_kernel_size, "kernel P of the depthwise convolutions");
    r("blocks_per_repeat", blocks_per_repeat,
      "blocks X per repeat, with dilations 1, 2, ..., 2^(X-1)");
    r("repeats", repeats, "repeats R of the dilated blocks");
    r("causal", causal,
      "True: the depthwise convolutions only look back and norm must be cLN (online use)");
    r.require(hidden_channels >= 1, "hidden_channels", "must be >= 1");
    r.require(skip_channels >= 1, "skip_channels", "must be >= 1");
    r.require(conv_kernel_size >= 1 && (causal || conv_kernel_size % 2 == 1), "conv_kernel_size",
              "must be odd (non-causal blocks keep the frames centred)");
    r.require(blocks_per_repeat >= 1, "blocks_per_repeat", "must be >= 1");
    r.require(repeats >= 1, "repeats", "must be >= 1");
    r.require(!causal || norm == waveform::Norm::kCumulative || norm == waveform::Norm::kChannel, "norm",
              "a causal model needs cLN or chanLN (gLN looks at the whole utterance)");
  }
};

struct DprnnOptions : waveform::WaveformOptions {
  int hidden_units = 128;
  int chunk_size = 100;
  int num_blocks = 6;

  DprnnOptions() {
    kernel_size = 16;
    encoder_filters = 64;
    bottleneck_channels = 64;
    mask_nonlinearity = waveform::MaskNonlinearity::kRelu;
  }

  void declare(OptionsReader& r) {
    declare_waveform(r);
    r("hidden_units", hidden_units, "units of each direction of every BLSTM");
    r("chunk_size", chunk_size, "frames per chunk K (chunks overlap by K/2)");
    r("num_blocks", num_blocks, "dual-path blocks (an intra-chunk and an inter-chunk BLSTM each)");
    r.require(hidden_units >= 1, "hidden_units", "must be >= 1");
    r.require(chunk_size >= 2 && chunk_size % 2 == 0, "chunk_size", "must be even and >= 2");
    r.require(num_blocks >= 1, "num_blocks", "must be >= 1");
    r.require(norm == waveform::Norm::kGlobal || norm == waveform::Norm::kChannel, "norm",
              "dprnn normalises with gLN or chanLN");
  }
};

// A built model's options, or null when `model` is not of that architecture (export/ reads them).
const ConvTasNetOptions* conv_tasnet_options(const Model& model);
const DprnnOptions* dprnn_options(const Model& model);

}  // namespace nabu
