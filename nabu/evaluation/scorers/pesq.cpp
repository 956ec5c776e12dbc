// PESQ (pesq.h): the levels, the input filters and the steps in order; the time alignment is in
// pesq_alignment.cpp, the perceptual model in pesq_model.cpp.
#include "nabu/evaluation/scorers/pesq.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <string>

#include "nabu/core/error.h"
#include "nabu/evaluation/scorers/pesq_alignment.h"
#include "nabu/evaluation/scorers/pesq_model.h"
#include "nabu/evaluation/scorers/scorer.h"

namespace nabu {

using pesq_detail::PaddedSignal;
using pesq_detail::RateConstants;

namespace {

struct CurvePoint {
  double hz, db;
};

// The band the level is measured in: 350 Hz to 3.25 kHz.
constexpr CurvePoint kLevelBand[26] = {
    {0, -500},   {50, -500},   {100, -500},  {125, -500},  {160, -500},  {200, -500},
    {250, -500}, {300, -500},  {350, 0},     {400, 0},     {500, 0},     {600, 0},
    {630, 0},    {800, 0},     {1000, 0},    {1250, 0},    {1600, 0},    {2000, 0},
    {2500, 0},   {3000, 0},    {3250, 0},    {3500, -500}, {4000, -500}, {5000, -500},
    {6300, -500}, {8000, -500}};
// The handset's receive characteristic (intermediate reference system, P.830) of P.862.
constexpr CurvePoint kIrsReceive[26] = {
    {0, -200},  {50, -40},  {100, -20}, {125, -12}, {160, -6},   {200, 0},    {250, 4},
    {300, 6},   {350, 8},   {400, 10},  {500, 11},  {600, 12},   {700, 12},   {800, 12},
    {1000, 12}, {1300, 12}, {1600, 12}, {2000, 12}, {2500, 12},  {3000, 12},  {3250, 12},
    {3500, 4},  {4000, -200}, {5000, -200}, {6300, -200}, {8000, -200}};

// Second-order sections b0 b1 b2 a1 a2 (a0 = 1).
using Sections = std::vector<std::array<double, 5>>;
// P.862.2's input filter: a 100 Hz high-pass.
const Sections kWideInput8k = {{2.6657628, -5.3315255, 2.6657628, -1.8890331, 0.89487434}};
const Sections kWideInput16k = {{2.740826, -5.4816519, 2.740826, -1.9444777, 0.94597794}};
// The filter the time alignment sees the signals through (the Recommendation's IRS-like IIR).
const Sections kAlignment8k = {
    {0.885535424, -0.885535424, 0.000000000, -0.771070709, 0.000000000},
    {0.895092588, 1.292907193, 0.449260174, 1.268869037, 0.442025372},
    {4.049527940, -7.865190042, 3.815662102, -1.746859852, 0.786305963},
    {0.500002353, -0.500002353, 0.000000000, 0.000000000, 0.000000000},
    {0.565002834, -0.241585934, -0.306009671, 0.259688659, 0.249979657},
    {2.115237288, 0.919935084, 1.141240051, -1.587313419, 0.665935315},
    {0.912224584, -0.224397719, -0.641121413, -0.246029464, -0.556720590},
    {0.444617727, -0.307589321, 0.141638062, -0.996391149, 0.502251622}};
const Sections kAlignment16k = {
    {0.325631521, -0.086782860, -0.238848661, -1.079416490, 0.434583902},
    {0.403961804, -0.556985881, 0.153024077, -0.415115835, 0.696590244},
    {4.736162769, 3.287251046, 1.753289019, -1.859599046, 0.876284034},
    {0.365373469, 0.000000000, 0.000000000, -0.634626531, 0.000000000},
    {0.884811506, 0.000000000, 0.000000000, -0.256725271, 0.141536777},
    {0.723593055, -1.447186099, 0.723593044, -1.129587469, 0.657232737},
    {1.644910855, -1.817280902, 1.249658063, -1.778403899, 0.801724355},
    {0.633692689, -0.284644314, -0.319789663, 0.000000000, 0.000000000},
    {1.032763031, 0.268428979, 0.602913323, 0.000000000, 0.000000000},
    {1.001616361, -0.823749013, 0.439731942, -0.885778255, 0.000000000},
    {0.752472096, -0.375388990, 0.188977609, -0.077258216, 0.247230734},
    {1.023700575, 0.001661628, 0.521284240, -0.183867259, 0.354324187}};

constexpr double kTargetPower = 1e7;

// The curve's gain (dB) at `hz`, linear between its points and beyond its ends.
double curve_db(const CurvePoint (&curve)[26], double hz) {
  int high = 1;
  if (hz >= curve[25].hz) high = 25;
  else if (hz > curve[0].hz)
    while (curve[high].hz < hz) ++high;
  const CurvePoint& lo = curve[high - 1];
  const CurvePoint& hi = curve[high];
  return ((hz - lo.hz) * hi.db + (hi.hz - hz) * lo.db) / (hi.hz - lo.hz);
}

// Filters the signal and its padding (not the search buffers) by the curve, relative to its gain
// at 1 kHz, in one DFT of the whole.
void filter_by_curve(std::vector<double>& data, long samples, const CurvePoint (&curve)[26],
                     const RateConstants& c) {
  const long sb = c.search_samples();
  const long n = samples - 2 * sb + c.padding_samples();
  std::size_t size = 1;
  while (size < static_cast<std::size_t>(n)) size <<= 1;
  std::vector<std::complex<double>> x(size);
  for (long i = 0; i < n; ++i) x[i] = data[sb + i];
  pesq_detail::fft(x, false);
  const double at_1k = curve_db(curve, 1000.0);
  for (std::size_t i = 0; i <= size / 2; ++i) {
    const double hz = static_cast<double>(i) * c.rate / static_cast<double>(size);
    const double gain = std::pow(10.0, (curve_db(curve, hz) - at_1k) / 20.0);
    x[i] *= gain;
    if (i > 0 && i < size / 2) x[size - i] *= gain;
  }
  pesq_detail::fft(x, true);
  for (long i = 0; i < n; ++i) data[sb + i] = x[i].real();
}

void filter_by_sections(double* x, long n, const Sections& sections) {
  for (const auto& s : sections) {
    double z1 = 0, z2 = 0;  // direct form II
    for (long i = 0; i < n; ++i) {
      const double z0 = x[i] - s[3] * z1 - s[4] * z2;
      x[i] = s[0] * z0 + s[1] * z1 + s[2] * z2;
      z2 = z1;
      z1 = z0;
    }
  }
}

PaddedSignal padded(const std::vector<double>& signal, const RateConstants& c) {
  PaddedSignal s;
  const long sb = c.search_samples();
  s.samples = static_cast<long>(signal.size()) + 2 * sb;
  s.data.assign(s.samples + c.padding_samples(), 0.0);
  std::copy(signal.begin(), signal.end(), s.data.begin() + sb);
  return s;
}

// Scales the signal to the target power in the level band, measured over the longer signal's
// span. False (and left as it is) when it has no power there.
bool set_level(PaddedSignal& s, long max_samples, const RateConstants& c) {
  auto band = s.data;
  filter_by_curve(band, s.samples, kLevelBand, c);
  const long sb = c.search_samples();
  double power = 0;
  for (long i = sb; i < s.samples - sb + c.padding_samples(); ++i) power += band[i] * band[i];
  power /= static_cast<double>(max_samples - 2 * sb + c.padding_samples());
  if (!(power > 0)) return false;
  const double scale = std::sqrt(kTargetPower / power);
  for (long i = 0; i < s.samples; ++i) s.data[i] *= scale;
  return true;
}

// The listening handset: P.862's IRS receive curve, or P.862.2's high-pass after 16-sample fades.
void input_filter(PaddedSignal& s, PesqBand band, const RateConstants& c) {
  if (band == PesqBand::kNarrow) {
    filter_by_curve(s.data, s.samples, kIrsReceive, c);
    return;
  }
  const long sb = c.search_samples();
  for (long i = 1; i < 16; ++i) {
    s.data[sb + i - 1] *= i / 16.0;
    s.data[s.samples - sb - i] *= i / 16.0;
  }
  filter_by_sections(s.data.data() + sb, s.samples - 2 * sb,
                     c.rate == 8000 ? kWideInput8k : kWideInput16k);
}

// The copy the time alignment sees: without its mean (over the signal, divided by its padded
// length as the Recommendation does), faded in and out over one envelope frame, filtered.
PaddedSignal alignment_copy(const PaddedSignal& s, const RateConstants& c) {
  PaddedSignal a = s;
  const long sb = c.search_samples(), ds = c.downsample;
  double mean = 0;
  for (long i = sb; i < a.samples - sb; ++i) mean += a.data[i];
  mean /= static_cast<double>(a.samples);
  for (long i = sb; i < a.samples - sb; ++i) a.data[i] -= mean;
  for (long i = 0; i < ds; ++i) {
    a.data[sb + i] *= (0.5 + i) / ds;
    a.data[a.samples - sb - 1 - i] *= (0.5 + i) / ds;
  }
  filter_by_sections(a.data.data(), static_cast<long>(a.data.size()),
                     c.rate == 8000 ? kAlignment8k : kAlignment16k);
  pesq_detail::voice_activity(a, c);
  return a;
}

}  // namespace

PesqBand pesq_band_of_rate(int sample_rate) {
  if (sample_rate == 8000) return PesqBand::kNarrow;
  if (sample_rate == 16000) return PesqBand::kWide;
  throw Error("pesq: scores signals at 8000 Hz (narrow band, P.862) or 16000 Hz (wide band, "
              "P.862.2), not " + std::to_string(sample_rate) +
              " Hz; resample the data (data.cfg or database.conf) to one of them");
}

double pesq(const std::vector<double>& reference, const std::vector<double>& degraded,
            int sample_rate, PesqBand band) {
  const RateConstants& c = pesq_detail::rate_constants(sample_rate);
  if (band == PesqBand::kWide && sample_rate != 16000)
    throw Error("pesq: wide band (P.862.2) needs signals at 16000 Hz, these are at " +
                std::to_string(sample_rate) + " Hz");
  const auto shortest = static_cast<std::size_t>(sample_rate / 4);
  if (reference.size() < shortest || degraded.size() < shortest)
    throw Error("pesq: the reference has " + std::to_string(reference.size()) +
                " samples and the degraded signal " + std::to_string(degraded.size()) +
                "; PESQ needs at least 1/4 s (" + std::to_string(shortest) + ") of each");
  PaddedSignal ref = padded(reference, c), deg = padded(degraded, c);
  const long max_samples = std::max(ref.samples, deg.samples);
  if (!set_level(ref, max_samples, c))
    throw Error("pesq: no utterance found in the reference: it is silent (between 350 Hz and "
                "3.25 kHz)");
  // The Recommendation leaves a silent degraded signal undefined (its implementation divides
  // by zero); it is scored the bottom of the scale.
  if (!set_level(deg, max_samples, c)) return 1.0;
  input_filter(ref, band, c);
  input_filter(deg, band, c);
  const auto utterances =
      pesq_detail::align_utterances(alignment_copy(ref, c), alignment_copy(deg, c), c);
  if (utterances.empty())
    throw Error("pesq: no utterance found in the reference (silent, or speech too short: PESQ "
                "needs 200 ms of speech the degraded signal also covers)");
  ref.data.resize(max_samples + c.padding_samples(), 0.0);
  deg.data.resize(max_samples + c.padding_samples(), 0.0);
  const double mos = pesq_detail::raw_mos(ref, deg, utterances, c);
  // P.862.1 and P.862.2 map the raw score to MOS-LQO.
  if (band == PesqBand::kNarrow) return 0.999 + 4.0 / (1.0 + std::exp(-1.4945 * mos + 4.6607));
  return 0.999 + 4.0 / (1.0 + std::exp(-1.3669 * mos + 3.8224));
}

}  // namespace nabu

namespace nabu {

double pesq_of_sources(const torch::Tensor& references, const torch::Tensor& estimates,
                       int sample_rate) {
  const PesqBand band = pesq_band_of_rate(sample_rate);
  return mean_of_best_assignment(
      references, estimates, [&](const std::vector<double>& r, const std::vector<double>& e) {
        return pesq(r, e, sample_rate, band);
      });
}

namespace {

// score_type pesq: per speaker the MOS-LQO of the estimate against its reference; estimates
// assigned to references by the highest mean.
class PesqScorer : public PairScorer {
 public:
  explicit PesqScorer(const ConfigSection& section) : PairScorer(section, "pesq", {"PESQ"}) {}
  bool needs_sample_rate() const override { return true; }
  std::string unit() const override { return "MOS"; }

 protected:
  std::vector<double> score_pair(const torch::Tensor& reference, const torch::Tensor& estimate,
                                 int sample_rate) const override {
    return {pesq(signal_samples(reference), signal_samples(estimate), sample_rate,
                 pesq_band_of_rate(sample_rate))};
  }
};

}  // namespace

ScorerPtr make_pesq_scorer(const ConfigSection& section) {
  return std::make_shared<PesqScorer>(section);
}

}  // namespace nabu
