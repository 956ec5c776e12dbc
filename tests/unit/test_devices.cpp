// Devices and mixed precision (docs/devices.md): device names, one clear line for a GPU that is
// not there, bf16 autocast and fp16's loss scale. The Cuda* tests (CTest label `cuda`) train on a
// GPU against the CPU; where LibTorch sees no GPU they are reported as skipped.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <map>
#include <regex>

#include "nabu/core/cpu_features.h"
#include "nabu/core/device.h"
#include "nabu/core/error.h"
#include "nabu/neuralnetworks/tensor_map.h"
#include "nabu/neuralnetworks/trainers/checkpoint.h"
#include "nabu/neuralnetworks/kernels/mixed_precision.h"
#include "nabu/neuralnetworks/trainers/parameter_update.h"
#include "nabu/neuralnetworks/trainers/trainer_options.h"
#include "test_helpers.h"
#include "training_fixture.h"

using namespace nabu;
using namespace nabu::testing;

namespace {

// `nabu train` of the tiny DC recipe into <dir>/<expdir> with `options`: the first stage's
// training losses by update. A failed run fails the test; `output` receives what it printed.
std::map<int64_t, double> first_stage_losses(const TempDir& dir, const std::string& expdir,
                                             const std::string& options,
                                             std::string* output = nullptr) {
  auto result = run_nabu("train --expdir=" + expdir + " " + tiny_dc(options), dir.path());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  if (output) *output = result.output;
  return training_losses_by_step(dir / (expdir + "/100/metrics.jsonl"));
}

}  // namespace

TEST(Device, NamesResolveAndMalformedOnesAreRejected) {
  EXPECT_TRUE(resolve_device("cpu", "--device").is_cpu());
  for (const std::string bad : {"gpu", "cuda:", "cuda:-1", "cuda:x", "CPU", ""}) {
    EXPECT_FALSE(is_device_name(bad)) << bad;
    EXPECT_NE(error_of([&] { resolve_device(bad, "--device"); })
                  .find("--device=" + bad + ": expected auto, cpu, cuda or cuda:N"),
              std::string::npos)
        << bad;
  }
  for (const std::string good : {"auto", "cpu", "cuda", "cuda:0", "cuda:12"})
    EXPECT_TRUE(is_device_name(good)) << good;
  // auto is the GPU when there is one, else the CPU.
  EXPECT_EQ(resolve_device("auto", "--device").is_cuda(), cuda_available());
}

TEST(Device, CudaWhereThereIsNoGpuIsOneClearError) {
  if (cuda_available()) GTEST_SKIP() << "LibTorch sees a GPU here";
  for (const std::string name : {"cuda", "cuda:1"}) {
    std::string message = error_of([&] { resolve_device(name, "--device"); });
    EXPECT_NE(message.find("--device=" + name + ": this LibTorch (" TORCH_VERSION), std::string::npos)
        << message;
    EXPECT_NE(message.find("use --device=cpu"), std::string::npos) << message;
  }
}

TEST(MixedPrecision, PrecisionNamesAndFp16NeedsAGpu) {
  EXPECT_EQ(parse_precision("bf16", "precision"), Precision::kBf16);
  EXPECT_EQ(precision_name(parse_precision("fp16", "precision")), "fp16");
  EXPECT_NE(error_of([] { parse_precision("fp8", "trainer.cfg precision"); })
                .find("trainer.cfg precision=fp8: expected fp32, bf16 or fp16"),
            std::string::npos);
  EXPECT_NE(error_of([] { check_precision(Precision::kFp16, torch::kCPU, "precision"); })
                .find("precision=fp16 needs a CUDA device"),
            std::string::npos);
  EXPECT_EQ(error_of([] { check_precision(Precision::kBf16, torch::kCPU, "precision"); }), "");
}

// bf16 on a CPU without bfloat16 instructions warns (with the measured factor); a CPU with
// avx512_bf16 or AMX, a GPU or another precision does not.
TEST(MixedPrecision, Bf16OnACpuWithoutBf16InstructionsWarns) {
  const c10::Device cpu(c10::kCPU), gpu(c10::kCUDA, 0);
  const std::string avx2 = "fpu sse2 avx avx2 fma";
  const std::string warning = bf16_speed_warning(Precision::kBf16, cpu, avx2);
  EXPECT_NE(warning.find("without bfloat16 instructions"), std::string::npos) << warning;
  EXPECT_NE(warning.find("10.3x slower"), std::string::npos) << warning;
  EXPECT_EQ(bf16_speed_warning(Precision::kBf16, cpu, avx2 + " avx512f avx512_bf16"), "");
  EXPECT_EQ(bf16_speed_warning(Precision::kBf16, cpu, avx2 + " amx_bf16 amx_tile"), "");
  EXPECT_EQ(bf16_speed_warning(Precision::kFp32, cpu, avx2), "");
  EXPECT_EQ(bf16_speed_warning(Precision::kBf16, gpu, avx2), "");
  // A name that merely contains the flag is not the flag.
  EXPECT_NE(bf16_speed_warning(Precision::kBf16, cpu, avx2 + " xavx512_bf16x"), "");
  // This machine's flags, as the trainer reads them.
  EXPECT_NE(cpu_flags().find("sse2"), std::string::npos) << cpu_flags();
}

TEST(MixedPrecision, AutocastScopeComputesProductsInBf16AndRestoresTheState) {
  auto a = torch::randn({4, 8}), b = torch::randn({8, 3});
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat32);
  // The product of the inputs rounded to bf16, accumulated in fp32 (outside autocast).
  auto reference = torch::mm(a.to(torch::kBFloat16).to(torch::kFloat32),
                             b.to(torch::kBFloat16).to(torch::kFloat32));
  {
    AutocastScope outer(Precision::kBf16, torch::kCPU);
    auto product = torch::mm(a, b);
    EXPECT_EQ(product.scalar_type(), torch::kBFloat16);
    EXPECT_TRUE(torch::allclose(product.to(torch::kFloat32), reference, 2e-2, 2e-2));
    {
      AutocastScope fp32(Precision::kFp32, torch::kCPU);  // changes nothing
      EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
    }
    {
      AutocastScope inner(Precision::kBf16, torch::kCPU);
      EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
    }
    // The inner scope's end kept the outer one on.
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
    // Element-wise sums are not autocast: they follow type promotion.
    EXPECT_EQ((a + a).scalar_type(), torch::kFloat32);
  }
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat32);
}

TEST(MixedPrecision, LossScalerSkipsOverflowsBacksOffAndGrows) {
  LossScaler::Options options;
  options.initial_scale = 1024;
  options.growth_interval = 3;
  LossScaler scaler(true, options);
  EXPECT_EQ(scaler.scale(), 1024);

  std::vector<torch::Tensor> gradients{torch::full({3}, 2048.0), torch::Tensor(),
                                       torch::full({2, 2}, -512.0)};
  EXPECT_TRUE(scaler.unscale(gradients));
  EXPECT_TRUE(torch::equal(gradients[0], torch::full({3}, 2.0)));
  EXPECT_TRUE(torch::equal(gradients[2], torch::full({2, 2}, -0.5)));
  EXPECT_FALSE(gradients[1].defined());

  // An infinity or a NaN anywhere: the update is to be skipped and the scale halves.
  for (double bad : {std::numeric_limits<double>::infinity(), std::nan("")}) {
    std::vector<torch::Tensor> overflowed{torch::ones({4}), torch::ones({2})};
    overflowed[1][1] = bad;
    EXPECT_FALSE(scaler.unscale(overflowed)) << bad;
  }
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 512);
  EXPECT_EQ(scaler.good_steps(), 0);
  // growth_interval updates in a row without overflow double it.
  scaler.update(true);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 512);
  EXPECT_EQ(scaler.good_steps(), 2);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 1024);
  EXPECT_EQ(scaler.good_steps(), 0);

  // A resumed run continues from the checkpoint's state.
  scaler.restore(256, 2);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 512);
  EXPECT_NE(error_of([&] { scaler.restore(0, 0); }).find("loss scaler"), std::string::npos);

  // Disabled (fp32, bf16): scale 1, the gradients untouched.
  LossScaler off;
  std::vector<torch::Tensor> untouched{torch::full({2}, 3.0)};
  EXPECT_EQ(off.scale(), 1.0);
  EXPECT_TRUE(off.unscale(untouched));
  EXPECT_TRUE(torch::equal(untouched[0], torch::full({2}, 3.0)));
}

TEST_F(TrainingRun, DeviceAndPrecisionMistakesAreOneLineAndLeaveNothingBehind) {
  struct Case {
    std::string options, message;
  };
  std::vector<Case> cases = {
      {"--set trainer.cfg:trainer:device=gpu", "[trainer] device"},
      {"--set trainer.cfg:trainer:precision=fp8", "precision"},
      {"--device=cpu --set trainer.cfg:trainer:precision=fp16",
       "precision=fp16 needs a CUDA device"},
      {"--device=tpu", "--device=tpu: expected auto, cpu, cuda or cuda:N"},
  };
  if (!cuda_available()) cases.push_back({"--device=cuda", "--device=cuda: this LibTorch"});
  int index = 0;
  for (const auto& c : cases) {
    const std::string expdir = "exp_bad" + std::to_string(index++);
    auto result = train(expdir, "--max-steps=1 " + c.options);
    EXPECT_EQ(result.exit_code, 1) << c.options << "\n" << result.output;
    EXPECT_NE(result.output.find(c.message), std::string::npos) << c.options << "\n"
                                                                 << result.output;
    // One line on the terminal, and no experiment folder.
    EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
    EXPECT_FALSE(fs::exists(dir_ / expdir)) << c.options;
  }
}

TEST_F(TrainingRun, Bf16OnTheCpuTrainsCloseToFp32) {
  const std::string common = "--max-steps=6,2 --set trainer.cfg:trainer:valid_frequency=3";
  std::string output;
  auto a = first_stage_losses(dir_, "exp_fp32", common);
  auto b = first_stage_losses(dir_, "exp_bf16", common + " --set trainer.cfg:trainer:precision=bf16",
                              &output);
  EXPECT_NE(output.find("precision: bf16 autocast"), std::string::npos) << output;
  ASSERT_EQ(a.size(), 6u);
  ASSERT_EQ(b.size(), 6u);
  bool differs = false;
  for (const auto& [step, loss] : a) {
    ASSERT_TRUE(std::isfinite(b[step])) << "update " << step;
    // bf16 keeps 8 bits of mantissa: the losses agree to about a percent, but not exactly
    // (autocast really computed the products in bf16).
    EXPECT_NEAR(b[step], loss, 0.03 * std::abs(loss)) << "update " << step;
    differs = differs || b[step] != loss;
  }
  EXPECT_TRUE(differs) << "bf16 gave the fp32 losses exactly: autocast did nothing";
  // The weights stay fp32.
  for (const auto& [name, tensor] : parameters("exp_bf16/100/logdir/latest.pt"))
    EXPECT_EQ(tensor.scalar_type(), torch::kFloat32) << name;
}

TEST_F(TrainingRun, Bf16ResumeAfterSigkillEndsBitIdentical) {
  expect_resume_after_sigkill_bit_identical(
      dir_, "--max-steps=30 --set trainer.cfg:trainer:valid_frequency=5"
            " --set trainer.cfg:trainer:precision=bf16");
}

// --- On a GPU (label cuda) ------------------------------------------------------------------

class CudaTraining : public TrainingRun {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "LibTorch (" TORCH_VERSION ") sees no GPU here";
    TrainingRun::SetUp();
  }
};

TEST(CudaUpdate, ClippedAdamUpdatesOnTheGpuMatchTheCpu) {
  // The update's GPU paths (multi-tensor kernels, the norm clipping's factor kept on the GPU)
  // against its CPU path: 60 float parameter tensors, six updates of gradients large enough
  // that clip_grad_norm scales them every time, with normalize_gradients and Adam.
  if (!cuda_available()) GTEST_SKIP() << "LibTorch (" TORCH_VERSION ") sees no GPU here";
  auto cfg = ConfigFile::parse(
      "[trainer]\ntasks = task\nclip_grad_norm = 0.5\nnormalize_gradients = True\n", "trainer.cfg");
  auto options = read_trainer_options(cfg).optimizer;
  torch::manual_seed(5);
  std::vector<std::pair<std::string, torch::Tensor>> cpu, gpu;
  for (int i = 0; i < 60; ++i) {
    auto values = torch::randn({1 + i % 7, 1 + i % 5});
    cpu.emplace_back("m.p" + std::to_string(i), values.clone().requires_grad_());
    gpu.emplace_back("m.p" + std::to_string(i), values.to(torch::kCUDA).requires_grad_());
  }
  auto tensors = [](const std::vector<std::pair<std::string, torch::Tensor>>& named) {
    std::vector<torch::Tensor> out;
    for (const auto& entry : named) out.push_back(entry.second);
    return out;
  };
  ParameterUpdate on_cpu(options, ProfilingOptions{}, cfg.section("trainer"), 0.01, cpu,
                         {{"task", 1.0, tensors(cpu)}});
  ParameterUpdate on_gpu(options, ProfilingOptions{}, cfg.section("trainer"), 0.01, gpu,
                         {{"task", 1.0, tensors(gpu)}});
  for (int step = 0; step < 6; ++step) {
    std::vector<torch::Tensor> cpu_gradients, gpu_gradients;
    for (const auto& [name, parameter] : cpu) {
      cpu_gradients.push_back(torch::randn(parameter.sizes()) * 3.0);
      gpu_gradients.push_back(cpu_gradients.back().to(torch::kCUDA));
    }
    on_cpu.apply({{1.0, 2.0, &cpu_gradients}}, 0.01, step, "test");
    on_gpu.apply({{1.0, 2.0, &gpu_gradients}}, 0.01, step, "test");
    // The applied gradients were scaled to the norm 0.5 on both.
    double cpu_norm = 0, gpu_norm = 0;
    for (std::size_t i = 0; i < cpu.size(); ++i) {
      cpu_norm += cpu_gradients[i].square().sum().item<double>();
      gpu_norm += gpu_gradients[i].square().sum().item<double>();
    }
    EXPECT_NEAR(std::sqrt(cpu_norm), 0.5, 1e-5) << "update " << step;
    EXPECT_NEAR(std::sqrt(gpu_norm), 0.5, 1e-5) << "update " << step;
  }
  for (std::size_t i = 0; i < cpu.size(); ++i)
    EXPECT_LE((gpu[i].second.cpu() - cpu[i].second).abs().max().item<double>(), 1e-5)
        << cpu[i].first;
}

TEST_F(CudaTraining, UpdatesOnTheGpuMatchTheCpuAndItsModelTestsOnTheCpu) {
  const std::string common = "--max-steps=5,2 --set trainer.cfg:trainer:valid_frequency=3"
                             " --set test_evaluator.cfg:task_2spk:batch_size=2"
                             " --set test_evaluator.cfg:task_2spk_real:batch_size=2";
  std::string output;
  auto a = first_stage_losses(dir_, "exp_cpu", common + " --device=cpu");
  auto b = first_stage_losses(dir_, "exp_gpu", common + " --device=cuda", &output);
  EXPECT_NE(output.find("device: cuda:0"), std::string::npos) << output;
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [step, loss] : a)
    EXPECT_NEAR(b[step], loss, 1e-3 * std::abs(loss)) << "update " << step;
  // The checkpoint holds CPU tensors and reads on the CPU. The weights agree within a few Adam
  // steps (lr 0.002): Adam normalises each gradient, so rounding differences of a near-zero one
  // move its weight by up to a step (seen on an H200: 0.003 after 7 updates).
  auto gpu_parameters = parameters("exp_gpu/full/logdir/latest.pt");
  auto cpu_parameters = parameters("exp_cpu/full/logdir/latest.pt");
  ASSERT_EQ(gpu_parameters.size(), cpu_parameters.size());
  for (const auto& [name, tensor] : gpu_parameters) {
    EXPECT_TRUE(tensor.device().is_cpu()) << name;
    EXPECT_LE((tensor - cpu_parameters.at(name)).abs().max().item<double>(), 0.01) << name;
  }
  // Trained on the GPU, tested on the CPU; and a GPU checkpoint resumes on the CPU.
  auto tested = run_nabu("test --expdir=exp_gpu --device=cpu --threads=1", dir_.path());
  EXPECT_EQ(tested.exit_code, 0) << tested.output;
  auto resumed = run_nabu("train --expdir=exp_gpu --resume --device=cpu --threads=1", dir_.path());
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
}

TEST_F(CudaTraining, Fp16SkipsTheUpdateWhoseGradientsOverflowed) {
  // NABU_TEST_INF_GRADIENT_AT_STEP puts an infinity into a gradient of that update.
  auto result = run_shell(std::string("NABU_TEST_INF_GRADIENT_AT_STEP=3 ") + NABU_BINARY +
                              " train --expdir=exp_fp16 " +
                              tiny_dc("--max-steps=6,0 --device=cuda"
                                      " --set trainer.cfg:trainer:valid_frequency=100"
                                      " --set trainer.cfg:trainer:precision=fp16"),
                          dir_.path());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  // The first updates may overflow by themselves too (the scale starts at 65536, as PyTorch's
  // GradScaler does; on an H200 it came down to 1024): each skip halves the scale.
  const std::regex skip("step ([0-9]+): fp16 loss or gradients overflowed at loss scale "
                        "([0-9]+): update skipped, scale now ([0-9]+)");
  std::map<int64_t, std::pair<double, double>> skips;
  for (std::sregex_iterator it(result.output.begin(), result.output.end(), skip), end; it != end;
       ++it)
    skips[std::stoll((*it)[1])] = {std::stod((*it)[2]), std::stod((*it)[3])};
  ASSERT_TRUE(skips.count(3)) << result.output;
  double scale = 65536;
  for (const auto& [step, scales] : skips) {
    EXPECT_EQ(scales.first, scale) << "step " << step;
    EXPECT_EQ(scales.second, scale / 2) << "step " << step;
    scale /= 2;
  }
  auto losses = training_losses_by_step(dir_ / "exp_fp16/100/metrics.jsonl");
  ASSERT_EQ(losses.size(), 6u);
  for (const auto& [step, loss] : losses) EXPECT_TRUE(std::isfinite(loss)) << step;
  // The scale is in the checkpoint, for an exact resume.
  auto checkpoint = load_checkpoint(dir_ / "exp_fp16/100/logdir/latest.pt", {});
  EXPECT_EQ(checkpoint.loss_scale, scale);
}

TEST(Device, FrameMasksAreMadeWhereTheLengthsAre) {
  auto lengths = torch::tensor({3, 1}, torch::kLong);
  EXPECT_TRUE(torch::equal(frame_mask(lengths, 4),
                           torch::tensor({{1.f, 1.f, 1.f, 0.f}, {1.f, 0.f, 0.f, 0.f}})));
  // Meta tensors stand in for a GPU's here: lengths on the GPU met a mask counter made on the CPU
  // in every recurrent model (found on an H200: "Expected all tensors to be on the same device").
  auto mask = frame_mask(lengths.to(torch::kMeta), 4);
  EXPECT_EQ(mask.device().type(), torch::kMeta);
  EXPECT_EQ(mask.sizes(), (std::vector<int64_t>{2, 4}));
}
