// Sequence tasks (docs/recognition.md): the ctc loss against a slow forward-algorithm reference,
// text_processor, label-sequence stores, and a whole data -> train -> test run of the shipped
// phone recipe on a corpus of tone sequences, decoded greedily and with the beam.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

#include "nabu/core/error.h"
#include "nabu/neuralnetworks/loss_computers/loss_computer.h"
#include "nabu/processing/processor.h"
#include "nabu/processing/store.h"
#include "test_helpers.h"

using namespace nabu;
using namespace nabu::testing;

namespace {

double log_add(double a, double b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  double high = std::max(a, b);
  return high + std::log(std::exp(a - high) + std::exp(b - high));
}

// -log p(labels | log_probs [T, C]) by the textbook forward recursion over the blank-extended
// label sequence, one scalar at a time.
double reference_ctc(const torch::Tensor& log_probs, const std::vector<int64_t>& labels,
                     int64_t blank) {
  auto lp = log_probs.to(torch::kDouble);
  const int64_t frames = lp.size(0);
  std::vector<int64_t> extended = {blank};
  for (auto label : labels) {
    extended.push_back(label);
    extended.push_back(blank);
  }
  const int64_t states = static_cast<int64_t>(extended.size());
  std::vector<double> alpha(states, -INFINITY);
  alpha[0] = lp[0][extended[0]].item<double>();
  if (states > 1) alpha[1] = lp[0][extended[1]].item<double>();
  for (int64_t t = 1; t < frames; ++t) {
    std::vector<double> next(states, -INFINITY);
    for (int64_t s = 0; s < states; ++s) {
      double sum = alpha[s];
      if (s >= 1) sum = log_add(sum, alpha[s - 1]);
      if (s >= 2 && extended[s] != blank && extended[s] != extended[s - 2])
        sum = log_add(sum, alpha[s - 2]);
      next[s] = sum + lp[t][extended[s]].item<double>();
    }
    alpha = next;
  }
  double total = alpha[states - 1];
  if (states > 1) total = log_add(total, alpha[states - 2]);
  return -total;
}

LossPtr ctc_loss(const std::string& options) {
  ConfigFile file = ConfigFile::parse("[ctc]\n" + options, "loss.cfg");
  return loss_registry().create("ctc", file.section("ctc"));
}

struct CtcBatch {
  torch::Tensor logits, labels, input_lengths, label_lengths;
  std::vector<std::vector<int64_t>> sequences;
  std::vector<std::string> names;
};

// Random logits with padding garbage, label sequences with repeats, for `blank`.
CtcBatch random_ctc_batch(int64_t classes, int64_t blank, unsigned seed) {
  torch::manual_seed(seed);
  std::mt19937 rng(seed);
  CtcBatch b;
  std::vector<int64_t> frames = {9, 6, 12};
  std::vector<std::vector<int64_t>> sequences = {{1, 1, 2}, {2}, {1, 2, 2, 1}};
  const int64_t batch = 3, max_frames = 12, max_labels = 4;
  b.logits = torch::randn({batch, max_frames, classes}, torch::kDouble) * 2;
  b.labels = torch::full({batch, max_labels}, 99, torch::kInt32);  // garbage padding
  for (int64_t i = 0; i < batch; ++i) {
    std::vector<int64_t> sequence;
    for (auto label : sequences[i]) sequence.push_back(label >= blank ? label + 1 : label);
    // Repeats stay repeats; labels are shifted past the blank.
    for (std::size_t k = 0; k < sequence.size(); ++k) b.labels[i][k] = sequence[k];
    b.sequences.push_back(sequence);
    b.names.push_back("utt" + std::to_string(i));
  }
  b.input_lengths = torch::tensor(frames, torch::kLong);
  b.label_lengths = torch::tensor(std::vector<int64_t>{3, 1, 4}, torch::kLong);
  return b;
}

LossResult run_ctc(LossComputer& loss, const CtcBatch& b) {
  TensorMap lengths = {{"phones", b.label_lengths}};
  return loss({{"phones", b.labels}}, {{"logits", b.logits}}, b.input_lengths,
              LossComputer::SequenceInfo{lengths, b.names});
}

}  // namespace

TEST(CtcLoss, MatchesTheForwardAlgorithmWithRepeatsAndBothBlankPositions) {
  for (int64_t blank : {int64_t{-1}, int64_t{0}}) {
    const int64_t classes = 4;
    const int64_t blank_index = blank < 0 ? classes - 1 : blank;
    for (unsigned seed : {1u, 2u, 3u}) {
      auto b = random_ctc_batch(classes, blank_index, seed);
      double expected = 0;
      for (int64_t i = 0; i < 3; ++i) {
        auto log_probs =
            torch::log_softmax(b.logits[i].slice(0, 0, b.input_lengths[i].item<int64_t>()), 1);
        expected += reference_ctc(log_probs, b.sequences[i], blank_index);
      }
      auto loss = ctc_loss("blank = " + std::to_string(blank) + "\n");
      auto result = run_ctc(*loss, b);
      EXPECT_NEAR(result.loss.item<double>(), expected, 1e-5 * std::abs(expected));
      EXPECT_EQ(result.norm.item<double>(), 8.0);  // 3 + 1 + 4 labels
    }
  }
}

TEST(CtcLoss, MeanReductionDividesEachUtteranceByItsLabels) {
  auto b = random_ctc_batch(4, 3, 7);
  double expected = 0;
  for (int64_t i = 0; i < 3; ++i) {
    auto log_probs =
        torch::log_softmax(b.logits[i].slice(0, 0, b.input_lengths[i].item<int64_t>()), 1);
    expected += reference_ctc(log_probs, b.sequences[i], 3) / b.sequences[i].size();
  }
  auto result = run_ctc(*ctc_loss("reduction = mean\n"), b);
  EXPECT_NEAR(result.loss.item<double>(), expected, 1e-5 * expected);
  EXPECT_EQ(result.norm.item<double>(), 3.0);
  // Gradients reach the logits.
  auto logits = b.logits.clone().requires_grad_(true);
  b.logits = logits;
  run_ctc(*ctc_loss(""), b).loss.backward();
  ASSERT_TRUE(logits.grad().defined());
  EXPECT_GT(logits.grad().abs().sum().item<double>(), 0);
  // Padded frames get no gradient.
  EXPECT_EQ(logits.grad()[1].slice(0, 6).abs().sum().item<double>(), 0);
}

TEST(CtcLoss, NamesTheUtteranceWhoseTargetNeedsMoreFramesOrUsesTheBlank) {
  auto b = random_ctc_batch(4, 3, 1);
  b.input_lengths[2] = 4;  // 4 labels with one repeat need 5 frames
  auto message = error_of([&] { run_ctc(*ctc_loss(""), b); });
  EXPECT_NE(message.find("'utt2' has 4 labels, which need at least 5 frames"), std::string::npos)
      << message;
  b = random_ctc_batch(4, 3, 1);
  b.labels[1][0] = 3;  // the blank
  message = error_of([&] { run_ctc(*ctc_loss(""), b); });
  EXPECT_NE(message.find("'utt1'"), std::string::npos) << message;
  EXPECT_NE(message.find("blank"), std::string::npos) << message;
  message = error_of([] { ctc_loss("reduction = average\n"); });
  EXPECT_NE(message.find("reduction"), std::string::npos) << message;
}

TEST(TextProcessor, MapsLabelsToTheirAlphabetIndicesAndRejectsWhatItCannot) {
  TempDir dir;
  auto make = [](const std::string& keys) {
    return make_processor(
        ConfigFile::parse("[processor]\nprocessor = text_processor\n" + keys, "phones.cfg"));
  };
  auto processor = make("alphabet = a b c\n");
  DataLine line{"utt1", {"c", "a", "a"}, "list:1"};
  auto labels = processor->process(line);
  EXPECT_EQ(labels.scalar_type(), torch::kInt32);
  EXPECT_TRUE(labels.equal(torch::tensor({2, 0, 0}, torch::kInt32)));
  ASSERT_NE(processor->alphabet(), nullptr);
  EXPECT_EQ(processor->alphabet()->size(), 3u);
  auto message = error_of([&] { processor->process(DataLine{"utt2", {"a", "bb"}, "list:2"}); });
  EXPECT_NE(message.find("label 'bb' is not in the alphabet"), std::string::npos) << message;
  message = error_of([&] { processor->process(DataLine{"utt3", {}, "list:3"}); });
  EXPECT_NE(message.find("empty transcription"), std::string::npos) << message;
  message = error_of([&] { processor->segment(labels, "100"); });
  EXPECT_NE(message.find("segment_lengths = full"), std::string::npos) << message;

  write_text(dir / "phones.txt", "x y\nz\n");
  auto from_file = make("alphabet_file = " + (dir / "phones.txt").string() + "\n");
  EXPECT_EQ(*from_file->alphabet(), (std::vector<std::string>{"x", "y", "z"}));
  message = error_of([&] { make("alphabet = a b\nalphabet_file = x\n"); });
  EXPECT_NE(message.find("exactly one of alphabet and alphabet_file"), std::string::npos)
      << message;
  message = error_of([&] { make("alphabet_file = " + (dir / "none.txt").string() + "\n"); });
  EXPECT_NE(message.find("phones.cfg"), std::string::npos) << message;
  EXPECT_NE(message.find("alphabet_file"), std::string::npos) << message;
  message = error_of([&] { make("alphabet = a b a\n"); });
  EXPECT_NE(message.find("label 'a' appears twice"), std::string::npos) << message;
}

TEST(TextProcessor, LabelSequencesRoundTripThroughAStore) {
  TempDir dir;
  StoreMetadata metadata;
  metadata.stored_type = StoredType::kInt32;
  metadata.section = "phones";
  metadata.segment_length = "full";
  {
    StoreWriter writer(dir / "store.h5", metadata);
    writer.append("a", torch::tensor({3, 1, 4}, torch::kInt32), 3);
    writer.append("b", torch::tensor({1}, torch::kInt32), 1);
    writer.commit();
  }
  StoreReader reader(dir / "store.h5");
  EXPECT_TRUE(reader.metadata().nontime_dims.empty());
  EXPECT_EQ(reader.length(0), 3);
  EXPECT_TRUE(reader.read(0).equal(torch::tensor({3, 1, 4}, torch::kInt32)));
  EXPECT_TRUE(reader.read(1).equal(torch::tensor({1}, torch::kInt32)));
}

namespace {

// Single-"speaker" utterances that are sequences of 3-6 tones from four pitches, 0.12 s each with
// 0.06 s gaps, and their transcriptions: the phone recipe's lists, learnable in a few updates.
void make_tone_sequence_corpus(const fs::path& root) {
  const std::vector<std::string> names = {"lo", "mid", "high", "top"};
  const std::vector<double> pitches = {300, 600, 1100, 1900};
  std::mt19937 rng(5);
  std::string alphabet;
  for (const auto& name : names) alphabet += name + " ";
  write_text(root / "data/corpus/sources/phones.txt", alphabet + "\n");
  for (const auto& [split, count] : std::vector<std::pair<std::string, int>>{
           {"tr", 64}, {"cv", 16}, {"tt", 20}}) {
    std::string scp, text;
    for (int u = 0; u < count; ++u) {
      std::string utterance = split + "_" + std::to_string(u);
      int tones = 3 + static_cast<int>(rng() % 4);
      std::vector<short> samples(480, 0);
      text += utterance;
      for (int k = 0; k < tones; ++k) {
        int label = static_cast<int>(rng() % names.size());
        text += " " + names[label];
        double amplitude = 4000 + rng() % 8000;
        for (int n = 0; n < 960; ++n)
          samples.push_back(static_cast<short>(
              amplitude * std::sin(2 * M_PI * pitches[label] * n / 8000.0)));
        samples.insert(samples.end(), 480, 0);
      }
      text += "\n";
      fs::path wav = root / "data/corpus/sources/wav" / (utterance + ".wav");
      write_pcm16_wav(wav, samples);
      scp += utterance + " " + wav.string() + "\n";
    }
    write_text(root / ("data/corpus/sources/" + split + "_wav.scp"), scp);
    write_text(root / ("data/corpus/sources/" + split + "_phones.txt"), text);
  }
}

}  // namespace

TEST(Recognition, ThePhoneRecipeLearnsToneSequencesAndScoresItsHypotheses) {
  TempDir dir;
  make_tone_sequence_corpus(dir.path());
  const std::string recipe = (source_dir() / "recipes/ASR/toy_CTC_phones").string();
  const std::string sets =
      " --set model.cfg:encoder:num_units=64 --set model.cfg:encoder:num_layers=1"
      " --set model.cfg:outlayer:output_dims=5 --set trainer.cfg:trainer:valid_frequency=50";
  auto data = run_nabu("data --recipe=" + recipe + " --expdir=exp" + sets, dir.path());
  ASSERT_EQ(data.exit_code, 0) << data.output;
  auto train = run_nabu("train --recipe=" + recipe + " --expdir=exp --threads=1 --max-steps=400" +
                            sets,
                        dir.path());
  ASSERT_EQ(train.exit_code, 0) << train.output;
  for (const std::string decoder : {"greedy", "beam_search"}) {
    auto test = run_nabu("test --expdir=exp --set decoder.cfg:task_phones:decoder=" + decoder,
                         dir.path());
    ASSERT_EQ(test.exit_code, 0) << test.output;
    EXPECT_NE(test.output.find("PER (" + decoder + " decoding)"), std::string::npos)
        << test.output;
    auto summary = nlohmann::json::parse(
        read_text(dir / "exp/test/results_task_phones_error_rate_summary.json"));
    EXPECT_EQ(summary["utterances"], 20);
    EXPECT_EQ(summary["decoder"], decoder);
    EXPECT_LT(summary["error_rate"].get<double>(), 0.1) << summary.dump();
    auto hypotheses = read_text(dir / "exp/test/task_phones/hyp.txt");
    EXPECT_EQ(std::count(hypotheses.begin(), hypotheses.end(), '\n'), 20);
    EXPECT_EQ(hypotheses.rfind("tt_", 0), 0u) << hypotheses;
  }
  // A decoder whose alphabet does not match the output: one line naming decoder.cfg.
  auto bad = run_nabu("test --expdir=exp --set decoder.cfg:task_phones:alphabet=trainfeats",
                      dir.path());
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("[task_phones] alphabet"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("text_processor"), std::string::npos) << bad.output;
}
