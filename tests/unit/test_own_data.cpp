// A user's own folder of 16 kHz mixtures to a separated recording in six commands, as
// docs/own_data.md walks through them: nabu prepare folder, nabu recipe new (from the demo's
// 8 kHz recipe), data, train, test, separate.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "nabu/processing/audio.h"
#include "test_helpers.h"

namespace nabu::testing {
namespace {

constexpr int kRate = 16000;

// ROOT/{tr,cv,tt}/{mix,s1,s2}/<name>.wav: two harmonic "speakers" per mixture at 16 kHz, the
// names with the non-ASCII letters a user's files may have.
void make_mixture_folder(const fs::path& root, int train, int other) {
  std::mt19937 generator(11);
  std::uniform_real_distribution<double> pitch(90.0, 300.0), seconds(0.8, 1.1);
  for (const auto& [split, count] : std::vector<std::pair<std::string, int>>{
           {"tr", train}, {"cv", other}, {"tt", other}}) {
    for (int i = 0; i < count; ++i) {
      const std::string name = "réunion_" + split + std::to_string(i);
      const int length = static_cast<int>(kRate * seconds(generator));
      std::vector<short> s1(length), s2(length), mix(length);
      const double f1 = pitch(generator), f2 = pitch(generator);
      for (int n = 0; n < length; ++n) {
        double t = static_cast<double>(n) / kRate, a = 0, b = 0;
        for (int h = 1; h <= 5; ++h) {
          a += std::sin(2 * M_PI * h * f1 * t) / h;
          b += std::sin(2 * M_PI * h * f2 * t + 1.0) / h;
        }
        s1[n] = static_cast<short>(2500 * a);
        s2[n] = static_cast<short>(2500 * b * (0.6 + 0.4 * std::sin(2 * M_PI * 3 * t)));
        mix[n] = static_cast<short>(s1[n] + s2[n]);
      }
      write_pcm16_wav(root / split / "mix" / (name + ".wav"), mix, kRate);
      write_pcm16_wav(root / split / "s1" / (name + ".wav"), s1, kRate);
      write_pcm16_wav(root / split / "s2" / (name + ".wav"), s2, kRate);
    }
  }
}

std::string demo_recipe() {
  return (source_dir() / "recipes/SS/DBLSTM/toy_PIT_SISNR_2spk").string();
}

// ROOT/<speaker>/<name>.wav: `speakers` speakers at 16 kHz, each a harmonic voice of its own
// pitch, with `files` recordings (the first speaker with one).
void make_speaker_folder(const fs::path& root, int speakers, int files) {
  for (int s = 0; s < speakers; ++s) {
    const double f0 = 90.0 + 25.0 * s;
    for (int f = 0; f < (s == 0 ? 1 : files); ++f) {
      const int length = kRate * (8 + f + s % 3) / 10;
      std::vector<short> samples(length);
      for (int n = 0; n < length; ++n) {
        double t = static_cast<double>(n) / kRate, value = 0;
        for (int h = 1; h <= 5; ++h) value += std::sin(2 * M_PI * h * f0 * (1 + 0.05 * f) * t) / h;
        samples[n] = static_cast<short>(2500 * value * (0.6 + 0.4 * std::sin(2 * M_PI * 2 * t + s)));
      }
      write_pcm16_wav(root / ("spk" + std::to_string(s)) / ("phrase_é" + std::to_string(f) + ".wav"),
                      samples, kRate);
    }
  }
}

// docs/own_data.md's six commands on the prepared folder's data, from the demo's 8 kHz recipe:
// prepare, recipe new (nfft fits a 16 kHz frame, stores of its own), data, train (tiny), test,
// and separate a recording copied to another folder, at its own rate.
void walk_through(const TempDir& dir, const std::string& folder, const fs::path& recording) {
  auto prepared = run_nabu("prepare folder " + folder + " --out=data", dir.path());
  ASSERT_EQ(prepared.exit_code, 0) << prepared.output;
  ASSERT_TRUE(fs::exists(dir / ("data/" + folder + "/prepared.json")));
  auto made = run_nabu("recipe new recipes/mine --from=" + demo_recipe() + " --data=data/" + folder,
                       dir.path());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  EXPECT_NE(made.output.find("nfft 256 -> 512"), std::string::npos) << made.output;
  EXPECT_NE(read_text(dir / "recipes/mine/database.conf").find("data/stores/mine/"),
            std::string::npos);
  EXPECT_EQ(read_text(dir / "recipes/mine/test_evaluator.cfg").find("task_2spk_real"),
            std::string::npos);
  // Every test task on another corpus goes, also one run only with --task (task_2spk_heldout),
  // with the comment above it; the other comments stay; the lists are named as --data was.
  for (const char* file : {"test_evaluator.cfg", "reconstructor.cfg", "scorer.cfg"})
    EXPECT_EQ(read_text(dir / "recipes/mine" / file).find("heldout"), std::string::npos) << file;
  EXPECT_NE(read_text(dir / "recipes/mine/loss.cfg").find("# PIT SI-SNR of the waveforms the "
                                                           "masks make"),
            std::string::npos);
  EXPECT_NE(read_text(dir / "recipes/mine/database.conf")
                .find("datafiles = data/" + folder + "/tr/mix_wav.scp"),
            std::string::npos)
      << read_text(dir / "recipes/mine/database.conf");
  EXPECT_NE(read_text(dir / "recipes/mine/scorer.cfg").find("score_type = sdr si_sdr stoi pesq"),
            std::string::npos);
  auto data = run_nabu("data --recipe=recipes/mine --expdir=exp/mine --threads=1", dir.path());
  ASSERT_EQ(data.exit_code, 0) << data.output;
  auto trained = run_nabu(
      "train recipes/mine --expdir=exp/mine --threads=1 --max-steps=2,1"
      " --set model.cfg:main:num_units=8 --set 'trainer.cfg:trainer:batch_size=2 2'",
      dir.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  auto tested = run_nabu("test --expdir=exp/mine --threads=1", dir.path());
  ASSERT_EQ(tested.exit_code, 0) << tested.output;
  fs::create_directories(dir / "elsewhere");
  fs::copy_file(recording, dir / "elsewhere/meeting.wav");
  auto separated = run_nabu("separate --expdir=../exp/mine --out=sep meeting.wav", dir / "elsewhere");
  ASSERT_EQ(separated.exit_code, 0) << separated.output;
  for (const char* speaker : {"s1", "s2"}) {
    auto audio = read_audio((dir / ("elsewhere/sep/meeting_" + std::string(speaker) + ".wav")).string());
    EXPECT_EQ(audio.sample_rate, kRate);
  }
}

TEST(OwnData, SixteenKilohertzMixturesFromAFolderToASeparatedRecordingInSixCommands) {
  TempDir dir;
  make_mixture_folder(dir / "my_corpus", 8, 4);
  walk_through(dir, "my_corpus", dir / "my_corpus/tt/mix/réunion_tt0.wav");
}

// Single-speaker recordings: speakers split by a hash of their names into tr, cv, tt (no speaker
// in two splits), mixtures of each split's own speakers, the real speakers in utt_spkinfo.txt;
// a speaker with one recording is used like the others.
TEST(OwnData, SixteenKilohertzSpeakerFoldersFromAFolderToASeparatedRecordingInSixCommands) {
  TempDir dir;
  make_speaker_folder(dir / "my_speakers", 9, 3);
  walk_through(dir, "my_speakers", dir / "my_speakers/spk3/phrase_é0.wav");
  std::map<std::string, std::set<std::string>> speakers;
  for (const char* split : {"tr", "cv", "tt"}) {
    std::istringstream lines(read_text(dir / ("data/my_speakers/" + std::string(split) + "/utt_spkinfo.txt")));
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream fields(line);
      std::string utterance, path, first, gender1, second;
      fields >> utterance >> path >> first >> gender1 >> second;
      speakers[split].insert(first);
      speakers[split].insert(second);
    }
  }
  EXPECT_EQ(speakers["tt"].size(), 2u);
  EXPECT_EQ(speakers["cv"].size(), 2u);
  EXPECT_EQ(speakers["tr"].size(), 5u);
  for (const auto& speaker : speakers["tr"]) {
    EXPECT_FALSE(speakers["cv"].count(speaker)) << speaker;
    EXPECT_FALSE(speakers["tt"].count(speaker)) << speaker;
    EXPECT_EQ(speaker.rfind("spk", 0), 0u) << speaker;
  }
  // Too few speakers for three splits of two: one line, nothing written.
  make_speaker_folder(dir / "few", 5, 2);
  auto few = run_nabu("prepare folder few --out=data", dir.path());
  EXPECT_NE(few.exit_code, 0);
  EXPECT_NE(few.output.find("5 speaker folder(s) with wavs; mixtures of two speakers need at "
                            "least 2 speakers in each of tr, cv (2) and tt (2)"),
            std::string::npos)
      << few.output;
  EXPECT_FALSE(fs::exists(dir / "data/few"));
}

TEST(OwnData, AFolderWithMixedRatesOrAMissingSourceIsOneLinePerFolderAndWritesNothing) {
  TempDir dir;
  make_mixture_folder(dir / "mine", 3, 2);
  write_noise_wav(dir / "mine/cv/s1/réunion_cv0.wav", 9000, 3, 22050);
  fs::remove(dir / "mine/tt/s2/réunion_tt1.wav");
  auto result = run_nabu("prepare folder mine --out=data", dir.path());
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.output.find("mine/cv/s1: 22050 Hz, not the 16000 Hz of mine/tr/mix/réunion_tr0.wav"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("mine/tt/s2: missing file (réunion_tt1.wav)"), std::string::npos)
      << result.output;
  EXPECT_FALSE(fs::exists(dir / "data/mine"));
}

// List files separate fields by spaces: a space in a path is refused in one line, naming it.
TEST(OwnData, SpacesInPathsAreRefusedNamingTheFileOrFolder) {
  TempDir dir;
  make_mixture_folder(dir / "mine", 3, 2);
  fs::rename(dir / "mine/tr/mix/réunion_tr0.wav", dir / "mine/tr/mix/réunion tr0.wav");
  auto file = run_nabu("prepare folder mine --out=data", dir.path());
  EXPECT_NE(file.exit_code, 0);
  EXPECT_NE(file.output.find("mine/tr/mix: a space in a file name"), std::string::npos)
      << file.output;
  fs::rename(dir / "mine/tr/mix/réunion tr0.wav", dir / "mine/tr/mix/réunion_tr0.wav");
  fs::rename(dir / "mine", dir / "my mixtures");
  auto folder = run_nabu("prepare folder 'my mixtures' --out=data", dir.path());
  EXPECT_NE(folder.exit_code, 0);
  EXPECT_NE(folder.output.find("my mixtures: a path with a space cannot go into list files"),
            std::string::npos)
      << folder.output;
  EXPECT_FALSE(fs::exists(dir / "data"));
}

// An 8 kHz recipe pointed at 16 kHz lists by hand: every key whose value depends on the rate or
// the framing is one nabu check problem with its file and line (the processors' nfft first, then
// the loss's sample_rate and framing and the output size the loss splits into bins x speakers),
// and what check passes trains and tests.
TEST(OwnData, RateDependentKeysAreCheckedAsTrainAndTestUseThem) {
  TempDir dir;
  make_mixture_folder(dir / "mine", 6, 3);
  ASSERT_EQ(run_nabu("prepare folder mine --out=data", dir.path()).exit_code, 0);
  fs::create_directories(dir / "recipes");
  fs::copy(demo_recipe(), dir / "recipes/byhand");
  std::string database = read_text(dir / "recipes/byhand/database.conf");
  for (std::size_t at; (at = database.find("data/corpus/2speakers/wav8k/min/")) != std::string::npos;)
    database.replace(at, 32, "data/mine/");
  write_text(dir / "recipes/byhand/database.conf", database);
  const std::string common = " --set 'test_evaluator.cfg:evaluator:tasks=task_2spk'"
                             " --set trainer.cfg:trainer:dynamic_mixing_sources=data/mine/tr/sources_wav.scp"
                             " --set trainer.cfg:trainer:dynamic_mixing_utt2spk=data/mine/tr/sources_utt2spk";
  auto first = run_nabu("check --recipe=recipes/byhand" + common, dir.path());
  EXPECT_EQ(first.exit_code, 1) << first.output;
  EXPECT_NE(first.output.find("rec_processor.cfg:7: [processor] nfft: nfft 256 is shorter than a "
                              "winlen of 0.032 s at 16000 Hz"),
            std::string::npos)
      << first.output;
  const std::string processors = " --set feature_processor.cfg:processor:nfft=512"
                                 " --set rec_processor.cfg:processor:nfft=512";
  auto second = run_nabu("check --recipe=recipes/byhand" + common + processors, dir.path());
  EXPECT_EQ(second.exit_code, 1) << second.output;
  for (const std::string line :
       {"loss.cfg:6: [pit_sisnr_masks] sample_rate: 8000 Hz, but [task_2spk]'s input (database.conf "
        "[trainspec], réunion_tr0, data/mine/tr/mix_wav.scp:1) is at 16000 Hz; set sample_rate = "
        "16000",
        "loss.cfg:10: [pit_sisnr_masks] nfft: 256, but the features of [task_2spk]'s input "
        "(database.conf [trainspec]) are framed with nfft = 512 (--set: [processor] nfft); set "
        "nfft = 512",
        "model.cfg:18: [outlayer] output_dims: 258 is not the 257 frequency bins (nfft = 512, --set: "
        "[processor] nfft) x 2 speakers (multi_targets) that [task_2spk]'s pit_sisnr_masks loss "
        "splits bin_est into; set output_dims = 514"})
    EXPECT_NE(second.output.find(line), std::string::npos) << line << "\n" << second.output;
  // Each once, although the training, validation and test tasks share them.
  const std::string once = "[pit_sisnr_masks] sample_rate:";
  EXPECT_EQ(second.output.find(once), second.output.rfind(once)) << second.output;
  const std::string fixed = processors + " --set loss.cfg:pit_sisnr_masks:sample_rate=16000"
                                         " --set loss.cfg:pit_sisnr_masks:nfft=512"
                                         " --set model.cfg:outlayer:output_dims=514";
  auto third = run_nabu("check --recipe=recipes/byhand" + common + fixed, dir.path());
  EXPECT_EQ(third.exit_code, 0) << third.output;
}

// The property for these keys (as RecipeMutants for the DC recipe): mutants of recipe new's
// 16 kHz recipe that change one to three rate-dependent keys either fail nabu check with its
// one-line problems, or train, test and separate.
TEST(OwnData, RateDependentMutantsThatPassCheckTrainTestAndSeparate) {
  TempDir dir;
  make_mixture_folder(dir / "mine", 6, 3);
  ASSERT_EQ(run_nabu("prepare folder mine --out=data", dir.path()).exit_code, 0);
  ASSERT_EQ(run_nabu("recipe new recipes/mine --from=" + demo_recipe() + " --data=data/mine",
                     dir.path()).exit_code, 0);
  // Changes a user makes, each one key or a coherent group of them (a window, a hop or an FFT
  // length changed everywhere it must be); a mutant takes one or two.
  const std::vector<std::string> changes = {
      " --set loss.cfg:pit_sisnr_masks:sample_rate=8000",
      " --set loss.cfg:pit_sisnr_masks:sample_rate=22050",
      " --set feature_processor.cfg:processor:nfft=1024",
      " --set feature_processor.cfg:processor:nfft=1024 --set rec_processor.cfg:processor:nfft=1024"
      " --set loss.cfg:pit_sisnr_masks:nfft=1024 --set model.cfg:outlayer:output_dims=1026",
      " --set feature_processor.cfg:processor:winstep=0.016"
      " --set rec_processor.cfg:processor:winstep=0.016"
      " --set loss.cfg:pit_sisnr_masks:winstep=0.016",
      " --set feature_processor.cfg:processor:winstep=0.016",
      " --set rec_processor.cfg:processor:winstep=0.016",
      " --set model.cfg:outlayer:output_dims=771",
      " --set 'scorer.cfg:task_2spk:score_type=sdr pesq'",
      " --set 'scorer.cfg:task_2spk:score_type=stoi si_sdr'"};
  std::mt19937 random(78);
  int passed = 0;
  for (int index = 0; index < 12; ++index) {
    const std::size_t first = random() % changes.size(), second = random() % changes.size();
    const std::string sets = changes[first] + (random() % 2 ? changes[second] : "");
    SCOPED_TRACE("mutant " + std::to_string(index) + ":" + sets);
    auto checked = run_nabu("check --recipe=recipes/mine" + sets, dir.path());
    if (checked.exit_code != 0) {
      EXPECT_EQ(checked.exit_code, 1) << checked.output;
      EXPECT_NE(checked.output.find("problem: "), std::string::npos) << checked.output;
      continue;
    }
    ++passed;
    // Each mutant in a folder of its own: its stores are made from its own processor configs
    // (a store made from other ones is refused, docs/data_layout.md).
    const fs::path work = dir / ("m" + std::to_string(index));
    fs::create_directories(work / "data");
    fs::create_directory_symlink(dir / "data/mine", work / "data/mine");
    const std::string recipe = " --recipe=" + (dir / "recipes/mine").string();
    auto data = run_nabu("data" + recipe + " --expdir=exp --threads=1" + sets, work);
    ASSERT_EQ(data.exit_code, 0) << "nabu check passed, nabu data failed:\n" << data.output;
    auto trained = run_nabu("train" + recipe + " --expdir=exp --threads=1"
                            " --max-steps=2,1 --set model.cfg:main:num_units=8"
                            " --set 'trainer.cfg:trainer:batch_size=2 2'" + sets,
                            work);
    ASSERT_EQ(trained.exit_code, 0) << "nabu check passed, nabu train failed:\n" << trained.output;
    auto tested = run_nabu("test --expdir=exp --threads=1", work);
    ASSERT_EQ(tested.exit_code, 0) << "nabu check passed, nabu test failed:\n" << tested.output;
    auto separated = run_nabu("separate --expdir=exp --out=sep ../mine/tt/mix/réunion_tt0.wav",
                              work);
    ASSERT_EQ(separated.exit_code, 0) << "nabu check passed, nabu separate failed:\n"
                                      << separated.output;
  }
  // Both sides of the property are exercised.
  EXPECT_GT(passed, 0);
  EXPECT_LT(passed, 12);
}

// One rule per problem of a recording, the same line in nabu prepare and nabu separate
// (processing/recording_checks.h): too short, truncated, audio of another format among the wavs;
// a speaker with one recording and a split of fewer than 3 speakers are warnings, and the split
// of the speakers is printed.
TEST(OwnData, EveryRecordingRuleIsOneLineAndTheSplitIsShown) {
  TempDir dir;
  make_speaker_folder(dir / "voices", 7, 3);
  write_noise_wav(dir / "voices/spk1/blip.wav", 160, 3, kRate);  // 10 ms
  write_text(dir / "voices/spk2/take.flac", "fLaC");
  write_noise_wav(dir / "voices/spk3/cut.wav", kRate, 4, kRate);
  fs::resize_file(dir / "voices/spk3/cut.wav", 44 + kRate);  // half of its declared second
  write_text(dir / "voices/spk4/notes.txt", "not audio, not a recording: passed over");
  auto refused = run_nabu("prepare folder voices --out=data", dir.path());
  EXPECT_NE(refused.exit_code, 0);
  for (const std::string line :
       {"voices/spk1: too short: 0.010 s (nabu takes recordings of 0.5 s or more) (blip.wav)",
        "voices/spk2: not a .wav file: nabu prepare reads RIFF/WAVE only; convert it (sox in.flac "
        "out.wav) or move it out (take.flac)",
        "voices/spk3: truncated: the header declares 1 s, the file holds 0.5 s (cut.wav)",
        "voices/spk0: one recording (phrase_é0.wav): the speaker enters few mixtures"})
    EXPECT_NE(refused.output.find(line), std::string::npos) << line << "\n" << refused.output;
  EXPECT_EQ(refused.output.find("notes.txt"), std::string::npos) << refused.output;
  EXPECT_FALSE(fs::exists(dir / "data/voices"));
  for (const char* bad : {"spk1/blip.wav", "spk2/take.flac", "spk3/cut.wav"})
    fs::remove(dir / "voices" / bad);
  auto prepared = run_nabu("prepare folder voices --out=data", dir.path());
  ASSERT_EQ(prepared.exit_code, 0) << prepared.output;
  // Which speakers went where, and that a test or validation set of one pair measures that pair.
  for (const std::string line : {"prepare: voices tr: 3 speaker(s): ", "prepare: voices cv: 2 speaker(s): ",
                                 "prepare: voices tt: 2 speaker(s): ",
                                 "prepare: voices tt holds 2 speakers: every tt mixture is of the "
                                 "same pair, so its figures measure that pair, not the model"})
    EXPECT_NE(prepared.output.find(line), std::string::npos) << line << "\n" << prepared.output;
}

TEST(OwnData, RecipeNewRefusesWhatItCannotMakeAndLeavesNothing) {
  TempDir dir;
  make_mixture_folder(dir / "mine", 3, 2);
  ASSERT_EQ(run_nabu("prepare folder mine --out=data", dir.path()).exit_code, 0);
  auto unprepared = run_nabu("recipe new recipes/a --from=" + demo_recipe() + " --data=mine",
                             dir.path());
  EXPECT_NE(unprepared.exit_code, 0);
  EXPECT_NE(unprepared.output.find("no prepared.json"), std::string::npos) << unprepared.output;
  EXPECT_FALSE(fs::exists(dir / "recipes/a"));
  auto not_a_recipe = run_nabu("recipe new recipes/b --from=mine --data=data/mine", dir.path());
  EXPECT_NE(not_a_recipe.exit_code, 0);
  EXPECT_NE(not_a_recipe.output.find("not a recipe folder"), std::string::npos)
      << not_a_recipe.output;
  ASSERT_EQ(run_nabu("recipe new recipes/c --from=" + demo_recipe() + " --data=data/mine",
                     dir.path()).exit_code, 0);
  auto again = run_nabu("recipe new recipes/c --from=" + demo_recipe() + " --data=data/mine",
                        dir.path());
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.output.find("already exists"), std::string::npos) << again.output;
}

}  // namespace
}  // namespace nabu::testing
