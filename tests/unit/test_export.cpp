// `nabu export` (export/model_export.h): the TorchScript of a time-domain model
// (conv_tasnet, dprnn) computes what the model computes, for every norm, mask activation and
// causality; a trained Conv-TasNet experiment exported and loaded with torch::jit::load
// separates as `nabu separate` does; what cannot be exported is refused in one line and leaves
// no file.
#include <gtest/gtest.h>
#include <torch/script.h>

#include <fstream>

#include "nabu/core/error.h"
#include "nabu/core/onnx.h"
#include "nabu/neuralnetworks/models/model.h"
#include "nabu/export/model_export.h"
#include "nabu/export/model_writers.h"
#include "nabu/processing/audio.h"
#include "test_helpers.h"
#include "test_model_helpers.h"
#include "training_fixture.h"

namespace nabu::testing {
namespace {

const char* kSmallConvTasNet =
    "architecture = conv_tasnet\nnum_speakers = 2\nkernel_size = 4\nencoder_filters = 8\n"
    "bottleneck_channels = 6\nhidden_channels = 10\nskip_channels = 5\nblocks_per_repeat = 3\n"
    "repeats = 2\n";

const char* kSmallDprnn =
    "architecture = dprnn\nnum_speakers = 3\nkernel_size = 4\nencoder_filters = 8\n"
    "bottleneck_channels = 6\nhidden_units = 5\nchunk_size = 4\nnum_blocks = 2\n";

// The scripted model of `body` against the model on unpadded batches of three at two lengths:
// time-domain models take the waveform [B, N] (the C++ model [B, N, 1]), the others frames
// [B, T, 7].
void expect_script_matches(const std::string& body, bool waveform = true) {
  SCOPED_TRACE(body);
  auto model = make_model_from(body);
  for (int64_t length : waveform ? std::vector<int64_t>{57, 200} : std::vector<int64_t>{1, 23}) {
    auto input = waveform ? torch::randn({3, length}) : torch::randn({3, length, 7});
    auto expected = model->run({waveform ? input.unsqueeze(2) : input},
                               torch::full({3}, length, torch::kLong), /*training=*/false);
    auto module = script_model(*model);
    torch::NoGradGuard no_grad;
    auto scripted = module.forward({input}).toTensor();
    ASSERT_EQ(scripted.sizes(), expected.sizes());
    EXPECT_TRUE(torch::allclose(scripted, expected, 1e-5, 1e-6))
        << (scripted - expected).abs().max().item<double>();
  }
}

void write_float32(const fs::path& path, const torch::Tensor& values) {
  auto floats = values.to(torch::kFloat32).contiguous();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(floats.data_ptr<float>()),
            static_cast<std::streamsize>(floats.numel() * sizeof(float)));
}

std::string convtasnet_recipe() {
  return (source_dir() / "recipes/SS/ConvTasNet/toy_ConvTasNet_2spk").string();
}

// A model of `recipe` (made small by `sets`) trained two updates on the fixture corpus in `dir`,
// exported to <expdir>.pt, loaded with torch::jit::load in C++ and with torch.jit.load in Python
// (tests/export/check_torchscript.py): its output for a test mixture is nabu separate's (one
// chunk) within 1e-4 of the output's RMS, and a batch of the mixture and half of it gives both.
// `recipe` (made small by `sets`, which its data preparation also gets) trained two updates on
// the fixture corpus into `expdir`.
void train_two_updates(const fs::path& dir, const std::string& recipe, const std::string& sets,
                       const std::string& expdir) {
  auto data = run_nabu(
      "data --recipe=" + recipe + " --expdir=" + expdir + "_data --threads=1 " + sets, dir);
  ASSERT_EQ(data.exit_code, 0) << data.output;
  auto trained = run_nabu("train --recipe=" + recipe + " --expdir=" + expdir +
                              " --threads=1 --max-steps=2,1 --set 'trainer.cfg:trainer:batch_size=4"
                              " 2' " + sets,
                          dir);
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
}

void expect_export_separates_as_nabu(const fs::path& dir, const std::string& recipe,
                                     const std::string& sets, const std::string& expdir) {
  train_two_updates(dir, recipe, sets, expdir);
  if (::testing::Test::HasFatalFailure()) return;
  const std::string file = expdir + ".pt";
  auto exported = run_nabu("export --expdir=" + expdir + " --out=" + file, dir);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const auto wav = dir / "data/corpus/2speakers/wav8k/min/tt/mix/tt_0.wav";
  auto separated = run_nabu("separate --expdir=" + expdir + " --threads=1 --chunk-seconds=0 --out=" +
                                expdir + "_sep '" + wav.string() + "'",
                            dir);
  ASSERT_EQ(separated.exit_code, 0) << separated.output;

  auto module = torch::jit::load((dir / file).string());
  EXPECT_EQ(module.attr("sample_rate").toInt(), 8000);
  EXPECT_EQ(module.attr("speakers").toInt(), 2);
  auto mixture = read_audio(wav.string()).samples.reshape({-1});  // int16 scale
  torch::NoGradGuard no_grad;
  auto output = module.forward({mixture.to(torch::kFloat32)}).toTensor();
  ASSERT_EQ(output.sizes(), (std::vector<int64_t>{1, 2, mixture.size(0)}));
  for (int s = 0; s < 2; ++s) {
    // nabu separate writes float files of int16-scale samples / 32768; read as stored.
    auto reference = read_audio((dir / (expdir + "_sep/tt_0_s" + std::to_string(s + 1) + ".wav"))
                                    .string())
                         .samples.reshape({-1}) * 32768.0;
    auto ours = output[0][s].to(torch::kFloat64);
    const double rms = reference.pow(2).mean().sqrt().item<double>();
    const double error = (ours - reference).abs().max().item<double>() / rms;
    EXPECT_LT(error, 1e-4) << "speaker " << s + 1;
    std::cout << expdir << " speaker " << s + 1
              << ": largest difference from nabu separate / RMS " << error << "\n";
  }
  write_float32(dir / (expdir + "_mixture.f32"), mixture);
  write_float32(dir / (expdir + "_expected.f32"), output[0]);
  auto python = run_shell("/usr/bin/python3 '" + source_dir().string() +
                              "/tests/export/check_torchscript.py' " + file + " " + expdir +
                              "_mixture.f32 " + expdir + "_expected.f32 2",
                          dir);
  EXPECT_EQ(python.exit_code, 0) << python.output;
  std::cout << python.output;
  // A batch separates each of its signals as alone (mask models' features are not scale-free).
  auto half = module.forward({(0.5 * mixture).to(torch::kFloat32)}).toTensor();
  auto batch = module.forward({torch::stack({mixture, 0.5 * mixture}).to(torch::kFloat32)})
                   .toTensor();
  EXPECT_TRUE(torch::allclose(batch[0], output[0], 1e-4, 1e-2));
  EXPECT_TRUE(torch::allclose(batch[1], half[0], 1e-4, 1e-2));
}

// `expdir` exported to ONNX: onnx.checker accepts the file and onnxruntime separates three test
// mixtures of different lengths as `nabu separate --chunk-seconds=0` does
// (tests/export/check_onnx.py, in the test venv).
void expect_onnx_separates_as_nabu(const fs::path& dir, const std::string& expdir) {
  const std::string python = NABU_TEST_VENV_PYTHON;
  ASSERT_TRUE(fs::exists(python)) << python << " is missing: ./run tests makes the test venv";
  auto exported =
      run_nabu("export --expdir=" + expdir + " --format=onnx --out=" + expdir + ".onnx", dir);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  std::string arguments;
  for (int utterance = 0; utterance < 3; ++utterance) {
    const std::string name = "tt_" + std::to_string(utterance);
    const auto wav = dir / ("data/corpus/2speakers/wav8k/min/tt/mix/" + name + ".wav");
    auto separated = run_nabu("separate --expdir=" + expdir + " --threads=1 --chunk-seconds=0 "
                              "--out=" + expdir + "_sep '" + wav.string() + "'",
                              dir);
    ASSERT_EQ(separated.exit_code, 0) << separated.output;
    std::vector<torch::Tensor> speakers;
    for (int s = 1; s <= 2; ++s)
      speakers.push_back(
          read_audio((dir / (expdir + "_sep/" + name + "_s" + std::to_string(s) + ".wav")).string())
              .samples.reshape({-1}) * 32768.0);
    write_float32(dir / (expdir + name + "_mixture.f32"),
                  read_audio(wav.string()).samples.reshape({-1}));
    write_float32(dir / (expdir + name + "_expected.f32"), torch::stack(speakers));
    arguments += " " + expdir + name + "_mixture.f32 " + expdir + name + "_expected.f32";
  }
  auto checked = run_shell(python + " '" + source_dir().string() +
                               "/tests/export/check_onnx.py' " + expdir + ".onnx 2" + arguments,
                           dir);
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
  std::cout << checked.output;
}

}  // namespace

TEST(ModelExport, TimeDomainScriptsComputeWhatTheModelsCompute) {
  torch::manual_seed(11);
  for (const std::string variant :
       {"norm = gLN\nmask_nonlinearity = relu\n", "norm = cLN\ncausal = True\n"
                                                   "mask_nonlinearity = sigmoid\n",
        "norm = chanLN\nmask_nonlinearity = softmax\n"})
    expect_script_matches(std::string(kSmallConvTasNet) + variant);
  // DPRNN: its BLSTMs run to each chunk's own length (the chunks at the edges are partly padding).
  for (const std::string variant :
       {"norm = gLN\n", "norm = chanLN\nmask_nonlinearity = sigmoid\n"})
    expect_script_matches(std::string(kSmallDprnn) + variant);
  auto leaky = make_model_from("architecture = leaky_dblstm\nnum_layers = 1\nnum_units = 4\n"
                                 "leak_factor = 0.9\n");
  leaky->run({torch::randn({1, 5, 3})}, torch::full({1}, 5, torch::kLong), false);
  try {
    script_model(*leaky);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("runs its own LSTM cells"), std::string::npos)
        << e.what();
  }
}

// The writers' registry: an architecture without a writer is refused in both formats with the
// list of those that have one, taken from the registry.
TEST(ModelWriters, AnArchitectureWithoutAWriterIsRefusedNamingThoseWithOne) {
  EXPECT_EQ(exportable_architectures(),
            (std::vector<std::string>{"conv_tasnet", "dbgru", "dblstm", "dbrnn", "dlstm", "dprnn",
                                      "linear", "tf_gridnet"}));
  auto feedforward = make_model_from("architecture = feedforward\nnum_layers = 1\nnum_units = 4\n");
  feedforward->run({torch::randn({1, 5, 3})}, torch::full({1}, 5, torch::kLong), false);
  const std::string listed = "(conv_tasnet, dbgru, dblstm, dbrnn, dlstm, dprnn, linear, tf_gridnet have)";
  try {
    model_torchscript(*feedforward);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("feedforward has no TorchScript export " + listed),
              std::string::npos) << e.what();
  }
  onnx::Graph graph;
  try {
    model_onnx(*feedforward, graph, "x");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("feedforward has no ONNX export " + listed),
              std::string::npos) << e.what();
  }
}

// The same networks as ONNX (export/model_writers.h) in onnxruntime (tests/export/check_onnx_models.py, the
// test venv): ONNX's LSTM/GRU/RNN with the gate blocks reordered, MatMul and the reshapes.
TEST(ModelExport, FrameModelsInOnnxRuntimeComputeWhatTheModelsCompute) {
  const std::string python = NABU_TEST_VENV_PYTHON;
  ASSERT_TRUE(fs::exists(python)) << python << " is missing: ./run tests makes the test venv";
  torch::manual_seed(13);
  TempDir dir;
  std::string manifest;
  const std::vector<std::string> bodies = {
      "architecture = dblstm\nnum_layers = 2\nnum_units = 6\n",
      "architecture = dlstm\nnum_layers = 2\nnum_units = 5\n",
      "architecture = dbgru\nnum_layers = 2\nnum_units = 4\n",
      "architecture = dbrnn\nnum_layers = 1\nnum_units = 4\n",
      "architecture = linear\noutput_dims = 5 2\nactivation_func = softmax\n",
      "architecture = linear\noutput_dims = 4\nactivation_func = tanh\nlast_only = True\n"};
  const auto sizes = [](const torch::Tensor& t) {
    std::string text;
    for (int64_t size : t.sizes()) text += (text.empty() ? "" : ",") + std::to_string(size);
    return text;
  };
  for (std::size_t k = 0; k < bodies.size(); ++k) {
    auto model = make_model_from(bodies[k]);
    auto input = torch::randn({3, 11, 7});
    auto expected = model->run({input}, torch::full({3}, 11, torch::kLong), false);
    onnx::Graph graph;
    graph.input("x", onnx::ElementType::kFloat, {{0, "batch"}, {0, "frames"}, {7, ""}});
    const std::string y = model_onnx(*model, graph, "x");
    ASSERT_FALSE(y.empty()) << bodies[k];
    std::vector<onnx::Dim> dims;
    for (int64_t d = 0; d < expected.dim(); ++d) dims.push_back({0, "d" + std::to_string(d)});
    graph.output(y, "y", onnx::ElementType::kFloat, dims);
    const std::string name = "m" + std::to_string(k);
    write_text(dir / (name + ".onnx"), graph.serialise("test", "nabu"));
    write_float32(dir / (name + "_x.f32"), input);
    write_float32(dir / (name + "_y.f32"), expected);
    manifest += name + ".onnx " + name + "_x.f32 " + sizes(input) + " " + name + "_y.f32 " +
                sizes(expected) + "\n";
  }
  write_text(dir / "manifest", manifest);
  auto checked = run_shell(python + " '" + source_dir().string() +
                               "/tests/export/check_onnx_models.py' manifest", dir.path());
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
  std::cout << checked.output;
  auto relu = make_model_from("architecture = dbrnn\nnum_layers = 1\nnum_units = 4\n"
                              "activation_fn = relu\n");
  relu->run({torch::randn({1, 5, 3})}, torch::full({1}, 5, torch::kLong), false);
  onnx::Graph graph;
  try {
    model_onnx(*relu, graph, "x");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("relu RNN"), std::string::npos) << e.what();
  }
}

// The mask models' networks: the fused recurrent stacks (both directions, several layers, the
// fused CPU LSTM against LibTorch's kernel) and the linear output layer's reshapes/activations.
TEST(ModelExport, RecurrentAndLinearScriptsComputeWhatTheModelsCompute) {
  torch::manual_seed(12);
  for (const std::string body :
       {"architecture = dblstm\nnum_layers = 2\nnum_units = 6\n",
        "architecture = dlstm\nnum_layers = 2\nnum_units = 5\n",
        "architecture = dbgru\nnum_layers = 2\nnum_units = 4\n",
        "architecture = dbrnn\nnum_layers = 1\nnum_units = 4\nactivation_fn = relu\n",
        "architecture = linear\noutput_dims = 10\n",
        "architecture = linear\noutput_dims = 5 2\nactivation_func = softmax\nno_bias = True\n",
        "architecture = linear\noutput_dims = 4\nactivation_func = sigmoid\nlast_only = True\n"})
    expect_script_matches(body, /*waveform=*/false);
}

// The toy Conv-TasNet, exported; bad requests are one line and leave no file.
TEST_F(TrainingRun, ExportedConvTasNetSeparatesAsNabuSeparate) {
  expect_export_separates_as_nabu(
      dir_.path(), convtasnet_recipe(),
      "--set model.cfg:main:encoder_filters=8 --set model.cfg:main:bottleneck_channels=6"
      " --set model.cfg:main:hidden_channels=8 --set model.cfg:main:skip_channels=6"
      " --set model.cfg:main:blocks_per_repeat=2 --set model.cfg:main:repeats=1",
      "exp_ctn");
  // A usage error (a required flag missing) exits with 2, a failure with 1.
  auto error_line = [&](const std::string& flags, int status = 1) {
    auto result = run_nabu("export " + flags, dir_.path());
    EXPECT_EQ(result.exit_code, status) << flags << "\n" << result.output;
    return result.output;
  };
  EXPECT_NE(error_line("--expdir=exp_ctn --out=x.pt --format=tflite").find("--format=tflite"),
            std::string::npos);
  EXPECT_NE(error_line("--expdir=exp_ctn --out=nofolder/x.pt").find("cannot write into"),
            std::string::npos);
  EXPECT_NE(error_line("--expdir=exp_none --out=x.pt").find("holds no trained experiment"),
            std::string::npos);
  EXPECT_NE(error_line("--expdir=exp_ctn", 2).find("--out"), std::string::npos);
  // A deep clustering experiment: its k-means is exported in neither format.
  auto dc = train("exp_dc", "--max-steps=1,1");
  ASSERT_EQ(dc.exit_code, 0) << dc.output;
  EXPECT_NE(error_line("--expdir=exp_dc --out=dc.pt").find("k-means"), std::string::npos);
  EXPECT_NE(error_line("--expdir=exp_dc --format=onnx --out=x.onnx").find("k-means"),
            std::string::npos);
  for (const char* name : {"x.onnx", "x.pt", "dc.pt"}) EXPECT_FALSE(fs::exists(dir_ / name));
  for (const auto& entry : fs::directory_iterator(dir_.path()))
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos)
        << entry.path();
}

// The PIT BLSTM (logspec features with the training's global mean and variance, two BLSTM
// layers, the linear mask layer, softmax masks, the inverse STFT), exported.
TEST_F(TrainingRun, ExportedMaskModelSeparatesAsNabuSeparate) {
  expect_export_separates_as_nabu(
      dir_.path(), (source_dir() / "recipes/SS/DBLSTM/toy_PIT_2spk").string(),
      "--set model.cfg:main:num_units=6", "exp_pit");
}

// The toy DPRNN, exported to TorchScript and ONNX (chunks of 50 frames: the test mixture's edges
// are partial chunks).
TEST_F(TrainingRun, ExportedDprnnSeparatesAsNabuSeparate) {
  expect_export_separates_as_nabu(
      dir_.path(),
      (source_dir() / "recipes/SS/DPRNN/toy_DPRNN_2spk").string(),
      "--set model.cfg:main:encoder_filters=8 --set model.cfg:main:bottleneck_channels=6"
      " --set model.cfg:main:hidden_units=5 --set model.cfg:main:num_blocks=2",
      "exp_dprnn");
  // And in ONNX: chunks gathered, LSTMs to each chunk's length, chunks overlap-added.
  expect_onnx_separates_as_nabu(dir_.path(), "exp_dprnn");
}

// The toy TF-GridNet exported to TorchScript and ONNX (STFT, unfolded BLSTMs, attention, inverse
// STFT; in ONNX the transforms as DFT products and the overlap-add as a transposed convolution).
TEST_F(TrainingRun, ExportedTfGridNetSeparatesAsNabuSeparate) {
  expect_export_separates_as_nabu(
      dir_.path(), (source_dir() / "recipes/SS/TFGridNet/toy_TFGridNet_2spk").string(),
      "--set trainer.cfg:trainer:dynamic_mixing=False --set trainer.cfg:trainer:dynamic_mixing_sources="
      " --set trainer.cfg:trainer:dynamic_mixing_utt2spk= --set trainer.cfg:trainer:dynamic_mixing_shares="
      " --set model.cfg:main:embedding_channels=4"
      " --set model.cfg:main:hidden_units=5 --set model.cfg:main:attention_heads=2"
      " --set 'test_evaluator.cfg:evaluator:tasks=task_2spk task_2spk_real'",
      "exp_tf_gridnet");
  ASSERT_FALSE(HasFatalFailure());
  expect_onnx_separates_as_nabu(dir_.path(), "exp_tf_gridnet");
}

// The toy Conv-TasNet (gLN) and its causal variant (cLN) exported to ONNX: onnx.checker accepts
// the files and onnxruntime separates three test mixtures of different lengths as
// `nabu separate --chunk-seconds=0` does (tests/export/check_onnx.py, in the test venv); DPRNN
// is refused in one line and leaves no file.
TEST_F(TrainingRun, ExportedOnnxSeparatesAsNabuSeparateInOnnxRuntime) {
  const std::string python = NABU_TEST_VENV_PYTHON;
  ASSERT_TRUE(fs::exists(python)) << python << " is missing: ./run tests makes the test venv";
  auto causal = train_small_causal_conv_tasnet("exp_onnx_causal");
  ASSERT_EQ(causal.exit_code, 0) << causal.output;
  auto global = train_small_causal_conv_tasnet(
      "exp_onnx_gln", 2, "--set model.cfg:main:causal=False --set model.cfg:main:norm=gLN");
  ASSERT_EQ(global.exit_code, 0) << global.output;
  for (const std::string expdir : {"exp_onnx_causal", "exp_onnx_gln"})
    expect_onnx_separates_as_nabu(dir_.path(), expdir);
}

// The PIT BLSTM (logspec, global MVN, two BLSTM layers, softmax masks) exported to ONNX whole:
// the STFT as DFT products, the LSTMs as ONNX's LSTM, the masks and the inverse STFT.
TEST_F(TrainingRun, ExportedMaskModelOnnxSeparatesAsNabuSeparateInOnnxRuntime) {
  train_two_updates(dir_.path(), (source_dir() / "recipes/SS/DBLSTM/toy_PIT_2spk").string(),
                    "--set model.cfg:main:num_units=6", "exp_onnx_pit");
  ASSERT_FALSE(HasFatalFailure());
  expect_onnx_separates_as_nabu(dir_.path(), "exp_onnx_pit");
}

}  // namespace nabu::testing
