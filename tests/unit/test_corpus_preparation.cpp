// nabu prepare: miniature LibriMix, WHAMR! and wsj0-2mix trees in their exact layouts (folder
// names, mixture names, LibriMix's metadata CSV columns), the lists it writes, and the bad trees
// a user has: a missing split, a 16 kHz tree under wav8k, a truncated wav.
#include <gtest/gtest.h>

#include <sndfile.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "nabu/core/error.h"
#include "nabu/evaluation/scorers/score_summary.h"
#include "nabu/processing/corpus_preparation.h"
#include "nabu/processing/wav_header.h"
#include "test_helpers.h"

namespace nabu {
namespace {

namespace fs = std::filesystem;
using testing::read_text;
using testing::run_nabu;
using testing::TempDir;
using testing::write_pcm16_wav;
using testing::write_text;

std::vector<short> tone(int length, int seed) {
  std::vector<short> samples(length);
  for (int i = 0; i < length; ++i) samples[i] = static_cast<short>((i * (seed + 3)) % 2000 - 1000);
  return samples;
}

// Libri2Mix/wav8k/min/{train-360,dev,test}/{mix_clean,mix_both,s1,s2,noise} with two mixtures
// per split, named as LibriMix names them (LibriSpeech utterances joined by '_'), and the
// metadata CSVs LibriMix writes (mixture_ID,mixture_path,source_1_path,...,length).
fs::path make_librimix(const fs::path& parent, int rate = 8000,
                       const std::vector<std::string>& splits = {"train-360", "dev", "test"}) {
  const fs::path root = parent / "Libri2Mix";
  const fs::path mode = root / "wav8k" / "min";
  int seed = 0;
  for (const auto& split : splits) {
    std::map<std::string, std::string> csv;
    for (const auto& folder : {"mix_clean", "mix_both"})
      csv[folder] = std::string("mixture_ID,mixture_path,source_1_path,source_2_path,") +
                    (std::string(folder) == "mix_both" ? "noise_path," : "") + "length\n";
    for (int m = 0; m < 2; ++m) {
      const int length = 800 + 160 * m;
      const std::string id = std::to_string(100 + seed) + "-5-000" + std::to_string(m) + "_" +
                             std::to_string(200 + seed) + "-7-001" + std::to_string(m);
      ++seed;
      for (const auto& folder : {"mix_clean", "mix_both", "s1", "s2", "noise"})
        write_pcm16_wav(mode / split / folder / (id + ".wav"), tone(length, seed), rate);
      for (auto& [folder, text] : csv) {
        const std::string gone = "/generated/elsewhere/" + split + "/";
        text += id + "," + gone + folder + "/" + id + ".wav," + gone + "s1/" + id + ".wav," + gone +
                "s2/" + id + ".wav," + (folder == "mix_both" ? gone + "noise/" + id + ".wav," : "") +
                std::to_string(length) + "\n";
      }
    }
    for (const auto& [folder, text] : csv)
      write_text(mode / "metadata" / ("mixture_" + split + "_" + folder + ".csv"), text);
  }
  return root;
}

std::vector<std::string> lines_of(const fs::path& file) {
  std::vector<std::string> lines;
  std::istringstream in(read_text(file));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(WavHeader, AgreesWithLibsndfileAndTellsATruncatedFile) {
  TempDir dir;
  write_pcm16_wav(dir / "a.wav", tone(1234, 1), 16000);
  SF_INFO info{};
  SNDFILE* file = sf_open((dir / "a.wav").c_str(), SFM_READ, &info);
  ASSERT_NE(file, nullptr);
  sf_close(file);
  auto header = read_wav_header(dir / "a.wav");
  EXPECT_EQ(header.sample_rate, info.samplerate);
  EXPECT_EQ(header.channels, info.channels);
  EXPECT_EQ(header.frames, info.frames);
  EXPECT_EQ(header.bits_per_sample, 16);
  EXPECT_FALSE(header.truncated());
  fs::resize_file(dir / "a.wav", fs::file_size(dir / "a.wav") - 1000);
  header = read_wav_header(dir / "a.wav");
  EXPECT_EQ(header.frames, 1234);
  EXPECT_EQ(header.frames_present, 1234 - 500);
  EXPECT_TRUE(header.truncated());
  write_text(dir / "b.wav", "not audio at all");
  EXPECT_NE(testing::error_of([&] { read_wav_header(dir / "b.wav"); }).find("not a RIFF/WAVE"),
            std::string::npos);
}

TEST(PrepareCorpus, LibriMixListsAndSummary) {
  TempDir dir;
  const fs::path root = make_librimix(dir.path());
  write_text(dir / "SPEAKERS.TXT", ";ID  |SEX| SUBSET\n100 | F | train-clean-360\n200 | M | x\n");
  CorpusPreparationOptions options;
  options.kind = "librimix";
  options.root = root;
  options.out = dir / "data";
  options.speaker_genders = dir / "SPEAKERS.TXT";
  auto prepared = prepare_corpus(options);
  ASSERT_EQ(prepared.size(), 1u);
  EXPECT_EQ(prepared[0].corpus, "Libri2Mix");
  EXPECT_EQ(prepared[0].sample_rate, 8000);
  EXPECT_EQ(prepared[0].speakers_per_mixture, 2);
  ASSERT_EQ(prepared[0].splits.size(), 3u);
  EXPECT_EQ(prepared[0].splits[0].name, "train-360");
  EXPECT_EQ(prepared[0].splits[0].utterances, 2);
  EXPECT_EQ(prepared[0].splits[0].speakers, 4);  // 100, 101, 200, 201
  EXPECT_NEAR(prepared[0].splits[0].hours, (800 + 960) / 8000.0 / 3600.0, 1e-12);

  const fs::path train = dir / "data" / "Libri2Mix" / "wav8k" / "min" / "train-360";
  const fs::path tree = fs::absolute(root) / "wav8k" / "min" / "train-360";
  auto sources = lines_of(train / "allS_wav.scp");
  ASSERT_EQ(sources.size(), 2u);
  EXPECT_EQ(sources[0], "100-5-0000_200-7-0010 " + (tree / "s1" / "100-5-0000_200-7-0010.wav").string() +
                            " " + (tree / "s2" / "100-5-0000_200-7-0010.wav").string());
  auto mixtures = lines_of(train / "mix_both_wav.scp");
  EXPECT_EQ(mixtures[1], "101-5-0001_201-7-0011 " +
                             (tree / "mix_both" / "101-5-0001_201-7-0011.wav").string());
  auto spkinfo = lines_of(train / "utt_spkinfo.txt");
  EXPECT_EQ(spkinfo[0], "100-5-0000_200-7-0010 " +
                            (tree / "mix_clean" / "100-5-0000_200-7-0010.wav").string() +
                            " 100 F 200 M");
  EXPECT_EQ(spkinfo[1].substr(spkinfo[1].size() - 11), "101 ? 201 ?");  // not in SPEAKERS.TXT
  auto utt2spk = lines_of(train / "sources_utt2spk");
  EXPECT_EQ(utt2spk[1], "100-5-0000_200-7-0010_s2 200");
  EXPECT_EQ(lines_of(train / "sources_wav.scp").size(), 4u);
  for (const char* list : {"mix_clean_wav.scp", "s1_wav.scp", "s2_wav.scp", "noise_wav.scp"})
    EXPECT_EQ(lines_of(train / list).size(), 2u) << list;
  auto report = nlohmann::json::parse(
      read_text(dir / "data" / "Libri2Mix" / "wav8k" / "min" / "prepared.json"));
  EXPECT_EQ(report["splits"]["dev"]["utterances"], 2);
  EXPECT_EQ(report["kind"], "librimix");
}

TEST(PrepareCorpus, BadTreesGiveOneLineEachAndWriteNothing) {
  TempDir dir;
  const fs::path nabu_out = dir / "data";
  // A tree without dev.
  make_librimix(dir / "nodev", 8000, {"train-360", "test"});
  auto result = run_nabu("prepare librimix " + (dir / "nodev" / "Libri2Mix").string() +
                         " --out " + nabu_out.string());
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.output.find("Libri2Mix/wav8k/min: no 'dev' split"), std::string::npos)
      << result.output;
  EXPECT_FALSE(fs::exists(nabu_out / "Libri2Mix"));

  // A 16 kHz tree under wav8k: one line per folder, not per file.
  make_librimix(dir / "rate", 16000);
  result = run_nabu("prepare librimix " + (dir / "rate" / "Libri2Mix").string() + " --out " +
                    nabu_out.string());
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.output.find("Libri2Mix/wav8k/min: every file is 16000 Hz, not the 8000 Hz of "
                               "wav8k (a wav16k tree in the wav8k folder?)"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("1 problem(s), listed above; nothing written"), std::string::npos)
      << result.output;
  // One file at another rate is named with its folder.
  const fs::path odd = make_librimix(dir / "odd");
  const fs::path odd_file = odd / "wav8k" / "min" / "dev" / "s2" / "102-5-0000_202-7-0010.wav";
  fs::remove(odd_file);
  write_pcm16_wav(odd_file, tone(800, 3), 16000);
  result = run_nabu("prepare librimix " + odd.string() + " --out " + nabu_out.string());
  EXPECT_NE(result.output.find("Libri2Mix/wav8k/min/dev/s2: 16000 Hz under wav8k (expected "
                               "8000) (102-5-0000_202-7-0010.wav)"),
            std::string::npos)
      << result.output;
  EXPECT_FALSE(fs::exists(nabu_out / "Libri2Mix"));

  // A good tree prepared, then a file truncated: the error names it, the earlier lists stay.
  const fs::path good = make_librimix(dir / "good");
  ASSERT_EQ(run_nabu("prepare librimix " + good.string() + " --out " + nabu_out.string())
                .exit_code,
            0);
  const fs::path lists = nabu_out / "Libri2Mix" / "wav8k" / "min" / "test" / "allS_wav.scp";
  const std::string before = read_text(lists);
  const fs::path cut = good / "wav8k" / "min" / "test" / "s1" / "104-5-0000_204-7-0010.wav";
  fs::resize_file(cut, fs::file_size(cut) / 2);
  result = run_nabu("prepare librimix " + good.string() + " --out " + nabu_out.string());
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.output.find("Libri2Mix/wav8k/min/test/s1: truncated: the header declares 0.1 s, "
                               "the file holds 0.0486 s (104-5-0000_204-7-0010.wav)"),
            std::string::npos)
      << result.output;
  EXPECT_EQ(read_text(lists), before);
  // No staging folder left next to the lists.
  for (const auto& entry : fs::directory_iterator(nabu_out / "Libri2Mix" / "wav8k"))
    EXPECT_EQ(entry.path().filename(), "min");

  // A file missing from one folder, and a length that disagrees with the metadata.
  fs::remove(good / "wav8k" / "min" / "dev" / "noise" / "102-5-0000_202-7-0010.wav");
  fs::resize_file(cut, 0);
  write_pcm16_wav(cut, tone(700, 1));
  result = run_nabu("prepare librimix " + good.string() + " --out " + nabu_out.string());
  EXPECT_NE(result.output.find("min/dev/noise: missing file (102-5-0000_202-7-0010.wav)"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("min/test/s1: length differs from mix_clean"), std::string::npos)
      << result.output;

  // Wrong root, unknown corpus, a rate the tree lacks.
  result = run_nabu("prepare librimix " + dir.path().string());
  EXPECT_NE(result.output.find("no wav8k or wav16k folder (nor Libri2Mix or Libri3Mix with one)"),
            std::string::npos)
      << result.output;
  result = run_nabu("prepare librimx " + good.string());
  EXPECT_NE(result.output.find("unknown corpus 'librimx' (did you mean 'librimix'?)"),
            std::string::npos)
      << result.output;
  result = run_nabu("prepare librimix " + good.string() + " --rates 16k");
  EXPECT_NE(result.output.find("no wav16k folder (found: wav8k)"), std::string::npos)
      << result.output;
}

// WHAMR! (anechoic and reverberant sources) and wsj0-2mix name mixtures after wsj0 utterances
// and gains; the speaker is an utterance's first three characters.
TEST(PrepareCorpus, WhamrAndWsj0MixLayouts) {
  TempDir dir;
  const std::vector<std::string> names{"011a0101_0.5_401c020r_-0.5", "40ao030c_1.2_011c0207_-1.2"};
  for (const char* split : {"tr", "cv", "tt"})
    for (const auto& name : names) {
      for (const char* folder : {"mix_both_anechoic", "mix_clean_reverb", "s1_anechoic",
                                 "s2_anechoic", "s1_reverb", "s2_reverb", "noise"})
        write_pcm16_wav(dir / "whamr" / "wav8k" / "max" / split / folder / (name + ".wav"),
                        tone(400, 2));
      for (const char* folder : {"mix", "s1", "s2"})
        write_pcm16_wav(dir / "wsj0-mix" / "2speakers" / "wav16k" / "min" / split / folder /
                            (name + ".wav"),
                        tone(640, 3), 16000);
    }
  CorpusPreparationOptions options;
  options.kind = "whamr";
  options.root = dir / "whamr";
  options.out = dir / "data";
  auto prepared = prepare_corpus(options);
  ASSERT_EQ(prepared.size(), 1u);
  EXPECT_EQ(prepared[0].corpus, "WHAMR");
  const fs::path tt = dir / "data" / "WHAMR" / "wav8k" / "max" / "tt";
  EXPECT_EQ(lines_of(tt / "allS_reverb_wav.scp").size(), 2u);
  auto anechoic = lines_of(tt / "allS_anechoic_wav.scp");
  EXPECT_NE(anechoic[0].find("/s2_anechoic/011a0101_0.5_401c020r_-0.5.wav"), std::string::npos);
  EXPECT_EQ(lines_of(tt / "sources_utt2spk")[1], "011a0101_0.5_401c020r_-0.5_s2 401");
  EXPECT_EQ(prepared[0].splits[2].speakers, 3);  // 011, 401, 40a

  options.kind = "wsj0-mix";
  options.root = dir / "wsj0-mix";
  prepared = prepare_corpus(options);
  ASSERT_EQ(prepared.size(), 1u);
  EXPECT_EQ(prepared[0].corpus, "wsj0-2mix");
  EXPECT_EQ(prepared[0].sample_rate, 16000);
  const fs::path cv = dir / "data" / "wsj0-2mix" / "wav16k" / "min" / "cv";
  EXPECT_EQ(lines_of(cv / "mix_wav.scp").size(), 2u);
  EXPECT_EQ(lines_of(cv / "allS_wav.scp").size(), 2u);
  auto spkinfo = lines_of(cv / "utt_spkinfo.txt");
  EXPECT_NE(spkinfo[1].find("/mix/40ao030c_1.2_011c0207_-1.2.wav 40a ? 011 ?"), std::string::npos)
      << spkinfo[1];
}

// A mixture with a speaker of unknown gender belongs to no gender group.
TEST(ScoreSummary, UnknownGendersAreInNoGenderGroup) {
  SpeakerInfo speakers;
  speakers["a"] = {{"1", "M"}, {"2", "F"}};
  speakers["b"] = {{"3", "?"}, {"4", "F"}};
  ScoreSummary summary({"sdr"}, speakers);
  UtteranceScore score;
  score.values["sdr"]["estimate"] = {1.0, 3.0};
  summary.add("a", score);
  summary.add("b", score);
  auto json = summary.complete_json();
  EXPECT_TRUE(json["a"]["spk_info"]["mix_type"]["diff_gen"].get<bool>());
  for (const char* group : {"all_m", "all_f", "same_gen", "diff_gen"})
    EXPECT_FALSE(json["b"]["spk_info"]["mix_type"][group].get<bool>()) << group;
}

}  // namespace
}  // namespace nabu
