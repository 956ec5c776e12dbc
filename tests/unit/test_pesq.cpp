// PESQ (evaluation/scorers/pesq.h): what P.862 defines (an undistorted signal scores the
// top of the scale, at any delay; noise lowers it; what it cannot score is refused), and the
// values of the `pesq` package (the Recommendation's implementation) on recorded and generated
// speech, clean, noisy, with a second talker, separated, delayed, and with a pause inserted.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "nabu/core/error.h"
#include "nabu/evaluation/scorers/pesq.h"
#include "nabu/evaluation/scorers/scorer.h"
#include "nabu/processing/audio_stream.h"
#include "speech_clips.h"
#include "test_helpers.h"

namespace nabu::testing {
namespace {

std::vector<double> resampled(const std::vector<double>& x, int from, int to) {
  Resampler resampler(from, to);
  auto out = resampler.process(x);
  auto rest = resampler.flush();
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

// `x` later by `samples` (zeros in front), cut to its length.
std::vector<double> delayed(const std::vector<double>& x, std::size_t samples) {
  std::vector<double> out(samples, 0.0);
  out.insert(out.end(), x.begin(), x.end() - static_cast<long>(samples));
  return out;
}

// `x` with `samples` of silence inserted in the middle (a delay that changes), cut to its length.
std::vector<double> with_pause(const std::vector<double>& x, std::size_t samples) {
  std::vector<double> out(x.begin(), x.begin() + static_cast<long>(x.size() / 2));
  out.insert(out.end(), samples, 0.0);
  out.insert(out.end(), x.begin() + static_cast<long>(x.size() / 2), x.end());
  out.resize(x.size());
  return out;
}

// The top of the MOS-LQO scale: the raw score 4.5 mapped (P.862.1, P.862.2).
const double kTopNarrow = 0.999 + 4.0 / (1.0 + std::exp(-1.4945 * 4.5 + 4.6607));
const double kTopWide = 0.999 + 4.0 / (1.0 + std::exp(-1.3669 * 4.5 + 3.8224));

}  // namespace

TEST(Pesq, UndistortedSpeechScoresTheTopAtAnyDelayAndNoiseLowersIt) {
  const auto clean = read_raw("/usr/share/codec2/raw/hts1a.raw");
  EXPECT_NEAR(pesq(clean, clean, 8000, PesqBand::kNarrow), kTopNarrow, 1e-6);
  EXPECT_NEAR(pesq(clean, delayed(clean, 240), 8000, PesqBand::kNarrow), kTopNarrow, 0.05);
  const auto wide = resampled(clean, 8000, 16000);
  EXPECT_NEAR(pesq(wide, wide, 16000, PesqBand::kWide), kTopWide, 1e-6);
  double previous = kTopNarrow + 1e-9;
  for (double snr : {30.0, 15.0, 5.0, -5.0}) {
    const double score =
        pesq(clean, add(clean, noise(clean.size(), 1.0, 3), snr), 8000, PesqBand::kNarrow);
    EXPECT_LT(score, previous) << snr << " dB";
    EXPECT_GE(score, 1.0) << snr << " dB";
    previous = score;
  }
  EXPECT_LT(previous, 2.0);
}

TEST(Pesq, RefusesWhatItCannotScoreInOneLine) {
  const auto clean = read_raw("/usr/share/codec2/raw/hts1a.raw");
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message([&] { pesq(clean, clean, 44100, PesqBand::kNarrow); }).find("44100"),
            std::string::npos);
  EXPECT_NE(message([&] { pesq(clean, clean, 8000, PesqBand::kWide); }).find("16000 Hz"),
            std::string::npos);
  const std::vector<double> short_clip(clean.begin(), clean.begin() + 1000);
  EXPECT_NE(message([&] { pesq(short_clip, clean, 8000, PesqBand::kNarrow); }).find("1/4 s"),
            std::string::npos);
  const std::vector<double> silence(16000, 0.0);
  EXPECT_NE(message([&] { pesq(silence, clean, 8000, PesqBand::kNarrow); }).find("no utterance"),
            std::string::npos);
  EXPECT_THROW(pesq_band_of_rate(22050), Error);
  // A silent estimate is scored the bottom of the scale, not refused.
  const std::vector<double> quiet(clean.size(), 0.0);
  EXPECT_EQ(pesq(clean, quiet, 8000, PesqBand::kNarrow), 1.0);
}

TEST(Pesq, ScorerAssignsEstimatesByTheHighestMean) {
  const auto a = read_raw("/usr/share/codec2/raw/hts1a.raw");
  const auto b = read_raw("/usr/share/codec2/raw/hts2a.raw");
  const std::size_t n = std::min(a.size(), b.size());
  auto references = torch::stack({torch::tensor(std::vector<double>(a.begin(), a.begin() + n)),
                                  torch::tensor(std::vector<double>(b.begin(), b.begin() + n))});
  auto swapped = torch::stack({references[1], references[0]});
  EXPECT_NEAR(pesq_of_sources(references, swapped, 8000), kTopNarrow, 1e-6);
  ConfigSection section("task", {});
  section.set("score_type", "pesq", Origin{});
  section.set("org_src", "src", Origin{});
  section.set("base", "mix", Origin{});
  section.set("spkinfo", "spk", Origin{});
  auto scorer = scorer_registry().create("pesq", section);
  auto result = scorer->evaluate(references, swapped, references.sum(0), {}, 8000);
  EXPECT_EQ(result.permutation["SS"], (std::vector<int64_t>{1, 0}));
  EXPECT_NEAR(result.values["PESQ"]["SS"][0], kTopNarrow, 1e-6);
  EXPECT_LT(result.values["PESQ"]["base"][0], 3.0);
  EXPECT_EQ(scorer->unit(), "MOS");
}

// nabu's PESQ within 0.05 MOS of the `pesq` package's (tests/scorers/check_pesq.py, in the test
// venv ./run tests makes) on 60 pairs: recorded speech (codec2-examples at 8 kHz and 16 kHz,
// pocketsphinx-testdata at 16 kHz) and generated speech (espeak-ng resampled to 8 and 16 kHz);
// narrow band at 8 kHz, wide band at 16 kHz (and narrow band at 16 kHz for two clips); each with
// white noise at 10 dB, a second talker at 5 dB, the second talker attenuated to a fifth (a
// separation that left some of it), delayed by 30 ms with noise at 20 dB, and with 150 ms of
// silence inserted in the middle (the delay changes within an utterance).
TEST(Pesq, MatchesThePesqPackageOnRecordedAndGeneratedSpeech) {
  const std::string python = NABU_TEST_VENV_PYTHON;
  ASSERT_TRUE(fs::exists(python)) << python << " is missing: ./run tests makes the test venv "
                                  << "from tests/requirements.txt";
  TempDir dir;
  std::vector<Clip> clips;
  for (const char* name : {"hts1a", "hts2a", "forig", "morig", "big_dog", "kristoff"})
    clips.push_back({name, read_raw(std::string("/usr/share/codec2/raw/") + name + ".raw"), 8000});
  Clip espeak = espeak_clip(0, dir);
  clips.push_back({"espeak8k", resampled(espeak.samples, espeak.rate, 8000), 8000});
  for (const char* path : {"/usr/share/pocketsphinx/test/data/librivox/"
                           "sense_and_sensibility_01_austen_64kb-0870.wav",
                           "/usr/share/pocketsphinx/test/data/librivox/"
                           "sense_and_sensibility_01_austen_64kb-0890.wav",
                           "/usr/share/pocketsphinx/test/data/librivox/"
                           "sense_and_sensibility_01_austen_64kb-0930.wav",
                           "/usr/share/codec2/raw/speech_orig_16k.wav"}) {
    Audio audio = read_audio(path);
    clips.push_back({fs::path(path).stem().string(), as_vector(audio.samples), 16000});
  }
  espeak = espeak_clip(1, dir);
  clips.push_back({"espeak16k", resampled(espeak.samples, espeak.rate, 16000), 16000});
  nlohmann::json pairs = nlohmann::json::array();
  for (std::size_t c = 0; c < clips.size(); ++c) {
    const Clip& clip = clips[c];
    const Clip& other = clips[(c + 1) % clips.size()];
    const fs::path reference_path = dir / (clip.name + "_reference.wav");
    write_wav(reference_path, clip.samples, clip.rate);
    const std::size_t ms = clip.rate / 1000;
    const std::vector<std::pair<std::string, std::vector<double>>> variants{
        {"noise10dB", add(clip.samples, noise(clip.samples.size(), 1.0, 11 + c), 10)},
        {"talker5dB", add(clip.samples, other.samples, 5)},
        {"separated", add(clip.samples, other.samples, 0, 0.2)},
        {"delayed30ms", delayed(add(clip.samples, noise(clip.samples.size(), 1.0, 5 + c), 20),
                                30 * ms)},
        {"pause150ms", with_pause(clip.samples, 150 * ms)}};
    // Scored from the files as written (16-bit), as the package reads them.
    const auto reference = as_vector(read_audio(reference_path.string()).samples);
    std::vector<PesqBand> bands{pesq_band_of_rate(clip.rate)};
    if (clip.rate == 16000 && (c % 3 == 0)) bands.push_back(PesqBand::kNarrow);
    for (const auto& [variant, signal] : variants) {
      const fs::path path = dir / (clip.name + "_" + variant + ".wav");
      write_wav(path, signal, clip.rate);
      const auto degraded = as_vector(read_audio(path.string()).samples);
      for (PesqBand band : bands)
        pairs.push_back({{"reference", reference_path.string()},
                         {"degraded", path.string()},
                         {"mode", band == PesqBand::kWide ? "wb" : "nb"},
                         {"pesq", pesq(reference, degraded, clip.rate, band)}});
    }
  }
  ASSERT_GE(pairs.size(), 60u);
  write_text(dir / "pairs.json", pairs.dump(1));
  auto checked = run_shell("'" + python + "' '" + std::string(NABU_SOURCE_DIR) +
                               "/tests/scorers/check_pesq.py' pairs.json -v",
                           dir.path());
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
  std::cout << checked.output;
}

}  // namespace nabu::testing
