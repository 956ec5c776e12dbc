// Models the original trained: tests/convert/make_tf_checkpoint.py writes, with TensorFlow, a
// checkpoint of a small BLSTM + linear model under the original's variable names (with the Adam
// slots, gradient accumulators and global_step its checkpoints hold) and that model's output
// computed by TensorFlow's LSTM kernel; tools/convert_tf_checkpoint converts the checkpoint; the
// models model.cfg builds load the result strictly (every parameter, nothing else) and compute
// TensorFlow's output. Both run with the test venv's python (tensorflow-cpu, h5py).
#include <gtest/gtest.h>

#include "nabu/core/config.h"
#include "nabu/core/error.h"
#include "nabu/neuralnetworks/models/model_bank.h"
#include "test_helpers.h"

namespace nabu {
namespace {

namespace fs = std::filesystem;
using testing::read_text;
using testing::run_shell;
using testing::TempDir;
using testing::write_text;

const char* kModelCfg =
    "[hyper]\nmodel_names = main outlayer\n\n"
    "[main]\narchitecture = dblstm\nnum_units = 6\nnum_layers = 2\ninput_noise = 0.2\n"
    "dropout = 1.0\nrecurrent_dropout = RECURRENT\nlayer_norm = False\n\n"
    "[outlayer]\narchitecture = linear\noutput_dims = 4\ninput_noise = 0\ndropout = 1.0\n";

std::string model_cfg(const std::string& recurrent_dropout) {
  std::string text = kModelCfg;
  text.replace(text.find("RECURRENT"), 9, recurrent_dropout);
  return text;
}

std::string python() { return NABU_TEST_VENV_PYTHON; }

testing::CommandResult convert(const fs::path& dir, const std::string& checkpoint,
                               const std::string& model_cfg, const std::string& out) {
  return run_shell("'" + python() + "' '" + std::string(NABU_SOURCE_DIR) +
                       "/tools/convert_tf_checkpoint' " + checkpoint + " --model-cfg=" +
                       model_cfg + " --out=" + out,
                   dir);
}

TEST(TfCheckpoint, ConvertedModelsComputeWhatTensorFlowComputes) {
  ASSERT_TRUE(fs::exists(python())) << python() << " is missing: ./run tests makes the test venv "
                                    << "from tests/requirements.txt";
  TempDir dir;
  auto made = run_shell("'" + python() + "' '" + std::string(NABU_SOURCE_DIR) +
                            "/tests/convert/make_tf_checkpoint.py' tf",
                        dir.path());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  auto reference = read_parameter_file(dir / "tf/reference.h5");
  const auto input = reference.at("input");
  const auto lengths = reference.at("lengths").to(torch::kLong);
  const auto expected = reference.at("output");
  // recurrent_dropout 1.0: LibTorch's fused LSTM layers (gates reordered, the forget bias in
  // bias_hh); 0.8: the cells that keep TensorFlow's layout (the dropout is off at inference).
  for (const std::string recurrent_dropout : {"1.0", "0.8"}) {
    SCOPED_TRACE("recurrent_dropout " + recurrent_dropout);
    const fs::path cfg = dir / ("model_" + recurrent_dropout + ".cfg");
    write_text(cfg, model_cfg(recurrent_dropout));
    const std::string out = "converted_" + recurrent_dropout + ".h5";
    auto converted = convert(dir.path(), "tf/model", cfg.string(), out);
    ASSERT_EQ(converted.exit_code, 0) << converted.output;
    EXPECT_NE(converted.output.find("from tf/model/network.ckpt-1200"), std::string::npos)
        << converted.output;
    ModelBank bank(ConfigFile::load(cfg));
    auto forward = [&] {
      torch::NoGradGuard no_grad;
      auto hidden = bank.at("main").run({input}, lengths, false);
      return bank.at("outlayer").run({hidden}, lengths, false);
    };
    forward();  // builds the parameters
    auto report = bank.load(dir / out, /*strict=*/true);
    EXPECT_TRUE(report.complete()) << report.summary();
    auto output = forward();
    ASSERT_EQ(output.sizes(), expected.sizes());
    const double difference = (output - expected).abs().max().item<double>();
    EXPECT_LT(difference, 1e-5) << "largest |nabu - tensorflow| " << difference;
    // The conversion is not the identity: a model that was not loaded computes something else.
    ModelBank fresh(ConfigFile::load(cfg));
    auto unloaded = fresh.at("outlayer").run({fresh.at("main").run({input}, lengths, false)},
                                             lengths, false);
    EXPECT_GT((unloaded - expected).abs().max().item<double>(), 1e-2);
  }

  // What cannot be converted is one line naming why, and nothing is written.
  auto refuse = [&](const std::string& cfg_text, const std::string& checkpoint,
                    const std::string& expected_message) {
    write_text(dir / "bad.cfg", cfg_text);
    auto result = convert(dir.path(), checkpoint, "bad.cfg", "bad.h5");
    EXPECT_EQ(result.exit_code, 1) << result.output;
    EXPECT_NE(result.output.find(expected_message), std::string::npos) << result.output;
    EXPECT_FALSE(fs::exists(dir / "bad.h5"));
  };
  std::string wider = model_cfg("1.0");
  wider.replace(wider.find("num_units = 6"), 13, "num_units = 8");
  refuse(wider, "tf/model",
         "main/layer0/bidirectional_rnn/fw/layer_norm_basic_lstm_cell/kernel: shape [11, 24], "
         "not [inputs + 8, 32] for num_units 8");
  std::string normed = model_cfg("1.0");
  normed.replace(normed.find("layer_norm = False"), 18, "layer_norm = True");
  refuse(normed, "tf/model", "model main: layer_norm = True is not converted");
  std::string other = model_cfg("1.0");
  other.replace(other.find("architecture = dblstm"), 21, "architecture = dbgru");
  refuse(other, "tf/model", "model main: architecture dbgru is not converted (dblstm and linear "
                            "are)");
  std::string renamed = model_cfg("1.0");
  renamed.replace(renamed.find("outlayer\n\n"), 8, "output");
  renamed.replace(renamed.find("[outlayer]"), 10, "[output]");
  refuse(renamed, "tf/model", "model output: no variable(s) matching output/.../weights");
  refuse(model_cfg("1.0"), "tf/nothing", "tf/nothing: no such checkpoint");
  refuse("[io]\ninputs = features\noutputs = emb\n\n[model]\narchitecture = dblstm\n", "tf/model",
         "the older single-model format ([io], [model])");

  // A file that only looks like HDF5 is refused where a model file is read.
  write_text(dir / "broken.h5", std::string("\x89HDF\r\n\x1a\n", 8) + "not really");
  try {
    read_parameter_file(dir / "broken.h5");
    ADD_FAILURE() << "a broken HDF5 file was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("broken.h5: not a readable HDF5 parameter file"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace nabu
