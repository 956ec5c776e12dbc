// TorchScript source of the STFT analysis and synthesis for `nabu export` of the mask models:
// methods of the exported module that compute, on an unpadded batch [B, N] of double samples,
// what signal.cpp and feature_computers.cpp compute on one signal.
#pragma once

#include <string>

#include "nabu/processing/signal.h"

namespace nabu {

// `def <name>(self, x: Tensor) -> Tensor`: [B, N] -> the complex spectrum [B, T, nfft/2 + 1] of
// the signal cut to whole frames (snip), pre-emphasised by `preemph` (0: none), framed with zeros
// after its end and windowed by the module's buffer `<name>_window` (frame_signal,
// frames_spectrum).
std::string stft_script(const std::string& name, const FrameSettings& settings, double preemph);

// `def <name>(self, spectra: Tensor) -> Tensor`: [B, S, T, F] complex -> [B, S, N] double, the
// weighted overlap-add of overlap_add_inverse (its edge floor; window buffer `<name>_window`).
std::string inverse_stft_script(const std::string& name, const FrameSettings& settings);

// The feature of a spectral feature computer as a TorchScript expression of the complex spectrum
// held in `spectrum` (double): magspec, logspec, powspec; empty for any other feature.
std::string spectral_feature_script(const std::string& feature, const std::string& spectrum,
                                    int nfft);

}  // namespace nabu
