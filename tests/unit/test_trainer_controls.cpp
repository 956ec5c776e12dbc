// trainer.cfg controls: those that observe a run (profile_steps: a Chrome trace and a phase
// table; log_norms: per-model norms in metrics.jsonl, plotted by tools/plot_metrics), the update
// rule's controls (optimizer and its keys, weight_decay, freeze_parameters, gradient_multipliers,
// clip_grad_norm) on ParameterUpdate directly, and init_file through a whole run.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "nabu/core/config.h"
#include "nabu/neuralnetworks/models/model_bank.h"
#include "nabu/neuralnetworks/trainers/parameter_update.h"
#include "nabu/neuralnetworks/trainers/step_profile.h"
#include "nabu/neuralnetworks/trainers/trainer_options.h"
#include "test_helpers.h"
#include "training_fixture.h"

using namespace nabu;
using namespace nabu::testing;

namespace {

std::vector<nlohmann::json> train_records(const fs::path& metrics) {
  std::vector<nlohmann::json> records;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    auto record = nlohmann::json::parse(line);
    if (record["type"] == "train") records.push_back(record);
  }
  return records;
}

}  // namespace

TEST(StepProfile, ParsesARangeOfUpdates) {
  EXPECT_EQ(parse_profile_steps(""), (std::pair<int64_t, int64_t>{0, 0}));
  EXPECT_EQ(parse_profile_steps("3-7"), (std::pair<int64_t, int64_t>{3, 7}));
  EXPECT_EQ(parse_profile_steps("5"), (std::pair<int64_t, int64_t>{5, 5}));
  EXPECT_THROW(parse_profile_steps("7-3"), std::invalid_argument);
  EXPECT_THROW(parse_profile_steps("0-3"), std::invalid_argument);
  EXPECT_THROW(parse_profile_steps("a-b"), std::invalid_argument);
}

TEST_F(TrainingRun, ProfileStepsAndLogNorms) {
  auto result = train("exp_profile", "--max-steps=4 --set trainer.cfg:trainer:valid_frequency=2"
                                     " --set trainer.cfg:trainer:profile_steps=2-3"
                                     " --set trainer.cfg:trainer:log_norms=True");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const fs::path stage = dir_ / "exp_profile/100";
  // The trace: Chrome's traceEvents, with our phases among LibTorch's operators.
  auto trace = nlohmann::json::parse(read_text(stage / "profile/trace_2-3.json"));
  ASSERT_TRUE(trace["traceEvents"].is_array());
  std::set<std::string> names;
  for (const auto& event : trace["traceEvents"]) names.insert(event.value("name", ""));
  for (const std::string phase : {"nabu::forward", "nabu::backward", "nabu::optimizer"})
    EXPECT_TRUE(names.count(phase)) << phase;
  EXPECT_GT(names.size(), 10u);
  EXPECT_NE(result.output.find("profile of updates 2-3 (2 updates"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("backward"), std::string::npos);

  // Every update's phases and, with log_norms, the norms of both models.
  auto records = train_records(stage / "metrics.jsonl");
  ASSERT_EQ(records.size(), 4u);
  for (const auto& record : records) {
    ASSERT_TRUE(record.contains("phases")) << record.dump();
    EXPECT_GT(record["phases"]["forward"].get<double>(), 0.0);
    EXPECT_GT(record["phases"]["backward"].get<double>(), 0.0);
    for (const std::string model : {"main", "outlayer"}) {
      EXPECT_GT(record["norms"][model]["parameters"].get<double>(), 0.0) << model;
      EXPECT_GT(record["norms"][model]["gradients"].get<double>(), 0.0) << model;
    }
  }
  // Validation before update 3 (valid_frequency 2) is counted in that update's phases.
  EXPECT_GT(records[2]["phases"]["validation"].get<double>(), 0.0);
  EXPECT_EQ(records[1]["phases"]["validation"].get<double>(), 0.0);

  auto plotted = run_shell(source_dir().string() + "/tools/plot_metrics exp_profile --out curves.png",
                           dir_.path());
  EXPECT_EQ(plotted.exit_code, 0) << plotted.output;
  EXPECT_TRUE(fs::exists(dir_ / "curves.png"));

  auto bad = train("exp_profile_bad", "--set trainer.cfg:trainer:profile_steps=9-3");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("profile_steps: expected A-B"), std::string::npos) << bad.output;
}

// plot_metrics reads trainer.cfg as nabu does (docs/ini_semantics.md): a repeated key or section
// (the last value wins) and a UTF-8 byte order mark, where Python 3's strict parser stops.
TEST(PlotMetrics, ReadsATrainerCfgWithRepeatsAndAByteOrderMark) {
  TempDir dir;
  write_text(dir / "exp/trainer.cfg", "\xEF\xBB\xBF[trainer]\nsegment_lengths = full\n"
                                      "segment_lengths = 100 full ; the stages\n[trainer]\nx = 1\n");
  for (const std::string stage : {"100", "full"})
    write_text(dir / ("exp/" + stage + "/metrics.jsonl"),
               "{\"type\": \"train\", \"step\": 1, \"loss\": 2.0, \"lr\": 0.001}\n"
               "{\"type\": \"validation\", \"step\": 1, \"loss\": 1.5}\n");
  auto plotted =
      run_shell(source_dir().string() + "/tools/plot_metrics exp --out curves.png", dir.path());
  EXPECT_EQ(plotted.exit_code, 0) << plotted.output;
  EXPECT_TRUE(fs::exists(dir / "curves.png"));
}

// ---------------------------------------------------------------------------------------------
// The update rule (ParameterUpdate, docs/trainer.md "One update") on a tiny double-precision
// model: every control against the update written out one scalar at a time.

namespace {

using Named = std::vector<std::pair<std::string, torch::Tensor>>;

// [trainer] with `keys` added, read through TrainerOptions' own declare.
ConfigFile trainer_cfg(const std::string& keys) {
  return ConfigFile::parse("[trainer]\ntasks = task\n" + keys + "\n", "trainer.cfg");
}

// Three parameter tensors of two models, double precision.
Named tiny_model() {
  auto parameter = [](std::vector<double> values) {
    return torch::tensor(values, torch::kFloat64).requires_grad_(true);
  };
  return {{"main.weight", parameter({0.5, -1.25})},
          {"main.bias", parameter({2.0, 0.75, -0.5})},
          {"out.weight", parameter({-0.3})}};
}

std::vector<torch::Tensor> tensors_of(const Named& named) {
  std::vector<torch::Tensor> out;
  for (const auto& entry : named) out.push_back(entry.second);
  return out;
}

// All parameter values in order, as plain numbers.
std::vector<double> values_of(const std::vector<torch::Tensor>& parameters) {
  std::vector<double> values;
  for (const auto& parameter : parameters) {
    auto flat = parameter.detach().reshape({-1});
    for (int64_t i = 0; i < flat.size(0); ++i) values.push_back(flat[i].item<double>());
  }
  return values;
}

// The gradient of a fixed quadratic, so that it depends on where the parameters are:
// g_k = (1 + k mod 3) * w_k / 2 - (k + 1) / 5 over all values in order.
std::vector<double> quadratic_gradient(const std::vector<double>& w) {
  std::vector<double> g(w.size());
  for (std::size_t k = 0; k < w.size(); ++k) g[k] = (1.0 + k % 3) * w[k] / 2.0 - (k + 1.0) / 5.0;
  return g;
}

// `values` cut into tensors shaped like `parameters`.
std::vector<torch::Tensor> shaped_like(const std::vector<torch::Tensor>& parameters,
                                       const std::vector<double>& values) {
  std::vector<torch::Tensor> out;
  std::size_t offset = 0;
  for (const auto& parameter : parameters) {
    auto n = static_cast<std::size_t>(parameter.numel());
    std::vector<double> part(values.begin() + offset, values.begin() + offset + n);
    out.push_back(torch::tensor(part, torch::kFloat64).reshape(parameter.sizes()));
    offset += n;
  }
  return out;
}

// One update of one task whose accumulated gradient is `gradients` (copied: the update changes
// gradients in place) with loss norm `norm`.
void apply_once(ParameterUpdate& update, const std::vector<torch::Tensor>& gradients,
                double learning_rate, int64_t step, double norm = 1.0) {
  std::vector<torch::Tensor> copies;
  for (const auto& gradient : gradients) copies.push_back(gradient.clone());
  update.apply({{1.0, norm, &copies}}, learning_rate, step, "test");
}

// The optimizers' per-element rules as LibTorch 1.13 defines them (its torch::optim step()s, the
// same as PyTorch's): weight_decay adds wd*w to the gradient (L2) for adam, sgd and rmsprop; adamw
// instead multiplies w by 1 - lr*wd before the Adam step (decoupled). No amsgrad, no nesterov, no
// dampening, rmsprop not centred.
struct WrittenOutOptimizer {
  OptimizerOptions options;
  std::vector<double> first, second, buffer;  // adam m, v; rmsprop square average; momentum
  int steps = 0;

  void step(std::vector<double>& w, const std::vector<double>& gradient, double lr) {
    const std::size_t n = w.size();
    if (first.empty()) {
      first.assign(n, 0.0);
      second.assign(n, 0.0);
      buffer.assign(n, 0.0);
    }
    ++steps;
    const double wd = options.weight_decay;
    for (std::size_t k = 0; k < n; ++k) {
      double g = gradient[k];
      if (options.optimizer == "adam" || options.optimizer == "adamw") {
        if (options.optimizer == "adam") g += wd * w[k];
        else w[k] *= 1.0 - lr * wd;
        const double b1 = options.adam_beta1, b2 = options.adam_beta2;
        first[k] = b1 * first[k] + (1 - b1) * g;
        second[k] = b2 * second[k] + (1 - b2) * g * g;
        const double correction1 = 1 - std::pow(b1, steps), correction2 = 1 - std::pow(b2, steps);
        if (options.adam_epsilon_placement == "tensorflow")  // tf.train.AdamOptimizer's lr_t
          w[k] -= lr * std::sqrt(correction2) / correction1 * first[k] /
                  (std::sqrt(second[k]) + options.adam_epsilon);
        else
          w[k] -= lr / correction1 * first[k] /
                  (std::sqrt(second[k]) / std::sqrt(correction2) + options.adam_epsilon);
      } else if (options.optimizer == "sgd") {
        g += wd * w[k];
        if (options.momentum != 0) {
          buffer[k] = steps == 1 ? g : options.momentum * buffer[k] + g;
          g = buffer[k];
        }
        w[k] -= lr * g;
      } else if (options.optimizer == "rmsprop") {
        g += wd * w[k];
        const double alpha = options.rmsprop_decay;
        second[k] = alpha * second[k] + (1 - alpha) * g * g;
        const double scaled = g / (std::sqrt(second[k]) + options.rmsprop_epsilon);
        if (options.momentum > 0) {
          buffer[k] = options.momentum * buffer[k] + scaled;
          w[k] -= lr * buffer[k];
        } else {
          w[k] -= lr * scaled;
        }
      } else {
        ADD_FAILURE() << "no written-out rule for " << options.optimizer;
      }
    }
  }
};

void expect_close(const std::vector<double>& actual, const std::vector<double>& expected,
                  double tolerance, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (std::size_t k = 0; k < actual.size(); ++k)
    EXPECT_NEAR(actual[k], expected[k], tolerance * (1.0 + std::abs(expected[k])))
        << what << ", value " << k;
}

}  // namespace

TEST(ParameterUpdate, EachOptimizerMatchesItsWrittenOutUpdateWithWeightDecay) {
  // Three updates at three learning rates, the gradient recomputed where the parameters moved;
  // non-default hyperparameters, so a key that did not reach the optimizer would show.
  const std::vector<std::string> cases = {
      "optimizer = adam\nadam_beta1 = 0.8\nadam_beta2 = 0.95\nadam_epsilon = 1e-3",
      "optimizer = adam\nweight_decay = 0.3\nadam_beta1 = 0.8\nadam_beta2 = 0.95",
      "optimizer = adamw\nweight_decay = 0.3\nadam_beta1 = 0.8\nadam_beta2 = 0.95\n"
      "adam_epsilon = 1e-3",
      // epsilon as TensorFlow places it; large enough that the placement moves the result.
      "optimizer = adam\nadam_epsilon_placement = tensorflow\nadam_beta1 = 0.8\n"
      "adam_beta2 = 0.95\nadam_epsilon = 0.5",
      "optimizer = adam\nadam_epsilon_placement = tensorflow\nweight_decay = 0.3\n"
      "adam_epsilon = 1e-3",
      "optimizer = sgd",
      "optimizer = sgd\nweight_decay = 0.3",
      "optimizer = sgd\nmomentum = 0.7\nweight_decay = 0.3",
      "optimizer = rmsprop\nrmsprop_decay = 0.8\nrmsprop_epsilon = 1e-3",
      "optimizer = rmsprop\nmomentum = 0.6\nweight_decay = 0.3\nrmsprop_decay = 0.8\n"
      "rmsprop_epsilon = 1e-3",
  };
  const std::vector<double> learning_rates = {0.1, 0.05, 0.02};
  for (const auto& keys : cases) {
    SCOPED_TRACE(keys);
    auto cfg = trainer_cfg(keys);
    auto options = read_trainer_options(cfg).optimizer;
    auto named = tiny_model();
    auto parameters = tensors_of(named);
    ParameterUpdate update(options, ProfilingOptions{}, cfg.section("trainer"), learning_rates[0], named,
                           {{"task", 1.0, parameters}});
    WrittenOutOptimizer reference;
    reference.options = options;
    std::vector<double> expected = values_of(parameters);
    for (std::size_t step = 0; step < learning_rates.size(); ++step) {
      auto gradient = quadratic_gradient(values_of(parameters));
      // normalize_gradients: the accumulated gradient is divided by the task's loss norm (2).
      std::vector<double> accumulated;
      for (double g : gradient) accumulated.push_back(2.0 * g);
      apply_once(update, shaped_like(parameters, accumulated), learning_rates[step],
                 static_cast<int64_t>(step), 2.0);
      reference.step(expected, quadratic_gradient(expected), learning_rates[step]);
      expect_close(values_of(parameters), expected, 1e-12,
                   "after update " + std::to_string(step + 1));
    }
  }
  // L2 and decoupled decay differ: the same keys with adam and adamw end elsewhere.
  std::vector<double> ends[2];
  for (int k = 0; k < 2; ++k) {
    auto cfg = trainer_cfg(std::string("optimizer = ") + (k ? "adamw" : "adam") +
                           "\nweight_decay = 0.3");
    auto named = tiny_model();
    ParameterUpdate update(read_trainer_options(cfg).optimizer,
                           read_trainer_options(cfg).profiling,
                           cfg.section("trainer"), 0.1, named,
                           {{"task", 1.0, tensors_of(named)}});
    for (int step = 0; step < 3; ++step)
      apply_once(update, shaped_like(tensors_of(named), quadratic_gradient(values_of(tensors_of(named)))),
                 0.1, step);
    ends[k] = values_of(tensors_of(named));
  }
  EXPECT_GT(std::abs(ends[0][0] - ends[1][0]), 1e-4);
}

TEST(ParameterUpdate, AdamEpsilonPlacementMovesTheFirstUpdatesAndOnlyAdamTakesIt) {
  // The same three updates with epsilon where LibTorch adds it and where TensorFlow does: with
  // epsilon 0.5 the first steps differ visibly (TF's effective epsilon is 0.5 x sqrt(1 - 0.95^t)).
  std::vector<double> ends[2];
  for (int k = 0; k < 2; ++k) {
    auto cfg = trainer_cfg(std::string("adam_beta2 = 0.95\nadam_epsilon = 0.5\n") +
                           "adam_epsilon_placement = " + (k ? "tensorflow" : "libtorch"));
    auto named = tiny_model();
    ParameterUpdate update(read_trainer_options(cfg).optimizer, ProfilingOptions{},
                           cfg.section("trainer"), 0.1, named, {{"task", 1.0, tensors_of(named)}});
    for (int step = 0; step < 3; ++step)
      apply_once(update,
                 shaped_like(tensors_of(named), quadratic_gradient(values_of(tensors_of(named)))),
                 0.1, step);
    ends[k] = values_of(tensors_of(named));
  }
  EXPECT_GT(std::abs(ends[0][0] - ends[1][0]), 1e-3);
  for (const char* optimizer : {"adamw", "sgd", "rmsprop"}) {
    auto message = error_of([&] {
      read_trainer_options(trainer_cfg(std::string("optimizer = ") + optimizer +
                                       "\nadam_epsilon_placement = tensorflow"));
    });
    EXPECT_NE(message.find("adam_epsilon_placement: tensorflow applies only to optimizer = adam "
                           "(optimizer is " + std::string(optimizer) + ")"),
              std::string::npos)
        << message;
  }
  auto message =
      error_of([&] { read_trainer_options(trainer_cfg("adam_epsilon_placement = tf")); });
  EXPECT_NE(message.find("adam_epsilon_placement"), std::string::npos) << message;
}

TEST(TrainerKeys, AccStepsIsUpdatePerTaskAndValidatePerTaskEachAlsoOnItsOwn) {
  auto read = [](const std::string& keys) {
    return read_trainer_options(trainer_cfg(keys)).optimizer;
  };
  auto neither = read("");
  EXPECT_FALSE(neither.update_per_task);
  EXPECT_FALSE(neither.validate_per_task);
  auto both = read("acc_steps = True");
  EXPECT_TRUE(both.update_per_task);
  EXPECT_TRUE(both.validate_per_task);
  auto updates = read("update_per_task = True");
  EXPECT_TRUE(updates.update_per_task);
  EXPECT_FALSE(updates.validate_per_task);
  auto tracks = read("validate_per_task = True");
  EXPECT_FALSE(tracks.update_per_task);
  EXPECT_TRUE(tracks.validate_per_task);
  EXPECT_TRUE(read("acc_steps = True\nupdate_per_task = True").validate_per_task);
  // acc_steps = True with one half switched off is a contradiction, not silently one of them.
  auto message = error_of([&] { read("acc_steps = True\nvalidate_per_task = False"); });
  EXPECT_NE(message.find("validate_per_task: is False but acc_steps = True sets it"),
            std::string::npos)
      << message;
}

TEST(TrainerKeys, NumbatchesToAggregateZeroIsOneMinibatchPerUpdate) {
  auto options = read_trainer_options(ConfigFile::parse(
      "[trainer]\ntasks = task\nsegment_lengths = 100 full\nbatch_size = 4 2\n"
      "numbatches_to_aggregate = 0 3\ninitial_learning_rate = 1e-3 1e-3\n",
      "trainer.cfg"));
  EXPECT_EQ(options.stage(0).numbatches_to_aggregate, 1);
  EXPECT_EQ(options.stage(1).numbatches_to_aggregate, 3);
  // Said where a user looks: the key's help and docs/trainer.md.
  bool helped = false;
  for (const auto& doc : describe_options<TrainerOptions>())
    if (doc.key == "numbatches_to_aggregate")
      helped = doc.help.find("0 = 1, one minibatch per update") != std::string::npos;
  EXPECT_TRUE(helped);
  EXPECT_NE(read_text(fs::path(NABU_SOURCE_DIR) / "docs/trainer.md")
                .find("`numbatches_to_aggregate = 0` is one minibatch per update"),
            std::string::npos);
}

TEST_F(TrainingRun, ValidatePerTaskKeepsABestPerTaskAndUpdatePerTaskAloneDoesNot) {
  // val_sum.json holds each stage's best per task with validate_per_task (acc_steps' tracks),
  // one number without it, whatever the update does.
  const std::string common = "--max-steps=2 --set trainer.cfg:trainer:valid_frequency=1";
  auto tracks = train("exp_tracks", common + " --set trainer.cfg:trainer:validate_per_task=True");
  ASSERT_EQ(tracks.exit_code, 0) << tracks.output;
  auto updates = train("exp_updates", common + " --set trainer.cfg:trainer:update_per_task=True");
  ASSERT_EQ(updates.exit_code, 0) << updates.output;
  auto per_task = nlohmann::json::parse(read_text(dir_ / "exp_tracks/val_sum.json"));
  auto total = nlohmann::json::parse(read_text(dir_ / "exp_updates/val_sum.json"));
  for (const std::string stage : {"100", "full"}) {
    ASSERT_TRUE(per_task[stage].is_object()) << per_task.dump();
    EXPECT_TRUE(per_task[stage]["task_2spk"].is_number()) << per_task.dump();
    EXPECT_TRUE(total[stage].is_number()) << total.dump();
  }
}

TEST(ParameterUpdate, FrozenParametersStayBitIdenticalAndHaveNoOptimizerState) {
  // As the trainer builds it: the names freeze_parameters matches are taken out of the tasks'
  // parameters, and the update is given every bank parameter. Adam with weight decay moves
  // every parameter it holds, even one whose gradient is zero.
  auto cfg = trainer_cfg("optimizer = adam\nweight_decay = 0.5\nfreeze_parameters = ^main[.]b");
  auto options = read_trainer_options(cfg).optimizer;
  auto named = tiny_model();
  auto frozen = frozen_parameter_names(options, cfg.section("trainer"), named);
  ASSERT_EQ(frozen, std::vector<std::string>{"main.bias"});
  const auto before = named[1].second.detach().clone();
  std::vector<torch::Tensor> trained{named[0].second, named[2].second};
  ParameterUpdate update(options, ProfilingOptions{}, cfg.section("trainer"), 0.1, named,
                         {{"task", 1.0, trained}});
  const auto trained_before = values_of(trained);
  for (int step = 0; step < 3; ++step)
    apply_once(update, shaped_like(trained, quadratic_gradient(values_of(trained))), 0.1, step);

  EXPECT_TRUE(torch::equal(named[1].second, before));
  EXPECT_FALSE(named[1].second.grad().defined());
  auto after = values_of(trained);
  for (std::size_t k = 0; k < after.size(); ++k) EXPECT_NE(after[k], trained_before[k]) << k;
  // Only the trained tensors are in the optimizer, and only they have state.
  ASSERT_EQ(update.parameters().size(), 2u);
  auto optimizers = update.optimizers();
  ASSERT_EQ(optimizers.size(), 1u);
  std::size_t held = 0;
  for (const auto& group : optimizers[0]->param_groups())
    for (const auto& parameter : group.params()) {
      ++held;
      EXPECT_NE(parameter.unsafeGetTensorImpl(), named[1].second.unsafeGetTensorImpl());
    }
  EXPECT_EQ(held, 2u);
  EXPECT_EQ(optimizers[0]->state().size(), 2u);

  // A task that still lists a frozen parameter is an error, not a silent update; so is a
  // pattern that matches nothing.
  auto message = error_of([&] {
    ParameterUpdate(options, ProfilingOptions{}, cfg.section("trainer"), 0.1, named,
                    {{"task", 1.0, tensors_of(named)}});
  });
  EXPECT_NE(message.find("main.bias"), std::string::npos) << message;
  EXPECT_NE(message.find("frozen"), std::string::npos) << message;
  auto typo = trainer_cfg("freeze_parameters = ^mian");
  message = error_of([&] {
    frozen_parameter_names(read_trainer_options(typo).optimizer, typo.section("trainer"), named);
  });
  EXPECT_NE(message.find("freeze_parameters: '^mian' matches no parameter"), std::string::npos)
      << message;
}

TEST(ParameterUpdate, GradientMultipliersZeroFreezesAndTwoDoublesThePlainSgdStep) {
  const double lr = 0.1;
  const std::vector<double> gradient = {0.4, -0.6, 0.25, 0.5, -0.75, 0.3};
  auto run = [&](const std::string& keys) {
    auto cfg = trainer_cfg("optimizer = sgd\n" + keys);
    auto named = tiny_model();
    ParameterUpdate update(read_trainer_options(cfg).optimizer,
                           read_trainer_options(cfg).profiling,
                           cfg.section("trainer"), lr, named,
                           {{"task", 1.0, tensors_of(named)}});
    apply_once(update, shaped_like(tensors_of(named), gradient), lr, 0);
    return values_of(tensors_of(named));
  };
  const auto start = values_of(tensors_of(tiny_model()));
  // main.weight (values 0-1) x0, main.bias (2-4) x2, out.weight (5) untouched: x1.
  auto moved = run("gradient_multipliers = ^main[.]w:0 bias:2");
  for (std::size_t k = 0; k < 2; ++k) EXPECT_EQ(moved[k], start[k]) << k;
  for (std::size_t k = 2; k < 5; ++k) EXPECT_DOUBLE_EQ(moved[k], start[k] - lr * 2 * gradient[k]);
  EXPECT_DOUBLE_EQ(moved[5], start[5] - lr * gradient[5]);
  auto plain = run("");
  for (std::size_t k = 2; k < 5; ++k)
    EXPECT_NEAR(moved[k] - start[k], 2 * (plain[k] - start[k]), 1e-15) << k;

  // The first matching pair applies; the factor comes before the element-wise clipping
  // (0.6 x 2 = 1.2 is clipped to 1).
  moved = run("gradient_multipliers = ^main:3 bias:0\nclip_grad_value = 1");
  EXPECT_DOUBLE_EQ(moved[0], start[0] - lr * 1.0);   // 0.4 x 3 = 1.2 -> 1
  EXPECT_DOUBLE_EQ(moved[1], start[1] - lr * -1.0);  // -1.8 -> -1
  EXPECT_DOUBLE_EQ(moved[2], start[2] - lr * 0.75);  // ^main wins over bias:0
  EXPECT_DOUBLE_EQ(moved[5], start[5] - lr * 0.3);

  auto message = error_of([&] { run("gradient_multipliers = ^mian:2"); });
  EXPECT_NE(message.find("gradient_multipliers: '^mian' matches no parameter"), std::string::npos)
      << message;
}

TEST(ParameterUpdate, ElementWiseClippingClipsInfinitiesAndANaNStopsTheUpdate) {
  // clip_grad_value 1: the gradients' norms decide which are clamped, so each case sits on
  // one side of that: main.weight's norm (1.25) is above 1 with both elements below it, and
  // an infinity or a NaN makes a norm infinite or NaN.
  const double lr = 0.1;
  const double inf = std::numeric_limits<double>::infinity();
  auto run = [&](const std::vector<double>& gradient) {
    auto cfg = trainer_cfg("optimizer = sgd\nclip_grad_value = 1");
    auto named = tiny_model();
    ParameterUpdate update(read_trainer_options(cfg).optimizer, ProfilingOptions{}, cfg.section("trainer"), lr,
                           named, {{"task", 1.0, tensors_of(named)}});
    apply_once(update, shaped_like(tensors_of(named), gradient), lr, 4);
    return values_of(tensors_of(named));
  };
  const auto start = values_of(tensors_of(tiny_model()));
  auto moved = run({0.75, -1.0, 0.999, inf, -inf, -3.0});
  const std::vector<double> applied = {0.75, -1.0, 0.999, 1.0, -1.0, -1.0};
  for (std::size_t k = 0; k < start.size(); ++k)
    EXPECT_DOUBLE_EQ(moved[k], start[k] - lr * applied[k]) << k;
  auto message = error_of([&] { run({0.1, 0.2, std::nan(""), 0.3, 0.4, 0.5}); });
  EXPECT_NE(message.find("task task: a gradient is NaN or infinite at step 4; test"),
            std::string::npos)
      << message;
  message = error_of([&] { run({0.1, 0.2, 0.3, 0.4, 0.5, -std::nan("")}); });
  EXPECT_NE(message.find("a gradient is NaN or infinite"), std::string::npos) << message;
}

TEST(ParameterUpdate, GlobalNormClippingScalesTheSummedGradientToTheNorm) {
  // Two tasks without acc_steps: the step uses 2 x task A's gradient + task B's, and the global
  // norm of that sum is capped. Plain SGD with learning rate 1 makes the applied step visible.
  auto run = [](const std::string& keys, std::map<std::string, double>* norms) {
    auto cfg = trainer_cfg("optimizer = sgd\nlog_norms = True\n" + keys);
    auto named = tiny_model();
    std::vector<torch::Tensor> a_parameters{named[0].second, named[1].second};
    std::vector<torch::Tensor> b_parameters{named[1].second, named[2].second};
    ParameterUpdate update(read_trainer_options(cfg).optimizer,
                           read_trainer_options(cfg).profiling,
                           cfg.section("trainer"), 1.0, named,
                           {{"a", 2.0, a_parameters}, {"b", 1.0, b_parameters}});
    std::vector<torch::Tensor> a_gradients = {torch::tensor({1.5, -2.0}, torch::kFloat64),
                                              torch::tensor({1.0, 0.0, 0.5}, torch::kFloat64)};
    std::vector<torch::Tensor> b_gradients = {torch::tensor({-1.0, 3.0, 0.0}, torch::kFloat64),
                                              torch::tensor({4.0}, torch::kFloat64)};
    auto before = values_of(tensors_of(named));
    update.apply({{1.0, 1.0, &a_gradients}, {1.0, 1.0, &b_gradients}}, 1.0, 0, "test");
    if (norms) *norms = update.last_gradient_norms();
    auto after = values_of(tensors_of(named));
    std::vector<double> applied;
    for (std::size_t k = 0; k < after.size(); ++k) applied.push_back(before[k] - after[k]);
    return applied;
  };
  // The summed gradient, written out: main.weight 2*(1.5, -2); main.bias 2*(1, 0, 0.5) +
  // (-1, 3, 0); out.weight 4.
  const std::vector<double> sum = {3.0, -4.0, 1.0, 3.0, 1.0, 4.0};
  double squares = 0;
  for (double g : sum) squares += g * g;
  const double norm = std::sqrt(squares);  // sqrt(52)
  std::map<std::string, double> norms;

  expect_close(run("", nullptr), sum, 1e-15, "no clipping");
  expect_close(run("clip_grad_norm = 100", nullptr), sum, 1e-15, "norm below the cap");
  auto clipped = run("clip_grad_norm = 2", &norms);
  std::vector<double> expected;
  for (double g : sum) expected.push_back(g * 2.0 / norm);
  expect_close(clipped, expected, 1e-14, "clipped to norm 2");
  double applied_squares = 0;
  for (double g : clipped) applied_squares += g * g;
  EXPECT_NEAR(std::sqrt(applied_squares), 2.0, 1e-14);
  // log_norms reports the applied (clipped) gradient per model.
  EXPECT_NEAR(norms.at("main"), std::sqrt(3 * 3 + 4 * 4 + 1 + 3 * 3 + 1) * 2.0 / norm, 1e-14);
  EXPECT_NEAR(norms.at("out"), 4.0 * 2.0 / norm, 1e-14);
}

TEST(ParameterUpdate, WithAccStepsEachTaskGradientIsClippedToTheNormOnItsOwn) {
  // acc_steps, or update_per_task alone: one SGD step per task with learning rate x task weight;
  // each task's gradient is capped at clip_grad_norm before its step (docs/trainer.md).
  for (const char* key : {"acc_steps", "update_per_task"}) {
    SCOPED_TRACE(key);
    auto cfg = trainer_cfg(std::string("optimizer = sgd\n") + key + " = True\nclip_grad_norm = 1");
    auto named = tiny_model();
    std::vector<torch::Tensor> a_parameters{named[0].second};
    std::vector<torch::Tensor> b_parameters{named[2].second};
    ParameterUpdate update(read_trainer_options(cfg).optimizer,
                           read_trainer_options(cfg).profiling, cfg.section("trainer"), 0.5,
                           named, {{"a", 2.0, a_parameters}, {"b", 1.0, b_parameters}});
    std::vector<torch::Tensor> a_gradients = {torch::tensor({3.0, -4.0}, torch::kFloat64)};
    std::vector<torch::Tensor> b_gradients = {torch::tensor({0.5}, torch::kFloat64)};
    auto before = values_of(tensors_of(named));
    update.apply({{1.0, 1.0, &a_gradients}, {1.0, 1.0, &b_gradients}}, 0.5, 0, "test");
    auto after = values_of(tensors_of(named));
    // Task a: norm 5 -> (0.6, -0.8), learning rate 0.5 x 2. Task b: norm 0.5 < 1, unchanged.
    EXPECT_NEAR(after[0], before[0] - 1.0 * 0.6, 1e-15);
    EXPECT_NEAR(after[1], before[1] - 1.0 * -0.8, 1e-15);
    EXPECT_NEAR(after[5], before[5] - 0.5 * 0.5, 1e-15);
    for (std::size_t k = 2; k < 5; ++k) EXPECT_EQ(after[k], before[k]);
  }
}

TEST(ParameterUpdate, PerTensorNormClippingCapsEachTensorOnItsOwn) {
  // clip_grad_norm_per_tensor (seed 003's slim clip_gradient_norms): each tensor times
  // min(1, cap / its norm); the global norm would scale all three alike. Plain SGD, rate 1.
  auto cfg = trainer_cfg("optimizer = sgd\nclip_grad_norm = 2\nclip_grad_norm_per_tensor = True");
  auto named = tiny_model();
  ParameterUpdate update(read_trainer_options(cfg).optimizer, ProfilingOptions{},
                         cfg.section("trainer"), 1.0, named, {{"task", 1.0, tensors_of(named)}});
  const std::vector<double> gradient = {3.0, -4.0, 0.5, 1.0, -0.5, -7.0};
  auto before = values_of(tensors_of(named));
  apply_once(update, shaped_like(tensors_of(named), gradient), 1.0, 0);
  auto after = values_of(tensors_of(named));
  // main.weight: norm 5 -> x 2/5; main.bias: norm sqrt(1.5) < 2, unchanged; out.weight: 7 -> 2.
  const std::vector<double> applied = {1.2, -1.6, 0.5, 1.0, -0.5, -2.0};
  for (std::size_t k = 0; k < applied.size(); ++k)
    EXPECT_NEAR(before[k] - after[k], applied[k], 1e-14) << k;
}

TEST(TaskLossCombination, MeanDividesTheTaskWeightsByTheirSumEverywhere) {
  // Two tasks weighted 3 and 1: sum (the default, Nabu-MSSS) keeps the weights, mean (the older
  // trainer's unweighted mean over tasks when no weights are given) divides them by 4. The update
  // of plain SGD at rate 1 is the weighted sum of the task gradients, written out.
  auto read = [](const std::string& keys) {
    return read_trainer_options(ConfigFile::parse(
        "[trainer]\ntasks = a b\noptimizer = sgd\n" + keys + "\n", "trainer.cfg"));
  };
  auto sum = read("task_weights = 3 1");
  auto mean = read("task_weights = 3 1\ntask_loss_combination = mean");
  auto unweighted = read("task_loss_combination = mean");
  EXPECT_DOUBLE_EQ(sum.task_weight(0), 3.0);
  EXPECT_DOUBLE_EQ(sum.task_weight(1), 1.0);
  EXPECT_DOUBLE_EQ(mean.task_weight(0), 0.75);
  EXPECT_DOUBLE_EQ(mean.task_weight(1), 0.25);
  EXPECT_DOUBLE_EQ(unweighted.task_weight(0), 0.5);
  EXPECT_DOUBLE_EQ(unweighted.task_weight(1), 0.5);

  auto step = [](const TrainerOptions& options) {
    auto cfg = trainer_cfg("optimizer = sgd");
    auto named = tiny_model();
    std::vector<torch::Tensor> both{named[0].second};
    ParameterUpdate update(options.optimizer, ProfilingOptions{}, cfg.section("trainer"), 1.0,
                           named,
                           {{"a", options.task_weight(0), both}, {"b", options.task_weight(1), both}});
    std::vector<torch::Tensor> a = {torch::tensor({1.0, -2.0}, torch::kFloat64)};
    std::vector<torch::Tensor> b = {torch::tensor({4.0, 8.0}, torch::kFloat64)};
    auto before = values_of(tensors_of(named));
    update.apply({{1.0, 1.0, &a}, {1.0, 1.0, &b}}, 1.0, 0, "test");
    auto after = values_of(tensors_of(named));
    return std::vector<double>{before[0] - after[0], before[1] - after[1]};
  };
  auto summed = step(sum), averaged = step(mean);
  EXPECT_NEAR(summed[0], 3 * 1.0 + 4.0, 1e-15);
  EXPECT_NEAR(summed[1], 3 * -2.0 + 8.0, 1e-15);
  EXPECT_NEAR(averaged[0], (3 * 1.0 + 4.0) / 4, 1e-15);
  EXPECT_NEAR(averaged[1], (3 * -2.0 + 8.0) / 4, 1e-15);

  auto message = error_of([&] { read("task_loss_combination = average"); });
  EXPECT_NE(message.find("task_loss_combination"), std::string::npos) << message;
  EXPECT_NE(message.find("average"), std::string::npos) << message;
}

TEST_F(TrainingRun, ClipGradValuePerMinibatchClampsEachMinibatchBeforeTheSum) {
  // Two minibatches per update, unnormalised gradients clamped at 0.001: the original's older
  // trainer (seed 001) clamps each minibatch, so an element of the applied sum reaches 0.002 where
  // both minibatches exceed the bound with one sign; Nabu-MSSS clamps the sum, so nothing exceeds
  // 0.001. print_grads_stats logs the applied gradient's largest |element|.
  const std::string common =
      "--max-steps=1 --set trainer.cfg:trainer:valid_frequency=1000"
      " --set trainer.cfg:trainer:optimizer=sgd --set 'trainer.cfg:trainer:numbatches_to_aggregate=2 1'"
      " --set trainer.cfg:trainer:normalize_gradients=False"
      " --set trainer.cfg:trainer:clip_grad_value=0.001"
      " --set trainer.cfg:trainer:print_grads_stats=True"
      " --set trainer.cfg:trainer:print_var_updates=True";
  auto summed = train("exp_sum", common);
  ASSERT_EQ(summed.exit_code, 0) << summed.output;
  auto per_minibatch =
      train("exp_minibatch", common + " --set trainer.cfg:trainer:clip_grad_value_per_minibatch=True");
  ASSERT_EQ(per_minibatch.exit_code, 0) << per_minibatch.output;
  auto largest = [](const std::string& output) {
    auto at = output.find("update 1: |gradient| over ");
    EXPECT_NE(at, std::string::npos) << output;
    if (at == std::string::npos) return 0.0;
    auto max_at = output.find(" max ", at);
    return std::stod(output.substr(max_at + 5));
  };
  EXPECT_DOUBLE_EQ(largest(summed.output), 0.001);
  EXPECT_DOUBLE_EQ(largest(per_minibatch.output), 0.002);
  // print_var_updates: the original's mean |change| x 1e4, one line per tensor.
  EXPECT_NE(per_minibatch.output.find("update 1: mean |parameter change| x 1e4 over "),
            std::string::npos);
  EXPECT_NE(per_minibatch.output.find("  change x 1e4 main."), std::string::npos)
      << per_minibatch.output;
}

TEST(MultiTensorAdam, MatchesTorchAdamToTheBit) {
  // Four float parameters of several shapes, five steps of random gradients; the second
  // parameter has no gradient in step 2, so its step count (and bias corrections) fall behind
  // the others'. Then the state is saved and loaded into a torch::optim::Adam that continues.
  for (const auto& options :
       {torch::optim::AdamOptions(0.01).betas({0.8, 0.95}).eps(1e-3),
        torch::optim::AdamOptions(0.02).weight_decay(0.3),
        torch::optim::AdamOptions(0.02).weight_decay(0.1).amsgrad(true)}) {
    SCOPED_TRACE("weight_decay " + std::to_string(options.weight_decay()) +
                 (options.amsgrad() ? ", amsgrad" : ""));
    torch::manual_seed(3);
    std::vector<torch::Tensor> ours, theirs;
    for (auto shape : std::vector<std::vector<int64_t>>{{7}, {3, 5}, {2, 4, 3}, {1}}) {
      ours.push_back(torch::randn(shape).requires_grad_());
      theirs.push_back(ours.back().detach().clone().requires_grad_());
    }
    MultiTensorAdam multi_tensor(ours, options);
    torch::optim::Adam reference(theirs, options);
    auto step_both = [&](int step) {
      for (std::size_t i = 0; i < ours.size(); ++i) {
        auto gradient = torch::randn_like(ours[i]);
        bool skipped = step == 2 && i == 1;
        ours[i].mutable_grad() = skipped ? torch::Tensor() : gradient.clone();
        theirs[i].mutable_grad() = skipped ? torch::Tensor() : gradient.clone();
      }
      multi_tensor.step();
      reference.step();
    };
    for (int step = 1; step <= 5; ++step) {
      step_both(step);
      for (std::size_t i = 0; i < ours.size(); ++i)
        ASSERT_TRUE(torch::equal(ours[i], theirs[i]))
            << "parameter " << i << " after step " << step << ": max difference "
            << (ours[i] - theirs[i]).abs().max().item<double>();
    }
    std::stringstream saved;
    {
      torch::serialize::OutputArchive archive;
      multi_tensor.save(archive);
      archive.save_to(saved);
    }
    std::vector<torch::Tensor> resumed;
    for (const auto& parameter : ours) resumed.push_back(parameter.detach().clone().requires_grad_());
    torch::optim::Adam loaded(resumed, options);
    torch::serialize::InputArchive archive;
    archive.load_from(saved);
    loaded.load(archive);
    for (std::size_t i = 0; i < ours.size(); ++i) {
      auto gradient = torch::randn_like(ours[i]);
      ours[i].mutable_grad() = gradient.clone();
      resumed[i].mutable_grad() = gradient.clone();
    }
    multi_tensor.step();
    loaded.step();
    for (std::size_t i = 0; i < ours.size(); ++i)
      EXPECT_TRUE(torch::equal(ours[i], resumed[i])) << "parameter " << i << " after loading";
  }
}

TEST_F(TrainingRun, InitFileLoadsMatchingParametersReportsTheRestAndFrozenOnesStayAsLoaded) {
  // A first run's model, edited: one tensor set to a value no initialisation gives, one of
  // another shape, two names the bank lacks, one left out.
  auto first = train("exp_first", "--max-steps=1 --set trainer.cfg:trainer:valid_frequency=1000");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto model = read_parameter_file(dir_ / "exp_first/full/model/model.pt");
  ASSERT_GE(model.size(), 4u);
  std::vector<std::string> names;
  for (const auto& entry : model) names.push_back(entry.first);
  const std::string frozen = names[1], reshaped = names[2], dropped = names[3];
  model[frozen] = torch::full_like(model[frozen], 0.125);
  model[reshaped] = torch::zeros({1, 2, 3});
  model.erase(dropped);
  model["nosuchmodel.weight"] = torch::zeros({2});
  model["main.nosuch"] = torch::zeros({2});
  write_parameter_file(dir_ / "init.pt", model);

  auto run = train("exp_init", "--max-steps=2 --set trainer.cfg:trainer:valid_frequency=1000"
                               " --set trainer.cfg:trainer:init_file=" + (dir_ / "init.pt").string() +
                               " --set 'trainer.cfg:trainer:freeze_parameters=^" + frozen + "$'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string& log = run.output;
  const std::string counts = std::to_string(names.size() - 2) +
                             " parameter(s) loaded, 3 skipped, 1 not in the file";
  EXPECT_NE(log.find("initialised from " + (dir_ / "init.pt").string() + ": " + counts),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("skipped nosuchmodel.weight: no model 'nosuchmodel' in the bank"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("skipped main.nosuch: no such parameter"), std::string::npos) << log;
  EXPECT_NE(log.find("skipped " + reshaped + ": shape [1, 2, 3] in the file"), std::string::npos)
      << log;
  EXPECT_NE(log.find("not in the file: " + dropped), std::string::npos) << log;
  EXPECT_NE(log.find("frozen: 1 parameter tensor(s): " + frozen), std::string::npos) << log;
  // Only the first stage starts from init_file, but the parameter stays frozen in every stage:
  // it is the loaded value, bit for bit, in both stages' models; a trained one moved.
  for (const std::string stage : {"100", "full"}) {
    auto trained = read_parameter_file(dir_ / ("exp_init/" + stage + "/model/model.pt"));
    EXPECT_TRUE(torch::equal(trained.at(frozen), model.at(frozen))) << stage;
    EXPECT_FALSE(torch::equal(trained.at(names[0]), model.at(names[0]))) << stage;
  }
}
