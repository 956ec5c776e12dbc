// PESQ's time alignment (ITU-T P.862 section 10.2): a voice-activity envelope of each signal, the
// crude delay of the whole degraded signal from the envelopes' cross-correlation, utterances of the
// reference, per utterance a crude delay and the fine delay from a histogram of cross-correlation
// peaks of Hann frames, then utterances split where the delay changes inside them.
#include "nabu/evaluation/scorers/pesq_alignment.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <type_traits>
#include <utility>

#include "nabu/core/error.h"

namespace nabu::pesq_detail {

const RateConstants& rate_constants(int sample_rate) {
  static const RateConstants narrow{8000, 32, 512};
  static const RateConstants wide{16000, 64, 1024};
  if (sample_rate == 8000) return narrow;
  if (sample_rate == 16000) return wide;
  throw Error("pesq: scores signals at 8000 or 16000 Hz, not " + std::to_string(sample_rate));
}

void fft(std::vector<std::complex<double>>& x, bool inverse) {
  const std::size_t n = x.size();
  for (std::size_t i = 1, j = 0; i < n; ++i) {  // bit-reversed order
    std::size_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(x[i], x[j]);
  }
  // The forward twiddles of the last size used, kept per thread (PESQ transforms many frames
  // of one size in a row); the inverse uses their conjugates.
  thread_local std::vector<std::complex<double>> twiddle;
  if (twiddle.size() != n / 2) {
    twiddle.resize(n / 2);
    for (std::size_t k = 0; k < n / 2; ++k)
      twiddle[k] = std::polar(1.0, -2.0 * M_PI * static_cast<double>(k) / static_cast<double>(n));
  }
  // The butterflies in real arithmetic: std::complex's operator* checks for infinities and NaN
  // (C99 Annex G) at several times the cost.
  double* data = reinterpret_cast<double*>(x.data());
  const double* w = reinterpret_cast<const double*>(twiddle.data());
  const double conjugate = inverse ? -1.0 : 1.0;
  for (std::size_t length = 2; length <= n; length <<= 1) {
    const std::size_t half = length / 2, stride = n / length;
    for (std::size_t i = 0; i < n; i += length)
      for (std::size_t k = 0; k < half; ++k) {
        double* a = data + 2 * (i + k);
        double* b = a + 2 * half;
        const double wr = w[2 * k * stride], wi = conjugate * w[2 * k * stride + 1];
        const double vr = b[0] * wr - b[1] * wi, vi = b[0] * wi + b[1] * wr;
        b[0] = a[0] - vr, b[1] = a[1] - vi;
        a[0] += vr, a[1] += vi;
      }
  }
  if (inverse)
    for (auto& v : x) v /= static_cast<double>(n);
}

namespace {

constexpr long kShortestSpeech = 4;   // bursts of up to this many frames are not speech
constexpr long kJoinedGap = 50;       // pauses of up to this many frames are joined
constexpr long kShortestUtterance = 50;
constexpr long kSplitUtterance = 200;  // utterances of this much speech are tried for a split
constexpr long kBreakpoints = 40;

bool rises(const std::vector<double>& v, long i) { return v[i] > 0 && v[i - 1] <= 0; }
bool falls(const std::vector<double>& v, long i) { return v[i] <= 0 && v[i - 1] > 0; }

// Frames' mean powers, the floor 40 dB below the loudest, and the noise threshold settled by
// twelve rounds of mean + 2 standard deviations of the frames below it.
double envelope_and_threshold(const PaddedSignal& s, long ds, std::vector<double>& vad,
                              double& floor) {
  const long windows = s.samples / ds;
  vad.assign(windows, 0.0);
  for (long w = 0; w < windows; ++w) {
    double sum = 0;
    for (long i = 0; i < ds; ++i) sum += s.data[w * ds + i] * s.data[w * ds + i];
    vad[w] = sum / ds;
  }
  double threshold = 0;
  for (double v : vad) threshold += v;
  threshold /= windows;
  floor = *std::max_element(vad.begin(), vad.end());
  floor = floor > 0 ? floor * 1e-4 : 1.0;
  for (double& v : vad) v = std::max(v, floor);
  for (int round = 0; round < 12; ++round) {
    double noise = 0, deviation = 0;
    long count = 0;
    for (double v : vad)
      if (v <= threshold) noise += v, ++count;
    if (count > 0) {
      noise /= count;
      for (double v : vad)
        if (v <= threshold) deviation += (v - noise) * (v - noise);
      deviation = std::sqrt(deviation / count);
    }
    threshold = 1.001 * (noise + 2.0 * deviation);
  }
  return threshold;
}

// Marks frames at or below the threshold as silence (negative), then drops short and weak bursts
// and joins short pauses. Returns the threshold (-1 when no frame is above it).
double mark_speech(std::vector<double>& vad, double threshold, double floor) {
  const long windows = static_cast<long>(vad.size());
  double signal = 0, noise = 0;
  long count = 0;
  for (double v : vad)
    if (v > threshold) signal += v, ++count;
    else noise += v;
  if (count > 0) signal /= count;
  else threshold = -1.0;
  noise = count < windows ? noise / (windows - count) : 1.0;
  for (double& v : vad)
    if (v <= threshold) v = -v;
  vad[0] = vad[windows - 1] = -floor;
  long start = 0, finish = 0;
  for (long c = 1; c < windows; ++c) {
    if (rises(vad, c)) start = c;
    if (!falls(vad, c)) continue;
    finish = c;
    if (finish - start <= kShortestSpeech)
      for (long i = start; i < finish; ++i) vad[i] = -vad[i];
  }
  if (signal >= noise * 1000.0)
    for (long c = 1; c < windows; ++c) {
      if (rises(vad, c)) start = c;
      if (!falls(vad, c)) continue;
      finish = c;
      double sum = 0;
      for (long i = start; i < finish; ++i) sum += vad[i];
      if (sum < 3.0 * threshold * (finish - start))
        for (long i = start; i < finish; ++i) vad[i] = -vad[i];
    }
  start = finish = 0;
  for (long c = 1; c < windows; ++c) {
    if (rises(vad, c)) {
      start = c;
      if (finish > 0 && start - finish <= kJoinedGap)
        for (long i = finish; i < start; ++i) vad[i] = floor;
    }
    if (falls(vad, c)) finish = c;
  }
  return threshold;
}

// Without any onset everything is speech; onsets and ends get ramps; log of the level above the
// threshold.
void finish_envelope(PaddedSignal& s, std::vector<double>& vad, double threshold, double floor) {
  const long windows = static_cast<long>(vad.size());
  bool onset = false;
  for (long c = 1; c < windows; ++c) onset = onset || rises(vad, c);
  if (!onset) {
    for (double& v : vad) v = std::fabs(v);
    vad[0] = vad[windows - 1] = -floor;
  }
  for (long c = 3; c < windows - 2; ++c) {
    if (vad[c] > 0 && vad[c - 2] <= 0) {
      vad[c - 2] = vad[c] * 0.1;
      vad[c - 1] = vad[c] * 0.3;
      ++c;
    }
    if (vad[c] <= 0 && vad[c - 1] > 0) {
      vad[c] = vad[c - 1] * 0.3;
      vad[c + 1] = vad[c - 1] * 0.1;
      c += 3;
    }
  }
  for (double& v : vad) v = std::max(v, 0.0);
  if (threshold <= 0) threshold = floor;
  s.log_vad.assign(windows, 0.0);
  for (long c = 0; c < windows; ++c)
    if (vad[c] > threshold) s.log_vad[c] = std::log(vad[c] / threshold);
  s.vad = std::move(vad);
}

// The lag L in (-nx, ny) of the highest sum_m x[m] y[m + L] (0 when none is positive).
long best_lag(const double* x, long nx, const double* y, long ny) {
  if (nx <= 1 || ny <= 1) return 0;
  std::size_t n = 1;
  while (n < static_cast<std::size_t>(2 * std::max(nx, ny))) n <<= 1;
  std::vector<std::complex<double>> a(n), b(n);
  for (long i = 0; i < nx; ++i) a[i] = x[nx - 1 - i];
  for (long i = 0; i < ny; ++i) b[i] = y[i];
  fft(a, false);
  fft(b, false);
  for (std::size_t i = 0; i < n; ++i) a[i] *= b[i];
  fft(a, true);
  double best = 1e-9;  // above the transform's rounding of an all-zero correlation
  long best_index = nx - 1;
  for (long i = 0; i < nx + ny - 1; ++i)
    if (a[i].real() > best) best = a[i].real(), best_index = i;
  return best_index - nx + 1;
}

// The crude delay (samples) of the degraded signal in reference frames [start, end), searched
// around `estimate` by the envelopes' cross-correlation.
long envelope_delay(const PaddedSignal& ref, const PaddedSignal& deg, long start, long end,
                    long estimate, long ds) {
  long ref_start = start, deg_start = start + estimate / ds;
  if (deg_start < 0) ref_start = -estimate / ds, deg_start = 0;
  const long ref_count = end - ref_start;
  const long deg_count = std::min(ref_count, deg.samples / ds - deg_start);
  return best_lag(ref.log_vad.data() + ref_start, ref_count, deg.log_vad.data() + deg_start,
                  deg_count) * ds + estimate;
}

}  // namespace

void voice_activity(PaddedSignal& signal, const RateConstants& constants) {
  std::vector<double> vad;
  double floor = 0;
  double threshold = envelope_and_threshold(signal, constants.downsample, vad, floor);
  threshold = mark_speech(vad, threshold, floor);
  finish_envelope(signal, vad, threshold, floor);
}

namespace {

// The histogram of where the cross-correlation of Hann frames of the two signals peaks (bins
// within 1 % of a frame's peak, weighted by the peak to the power 1/8), over frames added one by
// one; its peak, smoothed by a triangle, is the fine delay and its share of the weight the
// confidence.
class DelayHistogram {
 public:
  DelayHistogram(const PaddedSignal& ref, const PaddedSignal& deg, long nfft)
      : ref_(ref), deg_(deg), nfft_(nfft), counts_(nfft, 0.0), window_(nfft) {
    for (long n = 0; n < nfft; ++n)
      window_[n] = 0.5 * (1.0 - std::cos(2.0 * M_PI * n / static_cast<double>(nfft)));
  }

  void add_frame(long ref_start, long deg_start) {
    std::vector<std::complex<double>> a(nfft_), b(nfft_);
    for (long n = 0; n < nfft_; ++n) {
      a[n] = ref_.data[ref_start + n] * window_[n];
      b[n] = deg_.data[deg_start + n] * window_[n];
    }
    fft(a, false);
    fft(b, false);
    for (long k = 0; k < nfft_; ++k) a[k] = std::conj(a[k]) * b[k];
    fft(a, true);
    double peak = 0;
    for (const auto& v : a) peak = std::max(peak, std::fabs(v.real()));
    peak *= 0.99;
    const double weight = std::pow(peak, 0.125);
    for (long k = 0; k < nfft_; ++k)
      if (std::fabs(a[k].real()) > peak) counts_[k] += weight, total_ += weight;
  }

  // (lag in samples, confidence).
  std::pair<long, double> peak() const {
    const long kernel = nfft_ / 64;
    std::vector<double> smoothed(nfft_, 0.0);
    for (long i = 0; i < nfft_; ++i) {
      if (counts_[i] == 0) continue;
      for (long k = 1 - kernel; k < kernel; ++k)
        smoothed[(i + k + nfft_) % nfft_] += counts_[i] * (1.0 - std::labs(k) / double(kernel));
    }
    double best = 0;
    long lag = 0;
    for (long i = 0; i < nfft_; ++i)
      if (smoothed[i] > best) best = smoothed[i], lag = i;
    if (lag >= nfft_ / 2) lag -= nfft_;
    return {lag, total_ > 0 ? best / total_ : 0.0};
  }

 private:
  const PaddedSignal& ref_;
  const PaddedSignal& deg_;
  long nfft_;
  std::vector<double> counts_, window_;
  double total_ = 0;
};

// Frames stepping forward from reference sample `ref_start` (the degraded one `delay` later)
// while whole frames lie before reference sample `ref_limit` and inside the degraded signal.
class ForwardFrames {
 public:
  ForwardFrames(const PaddedSignal& deg, long ref_start, long delay, long nfft)
      : deg_(deg), nfft_(nfft), ref_(ref_start), deg_pos_(ref_start + delay) {
    if (deg_pos_ < 0) ref_ = -delay, deg_pos_ = 0;
  }
  void add_until(DelayHistogram& histogram, long ref_limit) {
    for (; deg_pos_ + nfft_ <= deg_.samples && ref_ + nfft_ <= ref_limit;
         ref_ += nfft_ / 4, deg_pos_ += nfft_ / 4)
      histogram.add_frame(ref_, deg_pos_);
  }

 private:
  const PaddedSignal& deg_;
  long nfft_, ref_, deg_pos_;
};

// Frames stepping backward from the last whole frame before reference sample `ref_end`.
class BackwardFrames {
 public:
  BackwardFrames(const PaddedSignal& deg, long ref_end, long delay, long nfft)
      : nfft_(nfft), ref_(ref_end - nfft), deg_pos_(ref_end - nfft + delay) {
    if (deg_pos_ + nfft > deg.samples) deg_pos_ = deg.samples - nfft, ref_ = deg_pos_ - delay;
  }
  void add_until(DelayHistogram& histogram, long ref_limit) {
    for (; deg_pos_ >= 0 && ref_ >= ref_limit; ref_ -= nfft_ / 4, deg_pos_ -= nfft_ / 4)
      histogram.add_frame(ref_, deg_pos_);
  }

 private:
  long nfft_, ref_, deg_pos_;
};

// The reference's utterances: speech of at least kShortestUtterance frames that the degraded
// signal (at the crude delay) can hold, with the windows searched around them.
std::vector<Utterance> find_utterances(const PaddedSignal& ref, const PaddedSignal& deg,
                                       long crude_delay, long ds) {
  const long length = ref.samples / ds;
  const long first_end = kShortestUtterance - crude_delay / ds;
  const long last_start = (deg.samples - crude_delay) / ds - kShortestUtterance;
  std::vector<Utterance> utterances;
  bool speech = false;
  long start = 0;
  for (long c = 0; c < length; ++c) {
    if (ref.vad[c] > 0 && !speech) speech = true, start = c;
    if (!((ref.vad[c] == 0 || c == length - 1) && speech)) continue;
    speech = false;
    if (c - start < kShortestUtterance || start >= last_start || c <= first_end) continue;
    Utterance u;
    u.search_start = std::max(0L, start - kSearchFrames);
    u.search_end = std::min(length - 1, c + kSearchFrames);
    u.start = start;
    u.end = c;
    utterances.push_back(u);
  }
  return utterances;
}

// Utterance bounds: the first starts and the last ends at the search buffers, neighbours meet
// half-way between them; then kept inside the degraded signal at their delays and, where two
// delayed utterances overlap, met half-way in the degraded signal.
void set_bounds(std::vector<Utterance>& utts, const PaddedSignal& ref, const PaddedSignal& deg,
                long ds) {
  const long n = static_cast<long>(utts.size());
  utts.front().start = kSearchFrames;
  utts.back().end = ref.samples / ds - kSearchFrames;
  for (long u = 1; u < n; ++u) {
    const long middle = (utts[u].start + utts[u - 1].end) / 2;
    utts[u].start = utts[u - 1].end = middle;
  }
  if (utts.front().start * ds + utts.front().delay < kSearchFrames * ds)
    utts.front().start = kSearchFrames + (ds - 1 - utts.front().delay) / ds;
  if (utts.back().end * ds + utts.back().delay > deg.samples - kSearchFrames * ds)
    utts.back().end = (deg.samples - utts.back().delay) / ds - kSearchFrames;
  for (long u = 1; u < n; ++u) {
    const long start = utts[u].start * ds + utts[u].delay;
    const long previous_end = utts[u - 1].end * ds + utts[u - 1].delay;
    if (start >= previous_end) continue;
    const long middle = (start + previous_end) / 2;
    utts[u].start = (ds - 1 + middle - utts[u].delay) / ds;
    utts[u - 1].end = (middle - utts[u - 1].delay) / ds;
  }
}

// Where an utterance is best split in two parts of different delays: both parts' delays and
// confidences and the breakpoint (frames).
struct Split {
  long estimate1 = 0, delay1 = 0, estimate2 = 0, delay2 = 0, breakpoint = 0;
  double confidence1 = 0, confidence2 = 0;
};

// Candidate breakpoints through the utterance's speech, at most kBreakpoints.
std::vector<long> breakpoints(long speech_start, long speech_end, long delta) {
  const long length = speech_end - speech_start;
  const long step = static_cast<long>((0.801 * length + 40 * delta - 1) / (40 * delta)) * delta;
  const long pad = std::max(length / 10, 75L);
  std::vector<long> points{speech_start + pad};
  for (long next = points[0] + step;
       next <= speech_end - pad && static_cast<long>(points.size()) < kBreakpoints;
       next += step)
    points.push_back(next);
  return points;
}

// The fine delays before (forward) or after (backward) each breakpoint; breakpoints sharing a
// crude delay share one histogram, grown frame by frame. `todo[b]`: whether to compute b.
template <class Frames>
void part_delays(const PaddedSignal& ref, const PaddedSignal& deg, const std::vector<long>& points,
                 const std::vector<long>& estimates, std::vector<bool> todo, long edge,
                 const RateConstants& c, std::vector<long>& delays,
                 std::vector<double>& confidences) {
  const long n = static_cast<long>(points.size());
  const bool forward = std::is_same<Frames, ForwardFrames>::value;
  for (long i = 0; i < n; ++i) {
    const long bp = forward ? i : n - 1 - i;
    if (!todo[bp]) continue;
    DelayHistogram histogram(ref, deg, c.align_nfft);
    Frames frames(deg, edge * c.downsample, estimates[bp], c.align_nfft);
    for (long j = i; j < n; ++j) {
      const long b = forward ? j : n - 1 - j;
      if (!todo[b] || estimates[b] != estimates[bp]) continue;
      frames.add_until(histogram, points[b] * c.downsample);
      const auto [lag, confidence] = histogram.peak();
      delays[b] = estimates[b] + lag;
      confidences[b] = confidence;
      todo[b] = false;
    }
  }
}

bool best_split(const PaddedSignal& ref, const PaddedSignal& deg, const Utterance& u,
                long speech_start, long speech_end, const RateConstants& c, Split& best) {
  const long ds = c.downsample;
  const auto points = breakpoints(speech_start, speech_end, c.align_nfft / (4 * ds));
  const long n = static_cast<long>(points.size());
  std::vector<long> estimates1(n), estimates2(n), delays1(n, 0), delays2(n, 0);
  for (long b = 0; b < n; ++b) {
    estimates1[b] = envelope_delay(ref, deg, u.start, points[b], u.delay_estimate, ds);
    estimates2[b] = envelope_delay(ref, deg, points[b], u.end, u.delay_estimate, ds);
  }
  std::vector<double> confidences1(n, 0.0), confidences2(n, 0.0);
  part_delays<ForwardFrames>(ref, deg, points, estimates1, std::vector<bool>(n, true), u.start,
                             c, delays1, confidences1);
  std::vector<bool> todo2(n);
  for (long b = 0; b < n; ++b) todo2[b] = confidences1[b] > u.confidence;
  part_delays<BackwardFrames>(ref, deg, points, estimates2, todo2, u.end, c, delays2,
                              confidences2);
  for (long b = 0; b < n; ++b) {
    if (std::labs(delays2[b] - delays1[b]) < ds ||
        confidences1[b] + confidences2[b] <= best.confidence1 + best.confidence2 ||
        confidences1[b] <= u.confidence || confidences2[b] <= u.confidence)
      continue;
    best = {estimates1[b], delays1[b], estimates2[b], delays2[b], points[b], confidences1[b],
            confidences2[b]};
  }
  return best.confidence1 > u.confidence && best.confidence2 > u.confidence;
}

// Splits utterances of at least kSplitUtterance frames of speech where the delay changes, each
// part again, up to the Recommendation's 50 utterances.
void split_utterances(std::vector<Utterance>& utts, const PaddedSignal& ref,
                      const PaddedSignal& deg, const RateConstants& c) {
  const long ds = c.downsample;
  for (std::size_t i = 0; i < utts.size() && utts.size() < 50;) {
    const Utterance u = utts[i];
    long speech_start = u.start, speech_end = u.end;
    while (speech_start < u.end && ref.vad[speech_start] <= 0) ++speech_start;
    while (speech_end > u.start && ref.vad[speech_end] <= 0) --speech_end;
    ++speech_end;
    Split s;
    if (speech_end - speech_start < kSplitUtterance ||
        !best_split(ref, deg, u, speech_start, speech_end, c, s)) {
      ++i;
      continue;
    }
    Utterance first = u, second = u;
    first.delay_estimate = s.estimate1, first.delay = s.delay1, first.confidence = s.confidence1;
    second.delay_estimate = s.estimate2, second.delay = s.delay2;
    second.confidence = s.confidence2;
    const long overlap = s.delay2 < s.delay1 ? 0 : (s.delay2 - s.delay1) / (2 * ds);
    first.end = s.breakpoint + overlap;
    second.start = s.breakpoint - overlap;
    if ((first.start - kSearchFrames) * ds + s.delay1 < 0)
      first.start = kSearchFrames + (ds - 1 - s.delay1) / ds;
    if (second.end * ds + s.delay2 > deg.samples - kSearchFrames * ds)
      second.end = (deg.samples - s.delay2) / ds - kSearchFrames;
    utts[i] = first;
    utts.insert(utts.begin() + static_cast<long>(i) + 1, second);
  }
}

}  // namespace

std::vector<Utterance> align_utterances(const PaddedSignal& ref, const PaddedSignal& deg,
                                        const RateConstants& c) {
  const long ds = c.downsample;
  const long crude = best_lag(ref.log_vad.data(), ref.samples / ds, deg.log_vad.data(),
                              deg.samples / ds) * ds;
  auto utts = find_utterances(ref, deg, crude, ds);
  if (utts.empty()) return utts;
  for (auto& u : utts) {
    u.delay_estimate = envelope_delay(ref, deg, u.search_start, u.search_end, crude, ds);
    DelayHistogram histogram(ref, deg, c.align_nfft);
    ForwardFrames(deg, u.search_start * ds, u.delay_estimate, c.align_nfft)
        .add_until(histogram, u.search_end * ds);
    const auto [lag, confidence] = histogram.peak();
    u.delay = u.delay_estimate + lag;
    u.confidence = confidence;
  }
  set_bounds(utts, ref, deg, ds);
  split_utterances(utts, ref, deg, c);
  return utts;
}

}  // namespace nabu::pesq_detail
