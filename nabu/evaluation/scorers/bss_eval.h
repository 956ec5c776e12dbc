// Separation metrics on time signals, in double precision.
//
// bss_eval_sources follows mir_eval's bss_eval_sources (BSS Eval v3, Vincent et al. 2006), which
// the original copied (docs/postprocessing.md): each estimate is decomposed against the references
// with a time-invariant distortion filter of `filter_length` taps (512 in the original) by least
// squares, giving SDR, SIR and SAR for every (estimate, reference) pair; the permutation with the
// highest mean SIR over all S! permutations is kept (compute_permutation=True).
//
// si_sdr_sources gives the scale-invariant SDR of Le Roux et al. 2019 (signals made zero-mean
// first, as in that definition and in the nussl code the original's disabled si_sdr scorer used),
// with nussl's SI-SIR / SI-SAR split of the residual into its projection on the span of all
// references (interference) and the rest (artifacts); the permutation maximising the mean SI-SDR
// is kept.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace nabu {

struct SeparationScores {
  // Indexed by reference j: estimate perm[j] scored against reference j.
  std::vector<double> sdr, sir, sar;
  std::vector<double> snr;  // bss_eval_sources_with_noise only
  std::vector<int64_t> perm;
};

// references, estimates: [S, N] (same shape; any floating dtype). Throws Error for mismatched
// shapes, S > 100, or an all-zero reference or estimate (mir_eval's validation). An exactly
// singular system falls back to least squares, as mir_eval does. Energies that are exactly zero
// give +inf dB (mir_eval's _safe_db).
SeparationScores bss_eval_sources(const torch::Tensor& references, const torch::Tensor& estimates,
                                  int64_t filter_length = 512);

// The original's sdr_snr extension: the same decomposition with a noise signal [N] (not all
// zeros) as one more signal to project on. The noise part of the error, e_noise = (projection on
// references and noise) - (projection on references), gives SNR = |s_target + e_spat + e_interf|^2
// / |e_noise|^2, and SAR becomes |projection on everything|^2 / |e_artif|^2; SDR and SIR (and so
// the permutation, by mean SIR) are those of bss_eval_sources.
SeparationScores bss_eval_sources_with_noise(const torch::Tensor& references,
                                             const torch::Tensor& estimates,
                                             const torch::Tensor& noise,
                                             int64_t filter_length = 512);

// SI-SDR (with SI-SIR, SI-SAR in the sdr/sir/sar fields). Same shape rules.
SeparationScores si_sdr_sources(const torch::Tensor& references, const torch::Tensor& estimates);

// A [..., n, n] X = B [..., n, k] (the same batch shape; A may also be one [n, n] for any B), each
// system by LU, or by least squares (minimum norm, SVD based, as numpy's lstsq) where LU finds it
// singular, as mir_eval does; `least_squares`, when given, counts the systems that fell back.
torch::Tensor solve_each(const torch::Tensor& a, const torch::Tensor& b,
                         int64_t* least_squares = nullptr);

}  // namespace nabu
