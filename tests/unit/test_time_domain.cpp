// Time-domain separation: the SI-SNR losses against a written-out reference (values and
// gradients), conv_tasnet and dprnn (shapes, padding, causality, gradients, option errors) and
// the waveform reconstructor.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "nabu/core/error.h"
#include "nabu/inference/reconstructors/reconstructor.h"
#include "nabu/inference/task_separation.h"
#include "nabu/neuralnetworks/kernels/mixed_precision.h"
#include "nabu/processing/signal.h"
#include "test_loss_helpers.h"
#include "test_model_helpers.h"

namespace nabu {
namespace {

using testing::expect_gradient_matches;
using testing::expect_padding_invariant;
using testing::make_model_from;
using testing::make_test_loss;
using testing::padded_batch;
using testing::permutations_of;

// SI-SNR in dB of estimate against source over their first `length` samples, the obvious way.
double reference_si_snr(const torch::Tensor& estimate, const torch::Tensor& source,
                        int64_t length) {
  const double epsilon = 1e-8;
  std::vector<double> e(length), s(length);
  double mean_e = 0, mean_s = 0;
  for (int64_t n = 0; n < length; ++n) {
    e[n] = estimate[n].item<double>();
    s[n] = source[n].item<double>();
    mean_e += e[n] / length;
    mean_s += s[n] / length;
  }
  double dot = 0, energy = 0;
  for (int64_t n = 0; n < length; ++n) {
    e[n] -= mean_e;
    s[n] -= mean_s;
    dot += e[n] * s[n];
    energy += s[n] * s[n];
  }
  const double alpha = dot / (energy + epsilon);
  double target = 0, error = 0;
  for (int64_t n = 0; n < length; ++n) {
    target += alpha * s[n] * alpha * s[n];
    error += (e[n] - alpha * s[n]) * (e[n] - alpha * s[n]);
  }
  return 10.0 * std::log10(target / (error + epsilon) + epsilon);
}

struct WaveformBatch {
  torch::Tensor estimates, sources, lengths;
  std::vector<int64_t> length_values;
};

// Sources [B, N, 1, S] as a raw store gives them, estimates [B, N, S] near a permutation of them,
// padded samples full of garbage in both.
WaveformBatch waveform_batch(const std::vector<int64_t>& lengths, int64_t speakers) {
  WaveformBatch batch;
  batch.length_values = lengths;
  batch.lengths = torch::tensor(lengths, torch::kLong);
  const int64_t samples = *std::max_element(lengths.begin(), lengths.end());
  const int64_t utterances = static_cast<int64_t>(lengths.size());
  auto options = torch::TensorOptions().dtype(torch::kDouble);
  batch.sources = torch::randn({utterances, samples, 1, speakers}, options) + 0.3;
  batch.estimates = batch.sources.squeeze(2).flip(2) * 0.7 +
                    0.4 * torch::randn({utterances, samples, speakers}, options);
  for (int64_t b = 0; b < utterances; ++b)
    if (lengths[b] < samples) {
      batch.sources[b].narrow(0, lengths[b], samples - lengths[b]).fill_(40.0);
      batch.estimates[b].narrow(0, lengths[b], samples - lengths[b]).fill_(-25.0);
    }
  return batch;
}

double loss_value(LossComputer& loss, const torch::Tensor& estimates, const WaveformBatch& batch) {
  auto result = loss({{"multi_targets", batch.sources}}, {{"sig_est", estimates}}, batch.lengths);
  return (result.loss / result.norm).item<double>();
}

TEST(TimeDomainLoss, SisnrAndPitSisnrMatchTheWrittenOutDefinition) {
  torch::manual_seed(3);
  const int64_t speakers = 3;
  auto batch = waveform_batch({61, 48, 30}, speakers);
  double fixed = 0, best = 0;
  for (int64_t b = 0; b < 3; ++b) {
    auto sources = batch.sources[b].squeeze(1);
    auto estimates = batch.estimates[b];
    const int64_t length = batch.length_values[b];
    for (int64_t s = 0; s < speakers; ++s)
      fixed -= reference_si_snr(estimates.select(1, s), sources.select(1, s), length);
    double lowest = std::numeric_limits<double>::infinity();
    for (const auto& order : permutations_of(speakers)) {
      double cost = 0;
      for (int64_t j = 0; j < speakers; ++j)
        cost -= reference_si_snr(estimates.select(1, order[j]), sources.select(1, j), length);
      lowest = std::min(lowest, cost);
    }
    best += lowest;
  }
  auto sisnr = make_test_loss("sisnr");
  auto pit = make_test_loss("pit_sisnr");
  EXPECT_NEAR(loss_value(*sisnr, batch.estimates, batch), fixed / (3 * speakers), 1e-9);
  EXPECT_NEAR(loss_value(*pit, batch.estimates, batch), best / (3 * speakers), 1e-9);
  // The estimates are a noisy reversal of the sources: the permutation finds them.
  EXPECT_LT(best, fixed - 10.0);
}

TEST(TimeDomainLoss, PitSisnrIgnoresOrderScaleAndOffsetOfTheEstimates) {
  torch::manual_seed(4);
  auto batch = waveform_batch({50, 37}, 2);
  auto pit = make_test_loss("pit_sisnr");
  auto sisnr = make_test_loss("sisnr");
  const double base = loss_value(*pit, batch.estimates, batch);
  auto changed = (batch.estimates.flip(2) * 4.5 + 2.0);
  EXPECT_NEAR(loss_value(*pit, changed, batch), base, 1e-8);
  EXPECT_GT(std::abs(loss_value(*sisnr, changed, batch) - loss_value(*sisnr, batch.estimates, batch)),
            1.0);
  // Perfect estimates reach the epsilon-bound ceiling (far above any real separation).
  EXPECT_LT(loss_value(*pit, batch.sources.squeeze(2) * 0.5, batch), -80.0);
}

TEST(TimeDomainLoss, GradientsMatchFiniteDifferencesAndVanishOnPadding) {
  torch::manual_seed(5);
  auto batch = waveform_batch({24, 17}, 2);
  for (const char* type : {"sisnr", "pit_sisnr"}) {
    SCOPED_TRACE(type);
    auto loss = make_test_loss(type);
    auto gradient = expect_gradient_matches(
        [&](const torch::Tensor& estimates) {
          auto result =
              (*loss)({{"multi_targets", batch.sources}}, {{"sig_est", estimates}}, batch.lengths);
          return result.loss;
        },
        batch.estimates, 40, 1e-6, 1e-5);
    testing::expect_zero_on_padding(gradient, batch.length_values);
  }
}

TEST(TimeDomainLoss, MistakesNameTheTensorAndTheShape) {
  auto batch = waveform_batch({20, 20}, 2);
  auto pit = make_test_loss("pit_sisnr");
  try {
    (*pit)({{"multi_targets", batch.sources}}, {{"sig_est", batch.estimates.narrow(2, 0, 1)}},
           batch.lengths);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sig_est has 1 speakers but multi_targets has 2"),
              std::string::npos)
        << e.what();
  }
  try {
    (*pit)({{"multi_targets", batch.sources}}, {{"bin_est", batch.estimates}}, batch.lengths);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sig_est"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_test_loss("pit_sisnr", "epsilon = 0\n"), ConfigError);
}

// pit_sisnr_masks against the reconstructor's own path, one utterance at a time: frames and
// spectrum of the mixture (frame_signal, frames_spectrum), softmax masks, overlap_add_inverse,
// then the written-out SI-SNR under the best permutation.
TEST(TimeDomainLoss, PitSisnrMasksScoresWhatTheReconstructorWouldMake) {
  torch::manual_seed(8);
  const std::string options =
      "sample_rate = 8000\nwinlen = 0.004\nwinstep = 0.002\nnfft = 32\n";
  FrameSettings settings;
  settings.winlen = 0.004;
  settings.winstep = 0.002;
  settings.nfft = 32;
  const int64_t bins = 17, speakers = 2, step = 16, window = 32;
  const std::vector<int64_t> frames{7, 5};
  const std::vector<int64_t> samples{(7 - 1) * step + window, (5 - 1) * step + window};
  auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  auto mixture = torch::randn({2, samples[0], 1}, f64);
  auto sources = torch::randn({2, samples[0], 1, speakers}, f64);
  auto logits = torch::randn({2, 7, bins * speakers}, f64);
  mixture[1].narrow(0, samples[1], samples[0] - samples[1]).fill_(30.0);
  sources[1].narrow(0, samples[1], samples[0] - samples[1]).fill_(-30.0);
  logits[1].narrow(0, 5, 2).fill_(9.0);
  auto lengths = torch::tensor(frames, torch::kLong);

  double expected = 0;
  for (int64_t b = 0; b < 2; ++b) {
    auto spectrum = frames_spectrum(
        frame_signal(mixture[b].squeeze(1).narrow(0, 0, samples[b]), settings), settings.nfft);
    ASSERT_EQ(spectrum.size(0), frames[b]);
    auto masks = logits[b].narrow(0, 0, frames[b]).reshape({frames[b], speakers, bins}).softmax(1);
    std::vector<torch::Tensor> estimates;
    for (int64_t s = 0; s < speakers; ++s)
      estimates.push_back(overlap_add_inverse(spectrum * masks.select(1, s), settings, samples[b]));
    double lowest = std::numeric_limits<double>::infinity();
    for (const auto& order : permutations_of(speakers)) {
      double cost = 0;
      for (int64_t j = 0; j < speakers; ++j)
        cost -= reference_si_snr(estimates[order[j]], sources[b].squeeze(1).select(1, j),
                                 samples[b]);
      lowest = std::min(lowest, cost);
    }
    expected += lowest;
  }
  auto loss = make_test_loss("pit_sisnr_masks", options);
  auto loss_of = [&](const torch::Tensor& output) {
    return (*loss)({{"mix_wave", mixture}, {"multi_targets", sources}}, {{"bin_est", output}},
                   lengths);
  };
  auto result = loss_of(logits);
  EXPECT_NEAR(result.loss.item<double>(), expected, 1e-8);
  EXPECT_EQ(result.norm.item<double>(), 4.0);
  auto gradient = expect_gradient_matches(
      [&](const torch::Tensor& output) { return loss_of(output).loss; }, logits, 40, 1e-6, 1e-5);
  testing::expect_zero_on_padding(gradient, frames);
  // Frames that do not match the features' framing are named.
  auto wrong = make_test_loss(
      "pit_sisnr_masks", "sample_rate = 8000\nwinlen = 0.004\nwinstep = 0.004\nnfft = 32\n");
  try {
    (*wrong)({{"mix_wave", mixture}, {"multi_targets", sources}}, {{"bin_est", logits}}, lengths);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("winlen, winstep and sample_rate"), std::string::npos)
        << e.what();
  }
}

const char* kTinyConvTasNet =
    "architecture = conv_tasnet\nnum_speakers = 2\nkernel_size = 4\nencoder_filters = 8\n"
    "bottleneck_channels = 6\nhidden_channels = 10\nskip_channels = 5\nblocks_per_repeat = 3\n"
    "repeats = 2\n";
const char* kTinyDprnn =
    "architecture = dprnn\nnum_speakers = 3\nkernel_size = 4\nencoder_filters = 8\n"
    "bottleneck_channels = 6\nhidden_units = 5\nchunk_size = 4\nnum_blocks = 2\n";

TEST(TimeDomainModel, ConvTasNetAndDprnnGiveOneWaveformPerSpeakerWhateverThePadding) {
  torch::manual_seed(6);
  for (const char* body : {kTinyConvTasNet, kTinyDprnn}) {
    SCOPED_TRACE(body);
    auto model = make_model_from(body);
    const std::vector<int64_t> lengths{57, 40, 9, 3};
    auto batch = padded_batch(lengths, 1);
    auto output = model->run({batch}, testing::lengths_of(lengths), false);
    const int64_t speakers = std::string(body).find("dprnn") != std::string::npos ? 3 : 2;
    ASSERT_EQ(output.sizes(), (std::vector<int64_t>{4, 57, speakers}));
    expect_padding_invariant(*model, batch, lengths, /*zero_padding=*/true, {}, 1e-5);
    testing::expect_gradients_everywhere(*model, {batch}, testing::lengths_of(lengths));
  }
}

// On the CPU in float the blocks run conv_tasnet_kernels.h; in double LibTorch's operations
// compose the same model: outputs and every parameter's gradient agree, padded batch included.
TEST(TimeDomainModel, ConvTasNetsOwnCpuKernelsComputeWhatLibTorchsOperationsCompose) {
  torch::manual_seed(11);
  auto model = make_model_from(kTinyConvTasNet);
  const std::vector<int64_t> lengths{57, 40, 9};
  const auto batch = padded_batch(lengths, 1);
  const auto lengths_tensor = testing::lengths_of(lengths);
  auto gradients_of = [&](const torch::Tensor& input, torch::Tensor& output) {
    model->zero_grad();
    output = model->run({input}, lengths_tensor, true);
    torch::manual_seed(12);
    (output * torch::randn(output.sizes()).to(output.scalar_type())).sum().backward();
    std::vector<torch::Tensor> gradients;
    for (const auto& p : model->parameters()) gradients.push_back(p.grad().to(torch::kDouble));
    return gradients;
  };
  torch::Tensor in_float, in_double;
  const auto float_gradients = gradients_of(batch, in_float);
  model->to(torch::kDouble);
  const auto double_gradients = gradients_of(batch.to(torch::kDouble), in_double);
  EXPECT_LT(testing::max_difference(in_float.to(torch::kDouble), in_double) /
                in_double.abs().max().item<double>(),
            1e-5);
  for (std::size_t i = 0; i < float_gradients.size(); ++i)
    EXPECT_LT(testing::max_difference(float_gradients[i], double_gradients[i]) /
                  std::max(double_gradients[i].abs().max().item<double>(), 1e-12),
              1e-4)
        << model->named_parameters()[i].key();
}

// Under precision = bf16 on the CPU conv_tasnet computes in fp32 all the same (its bf16 was
// slower there): the output is the fp32 one to the bit, not LibTorch's bf16 convolutions'.
TEST(TimeDomainModel, ConvTasNetComputesInFp32OnTheCpuUnderABf16Autocast) {
  torch::manual_seed(13);
  auto model = make_model_from(kTinyConvTasNet);
  const std::vector<int64_t> lengths{57, 40};
  const auto batch = padded_batch(lengths, 1);
  const auto fp32 = model->run({batch}, testing::lengths_of(lengths), false);
  AutocastScope autocast(Precision::kBf16, torch::kCPU);
  const auto under_bf16 = model->run({batch}, testing::lengths_of(lengths), false);
  ASSERT_EQ(under_bf16.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(under_bf16, fp32));
}

TEST(TimeDomainModel, CausalConvTasNetNeverLooksMoreThanOneKernelAhead) {
  torch::manual_seed(7);
  auto model = make_model_from(std::string(kTinyConvTasNet) + "causal = True\nnorm = cLN\n");
  auto signal = torch::randn({1, 80, 1});
  auto changed = signal.clone();
  const int64_t from = 50;
  changed.narrow(1, from, 80 - from).normal_();
  auto lengths = testing::lengths_of({80});
  auto before = model->run({signal}, lengths, false);
  auto after = model->run({changed}, lengths, false);
  // Output sample n hears the encoder frames that start at or before it, which reach L = 4
  // samples further.
  const int64_t safe = from - 4;
  EXPECT_TRUE(torch::allclose(before.narrow(1, 0, safe), after.narrow(1, 0, safe), 1e-6, 1e-6));
  EXPECT_FALSE(torch::allclose(before.narrow(1, from, 30), after.narrow(1, from, 30)));
  // The non-causal model does look ahead.
  auto centred = make_model_from(kTinyConvTasNet);
  EXPECT_FALSE(torch::allclose(centred->run({signal}, lengths, false).narrow(1, 0, safe),
                               centred->run({changed}, lengths, false).narrow(1, 0, safe)));
}

TEST(TimeDomainModel, OptionMistakesNameTheKey) {
  auto message = [](const std::string& body) {
    try {
      make_model_from(body);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(std::string(kTinyConvTasNet) + "causal = True\n").find("norm"),
            std::string::npos);
  EXPECT_NE(message(std::string(kTinyConvTasNet) + "conv_kernel_size = 4\n")
                .find("conv_kernel_size"),
            std::string::npos);
  EXPECT_NE(message(std::string(kTinyDprnn) + "chunk_size = 5\n").find("chunk_size"),
            std::string::npos);
  EXPECT_NE(message(std::string(kTinyDprnn) + "kernel_size = 3\n").find("kernel_size"),
            std::string::npos);
  EXPECT_NE(message(std::string(kTinyDprnn) + "norm = cLN\n").find("norm"), std::string::npos);
  // A spectrogram input is named as the mistake.
  auto model = make_model_from(kTinyConvTasNet);
  EXPECT_THROW(model->run({torch::randn({2, 10, 129})}, testing::lengths_of({10, 10}), false),
               Error);
}

TEST(WaveformReconstructor, GivesTheOutputWaveformsPerSpeakerPeakNormalised) {
  auto config = ConfigFile::parse(
      "[task]\nreconstruct_type = waveform\norg_mix = testbase\nnrs = 2\n", "reconstructor.cfg");
  auto reconstructor = make_reconstructor(config.section("task"));
  ASSERT_TRUE(reconstructor->estimates_signals());
  auto waveforms = torch::tensor({{0.5, -2.0}, {-1.0, 1.0}, {0.25, 0.0}}, torch::kFloat32);
  auto raw = reconstructor->signals({{"sig_est", waveforms}}, false);
  EXPECT_TRUE(torch::allclose(raw, waveforms.t().to(torch::kDouble)));
  auto normalised = reconstructor->signals({{"sig_est", waveforms}}, true);
  EXPECT_TRUE(torch::allclose(
      normalised, torch::tensor({{0.5, -1.0, 0.25}, {-1.0, 0.5, 0.0}}, torch::kDouble)));
  EXPECT_THROW(reconstructor->signals({{"sig_est", torch::zeros({3, 3})}}, true), Error);
  auto masks = ConfigFile::parse(
      "[task]\nreconstruct_type = waveform\norg_mix = testbase\nnrs = 2\nstore_masks = True\n",
      "reconstructor.cfg");
  EXPECT_THROW(make_reconstructor(masks.section("task")), ConfigError);
}

// nabu separate puts the waveforms of a scale-invariant model back at the recording's level: the
// gains that make their sum closest to the mixture, signs included.
TEST(WaveformReconstructor, SeparateFindsTheGainsThatRebuildTheMixture) {
  torch::manual_seed(9);
  auto signals = torch::randn({2, 400}, torch::kDouble);
  auto mixture = 3.0 * signals[0] - 0.5 * signals[1];
  auto gains = mixture_gains(signals, mixture);
  EXPECT_NEAR(gains[0].item<double>(), 3.0, 1e-6);
  EXPECT_NEAR(gains[1].item<double>(), -0.5, 1e-6);
  // A silent estimate gets no gain instead of a singular system.
  auto silent = torch::stack({signals[0], torch::zeros({400}, torch::kDouble)});
  auto with_silence = mixture_gains(silent, 2.0 * signals[0]);
  EXPECT_NEAR(with_silence[0].item<double>(), 2.0, 1e-6);
  EXPECT_EQ(with_silence[1].item<double>(), 0.0);
}

}  // namespace
}  // namespace nabu
