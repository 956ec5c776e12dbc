#include "nabu/evaluation/scorers/bss_eval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include "nabu/core/error.h"

namespace nabu {

namespace {

constexpr int64_t kMaxSources = 100;  // mir_eval's MAX_SOURCES

std::string shape_text(const torch::Tensor& tensor) {
  std::string text = "[";
  for (int64_t d = 0; d < tensor.dim(); ++d)
    text += (d ? ", " : "") + std::to_string(tensor.size(d));
  return text + "]";
}

// mir_eval's validate(): same [S, N] shapes, at most 100 sources, no all-zero signal.
void validate(const torch::Tensor& references, const torch::Tensor& estimates, const char* what) {
  if (!references.defined() || !estimates.defined() || references.dim() != 2 ||
      references.sizes() != estimates.sizes())
    throw Error(std::string(what) + ": references " +
                (references.defined() ? shape_text(references) : "undefined") +
                " and estimates " + (estimates.defined() ? shape_text(estimates) : "undefined") +
                " must have the same shape [S, N]");
  if (references.size(0) < 1 || references.size(1) < 1)
    throw Error(std::string(what) + ": no signals to score");
  if (references.size(0) > kMaxSources)
    throw Error(std::string(what) + ": more than 100 sources");
  if ((references == 0).all(1).any().item<bool>())
    throw Error(std::string(what) + ": a reference source is all zeros, which makes the "
                                    "evaluation ambiguous");
  if ((estimates == 0).all(1).any().item<bool>())
    throw Error(std::string(what) + ": an estimated source is all zeros, which leaves the "
                                    "decomposition underdetermined");
}

// 10 log10(num / den), +inf for a zero denominator (mir_eval's _safe_db).
torch::Tensor safe_db(const torch::Tensor& num, const torch::Tensor& den) {
  return torch::where(den == 0, torch::full_like(num, std::numeric_limits<double>::infinity()),
                      10.0 * torch::log10(num / den));
}

// The permutation (estimate perm[j] for reference j) with the highest mean of `criterion`
// [Se, S] over all permutations in lexicographic order; the first maximum wins, and a NaN mean
// wins like numpy's argmax.
std::vector<int64_t> best_permutation(const torch::Tensor& criterion) {
  const int64_t sources = criterion.size(0);
  auto values = criterion.contiguous();
  const double* data = values.data_ptr<double>();
  std::vector<int64_t> perm(sources), best;
  std::iota(perm.begin(), perm.end(), 0);
  double best_mean = 0.0;
  do {
    double sum = 0.0;
    for (int64_t j = 0; j < sources; ++j) sum += data[perm[j] * sources + j];
    double mean = sum / static_cast<double>(sources);
    bool take = best.empty() || (!std::isnan(best_mean) && (std::isnan(mean) || mean > best_mean));
    if (take) {
      best = perm;
      best_mean = mean;
    }
  } while (std::next_permutation(perm.begin(), perm.end()));
  return best;
}

SeparationScores select(const torch::Tensor& sdr, const torch::Tensor& sir,
                        const torch::Tensor& sar, const std::vector<int64_t>& perm) {
  SeparationScores scores;
  scores.perm = perm;
  for (std::size_t j = 0; j < perm.size(); ++j) {
    auto e = perm[j];
    auto r = static_cast<int64_t>(j);
    scores.sdr.push_back(sdr[e][r].item<double>());
    scores.sir.push_back(sir[e][r].item<double>());
    scores.sar.push_back(sar[e][r].item<double>());
  }
  return scores;
}

}  // namespace

namespace {

// mir_eval's decomposition of every estimate against every reference (and, with a noise signal,
// the extension of the original's sdr_snr scorer); see bss_eval.h.
SeparationScores decompose(const torch::Tensor& references, const torch::Tensor& estimates,
                           const torch::Tensor& noise, int64_t filter_length) {
  if (filter_length < 1) throw Error("bss_eval_sources: the filter length must be positive");
  auto refs = references.to(torch::kFloat64).contiguous();
  auto ests = estimates.to(torch::kFloat64).contiguous();
  const bool with_noise = noise.defined();
  // The signals the estimates are projected on: the references, then the noise.
  auto signals = with_noise ? torch::cat({refs, noise.to(torch::kFloat64).reshape({1, -1})}) : refs;
  const int64_t sources = refs.size(0), count = signals.size(0), samples = refs.size(1);
  const int64_t taps = filter_length, padded = samples + taps - 1;
  int64_t nfft = 1;
  while (nfft < padded) nfft *= 2;  // long enough that circular correlations are linear ones

  auto spectra = torch::fft::rfft(signals, nfft, 1);  // [C, K]
  auto est_spectra = torch::fft::rfft(ests, nfft, 1);
  auto index_options = torch::TensorOptions().dtype(torch::kLong);
  auto delays = torch::arange(taps, index_options);

  // Gram matrix of the delayed signals: <r_i delayed a, r_j delayed b> = xc_ij[b - a], with
  // xc_ij[k] = sum_m r_i[m + k] r_j[m]. Row/column i*taps + a.
  auto cross = torch::fft::irfft(spectra.unsqueeze(1) * spectra.conj().unsqueeze(0), nfft,
                                 -1);  // [C, C, nfft]
  auto lags = (delays.unsqueeze(0) - delays.unsqueeze(1)).remainder(nfft);  // [a, b] -> b - a
  auto blocks = cross.index_select(2, lags.flatten()).reshape({count, count, taps, taps});
  auto gram = blocks.permute({0, 2, 1, 3}).reshape({count * taps, count * taps});

  // Inner products of each estimate with the delayed signals: <r_i delayed a, e>.
  auto est_cross = torch::fft::irfft(spectra.unsqueeze(0) * est_spectra.conj().unsqueeze(1),
                                     nfft, -1);                              // [Se, C, nfft]
  auto products = est_cross.index_select(2, (-delays).remainder(nfft));      // [Se, C, taps]

  // Projection on the first `used` signals together (independent of the reference scored).
  auto project_on_first = [&](int64_t used) {
    auto sub_gram = gram.slice(0, 0, used * taps).slice(1, 0, used * taps);
    auto filters =
        solve_each(sub_gram, products.slice(1, 0, used).reshape({sources, used * taps}).t())
            .t()
            .reshape({sources, used, taps});  // [Se, used, taps]
    return torch::fft::irfft((torch::fft::rfft(filters, nfft, -1) * spectra.slice(0, 0, used)
                                                                        .unsqueeze(0))
                                 .sum(1),
                             nfft, -1)
        .slice(-1, 0, padded);  // [Se, L]
  };
  auto projection_all = project_on_first(sources);
  // Projection on each reference alone: its diagonal Gram block.
  auto own_gram = blocks.slice(0, 0, sources).slice(1, 0, sources).diagonal(0, 0, 1).permute(
      {2, 0, 1});  // [S, taps, taps]
  auto own_filters = solve_each(own_gram, products.slice(1, 0, sources).permute({1, 2, 0}));
  auto projection_own =
      torch::fft::irfft(torch::fft::rfft(own_filters.permute({2, 0, 1}), nfft, -1) *
                            spectra.slice(0, 0, sources).unsqueeze(0),
                        nfft, -1)
          .slice(-1, 0, padded);  // [Se, S, L]

  auto padded_estimates = torch::constant_pad_nd(ests, {0, taps - 1});  // [Se, L]
  // s_target + e_spat = projection_own; e_interf = projection_all - projection_own; with noise
  // e_noise = projection_all_and_noise - projection_all; e_artif = estimate - the projection on
  // everything (mir_eval's _bss_decomp_mtifilt and the original's _extended variant).
  auto target_energy = projection_own.square().sum(-1);
  auto distortion = (padded_estimates.unsqueeze(1) - projection_own).square().sum(-1);
  auto interference = (projection_all.unsqueeze(1) - projection_own).square().sum(-1);
  auto sdr = safe_db(target_energy, distortion);
  auto sir = safe_db(target_energy, interference);
  auto everything = with_noise ? project_on_first(count) : projection_all;
  auto sar = safe_db(everything.square().sum(-1), (padded_estimates - everything).square().sum(-1))
                 .unsqueeze(1)
                 .expand({sources, sources});
  auto scores = select(sdr, sir, sar, best_permutation(sir));
  if (with_noise) {
    auto snr = safe_db(projection_all.square().sum(-1),
                       (everything - projection_all).square().sum(-1));
    for (auto e : scores.perm) scores.snr.push_back(snr[e].item<double>());
  }
  return scores;
}

}  // namespace

SeparationScores bss_eval_sources(const torch::Tensor& references, const torch::Tensor& estimates,
                                  int64_t filter_length) {
  validate(references, estimates, "bss_eval_sources");
  return decompose(references, estimates, torch::Tensor(), filter_length);
}

SeparationScores bss_eval_sources_with_noise(const torch::Tensor& references,
                                             const torch::Tensor& estimates,
                                             const torch::Tensor& noise, int64_t filter_length) {
  validate(references, estimates, "bss_eval_sources (sdr_snr)");
  if (!noise.defined() || noise.numel() != references.size(1))
    throw Error("bss_eval_sources (sdr_snr): the noise signal has " +
                (noise.defined() ? std::to_string(noise.numel()) : std::string("no")) +
                " samples, the references " + std::to_string(references.size(1)));
  if ((noise == 0).all().item<bool>())
    throw Error("bss_eval_sources (sdr_snr): the noise signal is all zeros");
  return decompose(references, estimates, noise, filter_length);
}

SeparationScores si_sdr_sources(const torch::Tensor& references, const torch::Tensor& estimates) {
  validate(references, estimates, "si_sdr");
  auto refs = references.to(torch::kFloat64);
  auto ests = estimates.to(torch::kFloat64);
  refs = refs - refs.mean(1, /*keepdim=*/true);
  ests = ests - ests.mean(1, /*keepdim=*/true);
  auto ref_gram = refs.matmul(refs.t());                     // [S, S]
  auto scale = ests.matmul(refs.t()) / ref_gram.diagonal();  // [Se, S]
  auto target = scale.unsqueeze(-1) * refs.unsqueeze(0);     // [Se, S, N]
  auto residual = ests.unsqueeze(1) - target;
  // Interference: the residual's projection on the span of all references.
  auto coefficients = solve_each(ref_gram, residual.matmul(refs.t()).unsqueeze(-1)).squeeze(-1);
  auto interference = coefficients.matmul(refs);
  auto target_energy = target.square().sum(-1);
  auto sdr = safe_db(target_energy, residual.square().sum(-1));
  auto sir = safe_db(target_energy, interference.square().sum(-1));
  auto sar = safe_db(target_energy, (residual - interference).square().sum(-1));
  return select(sdr, sir, sar, best_permutation(sdr));
}

// One system at a time, not batched: LibTorch factors a batch on OpenMP workers, and in its
// oneMKL builds (the Python package index's wheels), after at::set_num_threads(n > 1), which
// nabu's --threads calls, those nested factorisations give invalid pivots, so LU fails on
// regular systems (docs/results.md, "GPUs";
// PostBssEval.SolvesEachSystemByLuWithManyThreads).
torch::Tensor solve_each(const torch::Tensor& a, const torch::Tensor& b, int64_t* least_squares) {
  auto solve_one = [&](const torch::Tensor& system, const torch::Tensor& side) {
    try {
      return torch::linalg_solve(system, side);
    } catch (const c10::Error&) {
      if (least_squares) ++*least_squares;
      return std::get<0>(torch::linalg_lstsq(system, side, c10::nullopt, "gelsd"));
    }
  };
  if (a.dim() == 2) return solve_one(a, b);
  const int64_t n = a.size(-1), k = b.size(-1);
  auto systems = a.reshape({-1, n, n});
  auto sides = b.reshape({-1, n, k});
  if (systems.size(0) != sides.size(0))
    throw std::logic_error("solve_each: A and B need the same batch shape");
  std::vector<torch::Tensor> solutions;
  for (int64_t i = 0; i < systems.size(0); ++i)
    solutions.push_back(solve_one(systems[i], sides[i]));
  return torch::stack(solutions).reshape(b.sizes());
}

}  // namespace nabu
