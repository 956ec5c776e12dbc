// STOI and ESTOI (evaluation/scorers/stoi.h): the properties the papers define, and the
// values of pystoi, the reference implementation, on recorded and generated speech, clean and
// degraded (noise, a second talker, a partly removed second talker), at 8, 16 and 22.05 kHz.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "nabu/evaluation/scorers/scorer.h"
#include "nabu/evaluation/scorers/stoi.h"
#include "nabu/processing/audio.h"
#include "speech_clips.h"
#include "test_helpers.h"

namespace nabu::testing {

TEST(Stoi, IdenticalSignalsScoreOneAndNoiseLowersIt) {
  const auto clean = read_raw("/usr/share/codec2/raw/hts1a.raw");
  ASSERT_GT(clean.size(), 8000u * 2);
  EXPECT_NEAR(stoi(clean, clean, 8000), 1.0, 1e-9);
  EXPECT_NEAR(stoi(clean, clean, 8000, true), 1.0, 1e-9);
  const auto mild = add(clean, noise(clean.size(), 1.0, 1), 10);
  const auto strong = add(clean, noise(clean.size(), 1.0, 2), -5);
  EXPECT_GT(stoi(clean, mild, 8000), stoi(clean, strong, 8000));
  EXPECT_GT(stoi(clean, mild, 8000, true), stoi(clean, strong, 8000, true));
  // Scale does not matter (the envelopes are normalised per segment).
  std::vector<double> louder(mild);
  for (double& v : louder) v *= 7.0;
  EXPECT_NEAR(stoi(clean, louder, 8000), stoi(clean, mild, 8000), 1e-9);
  // Shorter than one segment (30 frames of 12.8 ms after resampling): no measure.
  std::vector<double> short_clip(clean.begin(), clean.begin() + 2000);
  EXPECT_EQ(stoi(short_clip, short_clip, 8000), 1e-5);
  EXPECT_THROW(stoi(clean, short_clip, 8000), Error);
}

TEST(Stoi, ScorerAssignsEstimatesByTheHighestMean) {
  const auto a = read_raw("/usr/share/codec2/raw/hts1a.raw");
  const auto b = read_raw("/usr/share/codec2/raw/hts2a.raw");
  const std::size_t n = std::min(a.size(), b.size());
  auto references = torch::stack({torch::tensor(std::vector<double>(a.begin(), a.begin() + n)),
                                  torch::tensor(std::vector<double>(b.begin(), b.begin() + n))});
  auto swapped = torch::stack({references[1], references[0]});
  EXPECT_NEAR(stoi_of_sources(references, swapped, 8000, false), 1.0, 1e-9);
  ConfigSection section("task", {});
  section.set("score_type", "stoi", Origin{});
  section.set("org_src", "src", Origin{});
  section.set("base", "mix", Origin{});
  section.set("spkinfo", "spk", Origin{});
  auto scorer = scorer_registry().create("stoi", section);
  auto mixture = references.sum(0);
  auto result = scorer->evaluate(references, swapped, mixture, {}, 8000);
  EXPECT_EQ(result.permutation["SS"], (std::vector<int64_t>{1, 0}));
  EXPECT_NEAR(result.values["STOI"]["SS"][0], 1.0, 1e-9);
  EXPECT_LT(result.values["STOI"]["base"][0], 0.95);
  // The rate is required.
  EXPECT_THROW(scorer->evaluate(references, swapped, mixture), Error);
}

// nabu's STOI and ESTOI within 1e-3 of pystoi's (tests/scorers/check_stoi.py, in the test venv
// ./run tests makes) on 36 pairs: recorded speech (codec2-examples at 8 kHz,
// pocketsphinx-testdata at 16 kHz) and generated speech (espeak-ng at 22.05 kHz), each clean and
// with white noise at 5 dB, a second talker at 0 dB, and the second talker attenuated to a fifth
// (a separation that left some of it).
TEST(Stoi, MatchesPystoiOnRecordedAndGeneratedSpeech) {
  const std::string python = NABU_TEST_VENV_PYTHON;
  ASSERT_TRUE(fs::exists(python)) << python << " is missing: ./run tests makes the test venv "
                                  << "from tests/requirements.txt";
  TempDir dir;
  std::vector<Clip> clips;
  for (const char* name : {"hts1a", "hts2a", "forig", "big_dog", "cross", "kristoff"}) {
    const std::string path = std::string("/usr/share/codec2/raw/") + name + ".raw";
    if (fs::exists(path)) clips.push_back({name, read_raw(path), 8000});
  }
  for (const char* name : {"sense_and_sensibility_01_austen_64kb-0870",
                           "sense_and_sensibility_01_austen_64kb-0880",
                           "sense_and_sensibility_01_austen_64kb-0890"}) {
    Audio audio = read_audio(std::string("/usr/share/pocketsphinx/test/data/librivox/") + name +
                             ".wav");
    clips.push_back({name, as_vector(audio.samples), audio.sample_rate});
  }
  for (int i = 0; i < 3; ++i) clips.push_back(espeak_clip(i, dir));
  ASSERT_GE(clips.size(), 9u);
  nlohmann::json pairs = nlohmann::json::array();
  for (std::size_t c = 0; c < clips.size(); ++c) {
    const Clip& clip = clips[c];
    const Clip& other = clips[(c + 1) % clips.size()];
    const fs::path clean_path = dir / (clip.name + "_clean.wav");
    write_wav(clean_path, clip.samples, clip.rate);
    const std::vector<std::pair<std::string, std::vector<double>>> variants{
        {"same", clip.samples},
        {"noise5dB", add(clip.samples, noise(clip.samples.size(), 1.0, 7 + c), 5)},
        {"talker0dB", add(clip.samples, other.samples, 0)},
        {"separated", add(clip.samples, other.samples, 0, 0.2)}};
    // Scored from the files as written (16-bit), as pystoi reads them.
    auto clean = as_vector(read_audio(clean_path.string()).samples);
    for (const auto& [variant, signal] : variants) {
      const fs::path path = dir / (clip.name + "_" + variant + ".wav");
      write_wav(path, signal, clip.rate);
      auto processed = as_vector(read_audio(path.string()).samples);
      pairs.push_back({{"clean", clean_path.string()},
                       {"processed", path.string()},
                       {"stoi", stoi(clean, processed, clip.rate)},
                       {"estoi", stoi(clean, processed, clip.rate, true)}});
    }
  }
  ASSERT_GE(pairs.size(), 36u);
  write_text(dir / "pairs.json", pairs.dump(1));
  auto checked = run_shell("'" + python + "' '" + std::string(NABU_SOURCE_DIR) +
                               "/tests/scorers/check_stoi.py' pairs.json",
                           dir.path());
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
  std::cout << checked.output;
}

}  // namespace nabu::testing
