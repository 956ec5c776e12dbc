// The shipped model (models/pit_blstm_2spk_8k): `nabu separate --model=<name>` separates recorded
// two-speaker mixtures, from a folder that is not the source tree and with no training, as its
// card says (models/<name>/check.json: the figures and their tolerance); `nabu models` lists it;
// what only an experiment has is refused by its flag.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "nabu/evaluation/scorers/bss_eval.h"
#include "nabu/processing/audio.h"
#include "nabu/separator.h"
#include "test_helpers.h"

namespace nabu::testing {
namespace {

const char* kShipped = "pit_blstm_2spk_8k";

torch::Tensor samples_of(const fs::path& wav) {
  return read_audio(wav.string()).samples.reshape({-1}).to(torch::kFloat64);
}

double level_db(const torch::Tensor& signal) {
  return 10.0 * std::log10(signal.square().mean().item<double>() + 1e-20);
}

// The mixtures' files of a set tools/make_recorded_eval_set wrote, sorted.
std::vector<fs::path> mixtures_of(const fs::path& root) {
  std::vector<fs::path> mixtures;
  for (const auto& entry : fs::directory_iterator(root / "2speakers/wav8k/min/tt/mix"))
    mixtures.push_back(entry.path());
  std::sort(mixtures.begin(), mixtures.end());
  return mixtures;
}

}  // namespace

TEST(ShippedModel, SeparatesRecordedSpeechAsItsCardSays) {
  const fs::path folder = source_dir() / "models" / kShipped;
  const auto check = nlohmann::json::parse(read_text(folder / "check.json"));
  TempDir dir;
  const int count = check.at("recorded_mixtures").get<int>();
  auto made = run_shell("/usr/bin/python3 '" + (source_dir() / "tools/make_recorded_eval_set").string() +
                            "' --root=recorded --mixtures=" + std::to_string(count),
                        dir.path());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const auto mixtures = mixtures_of(dir / "recorded");
  ASSERT_EQ(mixtures.size(), static_cast<std::size_t>(count));
  std::string files;
  for (const auto& mixture : mixtures) files += " '" + mixture.string() + "'";
  // Single speakers: the first speaker of the first half of the mixtures, alone.
  std::string singles;
  for (std::size_t k = 0; k < mixtures.size() / 2; ++k)
    singles += " '" + (mixtures[k].parent_path().parent_path() / "s1" / mixtures[k].filename())
                          .string() + "'";
  auto separated = run_nabu(std::string("separate --model=") + kShipped +
                                " --threads=2 --out=separated" + files, dir.path());
  ASSERT_EQ(separated.exit_code, 0) << separated.output;
  auto alone = run_nabu(std::string("separate --model=") + kShipped +
                            " --threads=2 --out=alone" + singles, dir.path());
  ASSERT_EQ(alone.exit_code, 0) << alone.output;

  double improvement = 0;
  for (const auto& mixture : mixtures) {
    const auto tt = mixture.parent_path().parent_path();
    const auto stem = mixture.stem().string();
    auto references = torch::stack({samples_of(tt / "s1" / mixture.filename()),
                                    samples_of(tt / "s2" / mixture.filename())});
    auto estimates = torch::stack({samples_of(dir / "separated" / (stem + "_s1.wav")),
                                   samples_of(dir / "separated" / (stem + "_s2.wav"))});
    auto mix = samples_of(mixture);
    const auto ours = si_sdr_sources(references, estimates);
    const auto before = si_sdr_sources(references, torch::stack({mix, mix}));
    for (int s = 0; s < 2; ++s) improvement += (ours.sdr[s] - before.sdr[s]) / (2.0 * count);
  }
  // With one speaker the second output should be near silence: its level below the first's.
  double quiet = 0;
  const std::size_t halves = mixtures.size() / 2;
  for (std::size_t k = 0; k < halves; ++k) {
    const auto stem = mixtures[k].stem().string();
    const double a = level_db(samples_of(dir / "alone" / (stem + "_s1.wav")));
    const double b = level_db(samples_of(dir / "alone" / (stem + "_s2.wav")));
    quiet += (std::min(a, b) - std::max(a, b)) / static_cast<double>(halves);
  }
  // Nine digits: the CPU's instruction set moves the figure by about 1e-7 dB (docs/results.md).
  std::cout << std::setprecision(9) << kShipped << ": mean SI-SDR improvement on " << count
            << " recorded mixtures (codec2/pocketsphinx) " << improvement
            << " dB; one speaker: the quieter output " << quiet << " dB below the other\n";
  const double tolerance = check.at("tolerance_db").get<double>();
  EXPECT_NEAR(improvement, check.at("si_sdri_db").get<double>(), tolerance);
  EXPECT_NEAR(quiet, check.at("single_speaker_quiet_output_db").get<double>(), tolerance);

  auto listed = run_nabu("models", dir.path());
  EXPECT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find(std::string(kShipped) + "  -  "), std::string::npos) << listed.output;
}

// `nabu test --model=<shipped>` on the card's recipe, as a user runs it from a folder whose
// data/recorded holds the recorded test set: the recipe's task_2spk_real separated from its audio
// and scored by its scorer.cfg, with no experiment, gives the card's check figure.
TEST(ShippedModel, NabuTestOfItOnTheCardsRecipeGivesTheCardsFigure) {
  const fs::path folder = source_dir() / "models" / kShipped;
  const auto check = nlohmann::json::parse(read_text(folder / "check.json"));
  TempDir dir;
  const int count = check.at("recorded_mixtures").get<int>();
  auto made = run_shell("/usr/bin/python3 '" + (source_dir() / "tools/make_recorded_eval_set").string() +
                            "' --root=data/recorded --mixtures=" + std::to_string(count),
                        dir.path());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const fs::path recipe = source_dir() / "recipes/SS/DBLSTM/long_PIT_SISNR_2spk";
  const std::string flags = std::string("--model=") + kShipped + " --recipe='" +
                            recipe.string() + "' --task=task_2spk_real";
  const std::string command = "test --threads=2 " + flags;
  auto tested = run_nabu(command + " --expdir=exp", dir.path());
  ASSERT_EQ(tested.exit_code, 0) << tested.output;
  const fs::path results = dir / "exp" / (std::string("test_") + kShipped);
  const auto summary =
      nlohmann::json::parse(read_text(results / "results_task_2spk_real_si_sdr_summary.json"));
  const auto& si_sdr = summary.at("SI-SDR");
  const double improvement = si_sdr.at("SS").at("all").at("mean").get<double>() -
                             si_sdr.at("base").at("all").at("mean").get<double>();
  std::cout << std::setprecision(9) << kShipped << ": nabu test on " << count
            << " recorded mixtures, SI-SDR improvement " << improvement << " dB\n";
  EXPECT_EQ(si_sdr.at("SS").at("all").at("utterances").get<int>(), count);
  // The scorer scores the signals cut to whole analysis frames (the original's `raw` feature),
  // the separate test above the whole files: the figures differ by 0.013 dB.
  EXPECT_NEAR(improvement, check.at("nabu_test_si_sdri_db").get<double>(),
              check.at("tolerance_db").get<double>());
  EXPECT_NE(tested.output.find("si_sdr"), std::string::npos) << tested.output;
  const std::string pointers = read_text(results / "reconstructions/task_2spk_real/pointers.scp");
  EXPECT_EQ(std::count(pointers.begin(), pointers.end(), '\n'), count);
  EXPECT_FALSE(fs::exists(dir / "exp" / "test"));  // an exported model's results are its own

  // Chunks shorter than the mixtures: another folder, still a separation.
  auto chunked = run_nabu(command + " --expdir=exp --chunk-seconds=1 --overlap-seconds=0.25 "
                                    "--max-utterances=2",
                          dir.path());
  ASSERT_EQ(chunked.exit_code, 0) << chunked.output;
  EXPECT_TRUE(fs::exists(dir / "exp" / (std::string("test_") + kShipped + "_chunks_1s_first2") /
                         "results_task_2spk_real_sdr_summary.json"));

  // Bad input: one line naming what is wrong, nothing written.
  auto error_of = [&](const std::string& flags) {
    auto result = run_nabu("test --expdir=bad --threads=1 " + flags, dir.path());
    EXPECT_EQ(result.exit_code, 1) << flags << "\n" << result.output;
    return result.output;
  };
  EXPECT_NE(error_of(std::string("--model=") + kShipped).find(
                "needs --recipe: the recipe whose test lists"),
            std::string::npos);
  EXPECT_NE(error_of(std::string("--model=") + kShipped).find(
                "trained with recipes/SS/DBLSTM/long_PIT_SISNR_2spk"),
            std::string::npos);
  EXPECT_NE(error_of("--model=pit_blstm_2spk_8 --recipe='" + recipe.string() + "'")
                .find("did you mean"),
            std::string::npos);
  EXPECT_NE(error_of(flags + " --device=cuda").find("computes on the CPU"),
            std::string::npos);
  // task_2spk's test lists (data/corpus) are not in this folder: the list is named, with its
  // database.conf section and the folder a relative path was read from.
  const std::string unlisted = error_of(std::string("--model=") + kShipped + " --recipe='" +
                                        recipe.string() + "' --task=task_2spk");
  EXPECT_NE(unlisted.find("data/corpus/2speakers/wav8k/min/tt"), std::string::npos) << unlisted;
  EXPECT_NE(unlisted.find("database.conf:"), std::string::npos) << unlisted;
  EXPECT_NE(unlisted.find("datafiles: "), std::string::npos) << unlisted;
  EXPECT_NE(unlisted.find("(generate the corpus first: tools/make_toy_corpus; ./run demo makes "
                          "every corpus and test set the shipped recipes read)"),
            std::string::npos)
      << unlisted;
  EXPECT_NE(unlisted.find("(relative to the working directory " +
                          fs::canonical(dir.path()).string()),
            std::string::npos)
      << unlisted;
  EXPECT_FALSE(fs::exists(dir / "bad" / (std::string("test_") + kShipped)));
}

TEST(ShippedModel, WhatOnlyAnExperimentHasIsRefusedByItsFlag) {
  TempDir dir;
  write_noise_wav(dir / "a.wav", 8000, 3);
  auto error_of_run = [&](const std::string& flags) {
    auto result = run_nabu("separate --out=o " + flags, dir.path());
    EXPECT_EQ(result.exit_code, 1) << flags << "\n" << result.output;
    return result.output;
  };
  EXPECT_NE(error_of_run("--model=pit_blstm_2spk_8 a.wav").find("did you mean"),
            std::string::npos);
  EXPECT_NE(error_of_run("--model=avg a.wav").find("--model=<shipped model> is required"),
            std::string::npos);
  const std::string model = std::string("--model=") + kShipped;
  EXPECT_NE(error_of_run(model + " --stream").find("--stream takes a causal experiment"),
            std::string::npos);
  EXPECT_NE(error_of_run(model + " --precision=bf16 a.wav").find("--precision=bf16"),
            std::string::npos);
  EXPECT_NE(error_of_run(model + " --device=cuda a.wav").find("computes on the CPU"),
            std::string::npos);
  EXPECT_NE(error_of_run(model).find("no audio file"), std::string::npos);
  EXPECT_NE(error_of_run("--model=missing/file.pt a.wav").find("missing/file.pt: no such file"),
            std::string::npos);
  write_text(dir / "fake.pt", "not a model");
  EXPECT_NE(error_of_run("--model=./fake.pt a.wav").find("not a file nabu export wrote"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "o" / "a_s1.wav"));
}

}  // namespace nabu::testing

namespace nabu::testing {

// A shipped or exported model reads what an experiment reads: the channel asked for (and no
// channel a file lacks), and the rules every command applies to a recording (truncated, too
// short); an ONNX file is named as one, with the file nabu separate takes.
TEST(ShippedModel, RecordingsAreReadAsForAnExperiment) {
  TempDir dir;
  {
    // Two channels of different content.
    std::vector<double> left(8000), right(8000);
    for (int n = 0; n < 8000; ++n) {
      left[n] = 0.09 * std::sin(2 * M_PI * 220.0 * n / 8000.0);
      right[n] = 0.09 * std::sin(2 * M_PI * 130.0 * n / 8000.0) * std::sin(2 * M_PI * 3.0 * n / 8000.0);
    }
    write_multichannel_wav(dir / "stereo.wav", {left, right}, 8000);
  }
  const std::string model = std::string("--model=") + kShipped;
  for (const char* channel : {"1", "2"}) {
    auto result = run_nabu("separate " + model + " --threads=1 --channel=" + channel + " --out=c" +
                               channel + " stereo.wav",
                           dir.path());
    ASSERT_EQ(result.exit_code, 0) << result.output;
  }
  EXPECT_GT((samples_of(dir / "c1/stereo_s1.wav") - samples_of(dir / "c2/stereo_s1.wav"))
                .abs()
                .max()
                .item<double>(),
            0.01);
  auto error_of_run = [&](const std::string& flags) {
    auto result = run_nabu("separate --out=o --threads=1 " + flags, dir.path());
    EXPECT_EQ(result.exit_code, 1) << flags << "\n" << result.output;
    return result.output;
  };
  EXPECT_NE(error_of_run(model + " --channel=3 stereo.wav")
                .find("stereo.wav: --channel=3 but it has 2 channel(s)"),
            std::string::npos);
  // Truncated: the header declares 1 s, the file holds about half.
  write_noise_wav(dir / "cut.wav", 8000, 5);
  fs::resize_file(dir / "cut.wav", 44 + 8000);
  EXPECT_NE(error_of_run(model + " cut.wav").find("cut.wav: truncated: the header declares 1 s, "
                                                  "the file holds 0.5 s"),
            std::string::npos);
  write_noise_wav(dir / "blip.wav", 80, 5);
  EXPECT_NE(error_of_run(model + " blip.wav").find("blip.wav: too short: 0.010 s (nabu takes "
                                                   "recordings of 0.5 s or more)"),
            std::string::npos);
  // An ONNX model (a protobuf whose first field is ir_version), by name or by content.
  write_text(dir / "separator.onnx", std::string("\x08\x08\x12\x04nabu", 8));
  write_text(dir / "renamed.bin", std::string("\x08\x08\x12\x04nabu", 8));
  for (const char* file : {"separator.onnx", "./renamed.bin"})
    EXPECT_NE(error_of_run(std::string("--model=") + file + " stereo.wav")
                  .find("an ONNX model, which is for onnxruntime in your own program (docs/api.md); "
                        "nabu separate and nabu test take the TorchScript file of nabu export"),
              std::string::npos)
        << file;
  EXPECT_TRUE(!fs::exists(dir / "o") || fs::is_empty(dir / "o"));
}

}  // namespace nabu::testing

namespace nabu::testing {

namespace {

// Two recordings of codec2-examples (evaluation only) summed, cut to the shorter: 8 kHz.
fs::path write_codec2_mixture(const fs::path& path, const std::string& a, const std::string& b) {
  auto x = read_audio("/usr/share/codec2/wav/" + a + ".wav").samples.reshape({-1});
  auto y = read_audio("/usr/share/codec2/wav/" + b + ".wav").samples.reshape({-1});
  const int64_t length = std::min(x.size(0), y.size(0));
  auto sum = (x.slice(0, 0, length) + y.slice(0, 0, length)) * 0.5;
  auto values = sum.to(torch::kFloat64).contiguous();
  write_pcm16_wav(path, std::vector<short>(values.data_ptr<double>(),
                                           values.data_ptr<double>() + values.numel()));
  return path;
}

}  // namespace

// `nabu test --model` of a model at another rate than the test set's (the 8 kHz shipped model on
// the 16 kHz recipe's codec2/pocketsphinx recordings) resamples each mixture to the model's rate
// and back, as nabu separate does: the reconstructions are nabu separate's outputs (at the
// mixture's rate, peak-normalised), scored at 16 kHz.
TEST(ShippedModel, NabuTestOfItOnASetAtAnotherRateSeparatesAsNabuSeparate) {
  TempDir dir;
  auto made = run_shell("/usr/bin/python3 '" + (source_dir() / "tools/make_recorded_eval_set").string() +
                            "' --rate=16000 --root=data/recorded_16k --mixtures=4",
                        dir.path());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const fs::path recipe = source_dir() / "recipes/SS/DBLSTM/recorded_PIT_SISNR_2spk_16k";
  auto tested = run_nabu(std::string("test --threads=2 --model=") + kShipped + " --recipe='" +
                             recipe.string() + "' --task=task_2spk_real --expdir=exp",
                         dir.path());
  ASSERT_EQ(tested.exit_code, 0) << tested.output;
  const fs::path results = dir / "exp" / (std::string("test_") + kShipped);
  const auto summary =
      nlohmann::json::parse(read_text(results / "results_task_2spk_real_si_sdr_summary.json"));
  EXPECT_EQ(summary.at("SI-SDR").at("SS").at("all").at("utterances").get<int>(), 4);
  const fs::path mixtures = dir / "data/recorded_16k/2speakers/wav16k/min/tt/mix";
  std::string files;
  for (const auto& entry : fs::directory_iterator(mixtures)) files += " '" + entry.path().string() + "'";
  auto separated = run_nabu(std::string("separate --threads=2 --chunk-seconds=0 --model=") +
                                kShipped + " --out=sep" + files,
                            dir.path());
  ASSERT_EQ(separated.exit_code, 0) << separated.output;
  int compared = 0;
  for (const auto& entry : fs::directory_iterator(mixtures)) {
    const std::string stem = entry.path().stem().string();
    for (int s = 1; s <= 2; ++s) {
      auto tested_signal = samples_of(results / "reconstructions/task_2spk_real" /
                                      ("s" + std::to_string(s)) / (stem + ".wav"));
      auto separated_signal = samples_of(dir / "sep" / (stem + "_s" + std::to_string(s) + ".wav"));
      ASSERT_EQ(tested_signal.size(0), separated_signal.size(0)) << stem;
      separated_signal = separated_signal / separated_signal.abs().max();
      EXPECT_LT((tested_signal - separated_signal).abs().max().item<double>(), 1e-3) << stem;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 8);
}

// When the two outputs are voices of one pitch (within the model card's weak range, or one voice
// left in both), nabu separate says so in one line naming the file and the card, and the API
// returns it beside the signals; a woman with a man draws no such line.
TEST(ShippedModel, CautionsSayWhenTheOutputsAreVoicesOfOnePitch) {
  TempDir dir;
  write_codec2_mixture(dir / "two_men.wav", "hts1a", "morig");
  write_codec2_mixture(dir / "woman_and_man.wav", "forig", "morig");
  const std::string model = std::string("--model=") + kShipped;
  auto result = run_nabu("separate " + model + " --threads=1 --out=o two_men.wav woman_and_man.wav",
                         dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("two_men.wav: voices of one pitch: outputs 1 and 2 have median f0"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("models/pit_blstm_2spk_8k/card.md, \"Known limits\""),
            std::string::npos)
      << result.output;
  EXPECT_EQ(result.output.find("woman_and_man.wav: voices of one pitch"), std::string::npos)
      << result.output;
  auto never = run_nabu("separate " + model + " --threads=1 --near-pitch-semitones=0 --out=p "
                        "two_men.wav", dir.path());
  ASSERT_EQ(never.exit_code, 0) << never.output;
  EXPECT_EQ(never.output.find("voices of one pitch"), std::string::npos) << never.output;

  auto separator = api::Separator::from_exported(
      (source_dir() / "models" / kShipped / "model.pt").string());
  for (const char* name : {"two_men.wav", "woman_and_man.wav"}) {
    SCOPED_TRACE(name);
    const auto audio = api::read_audio((dir / name).string());
    const auto separation = separator.separate_with_cautions(audio.samples, audio.sample_rate);
    ASSERT_EQ(separation.signals.size(), 2u);
    ASSERT_EQ(separation.median_f0_hz.size(), 2u);
    const double apart = std::abs(12 * std::log2(separation.median_f0_hz[0] /
                                                 separation.median_f0_hz[1]));
    if (std::string(name) == "two_men.wav") {
      EXPECT_LT(apart, 4.0);
      ASSERT_EQ(separation.cautions.size(), 1u);
      EXPECT_EQ(separation.cautions[0].kind, "near_pitch");
      EXPECT_NE(result.output.find(separation.cautions[0].message), std::string::npos)
          << separation.cautions[0].message;
    } else {
      EXPECT_GT(apart, 5.0);
      EXPECT_TRUE(separation.cautions.empty());
    }
    // The signals are those separate() returns.
    EXPECT_EQ(separation.signals, separator.separate(audio.samples, audio.sample_rate));
  }
}

// Without --model and --expdir each recording is separated by the shipped model that is the
// default for its rate (model.json's default_from_rate: the highest at or below the rate), and
// nabu models says which is the default for which rates; a model.json that says something else
// is named.
TEST(ShippedModel, WithoutAModelEachRecordingTakesTheDefaultOfItsRate) {
  TempDir dir;
  const fs::path shipped = source_dir() / "models" / kShipped;
  for (auto [name, from] : {std::pair<const char*, int>{"low", 8000}, {"high", 16000}}) {
    fs::create_directories(dir / "models" / name);
    fs::create_symlink(shipped / "model.pt", dir / "models" / name / "model.pt");
    write_text(dir / "models" / name / "card.md", std::string("# ") + name + "\n\nA model.\n");
    write_text(dir / "models" / name / "model.json",
               "{\"default_from_rate\": " + std::to_string(from) + "}\n");
  }
  write_noise_wav(dir / "narrow.wav", 8000, 1, 8000);
  write_noise_wav(dir / "wide.wav", 16000, 2, 16000);
  write_noise_wav(dir / "phone.wav", 6000, 3, 6000);
  const std::string env = "NABU_MODELS_PATH='" + (dir / "models").string() + "' '" NABU_BINARY "' ";
  auto result = run_shell(env + "separate --threads=1 --out=o narrow.wav wide.wav phone.wav",
                          dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("model: low (8000 Hz, 2 speakers), the default for recordings at "
                               "8000 Hz and above"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("model: high (8000 Hz, 2 speakers), the default for recordings at "
                               "16000 Hz and above"),
            std::string::npos)
      << result.output;
  // Below both: the source tree's model, the default at any rate.
  EXPECT_NE(result.output.find("model: pit_blstm_2spk_8k (8000 Hz, 2 speakers), the default for "
                               "recordings at this rate"),
            std::string::npos)
      << result.output;
  for (const char* output : {"narrow_s1.wav", "wide_s2.wav", "phone_s1.wav"})
    EXPECT_TRUE(fs::exists(dir / "o" / output)) << output;
  auto listed = run_shell(env + "models", dir.path());
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find("without --model for recordings at 8000 to 15999 Hz\n"),
            std::string::npos)
      << listed.output;
  EXPECT_NE(listed.output.find("without --model for recordings at 16000 Hz and above\n"),
            std::string::npos)
      << listed.output;
  EXPECT_NE(listed.output.find("without --model for recordings below 8000 Hz\n"),
            std::string::npos)
      << listed.output;
  write_text(dir / "models" / "low" / "model.json", "{\"default_from_rate\": \"8 kHz\"}\n");
  auto bad = run_shell(env + "separate --threads=1 --out=q narrow.wav", dir.path());
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("models/low/model.json: default_from_rate must be a sample rate in Hz"),
            std::string::npos)
      << bad.output;
}

}  // namespace nabu::testing
