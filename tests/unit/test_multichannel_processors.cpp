// The multi-microphone processors (multichannel_processors.cpp) against slow references written
// here: explicit loops over frames, bins, sources and channels on the feature computers' output,
// or compositions of the single-channel processors, on small synthetic multi-channel examples
// (one mono wav per channel).
#include <gtest/gtest.h>

#include <cmath>

#include "nabu/core/config.h"
#include "nabu/core/error.h"
#include "nabu/processing/audio.h"
#include "nabu/processing/data_list.h"
#include "nabu/processing/feature_computer.h"
#include "nabu/processing/processor.h"
#include "test_helpers.h"

using namespace nabu;
using nabu::testing::error_of;
using nabu::testing::TempDir;
using nabu::testing::write_noise_wav;
using nabu::testing::write_pcm16_wav;

namespace {

constexpr int kBins = 129;  // nfft 256

ConfigFile config_of(const std::string& body) {
  return ConfigFile::parse("[processor]\n" + body, "processor.cfg");
}

ProcessorPtr processor_of(const std::string& body) { return make_processor(config_of(body)); }

DataLine line_of(std::vector<std::string> fields) {
  return DataLine{"utt", std::move(fields), "list.scp:1"};
}

// `count` noise wavs <prefix>1.wav ... of `length` samples; their paths.
std::vector<std::string> noise_wavs(const TempDir& dir, const std::string& prefix, int count,
                                    int length, unsigned seed) {
  std::vector<std::string> paths;
  for (int i = 0; i < count; ++i) {
    auto path = dir / (prefix + std::to_string(i + 1) + ".wav");
    write_noise_wav(path, length, seed + 17 * i);
    paths.push_back(path.string());
  }
  return paths;
}

// The feature `name` (recipe settings: 32 ms cosine windows every 8 ms, nfft 256) of one wav.
torch::Tensor feature_of(const std::string& name, const std::string& path) {
  FeatureOptions options;
  options.feature = name;
  Audio audio = read_audio(path);
  return make_feature_computer(options)->compute(audio.samples, audio.sample_rate).contiguous();
}

std::vector<torch::Tensor> features_of(const std::string& name,
                                       const std::vector<std::string>& paths) {
  std::vector<torch::Tensor> out;
  for (const auto& path : paths) out.push_back(feature_of(name, path));
  return out;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const std::string kEncapsulated =
    "processor = multi_averager_encapsulator\nwinlen = 0.032\nwinstep = 0.008\n"
    "winfunc = cosine\nnfft = 256\n";

}  // namespace

// ---------------------------------------------------------------------------------------------
// multi_averager_encapsulator

TEST(MultichannelEncapsulator, AveragesAudioFeatProcessorOverChannels) {
  TempDir dir;
  auto channels = noise_wavs(dir, "ch", 3, 1500, 11);
  for (std::string mvn : {"None", "local"}) {
    auto averager = processor_of(kEncapsulated +
                                 "encapsulated_processor = audio_feat_processor\nn_channels = 3\n"
                                 "feature = logspec\nmvn_type = " + mvn + "\n");
    auto single = processor_of("processor = audio_feat_processor\nfeature = logspec\nmvn_type = " +
                               mvn + "\n");
    int rate = 0;
    auto averaged = averager->process(line_of(channels), &rate);
    EXPECT_EQ(rate, 8000);
    auto expected = (single->process(line_of({channels[0]})) +
                     single->process(line_of({channels[1]})) +
                     single->process(line_of({channels[2]}))) / 3.0;
    ASSERT_EQ(averaged.sizes(), expected.sizes()) << mvn;
    EXPECT_TRUE(torch::allclose(averaged, expected, 1e-9, 1e-9)) << mvn;
    EXPECT_EQ(averager->nontime_dims(), std::vector<int64_t>{kBins});
    EXPECT_EQ(averager->feature_options()->feature, "logspec");
    EXPECT_EQ(averager->segment(averaged, "5").size(), segment_frames(averaged, "5").size());
  }
}

TEST(MultichannelEncapsulator, FromFilesNormalisesWithTheStatisticsOfTheMvnFiles) {
  TempDir dir;
  auto channels = noise_wavs(dir, "ch", 3, 1500, 21);
  auto mvn = noise_wavs(dir, "mvn", 2, 1400, 31);
  auto averager = processor_of(kEncapsulated +
                               "encapsulated_processor = audio_feat_processor\nn_channels = 3\n"
                               "feature = logspec\nmvn_type = from_files\n");
  std::vector<std::string> fields = channels;
  fields.push_back("mvn_from_files");
  fields.insert(fields.end(), mvn.begin(), mvn.end());
  auto normalised = averager->process(line_of(fields));

  // Explicit loops: channel average, and the mean and (population) std over time of the average
  // of the mvn files' features.
  auto x = features_of("logspec", channels);
  auto m = features_of("logspec", mvn);
  int64_t frames = x[0].size(0), mvn_frames = m[0].size(0);
  auto expected = torch::empty({frames, kBins}, torch::kFloat64);
  auto out = expected.accessor<double, 2>();
  for (int64_t f = 0; f < kBins; ++f) {
    double sum = 0;
    for (int64_t t = 0; t < mvn_frames; ++t)
      sum += (m[0][t][f].item<double>() + m[1][t][f].item<double>()) / 2;
    double mean = sum / mvn_frames, squares = 0;
    for (int64_t t = 0; t < mvn_frames; ++t) {
      double d = (m[0][t][f].item<double>() + m[1][t][f].item<double>()) / 2 - mean;
      squares += d * d;
    }
    double std = std::sqrt(squares / mvn_frames);
    for (int64_t t = 0; t < frames; ++t) {
      double average = 0;
      for (const auto& channel : x) average += channel[t][f].item<double>();
      out[t][f] = (average / 3 - mean) / (std + 1e-12);
    }
  }
  EXPECT_TRUE(torch::allclose(normalised, expected, 1e-8, 1e-8));

  // The keyword is required with from_files, and refused without it.
  auto missing = error_of([&] { averager->process(line_of(channels)); });
  EXPECT_TRUE(contains(missing, "mvn_from_files")) << missing;
  auto plain = processor_of(kEncapsulated +
                            "encapsulated_processor = audio_feat_processor\nn_channels = 3\n"
                            "feature = logspec\nmvn_type = None\n");
  auto refused = error_of([&] { plain->process(line_of(fields)); });
  EXPECT_TRUE(contains(refused, "mvn_type")) << refused;
}

TEST(MultichannelEncapsulator, SplitsSourceMajorLinesIntoChannelsAndAveragesSignals) {
  TempDir dir;
  // Two sources of two channels each, source-major: s1c1 s1c2 s2c1 s2c2.
  auto s1 = noise_wavs(dir, "s1c", 2, 1200, 41);
  auto s2 = noise_wavs(dir, "s2c", 2, 1200, 51);
  auto averager = processor_of(kEncapsulated +
                               "encapsulated_processor = audio_multi_signal_processor\n"
                               "n_channels = 2\nfeature = raw\n");
  auto multi = processor_of("processor = audio_multi_signal_processor\nfeature = raw\n");
  auto averaged = averager->process(line_of({s1[0], s1[1], s2[0], s2[1]}));
  auto expected = (multi->process(line_of({s1[0], s2[0]})) +
                   multi->process(line_of({s1[1], s2[1]}))) / 2.0;
  ASSERT_EQ(averaged.size(0), 2);
  EXPECT_TRUE(torch::allclose(averaged, expected, 1e-12, 1e-12));
  EXPECT_FALSE(averager->storable());

  // The complex spectrum of the mixture channels (org_mix for the reconstructor).
  auto spec = processor_of(kEncapsulated +
                           "encapsulated_processor = audio_signal_processor\nn_channels = 2\n"
                           "feature = spec\n");
  auto mixture = spec->process(line_of({s1[0], s1[1]}));
  auto reference = (feature_of("spec", s1[0]) + feature_of("spec", s1[1])) / 2.0;
  EXPECT_TRUE(mixture.is_complex());
  EXPECT_TRUE(torch::allclose(mixture, reference, 1e-9, 1e-9));
  EXPECT_EQ(spec->feature_options()->feature, "spec");
  EXPECT_FALSE(spec->storable());
}

TEST(MultichannelEncapsulator, GlobalStatisticsCoverTheFramesOfEveryChannel) {
  TempDir dir;
  auto channels = noise_wavs(dir, "ch", 2, 1300, 61);
  auto averager = processor_of(kEncapsulated +
                               "encapsulated_processor = audio_feat_processor\nn_channels = 2\n"
                               "feature = logspec\nmvn_type = global\n");
  auto single = processor_of("processor = audio_feat_processor\nfeature = logspec\n"
                             "mvn_type = global\n");
  ASSERT_TRUE(averager->needs_statistics());
  auto observations = averager->statistics_observations(line_of(channels));
  auto expected_observations =
      torch::cat({single->statistics_observations(line_of({channels[0]})),
                  single->statistics_observations(line_of({channels[1]}))},
                 0);
  EXPECT_TRUE(torch::equal(observations, expected_observations));
  MvnAccumulator accumulator;
  accumulator.add(observations);
  auto statistics = accumulator.finish();
  averager->set_statistics(statistics);
  single->set_statistics(statistics);
  auto expected = (single->process(line_of({channels[0]})) +
                   single->process(line_of({channels[1]}))) / 2.0;
  EXPECT_TRUE(torch::allclose(averager->process(line_of(channels)), expected, 1e-9, 1e-9));
}

TEST(MultichannelEncapsulator, BadConfigurationsAndLinesAreNamed) {
  const std::string base = kEncapsulated + "feature = logspec\n";
  auto unknown = error_of(
      [&] { processor_of(base + "encapsulated_processor = audio_feat_procesor\nn_channels = 3\n"); });
  EXPECT_TRUE(contains(unknown, "encapsulated_processor")) << unknown;
  EXPECT_TRUE(contains(unknown, "audio_feat_processor")) << unknown;  // did you mean
  EXPECT_THROW(processor_of(base + "encapsulated_processor = audio_feat_procesor\nn_channels = 3\n"),
               ConfigError);
  auto no_channels =
      error_of([&] { processor_of(base + "encapsulated_processor = audio_feat_processor\n"); });
  EXPECT_TRUE(contains(no_channels, "n_channels")) << no_channels;
  auto no_inner = error_of([&] { processor_of(base + "n_channels = 3\n"); });
  EXPECT_TRUE(contains(no_inner, "encapsulated_processor")) << no_inner;
  auto mvn = error_of([&] {
    processor_of(base + "encapsulated_processor = audio_signal_processor\nn_channels = 3\n"
                        "mvn_type = local\n");
  });
  EXPECT_TRUE(contains(mvn, "mvn_type")) << mvn;
  // A key the encapsulated processor does not know is found by the checker and when building.
  auto section = config_of(base + "encapsulated_processor = audio_feat_processor\nn_channels = 3\n"
                                  "mag_thres = 100\n");
  auto problems = processor_registry().check("multi_averager_encapsulator",
                                             section.section("processor"));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_TRUE(contains(problems[0], "mag_thres")) << problems[0];
  EXPECT_THROW(make_processor(section), ConfigError);
  EXPECT_TRUE(processor_registry()
                  .check("multi_averager_encapsulator",
                         config_of(base + "encapsulated_processor = audio_feat_processor\n"
                                          "n_channels = 3\nmvn_type = from_files\n")
                             .section("processor"))
                  .empty());

  TempDir dir;
  auto channels = noise_wavs(dir, "ch", 4, 1200, 71);
  write_noise_wav(dir / "short.wav", 900, 81);
  auto averager =
      processor_of(base + "encapsulated_processor = audio_feat_processor\nn_channels = 3\n");
  auto too_few = error_of([&] { averager->process(line_of({channels[0], channels[1]})); });
  EXPECT_TRUE(contains(too_few, "n_channels = 3")) << too_few;
  auto not_multiple = error_of([&] { averager->process(line_of(channels)); });
  EXPECT_TRUE(contains(not_multiple, "n_channels = 3")) << not_multiple;
  EXPECT_THROW(averager->process(line_of(channels)), DataError);
  auto lengths = error_of([&] {
    averager->process(line_of({channels[0], channels[1], (dir / "short.wav").string()}));
  });
  EXPECT_TRUE(contains(lengths, "short.wav")) << lengths;
}

// ---------------------------------------------------------------------------------------------
// spatial_feat_processor

TEST(MultichannelSpatial, CosAndSinOfThePhaseDifferenceOfEachPair) {
  TempDir dir;
  auto channels = noise_wavs(dir, "mic", 6, 1200, 91);
  auto spatial = processor_of(
      "processor = spatial_feat_processor\nchannels_pairs = 3-5 4-6 3-4\nfeature = angspec\n"
      "mvn_type = None\n");
  auto features = spatial->process(line_of(channels));
  auto phase = features_of("angspec", channels);
  const int pairs[3][2] = {{2, 4}, {3, 5}, {2, 3}};  // counted from 0
  int64_t frames = phase[0].size(0);
  ASSERT_EQ(features.sizes(), (torch::IntArrayRef{frames, 3 * 2 * kBins}));
  auto got = features.contiguous();
  auto out = got.accessor<double, 2>();
  double worst = 0;
  for (int p = 0; p < 3; ++p) {
    auto a = phase[pairs[p][0]].accessor<double, 2>();
    auto b = phase[pairs[p][1]].accessor<double, 2>();
    for (int64_t t = 0; t < frames; ++t)
      for (int f = 0; f < kBins; ++f) {
        double difference = a[t][f] - b[t][f];
        worst = std::max(worst, std::abs(out[t][p * 2 * kBins + f] - std::cos(difference)));
        worst = std::max(worst, std::abs(out[t][p * 2 * kBins + kBins + f] - std::sin(difference)));
      }
  }
  EXPECT_LT(worst, 1e-12);
  EXPECT_EQ(spatial->nontime_dims(), std::vector<int64_t>{6 * kBins});
  // A channel against itself: no phase difference.
  auto same = processor_of("processor = spatial_feat_processor\nchannels_pairs = 2-2\n"
                           "feature = angspec\n")
                  ->process(line_of(channels));
  EXPECT_TRUE(torch::allclose(same.slice(1, 0, kBins), torch::ones({frames, kBins}, torch::kFloat64)));
  EXPECT_TRUE(torch::allclose(same.slice(1, kBins), torch::zeros({frames, kBins}, torch::kFloat64)));
}

TEST(MultichannelSpatial, MalformedPairsAndMissingChannelsAreNamed) {
  for (std::string value : {"3-", "3", "a-b", "0-1", "1-2-3", "3-5 4_6", "-1-2"}) {
    std::string body = "processor = spatial_feat_processor\nfeature = angspec\nchannels_pairs = " +
                       value + "\n";
    auto message = error_of([&] { processor_of(body); });
    EXPECT_TRUE(contains(message, "channels_pairs")) << value << ": " << message;
    EXPECT_THROW(processor_of(body), ConfigError) << value;
    EXPECT_FALSE(processor_registry()
                     .check("spatial_feat_processor", config_of(body).section("processor"))
                     .empty())
        << value;
  }
  auto missing = error_of(
      [&] { processor_of("processor = spatial_feat_processor\nfeature = angspec\n"); });
  EXPECT_TRUE(contains(missing, "channels_pairs")) << missing;

  TempDir dir;
  auto channels = noise_wavs(dir, "mic", 4, 1200, 101);
  auto spatial = processor_of(
      "processor = spatial_feat_processor\nchannels_pairs = 3-5 4-6 3-4\nfeature = angspec\n");
  auto out_of_range = error_of([&] { spatial->process(line_of(channels)); });
  EXPECT_TRUE(contains(out_of_range, "channels_pairs")) << out_of_range;
  EXPECT_TRUE(contains(out_of_range, "channel 5")) << out_of_range;
  EXPECT_THROW(spatial->process(line_of(channels)), DataError);
}

// ---------------------------------------------------------------------------------------------
// ideal_ratio_multimic_processor

TEST(MultichannelIdealRatio, SpeechPowerAveragedOverChannelsAgainstTheReference) {
  TempDir dir;
  // Two speech sources and the noise reference, two channels each (source-major).
  auto s1 = noise_wavs(dir, "s1c", 2, 1300, 111);
  auto s2 = noise_wavs(dir, "s2c", 2, 1300, 121);
  auto noise = noise_wavs(dir, "nc", 2, 1300, 131);
  std::vector<std::string> fields = {s1[0], s1[1], s2[0], s2[1], noise[0], noise[1]};
  auto power = features_of("powspec", fields);
  int64_t frames = power[0].size(0);
  for (bool root : {true, false}) {
    auto processor = processor_of(std::string("processor = ideal_ratio_multimic_processor\n"
                                              "nr_channels = 2\nfeature = powspec\n") +
                                  (root ? "" : "apply_sqrt = False\n"));
    auto mask = processor->process(line_of(fields)).contiguous();
    ASSERT_EQ(mask.sizes(), (torch::IntArrayRef{frames, kBins}));
    auto got = mask.accessor<double, 2>();
    double worst = 0;
    for (int64_t t = 0; t < frames; ++t)
      for (int f = 0; f < kBins; ++f) {
        double speech = 0;
        for (int s = 0; s < 2; ++s)
          speech += (power[2 * s][t][f].item<double>() + power[2 * s + 1][t][f].item<double>()) / 2;
        double reference = (power[4][t][f].item<double>() + power[5][t][f].item<double>()) / 2;
        double ratio = speech / (speech + reference + 1e-48);
        worst = std::max(worst, std::abs(got[t][f] - (root ? std::sqrt(ratio) : ratio)));
      }
    EXPECT_LT(worst, 1e-12) << root;
    EXPECT_EQ(processor->nontime_dims(), std::vector<int64_t>{kBins});
  }

  auto magnitude = error_of([] {
    processor_of("processor = ideal_ratio_multimic_processor\nnr_channels = 2\nfeature = magspec\n");
  });
  EXPECT_TRUE(contains(magnitude, "feature")) << magnitude;
  EXPECT_TRUE(contains(magnitude, "power")) << magnitude;
  auto processor = processor_of(
      "processor = ideal_ratio_multimic_processor\nnr_channels = 2\nfeature = powspec\n");
  auto odd = error_of([&] {
    processor->process(line_of({s1[0], s1[1], s2[0], s2[1], noise[0]}));
  });
  EXPECT_TRUE(contains(odd, "nr_channels = 2")) << odd;
  EXPECT_THROW(processor->process(line_of({s1[0], s1[1]})), DataError);  // no reference block
}

// ---------------------------------------------------------------------------------------------
// onehotperfeature_target_multimic_processor and multi_target_multimic_processor

TEST(MultichannelTargets, OneHotTargetsOfTheChannelAveragedMagnitudes) {
  TempDir dir;
  // Three sources (two speakers and the noise) of two channels each.
  std::vector<std::string> fields;
  for (int s = 0; s < 3; ++s) {
    auto channels = noise_wavs(dir, "s" + std::to_string(s) + "c", 2, 1200, 141 + 10 * s);
    fields.insert(fields.end(), channels.begin(), channels.end());
  }
  auto magnitude = features_of("magspec", fields);
  int64_t frames = magnitude[0].size(0);
  // winner[t][f]: the first source with the largest channel mean.
  std::vector<std::vector<int>> winner(frames, std::vector<int>(kBins));
  for (int64_t t = 0; t < frames; ++t)
    for (int f = 0; f < kBins; ++f) {
      double best = -1;
      for (int s = 0; s < 3; ++s) {
        double mean =
            (magnitude[2 * s][t][f].item<double>() + magnitude[2 * s + 1][t][f].item<double>()) / 2;
        if (mean > best) {
          best = mean;
          winner[t][f] = s;
        }
      }
    }

  auto all = processor_of("processor = onehotperfeature_target_multimic_processor\nnrs = 3\n"
                          "nr_channels = 2\nfeature = magspec\n");
  auto targets = all->process(line_of(fields));
  EXPECT_EQ(targets.dtype(), torch::kBool);
  ASSERT_EQ(targets.sizes(), (torch::IntArrayRef{frames, kBins * 3}));
  EXPECT_EQ(all->nontime_dims(), std::vector<int64_t>{kBins * 3});
  int mismatches = 0;
  for (int64_t t = 0; t < frames; ++t)
    for (int f = 0; f < kBins; ++f)
      for (int s = 0; s < 3; ++s)
        mismatches += targets[t][f * 3 + s].item<bool>() != (winner[t][f] == s);
  EXPECT_EQ(mismatches, 0);

  // spk_select = 2: only the noise column (the noisebin targets).
  auto noise = processor_of("processor = onehotperfeature_target_multimic_processor\nnrs = 3\n"
                            "spk_select = 2\nnr_channels = 2\nfeature = magspec\n");
  auto bins = noise->process(line_of(fields));
  ASSERT_EQ(bins.sizes(), (torch::IntArrayRef{frames, kBins}));
  mismatches = 0;
  for (int64_t t = 0; t < frames; ++t)
    for (int f = 0; f < kBins; ++f) mismatches += bins[t][f].item<bool>() != (winner[t][f] == 2);
  EXPECT_EQ(mismatches, 0);

  auto count = error_of([&] {
    all->process(line_of(std::vector<std::string>(fields.begin(), fields.begin() + 5)));
  });
  EXPECT_TRUE(contains(count, "nrs")) << count;
  EXPECT_TRUE(contains(count, "nr_channels")) << count;
  auto select = error_of([] {
    processor_of("processor = onehotperfeature_target_multimic_processor\nnrs = 3\n"
                 "spk_select = 3\nnr_channels = 2\nfeature = magspec\n");
  });
  EXPECT_TRUE(contains(select, "spk_select")) << select;
  auto channels = error_of([] {
    processor_of("processor = onehotperfeature_target_multimic_processor\nnrs = 3\n"
                 "feature = magspec\n");
  });
  EXPECT_TRUE(contains(channels, "nr_channels")) << channels;
}

TEST(MultichannelTargets, MultiTargetsAreTheChannelMeansOfEverySource) {
  TempDir dir;
  std::vector<std::string> fields;
  for (int s = 0; s < 2; ++s) {
    auto channels = noise_wavs(dir, "s" + std::to_string(s) + "c", 3, 1200, 181 + 10 * s);
    fields.insert(fields.end(), channels.begin(), channels.end());
  }
  auto processor = processor_of("processor = multi_target_multimic_processor\nnrs = 2\n"
                                "nr_channels = 3\nfeature = magspec\n");
  auto targets = processor->process(line_of(fields)).contiguous();
  auto magnitude = features_of("magspec", fields);
  int64_t frames = magnitude[0].size(0);
  ASSERT_EQ(targets.sizes(), (torch::IntArrayRef{frames, kBins, 2}));
  EXPECT_EQ(processor->nontime_dims(), (std::vector<int64_t>{kBins, 2}));
  auto got = targets.accessor<double, 3>();
  double worst = 0;
  for (int64_t t = 0; t < frames; ++t)
    for (int f = 0; f < kBins; ++f)
      for (int s = 0; s < 2; ++s) {
        double mean = 0;
        for (int c = 0; c < 3; ++c) mean += magnitude[3 * s + c][t][f].item<double>();
        worst = std::max(worst, std::abs(got[t][f][s] - mean / 3));
      }
  EXPECT_LT(worst, 1e-9);
  EXPECT_THROW(processor->process(line_of({fields[0], fields[1], fields[2], fields[3]})),
               DataError);
}

// ---------------------------------------------------------------------------------------------
// scorelabelperfeature_multimic_processor

TEST(MultichannelUsedBins, ThresholdOnTheMicrophoneAverage) {
  TempDir dir;
  // Four microphones hearing tones of different level and frequency: many bins are far below
  // the peak, some above.
  std::vector<std::string> mics;
  for (int m = 0; m < 4; ++m) {
    std::vector<short> pcm(1500);
    for (int n = 0; n < 1500; ++n)
      pcm[n] = static_cast<short>(std::lround((2000 + 1500 * m) *
                                              std::sin(2 * M_PI * (400 + 300 * m) * n / 8000.0)));
    auto path = dir / ("mic" + std::to_string(m) + ".wav");
    write_pcm16_wav(path, pcm);
    mics.push_back(path.string());
  }
  auto processor = processor_of("processor = scorelabelperfeature_multimic_processor\n"
                                "feature = magspec\nmag_thres = 100\n");
  auto used = processor->process(line_of(mics));
  auto magnitude = features_of("magspec", mics);
  int64_t frames = magnitude[0].size(0);
  std::vector<std::vector<double>> average(frames, std::vector<double>(kBins));
  double peak = 0;
  for (int64_t t = 0; t < frames; ++t)
    for (int f = 0; f < kBins; ++f) {
      for (const auto& mic : magnitude) average[t][f] += mic[t][f].item<double>() / 4;
      peak = std::max(peak, average[t][f]);
    }
  EXPECT_EQ(used.dtype(), torch::kBool);
  ASSERT_EQ(used.sizes(), (torch::IntArrayRef{frames, kBins}));
  int mismatches = 0;
  for (int64_t t = 0; t < frames; ++t)
    for (int f = 0; f < kBins; ++f)
      mismatches += used[t][f].item<bool>() != (average[t][f] > peak / 100);
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(used.sum().item<int64_t>(), 0);
  EXPECT_LT(used.sum().item<int64_t>(), used.numel());
  EXPECT_EQ(processor->nontime_dims(), std::vector<int64_t>{kBins});
  EXPECT_THROW(processor->process(line_of({})), DataError);
}

// ---------------------------------------------------------------------------------------------
// one_processor and zero_processor

TEST(MultichannelConstant, OnesAndZerosWithTheFramesOfTheFeature) {
  TempDir dir;
  auto wav = noise_wavs(dir, "mix", 1, 1500, 201)[0];
  int64_t frames = feature_of("powspec", wav).size(0);
  for (auto [name, value] : {std::pair<std::string, float>{"one_processor", 1.0f},
                             std::pair<std::string, float>{"zero_processor", 0.0f}}) {
    auto processor = processor_of("processor = " + name + "\nfeature = powspec\n");
    int rate = 0;
    auto mask = processor->process(line_of({wav}), &rate);
    EXPECT_EQ(rate, 8000);
    EXPECT_EQ(mask.dtype(), torch::kFloat32) << name;
    EXPECT_TRUE(torch::equal(mask, torch::full({frames, kBins}, value, torch::kFloat32))) << name;
    EXPECT_EQ(processor->nontime_dims(), std::vector<int64_t>{kBins});
    // A slice of the wav (path begin end) has the slice's frames.
    auto slice = processor->process(line_of({wav, "0", "0.1"}));
    EXPECT_EQ(slice.size(0), (800 - 256) / 64 + 1) << name;
    EXPECT_THROW(processor->process(line_of({wav, wav})), DataError);
  }
}

// ---------------------------------------------------------------------------------------------
// Registration: every processor is listed, and the JNE 2020 recipes' processor configs build.

TEST(MultichannelRegistry, RecipeProcessorConfigsCheckAndBuild) {
  for (const char* name :
       {"multi_averager_encapsulator", "spatial_feat_processor", "ideal_ratio_multimic_processor",
        "onehotperfeature_target_multimic_processor", "multi_target_multimic_processor",
        "scorelabelperfeature_multimic_processor", "one_processor", "zero_processor"}) {
    EXPECT_TRUE(processor_registry().contains(name)) << name;
    EXPECT_FALSE(processor_registry().options(name).empty()) << name;
    EXPECT_FALSE(processor_registry().help(name).empty()) << name;
  }
  const std::string frames = "winlen = 0.032\nwinstep = 0.008\nwinfunc = cosine\nnfft = 256\n";
  const std::string spectral = frames + "preemph = 0.0\ninclude_energy = False\n";
  const std::vector<std::string> bodies = {
      "processor = spatial_feat_processor\nchannels_pairs = 3-5 4-6 3-4\nfeature = angspec\n" +
          spectral + "mvn_type = None\n",
      "processor = multi_averager_encapsulator\nencapsulated_processor = audio_signal_processor\n"
      "n_channels = 6\nfeature = raw\n" + frames,
      "processor = multi_averager_encapsulator\nencapsulated_processor = audio_feat_processor\n"
      "n_channels = 3\nfeature = logspec\n" + spectral + "mvn_type = from_files\n",
      "processor = multi_averager_encapsulator\nencapsulated_processor = audio_signal_processor\n"
      "n_channels = 6\nfeature = spec\n" + frames,
      "processor = multi_averager_encapsulator\nencapsulated_processor = "
      "audio_multi_signal_processor\nn_channels = 6\nfeature = raw\n" + frames,
      "processor = multi_averager_encapsulator\nencapsulated_processor = audio_signal_processor\n"
      "n_channels = 6\nfeature = magspec\n" + spectral,
      "processor = ideal_ratio_multimic_processor\nnr_channels = 6\nfeature = powspec\n" + spectral,
      "processor = onehotperfeature_target_multimic_processor\nnrs = 3\nspk_select = 2\n"
      "nr_channels = 6\nfeature = magspec\n" + spectral,
      "processor = onehotperfeature_target_multimic_processor\nnrs = 2\nnr_channels = 6\n"
      "feature = magspec\n" + spectral,
      "processor = multi_target_multimic_processor\nnrs = 2\nnr_channels = 6\nfeature = magspec\n" +
          spectral,
      "processor = scorelabelperfeature_multimic_processor\nfeature = magspec\n" + spectral +
          "mag_thres = 100\n",
      "processor = one_processor\nfeature = powspec\n" + spectral,
      "processor = zero_processor\nfeature = powspec\n" + spectral,
  };
  for (const auto& body : bodies) {
    auto config = config_of(body);
    const auto& section = config.section("processor");
    auto problems = processor_registry().check(section.get_string("processor"), section);
    EXPECT_TRUE(problems.empty()) << body << (problems.empty() ? "" : problems.front());
    EXPECT_NO_THROW(make_processor(config)) << body;
  }
}
