// ModelBank and ModelGraph: construction from model.cfg and task sections, weight sharing by
// model name, ordering and reference errors, save/load, and the graph shapes the original's
// recipes use (docs/models.md), with our architectures at small sizes.
#include <gtest/gtest.h>

#include "nabu/core/error.h"
#include "nabu/neuralnetworks/models/model_bank.h"
#include "nabu/neuralnetworks/models/model_graph.h"
#include "test_helpers.h"
#include "test_model_helpers.h"

namespace nabu::testing {
namespace {

const char* kTwoTaskModels = R"([hyper]
model_names = main outlayer_2spk outlayer_3spk

[main]
architecture = dblstm
num_units = 4
num_layers = 1
input_noise = 0.2
dropout = 1.0
recurrent_dropout = 1.0
layer_norm = False

[outlayer_2spk]
architecture = linear
output_dims = 6
input_noise = 0
dropout = 1.0

[outlayer_3spk]
architecture = linear
output_dims = 9
input_noise = 0
dropout = 1.0
)";

std::string task_text(const std::string& head) {
  return "[task]\ninputs = features\noutputs = bin_emb\nnodes = n0 bin_emb\nn0_model = main\n"
         "n0_inputs = features\nbin_emb_model = " +
         head + "\nbin_emb_inputs = n0\nfeatures = trainspec\n";
}

struct Batch {
  TensorMap inputs;
  std::map<std::string, torch::Tensor> lengths;
};

Batch features_batch(int64_t dim = 3, std::vector<int64_t> lengths = {5, 3}) {
  Batch batch;
  batch.inputs["features"] = padded_batch(lengths, dim);
  batch.lengths["features"] = lengths_of(lengths);
  return batch;
}

TEST(ModelBank, BuildsEveryNamedModelAndReportsProblemsWithLocation) {
  auto config = ConfigFile::parse(kTwoTaskModels, "model.cfg");
  ModelBank bank(config);
  EXPECT_EQ(bank.names(), (std::vector<std::string>{"main", "outlayer_2spk", "outlayer_3spk"}));
  EXPECT_EQ(bank.at("main").architecture(), "dblstm");
  EXPECT_EQ(bank.unbuilt().size(), 3u);
  EXPECT_THROW(bank.get("mian"), Error);
  try {
    bank.get("mian");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'main'"), std::string::npos) << e.what();
  }

  auto typo = ConfigFile::parse("[hyper]\nmodel_names = main\n[main]\narchitecture = dbslstm\n",
                                "model.cfg");
  try {
    ModelBank bad(typo);
    FAIL();
  } catch (const ConfigError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("model.cfg:4"), std::string::npos) << message;
    EXPECT_NE(message.find("dblstm"), std::string::npos) << message;
  }
  auto missing = ConfigFile::parse("[hyper]\nmodel_names = main outlayer\n[main]\n"
                                   "architecture = linear\noutput_dims = 2\noutput_dim = 3\n",
                                   "model.cfg");
  EXPECT_THROW(ModelBank{missing}, ConfigError);
  auto problems = ModelBank::check(missing);
  ASSERT_EQ(problems.size(), 2u);  // the unknown key and the missing section, both reported
  EXPECT_NE(problems[0].find("output_dim"), std::string::npos) << problems[0];
  EXPECT_NE(problems[1].find("outlayer"), std::string::npos) << problems[1];
}

TEST(ModelGraph, SameNameSharesWeightsAcrossTasksDifferentNamesDoNot) {
  torch::manual_seed(41);
  auto models = ConfigFile::parse(kTwoTaskModels, "model.cfg");
  ModelBank bank(models);
  auto task2 = ConfigFile::parse(task_text("outlayer_2spk"), "trainer.cfg");
  auto task3 = ConfigFile::parse(task_text("outlayer_3spk"), "trainer.cfg");
  ModelGraph graph2(task2.section("task"), bank), graph3(task3.section("task"), bank);
  EXPECT_EQ(graph2.used_models(), (std::set<std::string>{"main", "outlayer_2spk"}));
  EXPECT_EQ(graph2.input_names(), (std::vector<std::string>{"features"}));
  EXPECT_EQ(graph2.output_names(), (std::vector<std::string>{"bin_emb"}));
  EXPECT_EQ(graph2.length_source("bin_emb"), "features");

  auto batch = features_batch();
  graph2.materialize(batch.inputs, batch.lengths);
  graph3.materialize(batch.inputs, batch.lengths);
  EXPECT_TRUE(bank.unbuilt().empty());
  auto out2 = graph2.forward(batch.inputs, batch.lengths, true).at("bin_emb");
  auto out3 = graph3.forward(batch.inputs, batch.lengths, true).at("bin_emb");
  EXPECT_EQ(out2.sizes(), (std::vector<int64_t>{2, 5, 6}));
  EXPECT_EQ(out3.sizes(), (std::vector<int64_t>{2, 5, 9}));

  // One parameter set for `main`: its gradient is the sum of both tasks' gradients.
  auto& main = bank.at("main");
  auto gradient_of = [&](const torch::Tensor& loss) {
    main.zero_grad();
    loss.backward();
    std::vector<torch::Tensor> grads;
    for (const auto& p : main.parameters()) grads.push_back(p.grad().clone());
    return grads;
  };
  torch::manual_seed(42);
  auto loss2 = graph2.forward(batch.inputs, batch.lengths, false).at("bin_emb").pow(2).sum();
  auto loss3 = graph3.forward(batch.inputs, batch.lengths, false).at("bin_emb").sum();
  auto g2 = gradient_of(loss2);
  loss2 = graph2.forward(batch.inputs, batch.lengths, false).at("bin_emb").pow(2).sum();
  auto g3 = gradient_of(loss3);
  auto both = gradient_of(loss2 + graph3.forward(batch.inputs, batch.lengths, false)
                                      .at("bin_emb")
                                      .sum());
  for (std::size_t i = 0; i < both.size(); ++i)
    EXPECT_LT(max_difference(both[i], g2[i] + g3[i]), 1e-5);

  // The heads are separate: a 3spk loss leaves the 2spk head without gradient.
  for (const auto& p : bank.parameters()) p.mutable_grad() = torch::Tensor();
  graph3.forward(batch.inputs, batch.lengths, false).at("bin_emb").sum().backward();
  for (const auto& p : bank.at("outlayer_2spk").parameters()) EXPECT_FALSE(p.grad().defined());
  for (const auto& p : bank.at("outlayer_3spk").parameters()) EXPECT_TRUE(p.grad().defined());
  auto shared = bank.parameters({"main"});
  auto params2 = graph2.parameters();
  EXPECT_EQ(params2.size(), shared.size() + 2);
  EXPECT_TRUE(params2[0].is_same(shared[0]));
}

TEST(ModelGraph, OneModelInTwoNodesIsOneParameterSet) {
  torch::manual_seed(43);
  auto models = ConfigFile::parse(
      "[hyper]\nmodel_names = main concat\n[main]\narchitecture = linear\noutput_dims = 2\n"
      "[concat]\narchitecture = concat\nexpand_dim_to_first_input = False False\n",
      "model.cfg");
  ModelBank bank(models);
  auto task = ConfigFile::parse(
      "[t]\ninputs = left right\noutputs = both\nnodes = a b both\na_model = main\n"
      "a_inputs = left\nb_model = main\nb_inputs = right\nboth_model = concat\n"
      "both_inputs = a b\n",
      "trainer.cfg");
  ModelGraph graph(task.section("t"), bank);
  TensorMap inputs{{"left", torch::randn({1, 2, 3})}, {"right", torch::randn({1, 2, 3})}};
  auto all = graph.forward_all(inputs, {}, false);
  auto p = parameters_by_name(bank.at("main"));
  EXPECT_LT(max_difference(all.at("a"), torch::matmul(inputs["left"], p["weights"]) + p["biases"]),
            1e-6);
  EXPECT_LT(max_difference(all.at("b"), torch::matmul(inputs["right"], p["weights"]) + p["biases"]),
            1e-6);
  EXPECT_EQ(graph.forward(inputs, {}, false).at("both").size(-1), 4);
  EXPECT_EQ(bank.parameters().size(), 2u);
}

TEST(ModelGraph, ReferenceErrorsNameTheKey) {
  auto models = ConfigFile::parse(kTwoTaskModels, "model.cfg");
  ModelBank bank(models);
  auto expect_error = [&](const std::string& text, const std::string& key,
                          const std::string& fragment) {
    auto task = ConfigFile::parse(text, "trainer.cfg");
    try {
      ModelGraph graph(task.section("task"), bank);
      ADD_FAILURE() << "expected an error for " << key;
    } catch (const ConfigError& e) {
      std::string message = e.what();
      EXPECT_NE(message.find("trainer.cfg:"), std::string::npos) << message;
      EXPECT_NE(message.find(key), std::string::npos) << message;
      EXPECT_NE(message.find(fragment), std::string::npos) << message;
    }
    auto problems = ModelGraph::check(task.section("task"), models);
    EXPECT_FALSE(problems.empty()) << key;
  };
  // A node that uses a later node.
  expect_error("[task]\ninputs = features\noutputs = bin_emb\nnodes = bin_emb n0\n"
               "n0_model = main\nn0_inputs = features\nbin_emb_model = outlayer_2spk\n"
               "bin_emb_inputs = n0\n",
               "bin_emb_inputs", "does not come before");
  expect_error(task_text("outlayer_2spkk"), "bin_emb_model", "did you mean 'outlayer_2spk'");
  expect_error("[task]\ninputs = features\noutputs = bin_emb\nnodes = n0 bin_emb\n"
               "n0_model = main\nn0_inputs = featurs\nbin_emb_model = outlayer_2spk\n"
               "bin_emb_inputs = n0\n",
               "n0_inputs", "did you mean 'features'");
  expect_error("[task]\ninputs = features\noutputs = emb\nnodes = n0\nn0_model = main\n"
               "n0_inputs = features\n",
               "outputs", "'emb'");
  expect_error("[task]\ninputs = features\noutputs = n0\nnodes = n0\nn0_inputs = features\n",
               "n0_model", "missing");
  expect_error("[task]\ninputs = features\noutputs = n0\nnodes = n0\nn0_model = main\n",
               "n0_inputs", "missing");

  // check() lists every problem at once, without building models.
  auto task = ConfigFile::parse(
      "[task]\ninputs = features\noutputs = x\nnodes = n0 n1\nn0_model = mian\n"
      "n0_inputs = n1\nn1_model = main\nn1_inputs = feat\n",
      "trainer.cfg");
  EXPECT_EQ(ModelGraph::check(task.section("task"), models).size(), 4u);
}

TEST(ModelGraph, OutputNamesAndLengthsOfTheFirstInput) {
  torch::manual_seed(44);
  auto models = ConfigFile::parse(
      "[hyper]\nmodel_names = main concat\n[main]\narchitecture = dblstm\nnum_units = 2\n"
      "[concat]\narchitecture = concat\n",
      "model.cfg");
  ModelBank bank(models);
  auto task = ConfigFile::parse(
      "[t]\ninputs = features ivecs\noutputs = emb\nnodes = joined n0\njoined_model = concat\n"
      "joined_inputs = features ivecs\nn0_model = main\nn0_inputs = joined\n"
      "n0_output_names = emb\n",
      "trainer.cfg");
  ModelGraph graph(task.section("t"), bank);
  EXPECT_EQ(graph.length_source("emb"), "features");
  TensorMap inputs{{"features", padded_batch({4, 2}, 3)}, {"ivecs", torch::randn({2, 5})}};
  std::map<std::string, torch::Tensor> lengths{{"features", lengths_of({4, 2})},
                                               {"ivecs", lengths_of({5, 5})}};
  auto out = graph.forward(inputs, lengths, false).at("emb");
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{2, 4, 4}));
  // The features' lengths reached the LSTM: the padded frames of utterance 1 are zero.
  EXPECT_EQ(out[1].narrow(0, 2, 2).abs().max().item<double>(), 0.0);
  EXPECT_THROW(graph.forward({{"features", inputs["features"]}}, lengths, false), Error);
}

TEST(ModelBank, SaveLoadRoundTripAndPartialLoadReport) {
  TempDir dir;
  torch::manual_seed(45);
  auto models = ConfigFile::parse(kTwoTaskModels, "model.cfg");
  auto task = ConfigFile::parse(task_text("outlayer_2spk"), "trainer.cfg");
  auto batch = features_batch();

  ModelBank bank(models);
  ModelGraph graph(task.section("task"), bank);
  EXPECT_THROW(bank.save(dir / "early.pt"), Error);  // not built yet
  graph.materialize(batch.inputs, batch.lengths);
  auto task3 = ConfigFile::parse(task_text("outlayer_3spk"), "trainer.cfg");
  ModelGraph(task3.section("task"), bank).materialize(batch.inputs, batch.lengths);
  bank.save(dir / "models.pt");
  auto expected = graph.forward(batch.inputs, batch.lengths, false).at("bin_emb");
  EXPECT_NE(bank.summary().find("main.layer0.weight_ih_l0 [16, 3]"), std::string::npos)
      << bank.summary();

  torch::manual_seed(46);  // different initial weights
  ModelBank copy(models);
  ModelGraph copy_graph(task.section("task"), copy);
  copy_graph.materialize(batch.inputs, batch.lengths);
  EXPECT_GT(max_difference(copy_graph.forward(batch.inputs, batch.lengths, false).at("bin_emb"),
                           expected),
            1e-3);
  auto report = copy.load(dir / "models.pt", false);
  EXPECT_TRUE(torch::equal(copy_graph.forward(batch.inputs, batch.lengths, false).at("bin_emb"),
                           expected));
  // outlayer_3spk was never built in the copy: its entries are skipped with that reason.
  ASSERT_EQ(report.skipped.size(), 2u);
  EXPECT_NE(report.skipped[0].second.find("not built"), std::string::npos);
  EXPECT_TRUE(report.missing.size() == 1u && report.missing[0].find("outlayer_3spk") == 0);

  // A bank whose head has another size: the BLSTM loads, the head is skipped by shape.
  std::string other_text = kTwoTaskModels;
  other_text.replace(other_text.find("output_dims = 6"), 15, "output_dims = 7");
  auto other_models = ConfigFile::parse(other_text, "model.cfg");
  ModelBank other(other_models);
  ModelGraph other_graph(task.section("task"), other);
  other_graph.materialize(batch.inputs, batch.lengths);
  ModelGraph(task3.section("task"), other).materialize(batch.inputs, batch.lengths);
  EXPECT_THROW(other.load(dir / "models.pt", true), Error);
  auto partial = other.load(dir / "models.pt", false);
  EXPECT_EQ(partial.loaded.size(), 8u + 2u);  // the BLSTM's 8 tensors and the 3spk head
  EXPECT_EQ(partial.skipped.size(), 2u);
  for (const auto& [name, reason] : partial.skipped) {
    EXPECT_EQ(name.rfind("outlayer_2spk.", 0), 0u) << name;
    EXPECT_NE(reason.find("shape"), std::string::npos) << reason;
  }
  for (const auto& [name, tensor] : other.named_parameters({"main"}))
    for (const auto& [saved_name, saved] : bank.named_parameters({"main"}))
      if (name == saved_name) {
        EXPECT_TRUE(torch::equal(tensor, saved)) << name;
      }

  write_text(dir / "garbage.pt", "not a tensor file");
  EXPECT_THROW(other.load(dir / "garbage.pt"), Error);
  EXPECT_THROW(other.load(dir / "absent.pt"), Error);
}

// The graph of every recipe family of docs/models.md that our architectures cover, at small sizes.
struct RecipeCase {
  std::string name, models, task;
  TensorMap inputs;
  std::vector<int64_t> expected;  // shape of the first output
};

TEST(ModelRecipes, EveryRecipeGraphBuildsWithOurArchitectures) {
  const int64_t batch = 2, frames = 6, bins = 5;
  auto features = [&] { return torch::randn({batch, frames, bins}); };
  const std::string lstm_keys =
      "num_units = 3\nnum_layers = 2\ninput_noise = 0.2\ndropout = 1.0\n"
      "recurrent_dropout = 1.0\nlayer_norm = False\n";
  const std::string emb = "[outlayer]\narchitecture = linear\noutput_dims = 10\ninput_noise = 0\n"
                          "dropout = 1.0\n";
  const std::string dc_task = "inputs = features\noutputs = bin_emb\nnodes = n0 bin_emb\n"
                              "n0_model = main\nn0_inputs = features\nbin_emb_model = outlayer\n"
                              "bin_emb_inputs = n0\n";
  std::vector<RecipeCase> cases;
  for (const std::string architecture :
       {"dblstm", "leaky_dblstm", "leaky_dblstm_notrec", "leaky_dblstm_iznotrec", "dbrnn"}) {
    std::string extra = architecture.rfind("leaky", 0) == 0 ? "leak_factor = 0.5\n" : "";
    cases.push_back({"DC " + architecture,
                     "[hyper]\nmodel_names = main outlayer\n[main]\narchitecture = " +
                         architecture + "\n" + lstm_keys + extra + emb,
                     dc_task, {{"features", features()}}, {batch, frames, 10}});
  }
  cases.push_back({"DC dbresetlstm",
                   "[hyper]\nmodel_names = main outlayer\n[main]\narchitecture = dbresetlstm\n"
                   "separate_directions = False\nt_reset = 5 12\ngroup_size = 1 3\n"
                   "forward_reset = True\nbackward_reset = True\n" + lstm_keys +
                       "[outlayer]\narchitecture = linear\noutput_dims = 10\nno_bias = True\n",
                   dc_task, {{"features", features()}}, {batch, frames, 10}});
  cases.push_back({"DNN",
                   "[hyper]\nmodel_names = main outlayer\n[main]\narchitecture = feedforward\n"
                   "num_units = 8\nnum_layers = 4\ninput_noise = 0.2\ndropout = 1.0\n"
                   "recurrent_dropout = 1.0\nlayer_norm = False\n" + emb,
                   dc_task, {{"features", features()}}, {batch, frames, 10}});
  cases.push_back({"ivector concat",
                   "[hyper]\nmodel_names = main outlayer concat\n[main]\narchitecture = dblstm\n" +
                       lstm_keys + emb +
                       "[concat]\narchitecture = concat\nexpand_dim_to_first_input = False True\n"
                       "input_noise = 0.2 0.2\n",
                   "inputs = features ivecs\noutputs = bin_emb\nnodes = n0 n1 bin_emb\n"
                   "n0_model = concat\nn0_inputs = features ivecs\nn1_model = main\n"
                   "n1_inputs = n0\nbin_emb_model = outlayer\nbin_emb_inputs = n1\n",
                   {{"features", features()}, {"ivecs", torch::randn({batch, 4})}},
                   {batch, frames, 10}});
  cases.push_back(
      {"ivector indicator",
       "[hyper]\nmodel_names = main outlayer concat zero_generator one_generator\n"
       "[main]\narchitecture = dblstm\n" + lstm_keys + emb +
           "[concat]\narchitecture = concat\nexpand_dim_to_first_input = False True True\n"
           "input_noise = 0.2 0.2 0.0\n[zero_generator]\narchitecture = constant_generator\n"
           "constant_value = 0.0\ntensor_shape = 4\ninclude_batch_size = True\n"
           "output_noise = 0.0\n[one_generator]\narchitecture = constant_generator\n"
           "constant_value = 1.0\ntensor_shape = 1\ninclude_batch_size = True\n"
           "output_noise = 0.0\n",
       "inputs = features\noutputs = bin_emb\nnodes = zero_vec one_scalar n0 n1 bin_emb\n"
       "zero_vec_model = zero_generator\nzero_vec_inputs = features\n"
       "one_scalar_model = one_generator\none_scalar_inputs = features\nn0_model = concat\n"
       "n0_inputs = features zero_vec one_scalar\nn1_model = main\nn1_inputs = n0\n"
       "bin_emb_model = outlayer\nbin_emb_inputs = n1\n",
       {{"features", features()}}, {batch, frames, 10}});
  cases.push_back(
      {"reset LSTM with the i-vector after layer 1",
       "[hyper]\nmodel_names = main outlayer\n[main]\n"
       "architecture = dbresetlstm_insert_additional_input\ncombine_layer = 2\nt_reset = 4\n"
       "group_size = 1\nsymmetric_context = True\n" + lstm_keys + emb,
       "inputs = features ivecs\noutputs = bin_emb\nnodes = n0 bin_emb\nn0_model = main\n"
       "n0_inputs = features ivecs\nbin_emb_model = outlayer\nbin_emb_inputs = n0\n",
       {{"features", features()}, {"ivecs", torch::randn({batch, 4})}}, {batch, frames, 10}});
  cases.push_back(
      {"full then reset",
       "[hyper]\nmodel_names = main_lstm reset_lstm outlayer\n[main_lstm]\n"
       "architecture = dblstm\nnum_units = 3\nnum_layers = 1\n[reset_lstm]\n"
       "architecture = dbresetlstm\nnum_units = 3\nt_reset = 5\nnum_layers = 1\n" + emb,
       "inputs = features\noutputs = bin_emb\nnodes = n0 n1 bin_emb\nn0_model = main_lstm\n"
       "n0_inputs = features\nn1_model = reset_lstm\nn1_inputs = n0\nbin_emb_model = outlayer\n"
       "bin_emb_inputs = n1\n",
       {{"features", features()}}, {batch, frames, 10}});
  cases.push_back(
      {"DCNN",
       "[hyper]\nmodel_names = main feedforward outlayer\n[main]\n"
       "architecture = encoder_decoder_cnn\nnum_filters_1st_layer = 3\nfilters = 3 3\n"
       "num_encoder_layers = 3\nnum_centre_layers = 2\nf_pool_rate = 1\nt_pool_rate = 2\n"
       "activation_fn = relu\ninput_noise = 0.2\ndropout = 1.0\nlayer_norm = False\n"
       "[feedforward]\narchitecture = feedforward\nnum_units = 6\nnum_layers = 1\n"
       "activation_func = relu\ninput_noise = 0\ndropout = 1.0\n[outlayer]\n"
       "architecture = linear\noutput_dims = 4\ninput_noise = 0\ndropout = 1.0\n",
       "inputs = features\noutputs = bin_emb\nnodes = n0 n1 bin_emb\nn0_model = main\n"
       "n0_inputs = features\nn1_model = feedforward\nn1_inputs = n0\n"
       "bin_emb_model = outlayer\nbin_emb_inputs = n1\n",
       {{"features", features()}}, {batch, frames, bins, 4}});
  cases.push_back(
      {"CNN and LSTM",
       "[hyper]\nmodel_names = main aux_lstm concat feedforward outlayer\n[main]\n"
       "architecture = encoder_decoder_cnn\nbypass = unpool\nnum_filters_1st_layer = 3\n"
       "num_output_filters = 3\nfac_per_layer = 1.0\nfilter_size_t = 4\n"
       "filter_size_t_fac_after_pool = 0.8\nfilter_size_f = 3\n"
       "filter_size_f_fac_after_pool = 0.8\nnum_encoder_layers = 2\nnum_centre_layers = 0\n"
       "f_pool_rate = 1\nt_pool_rate = 3\nactivation_fn = relu\ninput_noise = 0.2\n"
       "dropout = 1.0\nlayer_norm = False\n[aux_lstm]\narchitecture = dblstm\nnum_units = 3\n"
       "fac_per_layer = 1.0\nnum_layers = 4\ninput_noise = 0.2\ndropout = 1.0\n"
       "recurrent_dropout = 1.0\nlayer_norm = False\nactivation_fn = tanh\n[concat]\n"
       "architecture = concat\nselect_inputs = True True\nflatten_last_2_dims = False False\n"
       "expand_dim_to_first_input = False True\n[feedforward]\narchitecture = feedforward\n"
       "num_units = 6\nfac_per_layer = 1.0\nnum_layers = 3\nactivation_func = relu\n"
       "input_noise = 0\ndropout = 1.0\n[outlayer]\narchitecture = linear\noutput_dims = 4\n"
       "input_noise = 0\ndropout = 1.0\n",
       "inputs = features\noutputs = bin_emb\nnodes = n0 n1 n2 n3 bin_emb\nn0_model = main\n"
       "n0_inputs = features\nn1_model = aux_lstm\nn1_inputs = features\nn2_model = concat\n"
       "n2_inputs = n0 n1\nn3_model = feedforward\nn3_inputs = n2\nbin_emb_model = outlayer\n"
       "bin_emb_inputs = n3\n",
       {{"features", features()}}, {batch, frames, bins, 4}});
  cases.push_back(
      {"binaural enhancement (two ears, shared BLSTM, masks concatenated)",
       "[hyper]\nmodel_names = main outlayer concat\n[main]\narchitecture = dblstm\n" +
           lstm_keys +
           "[outlayer]\narchitecture = linear\noutput_dims = 10\n[concat]\n"
           "architecture = concat\nexpand_dim_to_first_input = False False\n",
       "inputs = left right\noutputs = masks\nnodes = both1 both2 main1 main2 out1 out2 masks\n"
       "both1_model = concat\nboth1_inputs = left right\nboth2_model = concat\n"
       "both2_inputs = right left\nmain1_model = main\nmain1_inputs = both1\n"
       "main2_model = main\nmain2_inputs = both2\nout1_model = outlayer\nout1_inputs = main1\n"
       "out2_model = outlayer\nout2_inputs = main2\nmasks_model = concat\n"
       "masks_inputs = out1 out2\n",
       {{"left", features()}, {"right", features()}}, {batch, frames, 20}});

  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    torch::manual_seed(47);
    auto models = ConfigFile::parse(c.models, "model.cfg");
    auto task = ConfigFile::parse("[task]\n" + c.task, "trainer.cfg");
    ASSERT_TRUE(ModelBank::check(models).empty()) << ModelBank::check(models).front();
    ASSERT_TRUE(ModelGraph::check(task.section("task"), models).empty());
    ModelBank bank(models);
    ModelGraph graph(task.section("task"), bank);
    std::map<std::string, torch::Tensor> lengths;
    for (const auto& [name, tensor] : c.inputs)
      if (tensor.dim() >= 3) lengths[name] = lengths_of({frames, frames - 2});
    auto outputs = graph.forward(c.inputs, lengths, true);
    auto output = outputs.at(graph.output_names()[0]);
    EXPECT_EQ(output.sizes(), c.expected);
    output.sum().backward();
    for (const auto& parameter : graph.parameters())
      EXPECT_TRUE(parameter.grad().defined());
  }
}

}  // namespace
}  // namespace nabu::testing
