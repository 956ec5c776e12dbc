// nabu check is what runs (issue 53): for the shipped DC recipe and 50 mutated copies of it (one
// to three keys of trainer.cfg, model.cfg, the evaluators, the reconstructor and the scorer
// changed to values a user might write, sensible or not), a copy that nabu check passes must
// train, test and separate; a copy it fails must fail with its one-line problems, not a crash.
// The mutants are drawn from a fixed seed; each test runs ten of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "test_helpers.h"
#include "training_fixture.h"

using namespace nabu;
using namespace nabu::testing;

namespace {

struct Mutation {
  std::string key;  // file:section:key, as --set takes it
  std::vector<std::string> values;
};

// What a user might write, sensible or not, per key.
const std::vector<Mutation>& mutations() {
  static const std::vector<Mutation> all = {
      {"trainer.cfg:trainer:batch_size", {"1 1", "3 2", "64 64", "0 1", "4"}},
      {"trainer.cfg:trainer:numbatches_to_aggregate", {"2 1", "0 1", "3 3"}},
      {"trainer.cfg:trainer:segment_lengths", {"full", "50 full", "100", "200 full"}},
      {"trainer.cfg:trainer:initial_learning_rate", {"1e-2 1e-3", "0 0", "-1 1"}},
      {"trainer.cfg:trainer:valid_frequency", {"1", "0", "-5"}},
      {"trainer.cfg:trainer:num_epochs", {"1", "0"}},
      {"trainer.cfg:trainer:numbuckets", {"2", "0", "100"}},
      {"trainer.cfg:trainer:optimizer", {"sgd", "rmsprop", "adamw", "adagrad"}},
      {"trainer.cfg:trainer:clip_grad_norm", {"1", "-1"}},
      {"trainer.cfg:trainer:acc_steps", {"True"}},
      {"trainer.cfg:trainer:task_loss_combination", {"mean", "median"}},
      {"trainer.cfg:trainer:clip_grad_value_per_minibatch", {"True"}},
      {"trainer.cfg:trainer:lr_schedule", {"cosine", "noam", "linear"}},
      {"trainer.cfg:trainer:warmup_steps", {"2"}},
      {"trainer.cfg:trainer:go_back", {"True"}},
      {"trainer.cfg:trainer:valid_adapt", {"True"}},
      {"trainer.cfg:trainer:num_tries", {"0", "None", "x"}},
      {"trainer.cfg:trainer:average_checkpoints", {"2"}},
      {"trainer.cfg:trainer:shuffle", {"False"}},
      {"trainer.cfg:trainer:precision", {"bf16", "fp16"}},
      {"model.cfg:main:num_units", {"1", "0", "16"}},
      {"model.cfg:main:num_layers", {"0", "3"}},
      {"model.cfg:main:architecture", {"dlstm", "dblstmx", "dnn"}},
      {"model.cfg:main:dropout", {"0.5", "1.5"}},
      {"model.cfg:main:input_noise", {"0.1"}},
      {"model.cfg:main:layer_norm", {"True"}},
      {"model.cfg:outlayer:output_dims", {"100", "1290"}},
      {"validation_evaluator.cfg:evaluator:batch_size", {"1", "1000", "0"}},
      {"validation_evaluator.cfg:evaluator:requested_utts", {"1", "0"}},
      {"validation_evaluator.cfg:task_2spk:validation_metric", {"si_sdr", "sdr", "mos"}},
      {"test_evaluator.cfg:task_2spk:batch_size", {"1", "1000"}},
      {"reconstructor.cfg:task_2spk:reconstruct_type", {"deepattractornet", "pit"}},
      {"reconstructor.cfg:task_2spk:nrs", {"3", "1"}},
      {"scorer.cfg:task_2spk:score_type", {"sdr", "si_sdr", "sdr si_sdr", "mos"}},
  };
  return all;
}

// Mutant `index`: one to three different keys, each with one of its values.
std::vector<std::string> mutant(int index) {
  std::mt19937 random(1000 + index);
  const auto& all = mutations();
  std::vector<std::string> sets;
  std::vector<std::size_t> chosen;
  const int count = 1 + static_cast<int>(random() % 3);
  while (static_cast<int>(chosen.size()) < count) {
    std::size_t which = random() % all.size();
    if (std::find(chosen.begin(), chosen.end(), which) != chosen.end()) continue;
    chosen.push_back(which);
    const auto& values = all[which].values;
    sets.push_back(all[which].key + "=" + values[random() % values.size()]);
  }
  return sets;
}

class RecipeMutants : public TrainingRun {
 protected:
  void check_mutants(int first, int last) {
    const std::string test_sets = " --set test_evaluator.cfg:task_2spk:batch_size=2"
                                  " --set test_evaluator.cfg:task_2spk_real:batch_size=2";
    int passed_check = 0;
    for (int index = first; index < last; ++index) {
      std::string sets;
      for (const auto& set : mutant(index)) sets += " --set '" + set + "'";
      SCOPED_TRACE("mutant " + std::to_string(index) + ":" + sets);
      // test_evaluator's batch sizes first: a mutant's own value of one of them wins.
      const std::string flags = test_sets + sets;
      // check takes the recipe and the overrides train takes (not --deterministic).
      std::string check_flags = tiny_dc(flags);
      check_flags.erase(check_flags.find(" --deterministic"), 16);
      auto checked = run_nabu("check " + check_flags, dir_.path());
      if (checked.exit_code != 0) {
        EXPECT_EQ(checked.exit_code, 1) << checked.output;
        EXPECT_EQ(checked.output.find("terminate called"), std::string::npos) << checked.output;
        EXPECT_NE(checked.output.find("problem: "), std::string::npos) << checked.output;
        continue;
      }
      ++passed_check;
      const std::string expdir = "exp_mutant" + std::to_string(index);
      auto trained = run_nabu("train --expdir=" + expdir + " --max-steps=3 " + tiny_dc(flags),
                              dir_.path());
      ASSERT_EQ(trained.exit_code, 0) << "nabu check passed, nabu train failed:\n"
                                      << trained.output;
      auto tested = run_nabu("test --expdir=" + expdir + " --threads=1", dir_.path());
      ASSERT_EQ(tested.exit_code, 0) << "nabu check passed, nabu test failed:\n" << tested.output;
      auto separated = run_nabu("separate --expdir=" + expdir + " --out=" + expdir +
                                    "/separated --threads=1"
                                    " data/corpus/2speakers/wav8k/min/tt/mix/tt_0.wav",
                                dir_.path());
      ASSERT_EQ(separated.exit_code, 0) << "nabu check passed, nabu separate failed:\n"
                                        << separated.output;
    }
    // Both sides of the property are exercised in every ten (with this seed 5, 8, 5, 6 and 3
    // of them pass nabu check).
    RecordProperty("passed_check", passed_check);
    EXPECT_GT(passed_check, 0);
    EXPECT_LT(passed_check, last - first);
  }
};

}  // namespace

TEST_F(RecipeMutants, Mutants0To9CheckOkMeansTheyTrainTestAndSeparate) { check_mutants(0, 10); }
TEST_F(RecipeMutants, Mutants10To19CheckOkMeansTheyTrainTestAndSeparate) { check_mutants(10, 20); }
TEST_F(RecipeMutants, Mutants20To29CheckOkMeansTheyTrainTestAndSeparate) { check_mutants(20, 30); }
TEST_F(RecipeMutants, Mutants30To39CheckOkMeansTheyTrainTestAndSeparate) { check_mutants(30, 40); }
TEST_F(RecipeMutants, Mutants40To49CheckOkMeansTheyTrainTestAndSeparate) { check_mutants(40, 50); }

TEST(RecipeMutantsDraw, FiftyMutantsCoverBothSidesAndManyKeys) {
  // The draw is fixed: the same fifty every run, with most keys of the catalogue among them.
  std::set<std::string> keys;
  for (int index = 0; index < 50; ++index)
    for (const auto& set : mutant(index)) keys.insert(set.substr(0, set.find('=')));
  EXPECT_GE(keys.size(), mutations().size() * 3 / 4);
  EXPECT_EQ(mutant(7), mutant(7));
}
