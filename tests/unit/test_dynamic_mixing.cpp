// Dynamic mixing: the mixing math against a slow reference, the source pool's draws and errors,
// examples that are the recipe's processors applied to the mixture and its sources, exact crops,
// and positions and shards that behave like the stores' pipeline.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "nabu/core/error.h"
#include "nabu/neuralnetworks/trainers/trainer_options.h"
#include "nabu/pipeline/dynamic_mixing.h"
#include "nabu/pipeline/input_pipeline.h"
#include "nabu/pipeline/task_pipeline.h"
#include "nabu/processing/audio.h"
#include "nabu/processing/data_preparation.h"
#include "nabu/processing/signal.h"
#include "nabu/processing/store.h"
#include "test_helpers.h"

using namespace nabu;
using nabu::testing::TempDir;
using nabu::testing::error_of;
using nabu::testing::read_text;
using nabu::testing::write_text;

namespace {

// Speech-like test signal: a tone in bursts separated by silence (pauses must not count in the
// active level), int16 scale.
std::vector<short> bursts(int length, double f0, double amplitude, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> noise(-1.0, 1.0);
  std::vector<short> out(length);
  for (int n = 0; n < length; ++n) {
    bool on = (n / 1600) % 3 != 2;  // 0.2 s on, 0.2 s on, 0.2 s off
    double t = n / 8000.0;
    out[n] = on ? static_cast<short>(amplitude * (std::sin(2 * M_PI * f0 * t) + 0.1 * noise(rng)))
                : 0;
  }
  return out;
}

torch::Tensor as_tensor(const std::vector<short>& samples) {
  std::vector<double> values(samples.begin(), samples.end());
  return torch::tensor(values, torch::kFloat64);
}

// The definition, in loops: RMS over the 20 ms frames within 30 dB of the loudest.
double reference_active_rms(const std::vector<double>& x, int rate) {
  std::size_t frame = rate / 50, count = x.size() / frame;
  std::vector<double> energy(count, 0.0);
  double loudest = 0;
  for (std::size_t f = 0; f < count; ++f) {
    for (std::size_t i = 0; i < frame; ++i) energy[f] += x[f * frame + i] * x[f * frame + i];
    energy[f] /= frame;
    loudest = std::max(loudest, energy[f]);
  }
  double sum = 0;
  int active = 0;
  for (double e : energy)
    if (e >= loudest * 0.001) sum += e, ++active;
  return std::sqrt(sum / active);
}

// A recipe folder with the DC recipe's three training sections (features with global MVN,
// one-hot targets, used bins) over `mixtures` two-source mixtures of bursts, and a source list
// of 4 speakers x 3 utterances.
struct MixingRecipe {
  TempDir dir;
  MixingRecipe(int mixtures = 4) {
    std::string mix_list, source_list, wav_scp, utt2spk;
    for (int i = 0; i < mixtures; ++i) {
      std::string name = "m" + std::to_string(i);
      auto s1 = bursts(9000 + 500 * i, 150 + 20 * i, 4000, i), s2 = bursts(8000, 230, 3000, 50 + i);
      std::vector<short> mix(8000);
      for (int n = 0; n < 8000; ++n) mix[n] = static_cast<short>(s1[n] / 2 + s2[n] / 2);
      s1.resize(8000);
      nabu::testing::write_pcm16_wav(dir / ("mix/" + name + ".wav"), mix);
      nabu::testing::write_pcm16_wav(dir / ("s1/" + name + ".wav"), s1);
      nabu::testing::write_pcm16_wav(dir / ("s2/" + name + ".wav"), s2);
      mix_list += name + " " + (dir / ("mix/" + name + ".wav")).string() + "\n";
      source_list += name + " " + (dir / ("s1/" + name + ".wav")).string() + " " +
                     (dir / ("s2/" + name + ".wav")).string() + "\n";
    }
    for (int speaker = 0; speaker < 4; ++speaker)
      for (int u = 0; u < 3; ++u) {
        std::string name = "spk" + std::to_string(speaker) + "_" + std::to_string(u);
        auto path = dir / ("sources/" + name + ".wav");
        nabu::testing::write_pcm16_wav(
            path, bursts(6000 + 1700 * u + 300 * speaker, 110 + 45 * speaker + 7 * u,
                         2000 + 900 * u, 100 + 10 * speaker + u));
        wav_scp += name + " " + path.string() + "\n";
        utt2spk += name + " spk" + std::to_string(speaker) + "\n";
      }
    write_text(dir / "mix.scp", mix_list);
    write_text(dir / "allS.scp", source_list);
    write_text(dir / "sources.scp", wav_scp);
    write_text(dir / "utt2spk", utt2spk);
    const std::string stft =
        "feature = magspec\nwinlen = 0.032\nwinstep = 0.008\nwinfunc = cosine\nnfft = 256\n";
    write_text(dir / "recipe/feature.cfg",
               "[processor]\nprocessor = audio_feat_processor\n" + stft +
                   "mvn_type = global\n");
    write_text(dir / "recipe/target.cfg",
               "[processor]\nprocessor = onehotperfeature_target_processor\nnrs = 2\n" + stft);
    write_text(dir / "recipe/usedbins.cfg",
               "[processor]\nprocessor = scorelabelperfeature_processor\nmag_thres = 100\n" +
                   stft);
    write_text(dir / "recipe/database.conf",
               "[feat]\ndatafiles = " + (dir / "mix.scp").string() +
                   "\npreprocess = True\nstore_dir = " + (dir / "stores/feat").string() +
                   "\nmeanandvar_dir = " + (dir / "stats").string() +
                   "\nprocessor_config = feature.cfg\n"
                   "[targets]\ndatafiles = " + (dir / "allS.scp").string() +
                   "\npreprocess = True\nstore_dir = " + (dir / "stores/targets").string() +
                   "\nprocessor_config = target.cfg\n"
                   "[usedbins]\ndatafiles = " + (dir / "mix.scp").string() +
                   "\npreprocess = True\nstore_dir = " + (dir / "stores/usedbins").string() +
                   "\nprocessor_config = usedbins.cfg\n"
                   "[wave]\ndatafiles = " + (dir / "mix.scp").string() +
                   "\npreprocess = True\nstore_dir = " + (dir / "stores/wave").string() +
                   "\nprocessor_config = wave.cfg\n"
                   "[waves]\ndatafiles = " + (dir / "allS.scp").string() +
                   "\npreprocess = True\nstore_dir = " + (dir / "stores/waves").string() +
                   "\nprocessor_config = waves.cfg\n");
    const std::string raw = "feature = raw\nwinlen = 0.032\nwinstep = 0.008\n";
    write_text(dir / "recipe/wave.cfg", "[processor]\nprocessor = audio_signal_processor\n" + raw);
    write_text(dir / "recipe/waves.cfg",
               "[processor]\nprocessor = multi_target_processor\nnrs = 2\n" + raw);
    MvnStatistics statistics;
    statistics.mean = torch::full({129}, 3.0, torch::kFloat64);
    statistics.std = torch::full({129}, 2.0, torch::kFloat64);
    statistics.count = 1;
    std::filesystem::create_directories(dir / "stats");
    statistics.save(dir / "stats/mvn_stats.h5");
  }
  Recipe recipe() const { return Recipe::load(dir / "recipe"); }
  std::vector<DataBinding> inputs() const { return {{"features", {"feat"}}}; }
  std::vector<DataBinding> targets() const {
    return {{"binary_targets", {"targets"}}, {"usedbins", {"usedbins"}}};
  }
  DynamicMixingOptions options(const std::string& segment = "full", bool lists = true) const {
    DynamicMixingOptions o;
    if (lists) {
      o.source_lists = {(dir / "sources.scp").string()};
      o.utt2spk = {(dir / "utt2spk").string()};
    }
    o.examples_per_epoch = 12;
    o.segment_length = segment;
    o.seed = 7;
    return o;
  }
  // Two speakers' sources at 16 kHz (fast.scp), without utt2spk.
  DynamicMixingOptions options_of_16khz_sources() const {
    std::string list;
    for (int speaker = 0; speaker < 2; ++speaker) {
      auto path = dir / ("fast/" + std::to_string(speaker) + ".wav");
      nabu::testing::write_pcm16_wav(path, bursts(9000, 200 + 50 * speaker, 3000, speaker), 16000);
      list += "f" + std::to_string(speaker) + " " + path.string() + "\n";
    }
    write_text(dir / "fast.scp", list);
    auto o = options();
    o.source_lists = {(dir / "fast.scp").string()};
    o.utt2spk.clear();
    return o;
  }
};

}  // namespace

TEST(DynamicMixing, ActiveLevelAndMixingMatchASlowReference) {
  auto a = bursts(12000, 180, 5000, 1), b = bursts(9000, 260, 800, 2);
  std::vector<double> av(a.begin(), a.end()), bv(b.begin(), b.end());
  EXPECT_NEAR(active_rms(as_tensor(a), 8000), reference_active_rms(av, 8000), 1e-9);
  EXPECT_EQ(active_rms(torch::zeros({4000}, torch::kFloat64), 8000), 0.0);

  std::vector<double> gains{1.7, -1.7};
  auto mixed = mix_sources({as_tensor(a), as_tensor(b)}, gains, 8000);
  // The reference: same active level times the gain, cut to the shortest, joint peak 0.9.
  std::size_t length = 9000;
  double la = reference_active_rms(av, 8000), lb = reference_active_rms(bv, 8000);
  std::vector<double> sa(length), sb(length);
  double peak = 0;
  for (std::size_t n = 0; n < length; ++n) {
    sa[n] = av[n] / la * std::pow(10.0, gains[0] / 20);
    sb[n] = bv[n] / lb * std::pow(10.0, gains[1] / 20);
    peak = std::max({peak, std::abs(sa[n] + sb[n]), std::abs(sa[n]), std::abs(sb[n])});
  }
  double factor = 0.9 * 32767 / peak;
  ASSERT_EQ(mixed.mixture.size(0), static_cast<int64_t>(length));
  auto s1 = mixed.sources[0].accessor<double, 1>(), s2 = mixed.sources[1].accessor<double, 1>();
  auto m = mixed.mixture.accessor<double, 1>();
  double largest = 0;
  for (std::size_t n = 0; n < length; ++n) {
    ASSERT_EQ(s1[n], std::round(sa[n] * factor)) << n;
    ASSERT_EQ(s2[n], std::round(sb[n] * factor)) << n;
    ASSERT_EQ(m[n], s1[n] + s2[n]) << n;  // the exact sum
    largest = std::max({largest, std::abs(m[n]), std::abs(s1[n])});
  }
  EXPECT_NEAR(largest, 0.9 * 32767, 1.0);
  // The relative active level is the gain difference (3.4 dB).
  EXPECT_NEAR(20 * std::log10(active_rms(mixed.sources[0], 8000) /
                              active_rms(mixed.sources[1], 8000)),
              3.4, 0.05);
  EXPECT_NE(error_of([&] {
              mix_sources({as_tensor(a), torch::zeros({9000}, torch::kFloat64)}, gains, 8000);
            }).find("silent"),
            std::string::npos);
}

TEST(DynamicMixing, PoolDrawsDifferentSpeakersAndNamesBadLists) {
  MixingRecipe data;
  auto pool = SourcePool::from_lists({(data.dir / "sources.scp").string()},
                                     {(data.dir / "utt2spk").string()});
  EXPECT_EQ(pool.sources().size(), 12u);
  EXPECT_EQ(pool.num_speakers(), 4);
  EXPECT_EQ(pool.sample_rate(), 8000);
  std::set<std::string> seen_speakers, seen_utterances;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 300; ++i) {
    auto drawn = pool.draw(rng, 3);
    ASSERT_EQ(drawn.size(), 3u);
    std::set<std::string> speakers;
    for (auto s : drawn) {
      speakers.insert(pool.sources()[s].speaker);
      seen_utterances.insert(pool.sources()[s].name);
    }
    EXPECT_EQ(speakers.size(), 3u);
    seen_speakers.insert(speakers.begin(), speakers.end());
  }
  EXPECT_EQ(seen_speakers.size(), 4u);
  EXPECT_EQ(seen_utterances.size(), 12u);
  EXPECT_NE(error_of([&] { pool.draw(rng, 5); }).find("5 different speakers"), std::string::npos);

  // Without utt2spk every utterance is its own speaker; a list of stored mixtures' sources
  // gives each file once.
  auto lines = read_data_lines({(data.dir / "allS.scp").string()});
  EXPECT_EQ(SourcePool::from_source_lines(lines).sources().size(), 8u);

  write_text(data.dir / "short_utt2spk", "spk0_0 spk0\n");
  EXPECT_NE(error_of([&] {
              SourcePool::from_lists({(data.dir / "sources.scp").string()},
                                     {(data.dir / "short_utt2spk").string()});
            }).find("no speaker for utterance 'spk0_1'"),
            std::string::npos);
  nabu::testing::write_pcm16_wav(data.dir / "fast.wav", bursts(4000, 200, 3000, 9), 16000);
  write_text(data.dir / "mixed_rates.scp",
             "a " + (data.dir / "sources/spk0_0.wav").string() + "\nb " +
                 (data.dir / "fast.wav").string() + "\n");
  auto message = error_of([&] {
    SourcePool::from_lists({(data.dir / "mixed_rates.scp").string()}, {});
  });
  EXPECT_NE(message.find("fast.wav' is at 16000 Hz"), std::string::npos) << message;
  write_text(data.dir / "missing.scp", "a " + (data.dir / "nowhere.wav").string() + "\n");
  message = error_of([&] { SourcePool::from_lists({(data.dir / "missing.scp").string()}, {}); });
  EXPECT_NE(message.find("nowhere.wav"), std::string::npos) << message;
}

// Several source lists (recorded and synthetic voices, say), each with its own utt2spk: a speaker
// is a speaker of its list, and each source's list is drawn by its share.
TEST(DynamicMixing, SharesDrawEachSourcesListByItsWeight) {
  MixingRecipe data;
  std::string first, second, first_speakers, second_speakers;
  for (const auto& line : read_data_lines({(data.dir / "sources.scp").string()})) {
    int speaker = line.utterance[3] - '0';
    // Both utt2spk files call their speakers spk0 and spk1.
    (speaker < 2 ? first : second) += line.utterance + " " + line.fields.front() + "\n";
    (speaker < 2 ? first_speakers : second_speakers) +=
        line.utterance + " spk" + std::to_string(speaker % 2) + "\n";
  }
  write_text(data.dir / "a.scp", first);
  write_text(data.dir / "b.scp", second);
  write_text(data.dir / "a_utt2spk", first_speakers);
  write_text(data.dir / "b_utt2spk", second_speakers);
  auto pool = SourcePool::from_lists(
      {(data.dir / "a.scp").string(), (data.dir / "b.scp").string()},
      {(data.dir / "a_utt2spk").string(), (data.dir / "b_utt2spk").string()});
  EXPECT_EQ(pool.num_speakers(), 4);
  EXPECT_EQ(pool.num_speakers_of_list(0), 2);
  EXPECT_EQ(pool.num_speakers_of_list(1), 2);

  std::mt19937_64 rng(5);
  const int draws = 4000;
  int from_first = 0, both_first = 0;
  for (int i = 0; i < draws; ++i) {
    auto drawn = pool.draw(rng, 2, {3.0, 1.0});
    ASSERT_NE(pool.sources()[drawn[0]].speaker, pool.sources()[drawn[1]].speaker);
    int first_list = (pool.sources()[drawn[0]].list == 0) + (pool.sources()[drawn[1]].list == 0);
    from_first += first_list;
    both_first += first_list == 2;
  }
  // Each source from the first list with probability 3/4 (both lists keep an unused speaker for
  // the second source): 3/4 of all sources, 9/16 of the mixtures entirely from the first list.
  EXPECT_NEAR(from_first / (2.0 * draws), 0.75, 0.02);
  EXPECT_NEAR(both_first / static_cast<double>(draws), 0.5625, 0.03);
  // A share of 0 never draws from its list; too few speakers in the lists with a share is named.
  for (int i = 0; i < 200; ++i)
    for (auto s : pool.draw(rng, 2, {1.0, 0.0})) EXPECT_EQ(pool.sources()[s].list, 0u);
  EXPECT_NE(error_of([&] { pool.draw(rng, 3, {1.0, 0.0}); }).find("from the lists with a share"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              SourcePool::from_lists({(data.dir / "a.scp").string(), (data.dir / "b.scp").string()},
                                     {(data.dir / "a_utt2spk").string(),
                                      (data.dir / "b_utt2spk").string(),
                                      (data.dir / "utt2spk").string()});
            }).find("one for all or one per list"),
            std::string::npos);
}

// Pitch matching: with dynamic_mixing_near_pitch = p a mixture's other speakers are, with
// probability p, speakers within the given semitones of its first speaker's median f0.
TEST(DynamicMixing, NearPitchDrawsVoicesOfTheSamePitch) {
  MixingRecipe data;
  // spk0 and spk1 are 0.7 semitones apart, spk2 and spk3 0.9; the two pairs an octave apart.
  write_text(data.dir / "spk2f0", "spk0 100\nspk1 104\nspk2 200\nspk3 190\n");
  auto pool = SourcePool::from_lists({(data.dir / "sources.scp").string()},
                                     {(data.dir / "utt2spk").string()}, "",
                                     {(data.dir / "spk2f0").string()});
  ASSERT_TRUE(pool.has_pitch());
  auto speaker = [&](std::size_t source) { return pool.sources()[source].speaker; };
  auto near_pair = [&](const std::vector<std::size_t>& drawn) {
    std::set<std::string> pair{speaker(drawn[0]), speaker(drawn[1])};
    return pair == std::set<std::string>{"spk0", "spk1"} ||
           pair == std::set<std::string>{"spk2", "spk3"};
  };
  std::mt19937_64 rng(7);
  std::set<std::string> firsts;
  for (int i = 0; i < 400; ++i) {
    std::mt19937_64 unmatched = rng;
    auto drawn = pool.draw(rng, 2, {}, {1.0, 2.0});
    EXPECT_TRUE(near_pair(drawn)) << speaker(drawn[0]) << " " << speaker(drawn[1]);
    // The first source is the one the same generator draws without pitch matching.
    EXPECT_EQ(drawn[0], pool.draw(unmatched, 2)[0]);
    firsts.insert(speaker(drawn[0]));
  }
  EXPECT_EQ(firsts.size(), 4u);
  // Half the mixtures matched; of the others a third are near pairs by chance: 2/3 in all.
  int near = 0;
  const int draws = 3000;
  for (int i = 0; i < draws; ++i) near += near_pair(pool.draw(rng, 2, {}, {0.5, 2.0}));
  EXPECT_NEAR(near / static_cast<double>(draws), 2.0 / 3.0, 0.03);
  // Share 0 draws exactly what a pool without any f0 draws, and takes no more from the generator
  // (the gains drawn after it are the same too).
  auto unpitched = SourcePool::from_lists({(data.dir / "sources.scp").string()},
                                          {(data.dir / "utt2spk").string()});
  std::mt19937_64 a(11), b(11);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(pool.draw(a, 2, {}, {0.0, 2.0}), unpitched.draw(b, 2));
    EXPECT_EQ(a, b);
  }
  // Three speakers where each has one near voice: the mixture stays as drawn.
  for (int i = 0; i < 50; ++i) {
    auto drawn = pool.draw(rng, 3, {}, {1.0, 2.0});
    EXPECT_EQ((std::set<std::string>{speaker(drawn[0]), speaker(drawn[1]), speaker(drawn[2])})
                  .size(),
              3u);
  }

  // One file per list: the names are the lists' own (both lists call theirs spk0 and spk1).
  write_text(data.dir / "a.scp", "x0 " + (data.dir / "sources/spk0_0.wav").string() + "\nx1 " +
                                     (data.dir / "sources/spk1_0.wav").string() + "\n");
  write_text(data.dir / "b.scp", "y0 " + (data.dir / "sources/spk2_0.wav").string() + "\ny1 " +
                                     (data.dir / "sources/spk3_0.wav").string() + "\n");
  write_text(data.dir / "a_utt2spk", "x0 spk0\nx1 spk1\n");
  write_text(data.dir / "b_utt2spk", "y0 spk0\ny1 spk1\n");
  write_text(data.dir / "a_spk2f0", "spk0 100\nspk1 300\n");
  write_text(data.dir / "b_spk2f0", "spk0 101\nspk1 298\n");
  auto lists = SourcePool::from_lists(
      {(data.dir / "a.scp").string(), (data.dir / "b.scp").string()},
      {(data.dir / "a_utt2spk").string(), (data.dir / "b_utt2spk").string()}, "",
      {(data.dir / "a_spk2f0").string(), (data.dir / "b_spk2f0").string()});
  for (int i = 0; i < 100; ++i) {
    auto drawn = lists.draw(rng, 2, {1.0, 1.0}, {1.0, 1.0});
    std::set<std::string> names{lists.sources()[drawn[0]].name, lists.sources()[drawn[1]].name};
    EXPECT_TRUE(names == (std::set<std::string>{"x0", "y0"}) ||
                names == (std::set<std::string>{"x1", "y1"}));
  }
  // A list with a share of 0 gives no near voice: the mixtures stay within the first list.
  for (int i = 0; i < 50; ++i)
    for (auto source : lists.draw(rng, 2, {1.0, 0.0}, {1.0, 1.0}))
      EXPECT_EQ(lists.sources()[source].list, 0u);
  // A speaker missing from its list's file is named as that file names speakers.
  write_text(data.dir / "b_short_spk2f0", "spk0 101\n");
  auto message = error_of([&] {
    SourcePool::from_lists(
        {(data.dir / "a.scp").string(), (data.dir / "b.scp").string()},
        {(data.dir / "a_utt2spk").string(), (data.dir / "b_utt2spk").string()}, "",
        {(data.dir / "a_spk2f0").string(), (data.dir / "b_short_spk2f0").string()});
  });
  EXPECT_NE(message.find("b_short_spk2f0: no f0 for speaker 'spk1'"), std::string::npos)
      << message;

  // Bad files: named, with the speaker or the line.
  write_text(data.dir / "short_spk2f0", "spk0 100\nspk1 104\nspk2 200\n");
  message = error_of([&] {
    SourcePool::from_lists({(data.dir / "sources.scp").string()}, {(data.dir / "utt2spk").string()},
                           "", {(data.dir / "short_spk2f0").string()});
  });
  EXPECT_NE(message.find("short_spk2f0: no f0 for speaker 'spk3'"), std::string::npos) << message;
  write_text(data.dir / "bad_spk2f0", "spk0 100\nspk1 high\n");
  message = error_of([&] {
    SourcePool::from_lists({(data.dir / "sources.scp").string()}, {(data.dir / "utt2spk").string()},
                           "", {(data.dir / "bad_spk2f0").string()});
  });
  EXPECT_NE(message.find("bad_spk2f0:2: expected 'speaker f0' with f0 in Hz above 0"),
            std::string::npos)
      << message;
  message = error_of([&] {
    SourcePool::from_lists({(data.dir / "sources.scp").string()}, {(data.dir / "utt2spk").string()},
                           "", {(data.dir / "spk2f0").string(), (data.dir / "spk2f0").string()});
  });
  EXPECT_NE(message.find("2 spk2f0 files for 1 utt2spk files"), std::string::npos) << message;
  EXPECT_NE(error_of([&] { unpitched.draw(rng, 2, {}, {0.5, 2.0}); })
                .find("needs each speaker's f0"),
            std::string::npos);
}

TEST(DynamicMixing, ExamplesAreTheRecipeProcessorsOnTheMixtureAndItsSources) {
  MixingRecipe data;
  Recipe recipe = data.recipe();
  DynamicMixtureSet set(recipe, data.inputs(), data.targets(), data.options(), "task t");
  EXPECT_EQ(set.num_sources(), 2);
  EXPECT_EQ(set.size(), 12);
  SectionReader features(recipe, "feat"), targets(recipe, "targets"), used(recipe, "usedbins");
  auto lengths = set.lengths(0);
  for (int64_t index : {0, 5}) {
    auto draw = set.draw(0, index);
    EXPECT_NE(set.pool().sources()[draw.sources[0]].speaker,
              set.pool().sources()[draw.sources[1]].speaker);
    EXPECT_NEAR(draw.gains_db[0], -draw.gains_db[1], 1e-12);
    EXPECT_LE(std::abs(draw.gains_db[0]), 2.5);
    auto mixed = set.signals(draw);
    auto batch = set.load(0, {index});
    // Features: the section's processor (global MVN included) on the mixture.
    auto expected = features.process_audio(mixed.mixture, 8000).to(torch::kFloat32);
    ASSERT_EQ(batch.data.at("features").size(1), expected.size(0));
    EXPECT_EQ(lengths[index], expected.size(0)) << "predicted length";
    EXPECT_TRUE(torch::allclose(batch.data.at("features")[0], expected, 1e-5, 1e-5));
    // Targets: the one-hot processor on the scaled sources, as if they were s1/s2 files.
    auto expected_targets = targets.processor().process_signals(mixed.sources, 8000);
    EXPECT_TRUE(torch::equal(batch.data.at("binary_targets")[0], expected_targets));
    EXPECT_TRUE(torch::equal(batch.data.at("usedbins")[0], used.process_audio(mixed.mixture, 8000)));
  }
  // The same (epoch, index) is the same example; another epoch is another mixture.
  auto again = set.load(0, {3, 4});
  EXPECT_TRUE(torch::equal(again.data.at("features"), set.load(0, {3, 4}).data.at("features")));
  EXPECT_EQ(again.names, set.load(0, {3, 4}).names);
  EXPECT_NE(again.names, set.load(1, {3, 4}).names);
}

TEST(DynamicMixing, CropsAreExactlyTheFramesOfTheWholeMixture) {
  MixingRecipe data;
  Recipe recipe = data.recipe();
  DynamicMixtureSet whole(recipe, data.inputs(), data.targets(), data.options(), "t");
  DynamicMixtureSet cropped(recipe, data.inputs(), data.targets(), data.options("20"), "t");
  int checked = 0;
  for (int64_t index = 0; index < 12; ++index) {
    auto d = cropped.draw(0, index);
    EXPECT_EQ(d.length, std::min<int64_t>(20, d.frames));
    EXPECT_LE(d.first_frame + d.length, d.frames);
    auto full = whole.load(0, {index});  // same seed: the same mixture, uncropped
    auto part = cropped.load(0, {index});
    ASSERT_EQ(part.data.at("features").size(1), d.length);
    for (const std::string name : {"features", "binary_targets"}) {
      auto expected = full.data.at(name)[0].slice(0, d.first_frame, d.first_frame + d.length);
      EXPECT_TRUE(torch::allclose(part.data.at(name)[0].to(torch::kFloat64),
                                  expected.to(torch::kFloat64), 1e-4, 1e-4))
          << name << " of example " << index;
    }
    checked += d.first_frame > 0;
  }
  EXPECT_GT(checked, 3) << "crops should start at various frames";
}

// Waveform targets of a spectrogram model (pit_sisnr_masks): whole or cropped, they are the
// samples the features' frames cover, not as many samples as there are frames.
TEST(DynamicMixing, WaveformTargetsCoverTheSamplesOfTheFeatureFrames) {
  MixingRecipe data;
  Recipe recipe = data.recipe();
  const std::vector<DataBinding> targets{{"mix_wave", {"wave"}}, {"multi_targets", {"waves"}}};
  SectionReader wave(recipe, "wave"), waves(recipe, "waves");
  FrameSettings settings;  // the features' 32 ms frames every 8 ms at 8 kHz
  for (const std::string segment : {"full", "20"}) {
    DynamicMixtureSet set(recipe, data.inputs(), targets, data.options(segment), "t");
    for (int64_t index : {0, 3, 7}) {
      auto d = set.draw(0, index);
      auto batch = set.load(0, {index});
      auto mixed = set.signals(d);
      ASSERT_EQ(batch.data.at("features").size(1), d.length);
      const int64_t first = d.first_frame * settings.frame_step();
      const int64_t span = frames_span(d.length, settings);
      auto part = mixed.mixture.slice(0, first, first + span);
      ASSERT_EQ(batch.data.at("mix_wave").size(1), span) << segment << " example " << index;
      EXPECT_TRUE(torch::allclose(batch.data.at("mix_wave")[0],
                                  wave.process_audio(part, 8000).to(torch::kFloat32)));
      std::vector<torch::Tensor> sources;
      for (const auto& source : mixed.sources) sources.push_back(source.slice(0, first, first + span));
      EXPECT_TRUE(torch::allclose(batch.data.at("multi_targets")[0],
                                  waves.processor().process_signals(sources, 8000)
                                      .to(torch::kFloat32)));
    }
  }
}

TEST(DynamicMixing, PipelinePositionsAndShardsBehaveLikeTheStores) {
  MixingRecipe data;
  Recipe recipe = data.recipe();
  auto set = std::make_shared<DynamicMixtureSet>(recipe, data.inputs(), data.targets(),
                                                 data.options("20"), "t");
  BatchPlanOptions plan;
  plan.batch_size = 4;
  plan.seed = 5;
  InputPipeline uninterrupted(set, plan, true, 2);
  std::vector<std::vector<std::string>> expected;
  PipelinePosition saved;
  for (int i = 0; i < 8; ++i) {  // 3 batches per epoch
    if (i == 4) saved = uninterrupted.position();
    expected.push_back(uninterrupted.next()->names);
  }
  EXPECT_EQ(saved, (PipelinePosition{1, 1}));
  InputPipeline resumed(set, plan, true, 2, saved);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(resumed.next()->names, expected[i]) << i;
  std::set<std::string> epoch0(expected[0].begin(), expected[0].end());
  epoch0.insert(expected[1].begin(), expected[1].end());
  epoch0.insert(expected[2].begin(), expected[2].end());
  EXPECT_EQ(epoch0.size(), 12u) << "every example of an epoch once";

  // Two ranks: disjoint examples, the same number of batches.
  std::set<std::string> seen;
  for (int rank = 0; rank < 2; ++rank) {
    BatchPlanOptions sharded = plan;
    sharded.rank = rank;
    sharded.world_size = 2;
    InputPipeline pipeline(set, sharded, false, 2);
    int batches = 0;
    while (auto batch = pipeline.next()) {
      ++batches;
      for (const auto& name : batch->names) EXPECT_TRUE(seen.insert(name).second) << name;
    }
    EXPECT_EQ(batches, 1);
  }
}

// A spectrogram model with waveform targets trained on 20-frame segments: under dynamic mixing
// the features' stores alone count an epoch's examples, so the waveform sections need no store
// at a segment length that counts frames; without mixing the section that does not store that
// length is named, with its segment_lengths key.
TEST(DynamicMixing, SegmentedSpectrogramStagesNeedNoWaveformStoresAtTheirLength) {
  MixingRecipe data;
  std::string conf = read_text(data.dir / "recipe/database.conf");
  for (const std::string section : {"[feat]\n", "[wave]\n", "[waves]\n"})
    conf.replace(conf.find(section), section.size(),
                 section + "writer_style = numpy_float_array_as_tfrecord\n" +
                     (section == "[feat]\n" ? "segment_lengths = 20 full\n" : ""));
  write_text(data.dir / "recipe/database.conf", conf);
  Recipe recipe = data.recipe();
  DataPreparation preparation(recipe, data.dir / "exp", {});
  for (const std::string section : {"feat", "wave", "waves"}) preparation.prepare(section);
  const std::vector<DataBinding> targets{{"mix_wave", {"wave"}}, {"multi_targets", {"waves"}}};
  TaskPipelineOptions options;
  options.what = "training task [t]";
  options.segment_length = "20";
  options.plan.batch_size = 2;
  StoreCache stores;
  const std::string missing = error_of([&] {
    TaskPipeline stored(recipe, data.inputs(), targets, options, stores);
  });
  EXPECT_NE(missing.find("[wave] segment_lengths: 'full' has no 20"), std::string::npos)
      << missing;
  EXPECT_NE(missing.find("'mix_wave' of training task [t]"), std::string::npos) << missing;
  options.mixing = data.options();
  TaskPipeline mixed(recipe, data.inputs(), targets, options, stores);
  StoreReader features(store_path(data.dir / "stores/feat", "20"));
  EXPECT_EQ(mixed.stored_size(), features.size());
  EXPECT_GT(features.size(), 4) << "the 20-frame store cuts each mixture into several segments";
  auto batch = mixed.start()->next();
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->data.at("features").size(1), 20);
  EXPECT_EQ(batch->data.at("mix_wave").size(1), frames_span(20, FrameSettings{}));
  EXPECT_EQ(batch->data.at("multi_targets").size(1), frames_span(20, FrameSettings{}));
}

TEST(DynamicMixing, DefaultPoolAndConfigurationErrors) {
  MixingRecipe data;
  Recipe recipe = data.recipe();
  // No source list: the sources on the target section's lines.
  DynamicMixtureSet from_lines(recipe, data.inputs(), data.targets(), data.options("full", false),
                               "t");
  EXPECT_EQ(from_lines.pool().sources().size(), 8u);
  EXPECT_EQ(from_lines.load(0, {0, 1}).size(), 2);

  auto message = error_of([&] {
    DynamicMixtureSet(recipe, data.inputs(), {{"usedbins", {"usedbins"}}}, data.options(),
                      "training task [t]");
  });
  EXPECT_NE(message.find("training task [t]: dynamic mixing needs a target computed from two or "
                         "more sources"),
            std::string::npos)
      << message;
  message = error_of([&] {
    DynamicMixtureSet(recipe, {{"features", {"feat", "feat"}}}, data.targets(), data.options(),
                      "t");
  });
  EXPECT_NE(message.find("one database section per input and target; 'features' has 2"),
            std::string::npos)
      << message;
  // Sources at another rate than the task's training data.
  auto fast = data.options_of_16khz_sources();
  message = error_of([&] { DynamicMixtureSet(recipe, data.inputs(), data.targets(), fast, "t"); });
  EXPECT_NE(message.find("t: dynamic mixing sources are at 16000 Hz, the task's training data"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("at 8000 Hz"), std::string::npos) << message;
  auto options = data.options("abc");
  message = error_of([&] { DynamicMixtureSet(recipe, data.inputs(), data.targets(), options, "t"); });
  EXPECT_NE(message.find("segment length 'abc'"), std::string::npos) << message;

  auto trainer = [](const std::string& keys) {
    return error_of([&] {
      read_trainer_options(ConfigFile::parse("[trainer]\ntasks = t\n" + keys, "trainer.cfg"));
    });
  };
  EXPECT_EQ(trainer("dynamic_mixing = True\ndynamic_mixing_sources = a.scp\n"), "");
  message = trainer("dynamic_mixing_sources = a.scp\n");
  EXPECT_NE(message.find("trainer.cfg:3: [trainer] dynamic_mixing_sources"), std::string::npos)
      << message;
  message = trainer("dynamic_mixing = True\ndynamic_mixing_level_range = -1\n");
  EXPECT_NE(message.find("dynamic_mixing_level_range"), std::string::npos) << message;
  const std::string lists =
      "dynamic_mixing = True\ndynamic_mixing_sources = a.scp\ndynamic_mixing_utt2spk = u\n";
  EXPECT_EQ(trainer(lists + "dynamic_mixing_spk2f0 = f\ndynamic_mixing_near_pitch = 0.5\n"), "");
  message = trainer(lists + "dynamic_mixing_near_pitch = 0.5\n");
  EXPECT_NE(message.find("dynamic_mixing_near_pitch: needs dynamic_mixing_spk2f0"),
            std::string::npos)
      << message;
  message = trainer(lists + "dynamic_mixing_spk2f0 = f\ndynamic_mixing_near_pitch = 1.5\n");
  EXPECT_NE(message.find("dynamic_mixing_near_pitch: is a probability"), std::string::npos)
      << message;
  message = trainer(lists + "dynamic_mixing_spk2f0 = f g\n");
  EXPECT_NE(message.find("dynamic_mixing_spk2f0: has 2 files for 1 dynamic_mixing_utt2spk"),
            std::string::npos)
      << message;
  message = trainer(
      "dynamic_mixing = True\ndynamic_mixing_sources = a.scp\ndynamic_mixing_spk2f0 = f\n");
  EXPECT_NE(message.find("dynamic_mixing_spk2f0: needs dynamic_mixing_utt2spk"), std::string::npos)
      << message;
}

TEST(DynamicMixing, ProcessSignalsEqualsProcessOnTheFiles) {
  MixingRecipe data;
  Recipe recipe = data.recipe();
  SectionReader targets(recipe, "targets"), features(recipe, "feat");
  const DataLine& line = targets.line("m1");
  std::vector<torch::Tensor> sources;
  for (const auto& path : line.fields) sources.push_back(read_audio(path).samples);
  EXPECT_TRUE(torch::equal(targets.read("m1"), targets.processor().process_signals(sources, 8000)));
  auto mixture = read_audio(features.line("m1").fields[0]).samples;
  EXPECT_TRUE(torch::equal(features.read("m1"), features.processor().process_signals({mixture}, 8000)));
  EXPECT_EQ(targets.processor().signal_role(), SignalRole::kSources);
  EXPECT_EQ(features.processor().signal_role(), SignalRole::kMixture);
  EXPECT_NE(error_of([&] { features.processor().process_signals(sources, 8000); })
                .find("expected the mixture signal"),
            std::string::npos);
}

TEST(DynamicMixing, SpeedPerturbationChangesTempoAndPitchTogether) {
  // A 200 Hz tone played 1.1 times faster: 10% shorter and at 220 Hz.
  std::vector<double> tone(16000);
  for (std::size_t n = 0; n < tone.size(); ++n) tone[n] = 3000 * std::sin(2 * M_PI * 200 * n / 8000.0);
  auto faster = change_speed(torch::tensor(tone, torch::kFloat64), 1.1, 14545);
  ASSERT_EQ(faster.size(0), 14545);
  auto spectrum = torch::fft::rfft(faster.slice(0, 1000, 13000)).abs();
  double peak_hz = spectrum.argmax().item<int64_t>() * 8000.0 / 12000.0;
  EXPECT_NEAR(peak_hz, 220.0, 1.0);
  // The level is kept (a resampler, not a filter), apart from the edges.
  EXPECT_NEAR(faster.slice(0, 1000, 13000).square().mean().sqrt().item<double>(), 3000 / std::sqrt(2.0),
              30.0);

  MixingRecipe data;
  Recipe recipe = data.recipe();
  auto options = data.options();
  options.speed_range = 0.1;
  DynamicMixtureSet perturbed(recipe, data.inputs(), data.targets(), options, "t");
  DynamicMixtureSet plain(recipe, data.inputs(), data.targets(), data.options(), "t");
  for (int64_t index = 0; index < 12; ++index) {
    auto d = perturbed.draw(0, index), p = plain.draw(0, index);
    // Same sources and gains as without it; only the speeds are added.
    EXPECT_EQ(d.sources, p.sources);
    EXPECT_EQ(d.gains_db, p.gains_db);
    ASSERT_EQ(d.speeds.size(), 2u);
    for (std::size_t k = 0; k < 2; ++k) {
      EXPECT_GE(d.speeds[k], 0.9);
      EXPECT_LE(d.speeds[k], 1.1);
      EXPECT_EQ(d.samples[k], static_cast<int64_t>(std::floor(p.samples[k] / d.speeds[k])));
    }
    auto mixed = perturbed.signals(d);
    EXPECT_EQ(mixed.mixture.size(0), std::min(d.samples[0], d.samples[1]));
    EXPECT_EQ(perturbed.load(0, {index}).data.at("features").size(1), d.frames);
  }
  EXPECT_TRUE(plain.draw(0, 0).speeds.empty());
}

// Virtual speakers: each source in its speaker's recorded voice or one of its virtual voices (a
// share of them), each voice the same in every draw, the source shorter by its pitch factor; a
// twin is another utterance of the first source's speaker in the other kind of voice; the
// configuration rules name their keys.
TEST(DynamicMixing, VirtualVoicesAreFixedPerSpeakerAndTwinsShareASpeaker) {
  MixingRecipe data;
  Recipe recipe = data.recipe();
  auto options = data.options();
  options.virtual_voices = {3, 4.0, 3.0, 0.5, 0.0};
  options.examples_per_epoch = 200;
  DynamicMixtureSet voiced(recipe, data.inputs(), data.targets(), options, "t");
  auto speaker_of = [&](std::size_t source) { return voiced.pool().sources()[source].speaker; };
  int virtual_sources = 0, sources = 0;
  for (int64_t index = 0; index < 200; ++index) {
    auto d = voiced.draw(0, index);
    ASSERT_EQ(d.voice_numbers.size(), 2u);
    ASSERT_EQ(d.voices.size(), 2u);
    EXPECT_NE(speaker_of(d.sources[0]), speaker_of(d.sources[1]));
    for (std::size_t k = 0; k < 2; ++k) {
      EXPECT_GE(d.voice_numbers[k], 0);
      EXPECT_LE(d.voice_numbers[k], 3);
      auto expected = virtual_voice(speaker_of(d.sources[k]), d.voice_numbers[k], 4.0, 3.0);
      EXPECT_EQ(d.voices[k].pitch, expected.pitch);
      EXPECT_EQ(d.voices[k].formant, expected.formant);
      const int64_t recorded = voiced.pool().sources()[d.sources[k]].samples;
      EXPECT_EQ(d.samples[k], d.voice_numbers[k] == 0
                                  ? recorded
                                  : static_cast<int64_t>(std::floor(recorded / expected.pitch)));
      virtual_sources += d.voice_numbers[k] > 0;
      ++sources;
    }
    if (index < 4) {
      auto mixed = voiced.signals(d);
      EXPECT_EQ(mixed.mixture.size(0), std::min(d.samples[0], d.samples[1]));
      EXPECT_EQ(voiced.load(0, {index}).data.at("features").size(1), d.frames);
    }
  }
  EXPECT_NEAR(static_cast<double>(virtual_sources) / sources, 0.5, 0.07);
  // A voice's name in the example says which voice it is.
  for (int64_t index = 0; index < 20; ++index) {
    auto d = voiced.draw(0, index);
    if (d.voice_numbers[0] == 0) continue;
    auto name = voiced.load(0, {index}).names.front();
    EXPECT_NE(name.find("@v" + std::to_string(d.voice_numbers[0])), std::string::npos) << name;
    break;
  }

  options.virtual_voices.twins = 1.0;
  DynamicMixtureSet twins(recipe, data.inputs(), data.targets(), options, "t");
  for (int64_t index = 0; index < 50; ++index) {
    auto d = twins.draw(0, index);
    EXPECT_EQ(speaker_of(d.sources[0]), speaker_of(d.sources[1]));
    EXPECT_NE(d.sources[0], d.sources[1]);  // every speaker has three utterances
    // One of the two is the recording, the other a virtual voice.
    EXPECT_TRUE((d.voice_numbers[0] == 0) != (d.voice_numbers[1] == 0));
    EXPECT_GT(std::abs(12 * std::log2(d.voices[0].pitch / d.voices[1].pitch)), 2.0 - 1e-9);
  }
  // Without virtual voices, no voice is drawn.
  DynamicMixtureSet plain(recipe, data.inputs(), data.targets(), data.options(), "t");
  EXPECT_TRUE(plain.draw(0, 0).voices.empty());

  auto trainer = [](const std::string& keys) {
    return error_of([&] {
      read_trainer_options(ConfigFile::parse(
          "[trainer]\ntasks = t\ndynamic_mixing = True\ndynamic_mixing_sources = a.scp\n" + keys,
          "trainer.cfg"));
    });
  };
  EXPECT_EQ(trainer("dynamic_mixing_utt2spk = u\ndynamic_mixing_virtual_voices = 4\n"
                    "dynamic_mixing_virtual_formant = 3\ndynamic_mixing_virtual_twins = 0.3\n"),
            "");
  for (auto [keys, expected] : std::vector<std::pair<std::string, std::string>>{
           {"dynamic_mixing_virtual_voices = 4\n",
            "dynamic_mixing_virtual_voices: needs dynamic_mixing_virtual_pitch or"},
           {"dynamic_mixing_virtual_voices = 4\ndynamic_mixing_virtual_pitch = 13\n",
            "dynamic_mixing_virtual_pitch: must be in [0, 12] semitones"},
           {"dynamic_mixing_virtual_voices = 4\ndynamic_mixing_virtual_pitch = 2\n"
            "dynamic_mixing_virtual_share = 2\n",
            "dynamic_mixing_virtual_share: is a probability"},
           {"dynamic_mixing_virtual_twins = 0.5\n",
            "dynamic_mixing_virtual_twins: needs dynamic_mixing_virtual_voices"},
           {"dynamic_mixing_virtual_voices = 4\ndynamic_mixing_virtual_pitch = 2\n"
            "dynamic_mixing_virtual_twins = 0.5\n",
            "dynamic_mixing_virtual_twins: needs dynamic_mixing_utt2spk"}}) {
    auto message = trainer(keys);
    EXPECT_NE(message.find(expected), std::string::npos) << keys << " -> " << message;
  }
  auto message = error_of([&] {
    read_trainer_options(ConfigFile::parse(
        "[trainer]\ntasks = t\ndynamic_mixing_virtual_voices = 2\ndynamic_mixing_virtual_pitch = 2\n",
        "trainer.cfg"));
  });
  EXPECT_NE(message.find("dynamic_mixing_virtual_voices: is set but dynamic_mixing is False"),
            std::string::npos)
      << message;
}

namespace {

std::vector<double> sine(double frequency, int length, int rate = 8000) {
  std::vector<double> out(length);
  for (int n = 0; n < length; ++n) out[n] = std::sin(2 * M_PI * frequency * n / rate);
  return out;
}

// The gain of a filter for a sine, from the RMS after its transient (whole periods are not
// needed: the window holds hundreds of them).
double sine_gain(const std::function<torch::Tensor(const torch::Tensor&)>& filter,
                 double frequency) {
  auto out = filter(torch::tensor(sine(frequency, 16000), torch::kFloat64));
  return out.slice(0, 4000).square().mean().sqrt().item<double>() * std::sqrt(2.0);
}

// A voiced, speech-like second at 8 kHz: harmonics of 120 Hz with a slow envelope, int16 scale.
torch::Tensor voiced_signal() {
  std::vector<double> voiced(8000);
  for (int n = 0; n < 8000; ++n) {
    double envelope = 0.6 + 0.4 * std::sin(2 * M_PI * 3 * n / 8000.0);
    for (int k = 1; k <= 20; ++k)
      voiced[n] += envelope * 8000.0 / k * std::sin(2 * M_PI * 120 * k * n / 8000.0 + k);
  }
  return torch::tensor(voiced, torch::kFloat64);
}

}  // namespace

// The channel's parts against their definitions: convolution against the direct sum, the room's
// length, direct path, energy ratio and decay, the tilt's and the telephone band's gains against
// their analytic responses (Butterworth with the bilinear transform's prewarping), and the GSM
// codec as a lossy but faithful round trip of the same length.
TEST(ChannelAugmentation, PartsMatchTheirDefinitions) {
  std::mt19937 rng(4);
  std::normal_distribution<double> normal;
  std::vector<double> x(500), h(60);
  for (auto& v : x) v = normal(rng);
  for (auto& v : h) v = normal(rng);
  auto fast = convolve_cut(torch::tensor(x, torch::kFloat64), torch::tensor(h, torch::kFloat64));
  ASSERT_EQ(fast.size(0), 500);
  for (int n = 0; n < 500; ++n) {
    double sum = 0;
    for (int k = 0; k <= n && k < 60; ++k) sum += h[k] * x[n - k];
    ASSERT_NEAR(fast[n].item<double>(), sum, 1e-9) << n;
  }

  auto room = room_response(0.5, 4.0, 8000, 11);
  ASSERT_EQ(room.size(0), 4000);
  EXPECT_EQ(room[0].item<double>(), 1.0);
  double tail = room.slice(0, 1).square().sum().item<double>();
  EXPECT_NEAR(10 * std::log10(1.0 / tail), 4.0, 1e-9) << "direct to reverberant ratio";
  // -60 dB of amplitude over rt60: the energy 0.25 s later is 30 dB lower (a noise estimate).
  double early = room.slice(0, 200, 600).square().mean().item<double>();
  double late = room.slice(0, 2200, 2600).square().mean().item<double>();
  EXPECT_NEAR(10 * std::log10(early / late), 30.0, 2.0);
  EXPECT_TRUE(torch::equal(room, room_response(0.5, 4.0, 8000, 11)));
  EXPECT_FALSE(torch::equal(room, room_response(0.5, 4.0, 8000, 12)));

  const double tilt_db = 6.0, g = std::pow(10.0, tilt_db / 20), b = (1 - g) / (1 + g);
  for (double f : {100.0, 1000.0, 2500.0, 3900.0}) {
    double w = 2 * M_PI * f / 8000;
    EXPECT_NEAR(sine_gain([&](const torch::Tensor& s) { return spectral_tilt(s, tilt_db); }, f),
                std::sqrt(1 + b * b + 2 * b * std::cos(w)), 2e-3)
        << f;
  }
  auto butterworth = [](double f, double cutoff, bool high) {
    double ratio = std::tan(M_PI * f / 8000) / std::tan(M_PI * cutoff / 8000);
    return 1 / std::sqrt(1 + std::pow(high ? 1 / ratio : ratio, 8));
  };
  for (double f : {60.0, 150.0, 300.0, 600.0, 1000.0, 2000.0, 3000.0, 3400.0, 3700.0}) {
    EXPECT_NEAR(sine_gain([](const torch::Tensor& s) { return telephone_band(s, 8000); }, f),
                butterworth(f, 300, true) * butterworth(f, 3400, false), 5e-3)
        << f;
  }

  auto clean = voiced_signal();
  auto coded = gsm_round_trip(clean, 8000);
  ASSERT_EQ(coded.size(0), clean.size(0));
  double snr = 10 * std::log10(clean.square().sum().item<double>() /
                               (coded - clean).square().sum().item<double>());
  EXPECT_GT(snr, 3.0) << "the codec keeps the signal";
  EXPECT_LT(snr, 40.0) << "the codec changes the signal";
  EXPECT_TRUE(torch::equal(coded, gsm_round_trip(clean, 8000)));
}

// Codec 2 is a vocoder: it keeps the pitch and the spectral envelope but not the waveform, so
// it is checked by what it keeps (the energy near the harmonics of a voiced signal) rather than
// by the error, and its draws change nothing of the other channels' draws.
TEST(ChannelAugmentation, Codec2KeepsThePitchAndOnlyItsOwnDraws) {
  auto clean = voiced_signal();
  // The share of the energy within 15 Hz of the harmonics of 120 Hz (a 1-Hz spectrum).
  auto harmonic_share = [](const torch::Tensor& x) {
    auto power = torch::fft::rfft(x).abs().square();
    double near = 0;
    for (int k = 1; k * 120 < 4000; ++k)
      near += power.slice(0, k * 120 - 15, k * 120 + 16).sum().item<double>();
    return near / power.sum().item<double>();
  };
  EXPECT_GT(harmonic_share(clean), 0.99);
  std::vector<torch::Tensor> outputs;
  for (int bitrate : kCodec2Bitrates) {
    SCOPED_TRACE(bitrate);
    auto coded = codec2_round_trip(clean, bitrate);
    ASSERT_EQ(coded.size(0), clean.size(0));
    EXPECT_GT(harmonic_share(coded), 0.6) << "the vocoder keeps the pitch";
    double level_db = 10 * std::log10(coded.square().sum().item<double>() /
                                      clean.square().sum().item<double>());
    EXPECT_LT(std::abs(level_db), 6.0) << "and about the level";
    EXPECT_FALSE(torch::equal(coded, clean));
    EXPECT_TRUE(torch::equal(coded, codec2_round_trip(clean, bitrate)));
    outputs.push_back(coded);
  }
  EXPECT_FALSE(torch::equal(outputs.front(), outputs.back())) << "3200 and 1200 bit/s differ";
  // Noise has no pitch to keep: the measure is not one any output passes.
  EXPECT_LT(harmonic_share(torch::randn({8000}, torch::kFloat64) * 3000), 0.4);
  EXPECT_NE(error_of([&] { codec2_round_trip(clean, 2000); }).find("no mode of 2000 bit/s"),
            std::string::npos);

  MixingRecipe data;
  Recipe recipe = data.recipe();
  auto without = data.options("20"), with = data.options("20");
  without.channels = {0.5, 6.0, 0.5, 0.5};
  with.channels = {0.5, 6.0, 0.5, 0.5, 0.5};
  DynamicMixtureSet plain(recipe, data.inputs(), data.targets(), without, "t");
  DynamicMixtureSet coded(recipe, data.inputs(), data.targets(), with, "t");
  std::map<int, int> bitrates;
  int count = 0;
  for (int64_t index = 0; index < 16; ++index) {
    auto a = plain.draw(0, index), b = coded.draw(0, index);
    ASSERT_EQ(a.channels.size(), b.channels.size());
    for (std::size_t k = 0; k < a.channels.size(); ++k) {
      ++count;
      EXPECT_EQ(a.channels[k].rt60, b.channels[k].rt60);
      EXPECT_EQ(a.channels[k].tilt_db, b.channels[k].tilt_db);
      EXPECT_EQ(a.channels[k].telephone, b.channels[k].telephone);
      EXPECT_EQ(a.channels[k].gsm, b.channels[k].gsm);
      EXPECT_EQ(a.channels[k].codec2_bitrate, 0);
      ++bitrates[b.channels[k].codec2_bitrate];
    }
  }
  EXPECT_TRUE(bitrates[0] > 6 && bitrates[0] < 26) << bitrates[0] << " of " << count;
  EXPECT_EQ(bitrates.size(), 5u) << "no source coded, and each of the four bit rates";
  auto d = coded.draw(0, 0);
  auto mixed = coded.signals(d);
  EXPECT_TRUE(torch::equal(mixed.mixture, mixed.sources[0] + mixed.sources[1]));

  auto other_rate = data.options_of_16khz_sources();
  other_rate.channels.codec2 = 0.5;
  auto message =
      error_of([&] { DynamicMixtureSet(recipe, data.inputs(), data.targets(), other_rate, "t"); });
  EXPECT_NE(message.find("t: dynamic_mixing_codec2 needs 8 kHz sources (Codec 2 is a narrow-band "
                         "codec); the sources are at 16000 Hz"),
            std::string::npos)
      << message;
  message = error_of([&] {
    read_trainer_options(ConfigFile::parse(
        "[trainer]\ntasks = t\ndynamic_mixing = True\ndynamic_mixing_codec2 = 2\n", "trainer.cfg"));
  });
  EXPECT_NE(message.find("[trainer] dynamic_mixing_codec2: is a probability"), std::string::npos)
      << message;
}

// Channels are drawn after everything else: the same sources, gains and crops as without them,
// each source its own channel at the configured rates; the mixture is the sum of the changed
// sources; GSM on sources that are not at 8 kHz and bad trainer.cfg values are one line each.
TEST(ChannelAugmentation, DrawsKeepTheMixturesAndChangeEachSource) {
  MixingRecipe data;
  Recipe recipe = data.recipe();
  auto options = data.options("20");
  options.channels = {0.5, 6.0, 0.5, 0.5};
  DynamicMixtureSet changed(recipe, data.inputs(), data.targets(), options, "t");
  DynamicMixtureSet plain(recipe, data.inputs(), data.targets(), data.options("20"), "t");
  int rooms = 0, telephones = 0, codecs = 0, count = 0;
  for (int64_t index = 0; index < 12; ++index) {
    auto d = changed.draw(0, index), p = plain.draw(0, index);
    EXPECT_EQ(d.sources, p.sources);
    EXPECT_EQ(d.gains_db, p.gains_db);
    EXPECT_EQ(d.first_frame, p.first_frame);
    ASSERT_EQ(d.channels.size(), 2u);
    for (const auto& channel : d.channels) {
      ++count;
      rooms += channel.rt60 > 0, telephones += channel.telephone, codecs += channel.gsm;
      EXPECT_LE(std::abs(channel.tilt_db), 6.0);
      if (channel.rt60 > 0) {
        EXPECT_TRUE(channel.rt60 >= 0.2 && channel.rt60 <= 0.8);
      }
    }
    auto mixed = changed.signals(d), reference = plain.signals(p);
    ASSERT_EQ(mixed.mixture.size(0), reference.mixture.size(0));
    EXPECT_TRUE(torch::equal(mixed.mixture, mixed.sources[0] + mixed.sources[1]));
    EXPECT_FALSE(torch::equal(mixed.sources[0], reference.sources[0]));
  }
  EXPECT_TRUE(rooms > 4 && rooms < 20) << rooms << " of " << count;
  EXPECT_TRUE(telephones > 4 && telephones < 20) << telephones << " of " << count;
  EXPECT_TRUE(codecs > 4 && codecs < 20) << codecs << " of " << count;
  EXPECT_TRUE(plain.draw(0, 0).channels.empty());

  // One source's channel is exactly apply_channel on its file (then the mixing's scaling).
  auto d = changed.draw(0, 3);
  auto source = read_audio(changed.pool().sources()[d.sources[0]].path).samples;
  auto expected = apply_channel(source, d.channels[0], 8000);
  auto mixed = changed.signals(d).sources[0];
  auto n = mixed.size(0);
  double scale = mixed.dot(expected.slice(0, 0, n)).item<double>() /
                 expected.slice(0, 0, n).square().sum().item<double>();
  EXPECT_LT((mixed - scale * expected.slice(0, 0, n)).abs().max().item<double>(), 1.0)
      << "the mixed source is the channel's output scaled and rounded (to 0.5, and the "
         "least-squares scale)";

  auto gsm = data.options_of_16khz_sources();
  gsm.channels.gsm = 0.5;
  auto message = error_of([&] { DynamicMixtureSet(recipe, data.inputs(), data.targets(), gsm, "t"); });
  EXPECT_NE(message.find("dynamic_mixing_gsm needs 8 kHz sources"), std::string::npos) << message;

  auto trainer = [](const std::string& keys) {
    return error_of([&] {
      read_trainer_options(ConfigFile::parse("[trainer]\ntasks = t\n" + keys, "trainer.cfg"));
    });
  };
  EXPECT_EQ(trainer("dynamic_mixing = True\ndynamic_mixing_gsm = 0.3\ndynamic_mixing_tilt_range = 6\n"),
            "");
  message = trainer("dynamic_mixing = True\ndynamic_mixing_reverb = 1.5\n");
  EXPECT_NE(message.find("[trainer] dynamic_mixing_reverb: is a probability"), std::string::npos)
      << message;
  message = trainer("dynamic_mixing = True\ndynamic_mixing_tilt_range = 30\n");
  EXPECT_NE(message.find("dynamic_mixing_tilt_range: must be in [0, 20] dB"), std::string::npos)
      << message;
  message = trainer("dynamic_mixing_telephone = 0.2\n");
  EXPECT_NE(message.find("dynamic_mixing_telephone: is set but dynamic_mixing is False"),
            std::string::npos)
      << message;
}
