// ONNX nodes of the STFT analysis and synthesis for `nabu export --format=onnx` of the mask
// models: what signal.cpp computes on one signal, on an unpadded batch [B, N] of double samples,
// with the transforms as products with DFT matrices (the window folded in) and the frames gathered
// by index, so that only opset-17 operators that onnxruntime runs in double are used.
#pragma once

#include <string>

#include "nabu/processing/signal.h"

namespace nabu {

namespace onnx {
class Graph;
}

// The real and imaginary parts of a spectrum, double, each [..., T, nfft/2 + 1].
struct OnnxSpectrum {
  std::string real, imaginary;
};

// `keep` (int64 scalar): the samples of a signal of `length` samples (int64 scalar) that whole
// analysis frames cover (snipped_length).
std::string onnx_snipped_length(onnx::Graph& graph, const std::string& length,
                                const FrameSettings& settings);
// [B, N] double -> the spectrum of the first `keep` samples pre-emphasised by `preemph` (0: none),
// framed with zeros after the end and windowed (frame_signal, frames_spectrum).
OnnxSpectrum onnx_stft(onnx::Graph& graph, const std::string& signal, const std::string& keep,
                       const FrameSettings& settings, double preemph);
// [B, S, T, F] -> [B, S, (T - 1) step + frame_length] double: overlap_add_inverse. Throws Error
// when the frame length is not a whole number of steps or exceeds nfft.
std::string onnx_inverse_stft(onnx::Graph& graph, const OnnxSpectrum& spectrum,
                              const FrameSettings& settings);

}  // namespace nabu
