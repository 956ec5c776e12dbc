// CTC greedy and prefix beam search decoding, checked against exhaustive path enumeration; the
// Levenshtein error counts, checked against a plain recursive minimum; the decoder and sequence
// scorer registries (decoder.cfg `decoder`, scorer.cfg `score_type = error_rate`): built, checked
// and listed like every other family.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "nabu/catalog/catalog.h"
#include "nabu/catalog/recipe_check.h"
#include "nabu/core/config.h"
#include "nabu/core/error.h"
#include "nabu/evaluation/decoders/ctc_decoding.h"
#include "nabu/evaluation/decoders/decoder.h"
#include "nabu/evaluation/scorers/edit_distance.h"
#include "nabu/evaluation/scorers/sequence_scorer.h"
#include "test_helpers.h"

namespace {

using namespace nabu;
using Labels = std::vector<int64_t>;

// Log-softmax of a frame per path entry that strongly favours that label.
torch::Tensor peaked(const Labels& path, int64_t num_classes) {
  auto logits = torch::zeros({static_cast<int64_t>(path.size()), num_classes}, torch::kFloat64);
  for (size_t t = 0; t < path.size(); ++t) logits[t][path[t]] = 5.0;
  return torch::log_softmax(logits, 1);
}

torch::Tensor random_log_probs(int64_t frames, int64_t num_classes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.5);
  std::vector<double> logits(frames * num_classes);
  for (double& x : logits) x = normal(rng);
  return torch::log_softmax(torch::tensor(logits, torch::kFloat64).reshape({frames, num_classes}), 1);
}

Labels collapse(const Labels& path, int64_t blank) {
  Labels labels;
  int64_t previous = blank;
  for (int64_t c : path) {
    if (c != blank && c != previous) labels.push_back(c);
    previous = c;
  }
  return labels;
}

double log_add(double a, double b) {
  if (a == -std::numeric_limits<double>::infinity()) return b;
  const double larger = std::max(a, b);
  return larger + std::log(std::exp(a - larger) + std::exp(b - larger));
}

// Every one of the C^T frame paths: the summed log-probability of each collapsed label sequence,
// and the most probable single path.
struct Exhaustive {
  std::map<Labels, double> sequences;
  Labels best_path;
};

Exhaustive enumerate_paths(const torch::Tensor& log_probs, int64_t blank) {
  const int64_t frames = log_probs.size(0), num_classes = log_probs.size(1);
  const auto scores = log_probs.accessor<double, 2>();
  int64_t num_paths = 1;
  for (int64_t t = 0; t < frames; ++t) num_paths *= num_classes;

  Exhaustive result;
  double best_path_score = -std::numeric_limits<double>::infinity();
  for (int64_t index = 0; index < num_paths; ++index) {
    Labels path(frames);
    double score = 0.0;
    for (int64_t t = 0, rest = index; t < frames; ++t, rest /= num_classes) {
      path[t] = rest % num_classes;
      score += scores[t][path[t]];
    }
    const Labels labels = collapse(path, blank);
    auto found = result.sequences.find(labels);
    if (found == result.sequences.end())
      result.sequences[labels] = score;
    else
      found->second = log_add(found->second, score);
    if (score > best_path_score) {
      best_path_score = score;
      result.best_path = path;
    }
  }
  return result;
}

struct RandomCase {
  int64_t frames, num_classes, blank;
  uint64_t seed;
};

std::vector<RandomCase> random_cases() {
  std::vector<RandomCase> cases;
  for (int64_t frames = 1; frames <= 5; ++frames)
    for (int64_t num_classes = 2; num_classes <= 4; ++num_classes)
      for (uint64_t seed = 0; seed < 4; ++seed)
        for (int64_t blank : {int64_t{0}, num_classes - 1})
          cases.push_back({frames, num_classes, blank, seed * 100 + frames * 10 + num_classes});
  return cases;
}

std::string describe(const RandomCase& c) {
  std::ostringstream text;
  text << "T=" << c.frames << " C=" << c.num_classes << " blank=" << c.blank << " seed=" << c.seed;
  return text.str();
}

TEST(CtcDecoding, GreedyMergesRepeatsAndDropsBlanks) {
  EXPECT_EQ(ctc_greedy_decode(peaked({1, 1, 2, 2, 0, 0, 1}, 3), 0), (Labels{1, 2, 1}));
  EXPECT_EQ(ctc_greedy_decode(peaked({0, 0, 0}, 3), 0), Labels{});
}

TEST(CtcDecoding, GreedyKeepsRepeatsSeparatedByBlank) {
  EXPECT_EQ(ctc_greedy_decode(peaked({1, 1, 0, 1}, 2), 0), (Labels{1, 1}));
  // Blank as the last class, and float input.
  EXPECT_EQ(ctc_greedy_decode(peaked({0, 2, 0, 0, 1}, 3).to(torch::kFloat32), 2), (Labels{0, 0, 1}));
}

TEST(CtcDecoding, EmptyUtterance) {
  const auto nothing = torch::empty({0, 3}, torch::kFloat64);
  EXPECT_EQ(ctc_greedy_decode(nothing, 0), Labels{});
  const auto beam = ctc_prefix_beam_search(nothing, 0, 4);
  ASSERT_EQ(beam.size(), 1u);
  EXPECT_EQ(beam[0].labels, Labels{});
  EXPECT_EQ(beam[0].log_probability, 0.0);
}

TEST(CtcDecoding, BeamSearchSumsPathsThatGreedyMisses) {
  // Two frames with p(a) = 0.4, p(blank) = 0.6: the best path is blank blank (0.36), but "a" has
  // the paths a a, a _, _ a (0.16 + 0.24 + 0.24 = 0.64).
  const auto log_probs = torch::log(torch::tensor({{0.6, 0.4}, {0.6, 0.4}}, torch::kFloat64));
  EXPECT_EQ(ctc_greedy_decode(log_probs, 0), Labels{});
  const auto beam = ctc_prefix_beam_search(log_probs, 0, 2);
  ASSERT_EQ(beam.size(), 2u);
  EXPECT_EQ(beam[0].labels, Labels{1});
  EXPECT_NEAR(beam[0].log_probability, std::log(0.64), 1e-12);
  EXPECT_EQ(beam[1].labels, Labels{});
  EXPECT_NEAR(beam[1].log_probability, std::log(0.36), 1e-12);
}

TEST(CtcDecoding, WideBeamEqualsExhaustiveSum) {
  for (const auto& c : random_cases()) {
    SCOPED_TRACE(describe(c));
    const auto log_probs = random_log_probs(c.frames, c.num_classes, c.seed);
    const auto exact = enumerate_paths(log_probs, c.blank);
    const int beam_width = static_cast<int>(std::pow(c.num_classes, c.frames));
    const auto beam = ctc_prefix_beam_search(log_probs, c.blank, beam_width);

    // Exact: every label sequence with its total probability, best first.
    ASSERT_EQ(beam.size(), exact.sequences.size());
    double best = -std::numeric_limits<double>::infinity();
    for (const auto& [labels, log_probability] : exact.sequences)
      if (log_probability > best) best = log_probability;
    EXPECT_NEAR(beam[0].log_probability, best, 1e-9);
    EXPECT_NEAR(exact.sequences.at(beam[0].labels), best, 1e-9);
    for (size_t k = 0; k < beam.size(); ++k) {
      ASSERT_EQ(exact.sequences.count(beam[k].labels), 1u);
      EXPECT_NEAR(beam[k].log_probability, exact.sequences.at(beam[k].labels), 1e-9);
      if (k > 0) {
        EXPECT_GE(beam[k - 1].log_probability, beam[k].log_probability);
      }
    }
  }
}

TEST(CtcDecoding, NarrowBeamGivesPossibleSequences) {
  for (const auto& c : random_cases()) {
    SCOPED_TRACE(describe(c));
    const auto log_probs = random_log_probs(c.frames, c.num_classes, c.seed);
    const auto exact = enumerate_paths(log_probs, c.blank);
    for (int beam_width : {1, 2, 3}) {
      const auto beam = ctc_prefix_beam_search(log_probs, c.blank, beam_width);
      ASSERT_GE(beam.size(), 1u);
      ASSERT_LE(beam.size(), static_cast<size_t>(beam_width));
      for (const auto& hypothesis : beam) {
        // A real label sequence, scored with a subset of its paths: at most its true probability.
        ASSERT_EQ(exact.sequences.count(hypothesis.labels), 1u);
        EXPECT_LE(hypothesis.log_probability, exact.sequences.at(hypothesis.labels) + 1e-9);
      }
    }
  }
}

TEST(CtcDecoding, GreedyIsTheMostProbablePath) {
  for (const auto& c : random_cases()) {
    SCOPED_TRACE(describe(c));
    const auto log_probs = random_log_probs(c.frames, c.num_classes, c.seed);
    const auto exact = enumerate_paths(log_probs, c.blank);
    EXPECT_EQ(ctc_greedy_decode(log_probs, c.blank), collapse(exact.best_path, c.blank));
  }
}

TEST(CtcDecoding, RejectsBadInput) {
  const auto log_probs = random_log_probs(3, 4, 1);
  EXPECT_THROW(ctc_greedy_decode(log_probs[0], 0), Error);
  EXPECT_THROW(ctc_prefix_beam_search(log_probs[0], 0, 2), Error);
  EXPECT_THROW(ctc_greedy_decode(log_probs, 4), Error);
  EXPECT_THROW(ctc_greedy_decode(log_probs, -1), Error);
  EXPECT_THROW(ctc_prefix_beam_search(log_probs, 4, 2), Error);
  EXPECT_THROW(ctc_prefix_beam_search(log_probs, 0, 0), Error);
  EXPECT_THROW(ctc_greedy_decode(torch::zeros({3, 1}, torch::kFloat64), 0), Error);
  EXPECT_THROW(ctc_greedy_decode(torch::Tensor(), 0), Error);
}

std::vector<std::string> words(const std::string& text) {
  std::istringstream stream(text);
  std::vector<std::string> tokens;
  for (std::string token; stream >> token;) tokens.push_back(token);
  return tokens;
}

EditCounts edits(const std::string& reference, const std::string& hypothesis) {
  return align_edits(words(reference), words(hypothesis));
}

void expect_counts(const EditCounts& counts, int64_t substitutions, int64_t deletions,
                   int64_t insertions) {
  EXPECT_EQ(counts.substitutions, substitutions);
  EXPECT_EQ(counts.deletions, deletions);
  EXPECT_EQ(counts.insertions, insertions);
}

TEST(EditDistance, HandComputedCases) {
  expect_counts(edits("a b c", "a b c"), 0, 0, 0);
  expect_counts(edits("a b c", ""), 0, 3, 0);
  expect_counts(edits("", "a b"), 0, 0, 2);
  expect_counts(edits("", ""), 0, 0, 0);
  expect_counts(edits("a b c", "a x c"), 1, 0, 0);
  expect_counts(edits("a b c d", "a c d e"), 0, 1, 1);
  EXPECT_EQ(edits("a b c d", "a c d e").errors(), 2);
  EXPECT_EQ(edits("a b c", "a b").reference_length, 3);
}

TEST(EditDistance, TiesPreferSubstitutions) {
  // "a b" -> "b c": two substitutions or delete a, keep b, insert c; both cost 2.
  expect_counts(edits("a b", "b c"), 2, 0, 0);
  expect_counts(edits("a b c", "c d"), 2, 1, 0);
}

TEST(EditDistance, RateAndAccumulation) {
  EXPECT_DOUBLE_EQ(edits("a b c d", "a c d e").rate(), 0.5);
  EXPECT_DOUBLE_EQ(edits("", "").rate(), 0.0);
  EXPECT_DOUBLE_EQ(edits("", "a").rate(), 1.0);
  EditCounts total = edits("a b", "a x");
  total += edits("c d e", "c d e f");
  EXPECT_EQ(total.reference_length, 5);
  expect_counts(total, 1, 0, 1);
  EXPECT_DOUBLE_EQ(total.rate(), 0.4);
}

// The fewest edits turning reference[i..] into hypothesis[j..], as a plain recursion.
int64_t slow_distance(const std::vector<std::string>& reference,
                      const std::vector<std::string>& hypothesis, size_t i, size_t j) {
  if (i == reference.size()) return static_cast<int64_t>(hypothesis.size() - j);
  if (j == hypothesis.size()) return static_cast<int64_t>(reference.size() - i);
  const int64_t substitute =
      (reference[i] != hypothesis[j]) + slow_distance(reference, hypothesis, i + 1, j + 1);
  const int64_t remove = 1 + slow_distance(reference, hypothesis, i + 1, j);
  const int64_t insert = 1 + slow_distance(reference, hypothesis, i, j + 1);
  return std::min({substitute, remove, insert});
}

TEST(EditDistance, MatchesSlowRecursion) {
  std::mt19937 rng(7);
  const std::vector<std::string> alphabet = {"a", "b", "c"};
  auto random_words = [&] {
    std::vector<std::string> tokens(std::uniform_int_distribution<int>(0, 6)(rng));
    for (auto& token : tokens) token = alphabet[std::uniform_int_distribution<int>(0, 2)(rng)];
    return tokens;
  };
  for (int trial = 0; trial < 300; ++trial) {
    const auto reference = random_words(), hypothesis = random_words();
    const EditCounts counts = align_edits(reference, hypothesis);
    ASSERT_EQ(counts.errors(), slow_distance(reference, hypothesis, 0, 0)) << "trial " << trial;
    // The alignment accounts for every token on both sides.
    const int64_t reference_length = static_cast<int64_t>(reference.size());
    const int64_t hypothesis_length = static_cast<int64_t>(hypothesis.size());
    EXPECT_EQ(counts.reference_length, reference_length);
    EXPECT_EQ(counts.deletions - counts.insertions, reference_length - hypothesis_length);
    EXPECT_LE(counts.substitutions + counts.deletions, reference_length);
  }
}

}  // namespace

namespace {

using nabu::testing::error_of;

// One section [task_phones] of `file` with `keys`.
ConfigFile task_section(const std::string& file, const std::string& keys) {
  return ConfigFile::parse("[task_phones]\n" + keys + "\n", file);
}

std::string all(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  return text;
}

TEST(Decoders, EachRegisteredDecoderDecodesAsItsAlgorithmWithItsOwnKeys) {
  EXPECT_EQ(decoder_registry().names(), (std::vector<std::string>{"beam_search", "greedy"}));
  // Two frames with p(a) = 0.4, p(blank) = 0.6: the best path is blank blank, but "a" has the
  // paths a a, a _, _ a (0.64). A beam of 1 keeps only the empty prefix after the first frame.
  const auto log_probs = torch::log(torch::tensor({{0.6, 0.4}, {0.6, 0.4}}, torch::kFloat64));
  auto decode = [&](const std::string& keys) {
    auto file = task_section("decoder.cfg", keys + "\nalphabet = phones");
    return make_decoder(file.section("task_phones"))->decode(log_probs, 0);
  };
  EXPECT_EQ(decode("decoder = greedy"), Labels{});
  EXPECT_EQ(decode(""), Labels{});  // greedy is the default
  EXPECT_EQ(decode("decoder = beam_search"), Labels{1});
  EXPECT_EQ(decode("decoder = beam_search\nbeam_width = 1"), Labels{});
  EXPECT_EQ(decode("decoder = beam_search\nbeam_width = 2"), Labels{1});
  // A beam_search section switched to greedy (--set decoder.cfg:TASK:decoder=greedy) keeps working.
  EXPECT_EQ(decode("decoder = greedy\nbeam_width = 2"), Labels{});

  auto file = task_section("decoder.cfg", "decoder = beam_search\nblank = 1\noutput = logits\n"
                                          "alphabet = phones");
  auto decoder = make_decoder(file.section("task_phones"));
  const auto& options = decoder->options();
  EXPECT_EQ(options.decoder, "beam_search");
  EXPECT_EQ(options.blank, 1);
  EXPECT_EQ(options.output, "logits");
  EXPECT_EQ(options.alphabet, "phones");

  auto typo = task_section("decoder.cfg", "decoder = beam_serch\nalphabet = phones");
  EXPECT_EQ(error_of([&] { make_decoder(typo.section("task_phones")); }),
            "decoder.cfg:2: [task_phones] decoder: unknown decoder 'beam_serch' (did you mean "
            "'beam_search'?); known: beam_search, greedy");
  auto bad = task_section("decoder.cfg", "decoder = beam_search\nbeam_width = 0\nalphabet = p");
  EXPECT_NE(error_of([&] { make_decoder(bad.section("task_phones")); })
                .find("decoder.cfg:3: [task_phones] beam_width: must be at least 1"),
            std::string::npos);
}

TEST(Decoders, CheckReportsEveryProblemThroughTheDecodersOwnOptions) {
  auto problems = [](const std::string& keys) {
    auto file = task_section("decoder.cfg", keys);
    auto found = check_decoder(file.section("task_phones"));
    // make_decoder throws where check finds a problem, with the first one's text.
    auto thrown = error_of([&] { make_decoder(file.section("task_phones")); });
    EXPECT_EQ(thrown.empty(), found.empty()) << thrown << "\n" << all(found);
    if (!found.empty()) {
      EXPECT_EQ(thrown, found[0]);
    }
    return found;
  };
  EXPECT_TRUE(problems("decoder = greedy\nbeam_width = 8\nalphabet = phones").empty());
  EXPECT_TRUE(problems("decoder = beam_search\nbeam_width = 3\nalphabet = phones").empty());
  auto found = problems("decoder = beam_search\nbeam_width = 0\nalphabet = phones");
  ASSERT_EQ(found.size(), 1u) << all(found);
  EXPECT_EQ(found[0], "decoder.cfg:3: [task_phones] beam_width: must be at least 1");
  found = problems("decoder = beam_search\nbeam_widht = 3\nalphabet = phones");
  ASSERT_EQ(found.size(), 1u) << all(found);
  EXPECT_NE(found[0].find("beam_widht"), std::string::npos) << found[0];
  EXPECT_NE(found[0].find("did you mean 'beam_width'"), std::string::npos) << found[0];
  found = problems("decoder = greedy");
  ASSERT_EQ(found.size(), 1u) << all(found);
  EXPECT_NE(found[0].find("alphabet"), std::string::npos) << found[0];
  found = problems("decoder = viterbi\nalphabet = phones");
  ASSERT_EQ(found.size(), 1u) << all(found);
  EXPECT_NE(found[0].find("decoder.cfg:2: [task_phones] decoder: unknown decoder 'viterbi'"),
            std::string::npos)
      << found[0];
}

TEST(SequenceScorers, ErrorRateCountsEditsPerUtteranceAndOverAll) {
  auto file = task_section("scorer.cfg",
                           "score_type = error_rate\nreferences = testphones\nunit = phone");
  auto scorer = make_sequence_scorer(file.section("task_phones"));
  EXPECT_EQ(scorer->type(), "error_rate");
  EXPECT_EQ(scorer->options().references, "testphones");
  // a b c -> a x: b substituted, c deleted. a -> a b: b inserted.
  auto first = scorer->add({"a", "b", "c"}, {"a", "x"});
  EXPECT_EQ(first, (nlohmann::json{{"reference_length", 3}, {"substitutions", 1},
                                   {"deletions", 1}, {"insertions", 0},
                                   {"error_rate", 2.0 / 3.0}}));
  auto second = scorer->add({"a"}, {"a", "b"});
  EXPECT_EQ(second["insertions"], 1);
  EXPECT_EQ(second["error_rate"], 1.0);
  // Over all: 3 errors over 4 reference labels, not the mean of the rates.
  EXPECT_EQ(scorer->summary(), (nlohmann::json{{"unit", "phone"}, {"utterances", 2},
                                               {"reference_length", 4}, {"substitutions", 1},
                                               {"deletions", 1}, {"insertions", 1},
                                               {"error_rate", 0.75}}));
  EXPECT_EQ(scorer->summary_line("greedy"),
            "PER (greedy decoding): 75.00 % over 4 phones of 2 utterances (substitutions 1, "
            "deletions 1, insertions 1)");
  auto words = task_section("scorer.cfg", "score_type = error_rate\nreferences = r\nunit = word");
  EXPECT_EQ(make_sequence_scorer(words.section("task_phones"))->summary_line("beam_search"),
            "WER (beam_search decoding): 0.00 % over 0 words of 0 utterances (substitutions 0, "
            "deletions 0, insertions 0)");
}

TEST(SequenceScorers, ScoreTypeAndKeysAreCheckedByTheScorersOwnOptions) {
  auto problems = [](const std::string& keys) {
    auto file = task_section("scorer.cfg", keys);
    auto found = check_sequence_scorer(file.section("task_phones"));
    // make_sequence_scorer throws where check finds a problem, with the first one's text.
    auto thrown = error_of([&] { make_sequence_scorer(file.section("task_phones")); });
    EXPECT_EQ(thrown.empty(), found.empty()) << thrown << "\n" << all(found);
    if (!found.empty()) {
      EXPECT_EQ(thrown, found[0]);
    }
    return found;
  };
  EXPECT_TRUE(problems("score_type = error_rate\nreferences = r\nunit = word").empty());
  auto found = problems("score_type = error_rate\nreferences = r\nunti = word");
  ASSERT_EQ(found.size(), 1u) << all(found);
  EXPECT_NE(found[0].find("did you mean 'unit'"), std::string::npos) << found[0];
  found = problems("score_type = error_rate");
  ASSERT_EQ(found.size(), 1u) << all(found);
  EXPECT_NE(found[0].find("[task_phones] references"), std::string::npos) << found[0];
  found = problems("score_type = sdr\nreferences = r");
  ASSERT_EQ(found.size(), 1u) << all(found);
  EXPECT_EQ(found[0], "scorer.cfg:2: [task_phones] score_type: unknown score_type 'sdr'; known: "
                      "error_rate (sdr scores separated signals, not label sequences)");
  found = problems("score_type = error_rate error_rate\nreferences = r");
  ASSERT_EQ(found.size(), 1u) << all(found);
  EXPECT_NE(found[0].find("takes one score_type"), std::string::npos) << found[0];
  found = problems("references = r");
  ASSERT_EQ(found.size(), 1u) << all(found);
  EXPECT_NE(found[0].find("score_type"), std::string::npos) << found[0];
}

TEST(RecognitionRegistries, NabuListAndTheDefaultsShowThemAndNabuCheckUsesTheirOptions) {
  // One score_type family with both kinds of scorer, and a decoder family.
  std::map<std::string, std::vector<std::string>> families;
  for (const auto& entry : catalog()) {
    EXPECT_EQ(families.count(entry.family), 0u) << entry.family << " listed twice";
    families[entry.family] = entry.names();
  }
  EXPECT_EQ(families["decoder"], (std::vector<std::string>{"beam_search", "greedy"}));
  EXPECT_EQ(families["score_type"],
            (std::vector<std::string>{"error_rate", "estoi", "pesq", "sdr", "sdr_snr",
                                      "si_sdr", "stoi"}));
  auto listed = nabu::testing::run_nabu("list --options decoder");
  EXPECT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find("beam_search  -  CTC prefix beam search"), std::string::npos)
      << listed.output;
  EXPECT_NE(listed.output.find("beam_width = 8"), std::string::npos) << listed.output;

  // The generated defaults: the recognition task's section, the required key left to fill.
  for (const auto& entry : catalog()) {
    if (entry.family == "decoder") {
      auto text = default_config_text(entry, "beam_search");
      EXPECT_NE(text.find("[task_phones]\ndecoder = beam_search\n"), std::string::npos) << text;
      EXPECT_NE(text.find("\nbeam_width = 8\n"), std::string::npos) << text;
      EXPECT_NE(text.find("\n# alphabet =\n"), std::string::npos) << text;
    }
    if (entry.family == "score_type") {
      auto text = default_config_text(entry, "error_rate");
      EXPECT_NE(text.find("[task_phones]\nscore_type = error_rate\n"), std::string::npos) << text;
      EXPECT_NE(text.find("\nunit = label\n"), std::string::npos) << text;
      EXPECT_NE(text.find("\n# references =\n"), std::string::npos) << text;
      EXPECT_NE(default_config_text(entry, "sdr").find("score_type = sdr"), std::string::npos);
    }
  }

  // nabu check on the shipped phone recipe, broken through --set: each decoder's and scorer's
  // own rules, with the file and line of the key.
  const auto recipe = nabu::testing::source_dir() / "recipes/ASR/toy_CTC_phones";
  auto report = check_recipe(recipe, {ConfigOverride::parse("decoder.cfg:task_phones:beam_width=0"),
                                      ConfigOverride::parse("scorer.cfg:task_phones:unti=word")});
  auto has = [&](const std::string& text) {
    return std::any_of(report.problems.begin(), report.problems.end(),
                       [&](const std::string& line) { return line.find(text) != std::string::npos; });
  };
  EXPECT_TRUE(has("[task_phones] beam_width: must be at least 1")) << all(report.problems);
  EXPECT_TRUE(has("unti")) << all(report.problems);
  report = check_recipe(recipe, {ConfigOverride::parse("decoder.cfg:task_phones:decoder=greedy"),
                                 ConfigOverride::parse("scorer.cfg:task_phones:score_type=si_sdr")});
  EXPECT_FALSE(has("beam_width")) << all(report.problems);
  EXPECT_TRUE(has("unknown score_type 'si_sdr'; known: error_rate")) << all(report.problems);
}

}  // namespace
