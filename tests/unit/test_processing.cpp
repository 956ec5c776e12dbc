// Feature computers, processors, segmentation, statistics and errors, against independent
// computations written here (explicit DFT sums, known window values).
#include <gtest/gtest.h>
#include <sndfile.h>

#include <cmath>

#include "nabu/core/config.h"
#include "nabu/core/error.h"
#include "nabu/processing/audio.h"
#include "nabu/processing/data_list.h"
#include "nabu/processing/feature_computer.h"
#include "nabu/processing/processor.h"
#include "nabu/processing/signal.h"
#include "nabu/processing/store.h"
#include "test_helpers.h"

using namespace nabu;
using nabu::testing::error_of;
using nabu::testing::TempDir;
using nabu::testing::write_text;

namespace {

// 16-bit PCM wav of `samples` (int16 scale values).
void write_pcm16(const std::filesystem::path& path, const std::vector<double>& samples,
                 int rate = 8000) {
  SF_INFO info{};
  info.samplerate = rate;
  info.channels = 1;
  info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
  SNDFILE* file = sf_open(path.c_str(), SFM_WRITE, &info);
  ASSERT_NE(file, nullptr);
  std::vector<short> pcm;
  for (double x : samples) pcm.push_back(static_cast<short>(std::lround(x)));
  sf_writef_short(file, pcm.data(), pcm.size());
  sf_close(file);
}

std::vector<double> tone(int length, double frequency, double amplitude, double phase = 0.0,
                         int rate = 8000) {
  std::vector<double> out(length);
  for (int n = 0; n < length; ++n)
    out[n] = amplitude * std::sin(2 * M_PI * frequency * n / rate + phase);
  return out;
}

std::vector<double> to_int16_grid(std::vector<double> x) {
  for (auto& v : x) v = static_cast<double>(std::lround(v));
  return x;
}

ConfigFile processor_config(const std::string& body) {
  return ConfigFile::parse("[processor]\n" + body, "processor.cfg");
}

DataLine line_of(const std::string& utterance, std::vector<std::string> fields) {
  return DataLine{utterance, std::move(fields), "list.scp:1"};
}

}  // namespace

TEST(ProcessingSignal, WindowsHaveTheirKnownValues) {
  auto cosine = make_window("cosine", 256);
  EXPECT_NEAR(cosine[0].item<double>(), std::sin(M_PI * 0.5 / 256), 1e-15);
  EXPECT_NEAR(cosine[128].item<double>(), std::sin(M_PI * 128.5 / 256), 1e-15);
  auto hanning = make_window("hanning", 5);  // numpy.hanning(5) = [0, .5, 1, .5, 0]
  EXPECT_NEAR(hanning[1].item<double>(), 0.5, 1e-15);
  EXPECT_NEAR(hanning[2].item<double>(), 1.0, 1e-15);
  auto hamming = make_window("hamming", 5);  // [.08, .54, 1, .54, .08]
  EXPECT_NEAR(hamming[0].item<double>(), 0.08, 1e-15);
  EXPECT_NEAR(make_window("none", 4).sum().item<double>(), 4.0, 1e-15);
  EXPECT_THROW(make_window("blackman", 4), Error);
}

TEST(ProcessingSignal, SnipAndFrameCounts) {
  FrameSettings settings;  // 256 / 64 samples at 8 kHz
  // n = int((1000 - 256) / 64) = 11 -> keep 11*64 + 256 = 960 samples, T = n + 1 = 12 frames.
  auto snipped = snip(torch::zeros({1000}, torch::kFloat64), settings);
  EXPECT_EQ(snipped.size(0), 960);
  EXPECT_EQ(num_frames(960, settings), 12);
  EXPECT_EQ(num_frames(100, settings), 1);
  EXPECT_EQ(num_frames(257, settings), 2);  // 1 + ceil(1/64)
  EXPECT_EQ(frame_signal(snipped, settings).sizes(), (torch::IntArrayRef{12, 256}));
}

TEST(ProcessingFeatures, MagnitudeAndLogSpectrumMatchAnExplicitDft) {
  torch::manual_seed(0);
  auto signal = torch::randn({1200}, torch::kFloat64) * 1000;
  FeatureOptions options;
  options.feature = "magspec";
  auto magnitude = make_feature_computer(options)->compute(signal, 8000);
  options.feature = "logspec";
  auto log_magnitude = make_feature_computer(options)->compute(signal, 8000);
  options.feature = "powspec";
  auto power = make_feature_computer(options)->compute(signal, 8000);
  ASSERT_EQ(magnitude.size(1), 129);
  for (int t : {0, 3, 14}) {
    for (int k : {0, 1, 37, 128}) {
      double re = 0, im = 0;
      for (int n = 0; n < 256; ++n) {
        double windowed = signal[t * 64 + n].item<double>() * std::sin(M_PI * (n + 0.5) / 256);
        re += windowed * std::cos(2 * M_PI * k * n / 256);
        im -= windowed * std::sin(2 * M_PI * k * n / 256);
      }
      double expected = std::hypot(re, im);
      EXPECT_NEAR(magnitude[t][k].item<double>(), expected, 1e-6 * (1 + expected));
      EXPECT_NEAR(log_magnitude[t][k].item<double>(), 10 * std::log10(expected), 1e-9);
      EXPECT_NEAR(power[t][k].item<double>(), expected * expected / 256,
                  1e-6 * (1 + expected * expected));
    }
  }
}

TEST(ProcessingFeatures, PreemphasisSpecAndRaw) {
  auto x = torch::tensor({1.0, 2.0, 4.0, 8.0}, torch::kFloat64);
  auto y = preemphasis(x, 0.5);
  EXPECT_TRUE(torch::allclose(y, torch::tensor({1.0, 1.5, 3.0, 6.0}, torch::kFloat64)));
  FeatureOptions options;
  options.feature = "spec";
  auto signal = torch::randn({800}, torch::kFloat64);
  auto spectrum = make_feature_computer(options)->compute(signal, 8000);
  EXPECT_TRUE(spectrum.is_complex());
  options.feature = "magspec";
  EXPECT_TRUE(torch::allclose(spectrum.abs(), make_feature_computer(options)->compute(signal, 8000)));
  options.feature = "raw";
  auto raw = make_feature_computer(options)->compute(signal * 3000, 8000);
  EXPECT_EQ(raw.size(1), 1);
  EXPECT_NEAR(raw.abs().max().item<double>(), 1.0, 1e-12);
}

TEST(ProcessingFeatures, FbankAndMfccShapes) {
  FeatureOptions options;
  options.feature = "fbank";
  options.nfilt = 23;
  options.dynamic = "ddelta";
  auto fbank = make_feature_computer(options);
  auto features = fbank->compute(torch::randn({4000}, torch::kFloat64) * 100, 8000);
  EXPECT_EQ(features.size(1), 69);
  EXPECT_EQ(fbank->dim(), 69);
  options.feature = "mfcc";
  options.dynamic = "nodelta";
  options.include_energy = true;
  auto mfcc = make_feature_computer(options);
  EXPECT_EQ(mfcc->compute(torch::randn({4000}, torch::kFloat64), 8000).size(1), 14);
  // Triangular filters peak at 1 and the first filter starts at bin 0.
  auto bank = mel_filterbank(10, 256, 8000, 0, -1);
  EXPECT_NEAR(bank.max().item<double>(), 1.0, 1e-12);
  EXPECT_EQ(bank.sizes(), (torch::IntArrayRef{10, 129}));
}

TEST(ProcessingSegmentation, OriginalRules) {
  auto data = torch::arange(250, torch::kFloat32).reshape({250, 1});
  auto full = segment_frames(data, "full");
  ASSERT_EQ(full.size(), 1u);
  EXPECT_EQ(full[0].second, 250);
  auto hundred = segment_frames(data, "100");  // floor(250/100) = 2, remainder dropped
  ASSERT_EQ(hundred.size(), 2u);
  EXPECT_EQ(hundred[1].first[0][0].item<float>(), 100.0f);
  EXPECT_EQ(hundred[1].second, 100);
  auto exact = segment_frames(data.slice(0, 0, 100), "100");
  ASSERT_EQ(exact.size(), 1u);
  auto short_one = segment_frames(data.slice(0, 0, 30), "100");  // one zero-padded segment
  ASSERT_EQ(short_one.size(), 1u);
  EXPECT_EQ(short_one[0].first.size(0), 100);
  EXPECT_EQ(short_one[0].second, 30);
  EXPECT_EQ(short_one[0].first.slice(0, 30).abs().sum().item<float>(), 0.0f);
  EXPECT_THROW(segment_frames(data, "ten"), ConfigError);
}

TEST(ProcessingProcessors, OneHotTargetsMarkTheDominantSource) {
  TempDir dir;
  // Source 1 is a 500 Hz tone, source 2 a 2 kHz tone: bins near 500 Hz belong to source 1.
  write_pcm16(dir / "s1.wav", tone(2000, 500, 8000));
  write_pcm16(dir / "s2.wav", tone(2000, 2000, 8000));
  auto processor = make_processor(processor_config(
      "processor = onehotperfeature_target_processor\nnrs = 2\nfeature = magspec\n"));
  auto targets = processor->process(line_of("u", {(dir / "s1.wav").string(),
                                                  (dir / "s2.wav").string()}));
  EXPECT_EQ(targets.dtype(), torch::kBool);
  ASSERT_EQ(targets.size(1), 129 * 2);
  int bin_500 = 16, bin_2000 = 64;  // f * 8000 / 256
  EXPECT_TRUE(targets[5][bin_500 * 2 + 0].item<bool>());
  EXPECT_FALSE(targets[5][bin_500 * 2 + 1].item<bool>());
  EXPECT_TRUE(targets[5][bin_2000 * 2 + 1].item<bool>());
  // Exactly one speaker per bin.
  EXPECT_TRUE((targets.reshape({targets.size(0), 129, 2}).sum(-1) == 1).all().item<bool>());
  EXPECT_EQ(processor->nontime_dims(), std::vector<int64_t>{258});
}

TEST(ProcessingProcessors, UsedBinsAreFortyDecibelsBelowThePeak) {
  TempDir dir;
  auto samples = to_int16_grid(tone(2000, 1000, 10000));
  write_pcm16(dir / "mix.wav", samples);
  auto processor = make_processor(processor_config(
      "processor = scorelabelperfeature_processor\nfeature = magspec\nmag_thres = 100\n"));
  auto used = processor->process(line_of("u", {(dir / "mix.wav").string()}));
  FeatureOptions options;
  options.feature = "magspec";
  auto magnitude = make_feature_computer(options)->compute(
      torch::tensor(samples, torch::kFloat64), 8000);
  auto expected = magnitude > magnitude.max() / 100;
  EXPECT_TRUE(torch::equal(used, expected));
  EXPECT_GT(used.sum().item<int64_t>(), 0);
  EXPECT_LT(used.sum().item<int64_t>(), used.numel());
}

TEST(ProcessingProcessors, AudioIsReadInInt16Scale) {
  TempDir dir;
  write_pcm16(dir / "a.wav", {0, 1000, -32768, 32767});
  auto audio = read_audio((dir / "a.wav").string());
  EXPECT_EQ(audio.sample_rate, 8000);
  EXPECT_DOUBLE_EQ(audio.samples[1].item<double>(), 1000.0);
  EXPECT_DOUBLE_EQ(audio.samples[2].item<double>(), -32768.0);
  auto slice = read_audio_fields({(dir / "a.wav").string(), "0.000125", "0.0005"});
  EXPECT_EQ(slice.samples.size(0), 3);
  EXPECT_DOUBLE_EQ(slice.samples[0].item<double>(), 1000.0);
}

TEST(ProcessingProcessors, MultiTargetsAndGlobalMvn) {
  TempDir dir;
  write_pcm16(dir / "s1.wav", tone(1600, 300, 5000));
  write_pcm16(dir / "s2.wav", tone(1600, 900, 3000));
  write_pcm16(dir / "mix.wav", tone(1600, 300, 5000, 0.3));
  auto multi = make_processor(
      processor_config("processor = multi_target_processor\nnrs = 2\nfeature = magspec\n"));
  auto targets = multi->process(line_of("u", {(dir / "s1.wav").string(), (dir / "s2.wav").string()}));
  EXPECT_EQ(targets.sizes(), (torch::IntArrayRef{22, 129, 2}));

  auto features = make_processor(processor_config(
      "processor = audio_feat_processor\nfeature = logspec\nmvn_type = global\n"));
  ASSERT_TRUE(features->needs_statistics());
  DataLine line = line_of("u", {(dir / "mix.wav").string()});
  auto observations = features->statistics_observations(line);
  MvnAccumulator accumulator;
  accumulator.add(observations.slice(0, 0, 7));  // in two parts: the merge must be exact
  accumulator.add(observations.slice(0, 7));
  auto statistics = accumulator.finish();
  EXPECT_TRUE(torch::allclose(statistics.mean, observations.mean(0)));
  EXPECT_TRUE(torch::allclose(statistics.std, observations.std(0, /*unbiased=*/false)));
  features->set_statistics(statistics);
  auto normalised = features->process(line);
  EXPECT_TRUE(torch::allclose(normalised.mean(0), torch::zeros({129}, torch::kFloat64), 1e-6, 1e-6));

  auto local = make_processor(processor_config(
      "processor = audio_feat_processor\nfeature = logspec\nmvn_type = local\n"));
  EXPECT_NEAR(local->process(line).mean().item<double>(), 0.0, 1e-9);
  EXPECT_THROW(make_processor(processor_config(
                   "processor = audio_feat_processor\nfeature = logspec\nmvn_type = median\n")),
               ConfigError);
}

TEST(ProcessingProcessors, Matrix2VectorGivesOneVectorPerSegment) {
  TempDir dir;
  write_pcm16(dir / "mix.wav", tone(8000, 300, 5000));  // 122 frames
  write_text(dir / "ivec.txt", "1 2 3, 4 5 6\n");
  auto processor = make_processor(processor_config(
      "processor = matrix2vector_processor\nfeature = logspec\nnrcol = 3\nnrs = 2\n"));
  auto data = processor->process(line_of("u", {(dir / "mix.wav").string(), (dir / "ivec.txt").string()}));
  auto segments = processor->segment(data, "50");
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_TRUE(torch::equal(segments[0].first,
                           torch::tensor({{1.f, 2.f, 3.f, 4.f, 5.f, 6.f}})));
  EXPECT_EQ(processor->segment(data, "full").size(), 1u);
  write_text(dir / "bad.txt", "1 2, 3 4 5\n");
  EXPECT_NE(error_of([&] {
              processor->process(line_of("u", {(dir / "mix.wav").string(), (dir / "bad.txt").string()}));
            }).find("nrcol"),
            std::string::npos);
}

TEST(ProcessingErrors, AudioProblemsAreNamed) {
  TempDir dir;
  write_text(dir / "corrupt.wav", "RIFF this is not a wave file");
  EXPECT_NE(error_of([&] { read_audio((dir / "corrupt.wav").string()); }).find("corrupt.wav"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_audio((dir / "missing.wav").string()); }).find("does not exist"),
            std::string::npos);
  write_pcm16(dir / "a8k.wav", tone(1000, 300, 1000), 8000);
  write_pcm16(dir / "a16k.wav", tone(1000, 300, 1000), 16000);
  write_pcm16(dir / "short.wav", tone(900, 300, 1000), 8000);
  auto targets = make_processor(processor_config(
      "processor = onehotperfeature_target_processor\nnrs = 2\nfeature = magspec\n"));
  EXPECT_NE(error_of([&] {
              targets->process(line_of("u", {(dir / "a8k.wav").string(), (dir / "a16k.wav").string()}));
            }).find("sample rate"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              targets->process(line_of("u", {(dir / "a8k.wav").string(), (dir / "short.wav").string()}));
            }).find("samples but the first source has"),
            std::string::npos);
  EXPECT_NE(error_of([&] { targets->process(line_of("u", {(dir / "a8k.wav").string()})); })
                .find("expected 2 source files"),
            std::string::npos);
}

TEST(ProcessingErrors, ListFileProblemsNameFileAndLine) {
  TempDir dir;
  write_text(dir / "pipe.scp", "u1 a.wav\nu2 sox a.wav -t wav - |\n");
  EXPECT_NE(error_of([&] { read_data_lines({(dir / "pipe.scp").string()}); }).find("pipe.scp:2"),
            std::string::npos);
  write_text(dir / "short.scp", "u1\n");
  EXPECT_NE(error_of([&] { read_data_lines({(dir / "short.scp").string()}); })
                .find("short.scp:1: utterance 'u1' has 0 fields"),
            std::string::npos);
  write_text(dir / "dup.scp", "u1 a.wav\n\nu1 b.wav\n");
  EXPECT_NE(error_of([&] { read_data_lines({(dir / "dup.scp").string()}); }).find("listed twice"),
            std::string::npos);
  // A missing list says where a relative path was looked for; an absolute one needs no note.
  const std::string relative = error_of([&] { read_data_lines({"no/such/list.scp"}); });
  EXPECT_NE(relative.find("list file 'no/such/list.scp' does not exist (relative to the working "
                          "directory " + std::filesystem::current_path().string()),
            std::string::npos)
      << relative;
  const std::string absolute = error_of([&] { read_data_lines({(dir / "none.scp").string()}); });
  EXPECT_NE(absolute.find("none.scp' does not exist"), std::string::npos) << absolute;
  EXPECT_EQ(absolute.find("working directory"), std::string::npos) << absolute;
  write_text(dir / "a.scp", "u1 a.wav\n");
  write_text(dir / "b.scp", "u2 b.wav 0.5 1.0\n");
  auto lines = read_data_lines({(dir / "a.scp").string(), (dir / "b.scp").string()});
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1].fields.size(), 3u);
  EXPECT_THROW(make_processor(processor_config("processor = audio_feet_processor\n")),
               ConfigError);
}

TEST(ProcessingStore, RoundTripAndAtomicity) {
  TempDir dir;
  StoreMetadata metadata;
  metadata.stored_type = StoredType::kBool;
  metadata.nontime_dims = {3, 2};
  metadata.section = "traintargets";
  metadata.segment_length = "full";
  metadata.writer_style = "numpy_bool_array_as_tfrecord";
  metadata.processor_config = "[processor]\nnrs = 2\n";
  auto path = store_path(dir.path(), "full");
  auto first = torch::rand({4, 3, 2}) > 0.5;
  auto second = torch::rand({7, 3, 2}) > 0.5;
  {
    StoreWriter abandoned(path, metadata);
    abandoned.append("a", first, 4);
  }  // destroyed without commit: nothing may look like a store
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(path.parent_path()),
                          std::filesystem::directory_iterator{}),
            0);
  {
    StoreWriter writer(path, metadata);
    writer.append("a", first, 4);
    writer.append("b", second, 5);  // padded segment: 7 stored rows, real length 5
    writer.set_utterances(2);
    writer.commit();
  }
  StoreReader reader(path);
  ASSERT_EQ(reader.size(), 2);
  EXPECT_EQ(reader.name(1), "b");
  EXPECT_EQ(reader.length(1), 5);
  EXPECT_TRUE(torch::equal(reader.read(0), first));
  EXPECT_TRUE(torch::equal(reader.read(1), second));
  EXPECT_EQ(reader.metadata().processor_config, metadata.processor_config);
  EXPECT_EQ(reader.metadata().nontime_dims, (std::vector<int64_t>{3, 2}));
  write_text(dir / "garbage.h5", "not hdf5");
  EXPECT_NE(error_of([&] { StoreReader bad(dir / "garbage.h5"); }).find("not a readable"),
            std::string::npos);
}
