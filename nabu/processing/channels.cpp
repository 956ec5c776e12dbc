#include "nabu/processing/channels.h"

#include <codec2/codec2.h>
#include <sndfile.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "nabu/core/error.h"
#include "nabu/processing/audio.h"

namespace nabu {

namespace {


// A platform-independent Gaussian draw (Box-Muller over 53-bit uniforms), so a room is the same
// on every platform.
double gaussian(std::mt19937_64& rng) {
  auto uniform = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  double u1 = 1.0 - uniform(), u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

std::vector<double> values_of(const torch::Tensor& x) {
  auto contiguous = x.to(torch::kFloat64).contiguous();
  return std::vector<double>(contiguous.data_ptr<double>(),
                             contiguous.data_ptr<double>() + contiguous.numel());
}

// A growing byte buffer that libsndfile reads and writes as a file (sf_open_virtual).
struct MemoryFile {
  std::vector<char> bytes;
  sf_count_t position = 0;
  static MemoryFile& of(void* user) { return *static_cast<MemoryFile*>(user); }
  static sf_count_t length(void* user) { return static_cast<sf_count_t>(of(user).bytes.size()); }
  static sf_count_t seek(sf_count_t offset, int whence, void* user) {
    MemoryFile& f = of(user);
    sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? f.position : length(user);
    f.position = std::max<sf_count_t>(0, base + offset);
    return f.position;
  }
  static sf_count_t read(void* out, sf_count_t count, void* user) {
    MemoryFile& f = of(user);
    count = std::max<sf_count_t>(0, std::min(count, length(user) - f.position));
    if (count > 0) std::memcpy(out, f.bytes.data() + f.position, static_cast<std::size_t>(count));
    f.position += count;
    return count;
  }
  static sf_count_t write(const void* in, sf_count_t count, void* user) {
    MemoryFile& f = of(user);
    if (f.position + count > length(user)) f.bytes.resize(static_cast<std::size_t>(f.position + count));
    std::memcpy(f.bytes.data() + f.position, in, static_cast<std::size_t>(count));
    f.position += count;
    return count;
  }
  static sf_count_t tell(void* user) { return of(user).position; }
};

// One RBJ-cookbook biquad (bilinear transform prewarped at f0), applied in place.
void biquad(std::vector<double>& x, bool high_pass, double f0, double q, int sample_rate) {
  double w0 = 2.0 * M_PI * f0 / sample_rate, c = std::cos(w0), alpha = std::sin(w0) / (2.0 * q);
  double b0 = high_pass ? (1.0 + c) / 2.0 : (1.0 - c) / 2.0;
  double b1 = high_pass ? -(1.0 + c) : 1.0 - c;
  double a0 = 1.0 + alpha, a1 = -2.0 * c, a2 = 1.0 - alpha;
  double x1 = 0, x2 = 0, y1 = 0, y2 = 0;
  for (double& value : x) {
    double y = (b0 * value + b1 * x1 + b0 * x2 - a1 * y1 - a2 * y2) / a0;
    x2 = x1, x1 = value, y2 = y1, y1 = y;
    value = y;
  }
}

// x rounded to int16 samples (clipped), `length` of them (>= x's), zeros past x: a codec's input.
std::vector<short> int16_samples(const torch::Tensor& x, std::size_t length) {
  auto values = values_of(x);
  std::vector<short> samples(std::max(length, values.size()), 0);
  for (std::size_t i = 0; i < values.size(); ++i)
    samples[i] = static_cast<short>(std::clamp(std::round(values[i]), -32768.0, 32767.0));
  return samples;
}

}  // namespace

torch::Tensor room_response(double rt60, double direct_to_reverberant_db, int sample_rate,
                            uint64_t seed) {
  int64_t length = std::max<int64_t>(2, std::llround(rt60 * sample_rate));
  std::mt19937_64 rng(seed);
  std::vector<double> h(static_cast<std::size_t>(length), 0.0);
  h[0] = 1.0;
  const double decay = std::log(1000.0) / (rt60 * sample_rate);  // amplitude -60 dB at rt60
  double tail = 0.0;
  for (int64_t n = 1; n < length; ++n) {
    h[n] = gaussian(rng) * std::exp(-decay * static_cast<double>(n));
    tail += h[n] * h[n];
  }
  double scale = std::sqrt(std::pow(10.0, -direct_to_reverberant_db / 10.0) / tail);
  for (int64_t n = 1; n < length; ++n) h[n] *= scale;
  return torch::tensor(h, torch::kFloat64);
}

torch::Tensor convolve_cut(const torch::Tensor& x, const torch::Tensor& h) {
  int64_t n = x.size(0), size = 1;
  while (size < n + h.size(0) - 1) size <<= 1;
  auto spectrum = torch::fft::rfft(x.to(torch::kFloat64), size) *
                  torch::fft::rfft(h.to(torch::kFloat64), size);
  return torch::fft::irfft(spectrum, size).slice(0, 0, n);
}

torch::Tensor spectral_tilt(const torch::Tensor& x, double tilt_db) {
  // |H| = 1 + b at 0 Hz and 1 - b at Nyquist.
  double g = std::pow(10.0, tilt_db / 20.0), b = (1.0 - g) / (1.0 + g);
  auto y = x.to(torch::kFloat64).clone();
  if (y.size(0) > 1) y.slice(0, 1).add_(x.to(torch::kFloat64).slice(0, 0, -1), b);
  return y;
}

torch::Tensor telephone_band(const torch::Tensor& x, int sample_rate) {
  // Two biquads of these Q make a 4th-order Butterworth response.
  const double q1 = 1.0 / (2.0 * std::cos(M_PI / 8.0)), q2 = 1.0 / (2.0 * std::cos(3.0 * M_PI / 8.0));
  auto values = values_of(x);
  for (double q : {q1, q2}) biquad(values, true, 300.0, q, sample_rate);
  if (3400.0 < 0.45 * sample_rate)
    for (double q : {q1, q2}) biquad(values, false, 3400.0, q, sample_rate);
  return torch::tensor(values, torch::kFloat64);
}

torch::Tensor gsm_round_trip(const torch::Tensor& x, int sample_rate) {
  auto samples = int16_samples(x, 0);
  SF_VIRTUAL_IO io{MemoryFile::length, MemoryFile::seek, MemoryFile::read, MemoryFile::write,
                   MemoryFile::tell};
  MemoryFile file;
  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = 1;
  info.format = SF_FORMAT_WAV | SF_FORMAT_GSM610;
  SNDFILE* encoder = sf_open_virtual(&io, SFM_WRITE, &info, &file);
  if (!encoder) throw Error(std::string("GSM 06.10 encoder: ") + sf_strerror(nullptr));
  auto count = static_cast<sf_count_t>(samples.size());
  bool written = sf_writef_short(encoder, samples.data(), count) == count;
  sf_close(encoder);
  if (!written) throw Error("GSM 06.10 encoder: short write");
  file.position = 0;
  SF_INFO decoded_info{};
  SNDFILE* decoder = sf_open_virtual(&io, SFM_READ, &decoded_info, &file);
  if (!decoder) throw Error(std::string("GSM 06.10 decoder: ") + sf_strerror(nullptr));
  std::vector<short> decoded(samples.size(), 0);  // the codec's last block may be short
  sf_readf_short(decoder, decoded.data(), count);
  sf_close(decoder);
  return torch::tensor(std::vector<double>(decoded.begin(), decoded.end()), torch::kFloat64);
}

// libcodec2's decoder draws random phases from codec2_rand(), one generator for the whole process
// that no call of its API resets: two round trips of one signal would differ, and dynamic
// mixtures must be the same for the same seed (resume is bit-identical). This definition takes
// the library's place (libcodec2 calls it through its PLT, and the loader finds the program's
// definition first: exported by visibility and --export-dynamic-symbol, nabu/CMakeLists.txt):
// the library's own generator, per thread, restarted by every round trip.
// ChannelAugmentation.Codec2KeepsThePitchAndOnlyItsOwnDraws fails if it is not the one called.
namespace {
thread_local unsigned long codec2_random_state = 1;
}  // namespace

extern "C" __attribute__((visibility("default"))) int codec2_rand(void) {
  codec2_random_state = codec2_random_state * 1103515245UL + 12345UL;
  return static_cast<int>((codec2_random_state / 65536) % 32768);
}

torch::Tensor codec2_round_trip(const torch::Tensor& x, int bitrate) {
  // kCodec2Bitrates' modes (the header keeps libcodec2's constants out); the test of every
  // rate fails if the two lists part.
  static const std::map<int, int> modes = {{3200, CODEC2_MODE_3200}, {2400, CODEC2_MODE_2400},
                                           {1600, CODEC2_MODE_1600}, {1200, CODEC2_MODE_1200}};
  auto mode = modes.find(bitrate);
  if (mode == modes.end())
    throw Error("Codec 2: no mode of " + std::to_string(bitrate) + " bit/s here");
  std::unique_ptr<CODEC2, void (*)(CODEC2*)> codec(codec2_create(mode->second), codec2_destroy);
  if (!codec) throw Error("Codec 2: libcodec2 has no " + std::to_string(bitrate) + " bit/s mode");
  const auto length = static_cast<std::size_t>(x.numel());
  const std::size_t frame = static_cast<std::size_t>(codec2_samples_per_frame(codec.get()));
  // Whole frames, the last one padded with zeros, then cut back to the input's length.
  auto samples = int16_samples(x, (length + frame - 1) / frame * frame);
  std::vector<short> decoded(samples.size());
  std::vector<unsigned char> bits(static_cast<std::size_t>(codec2_bytes_per_frame(codec.get())));
  codec2_random_state = 1;
  for (std::size_t start = 0; start < samples.size(); start += frame) {
    codec2_encode(codec.get(), bits.data(), samples.data() + start);
    codec2_decode(codec.get(), decoded.data() + start, bits.data());
  }
  return torch::tensor(std::vector<double>(decoded.begin(), decoded.begin() + length),
                       torch::kFloat64);
}

torch::Tensor apply_channel(const torch::Tensor& samples, const Channel& channel,
                            int sample_rate) {
  auto x = samples.to(torch::kFloat64);
  if (channel.rt60 > 0)
    x = convolve_cut(x, room_response(channel.rt60, channel.direct_to_reverberant_db,
                                      sample_rate, channel.room_seed));
  if (channel.tilt_db != 0) x = spectral_tilt(x, channel.tilt_db);
  if (channel.telephone) x = telephone_band(x, sample_rate);
  // The codecs take int16 samples: at half of full scale, far from clipping and from the last
  // bits (mix_sources sets the level of every source afterwards anyway).
  auto at_half_scale = [](const torch::Tensor& signal) {
    double peak = signal.abs().max().item<double>();
    return peak > 0 ? signal * (0.5 * kFullScale / peak) : signal;
  };
  if (channel.gsm) x = gsm_round_trip(at_half_scale(x), sample_rate);
  if (channel.codec2_bitrate > 0) x = codec2_round_trip(at_half_scale(x), channel.codec2_bitrate);
  return x;
}

}  // namespace nabu
