// Streaming separation (Model::stream, inference/separation_stream.h): a causal Conv-TasNet
// fed a signal in pieces of 10, 20 and 40 ms (and uneven pieces) gives what its forward pass over
// the whole signal gives; models that look ahead are refused with the reason.
#include <gtest/gtest.h>

#include <fstream>

#include "nabu/neuralnetworks/models/model.h"
#include "nabu/processing/audio.h"
#include "test_helpers.h"
#include "test_model_helpers.h"
#include "training_fixture.h"

namespace nabu::testing {
namespace {

// Kernel 16 (2 ms at 8 kHz), dilations up to 8 frames: a receptive field longer than a piece.
std::string causal_conv_tasnet(const std::string& norm, const std::string& activation) {
  return "architecture = conv_tasnet\nnum_speakers = 2\nkernel_size = 16\nencoder_filters = 12\n"
         "bottleneck_channels = 6\nhidden_channels = 10\nskip_channels = 5\n"
         "blocks_per_repeat = 4\nrepeats = 2\ncausal = True\nnorm = " +
         norm + "\nmask_nonlinearity = " + activation + "\n";
}

// The signal pushed in pieces of `sizes` (repeated), then finished: [S, n].
torch::Tensor streamed(Model& model, const torch::Tensor& signal, std::vector<int64_t> sizes) {
  auto stream = model.stream();
  EXPECT_TRUE(stream);
  std::vector<torch::Tensor> outputs;
  int64_t start = 0;
  for (std::size_t i = 0; start < signal.size(0); ++i) {
    const int64_t size = std::min(sizes[i % sizes.size()], signal.size(0) - start);
    auto piece = stream->push(signal.narrow(0, start, size));
    // What comes back is all the input allows: everything but the lookahead.
    start += size;
    int64_t out = 0;
    for (const auto& output : outputs) out += output.size(1);
    EXPECT_EQ(out + piece.size(1),
              std::max<int64_t>(start - stream->lookahead() - (start % stream->lookahead()), 0))
        << "after " << start << " samples";
    outputs.push_back(piece);
  }
  outputs.push_back(stream->finish());
  return torch::cat(outputs, 1);
}

TEST(ModelStream, CausalConvTasNetStreamsAsItsWholeSignalPass) {
  torch::manual_seed(3);
  for (const std::string norm : {"cLN", "chanLN"}) {
    for (const std::string activation : {"relu", "softmax"}) {
      SCOPED_TRACE(norm + " " + activation);
      auto model = make_model_from(causal_conv_tasnet(norm, activation));
      torch::NoGradGuard no_grad;
      const int64_t samples = 2003;  // not a whole number of frames
      auto signal = torch::randn({samples}) * 0.3;
      auto offline = model
                         ->run({signal.view({1, -1, 1})}, torch::tensor({samples}),
                               /*training=*/false)[0]
                         .transpose(0, 1);  // [S, n]
      const double rms = offline.pow(2).mean().sqrt().item<double>();
      // 10, 20 and 40 ms at 8 kHz; pieces shorter than a frame and of odd lengths.
      for (const auto& sizes : std::vector<std::vector<int64_t>>{{80}, {160}, {320}, {5, 37, 1}}) {
        auto online = streamed(*model, signal, sizes);
        ASSERT_EQ(online.sizes(), offline.sizes()) << "pieces of " << sizes[0];
        const double error = (online - offline).abs().max().item<double>() / rms;
        EXPECT_LT(error, 1e-5) << "pieces of " << sizes[0];
        std::cout << norm << " " << activation << ", pieces of " << sizes[0]
                  << ": largest difference / RMS " << error << "\n";
      }
    }
  }
}

TEST(ModelStream, ASignalShorterThanAFrameComesBackWhole) {
  auto model = make_model_from(causal_conv_tasnet("cLN", "relu"));
  torch::NoGradGuard no_grad;
  auto signal = torch::randn({11});
  auto offline =
      model->run({signal.view({1, -1, 1})}, torch::tensor({int64_t{11}}), false)[0].transpose(0, 1);
  auto online = streamed(*model, signal, {3});
  ASSERT_EQ(online.sizes(), offline.sizes());
  EXPECT_TRUE(torch::allclose(online, offline, 1e-5, 1e-6));
}

TEST(ModelStream, ModelsThatLookAheadAreNotStreamed) {
  auto model = make_model_from(
      "architecture = conv_tasnet\nnum_speakers = 2\nkernel_size = 4\nencoder_filters = 8\n"
      "bottleneck_channels = 6\nhidden_channels = 10\nskip_channels = 5\nblocks_per_repeat = 2\n"
      "repeats = 1\n");
  model->run({torch::randn({1, 40, 1})}, torch::tensor({int64_t{40}}), false);
  EXPECT_EQ(model->stream(), nullptr);
  EXPECT_NE(model->why_not_streamed().find("causal = True"), std::string::npos);
  auto dprnn = make_model_from(
      "architecture = dprnn\nnum_speakers = 2\nkernel_size = 4\nencoder_filters = 8\n"
      "bottleneck_channels = 6\nhidden_units = 5\nchunk_size = 4\nnum_blocks = 1\n");
  EXPECT_EQ(dprnn->stream(), nullptr);
  EXPECT_NE(dprnn->why_not_streamed().find("dprnn"), std::string::npos);
}

void write_bytes(const fs::path& path, const torch::Tensor& pcm, bool extra_byte = false) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(pcm.data_ptr<int16_t>()),
            static_cast<std::streamsize>(pcm.numel() * 2));
  if (extra_byte) out.put('\x01');
}

torch::Tensor read_pcm(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return torch::from_blob(bytes.data(), {static_cast<int64_t>(bytes.size() / 2)}, torch::kInt16)
      .to(torch::kFloat64);
}

double correlation(const torch::Tensor& a, const torch::Tensor& b) {
  auto x = a - a.mean(), y = b - b.mean();
  return ((x * y).sum() / (x.norm() * y.norm() + 1e-12)).item<double>();
}

}  // namespace

// The causal toy recipe (shrunk) trained two updates: `nabu separate --stream` of a test mixture
// as 16-bit PCM gives one stream per speaker of the mixture's length, each the offline
// separation's speaker at a level found as it goes; an odd byte count, a model that looks ahead
// and a file given with --stream are one line each and leave no output.
TEST_F(TrainingRun, SeparateStreamGivesTheOfflineSeparationPieceByPiece) {
  auto trained = train_small_causal_conv_tasnet("exp_causal");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const auto wav = dir_ / "data/corpus/2speakers/wav8k/min/tt/mix/tt_0.wav";
  auto separated = run_nabu(
      "separate --expdir=exp_causal --threads=1 --chunk-seconds=0 "
      "--out=offline '" +
          wav.string() + "'",
      dir_.path());
  ASSERT_EQ(separated.exit_code, 0) << separated.output;
  auto mixture = read_audio(wav.string()).samples.reshape({-1});  // int16 scale
  write_bytes(dir_ / "mix.pcm", mixture.round().to(torch::kInt16).contiguous());
  for (const char* ms : {"10", "40"}) {
    auto streamed = run_nabu(std::string("separate --expdir=exp_causal --threads=1 --stream "
                                         "--stream-ms=") +
                                 ms + " --out=live < mix.pcm",
                             dir_.path());
    ASSERT_EQ(streamed.exit_code, 0) << streamed.output;
    EXPECT_NE(streamed.output.find("real-time factor"), std::string::npos) << streamed.output;
    const int64_t n = mixture.size(0);
    for (int s = 1; s <= 2; ++s) {
      auto live = read_pcm(dir_ / ("live/s" + std::to_string(s) + ".pcm"));
      ASSERT_EQ(live.size(0), n) << ms << " ms, speaker " << s;
      auto offline = read_audio((dir_ / ("offline/tt_0_s" + std::to_string(s) + ".wav")).string())
                         .samples.reshape({-1}) *
                     32768.0;
      // Past the first quarter the running gains have settled on the whole-file ones.
      auto middle = [&](const torch::Tensor& x) { return x.narrow(0, n / 4, n / 2); };
      const double similar = correlation(middle(live), middle(offline));
      const double level = (middle(live).norm() / middle(offline).norm()).item<double>();
      EXPECT_GT(similar, 0.99) << ms << " ms, speaker " << s;
      EXPECT_NEAR(level, 1.0, 0.3) << ms << " ms, speaker " << s;
      std::cout << ms << " ms pieces, speaker " << s << ": correlation with the offline output "
                << similar << ", level " << level << "\n";
    }
  }

  auto error_line = [&](const std::string& command) {
    auto result = run_nabu(command, dir_.path());
    EXPECT_EQ(result.exit_code, 1) << command << "\n" << result.output;
    return result.output;
  };
  write_bytes(dir_ / "odd.pcm", mixture.round().to(torch::kInt16).contiguous(), true);
  EXPECT_NE(error_line("separate --expdir=exp_causal --stream --out=odd < odd.pcm")
                .find("bytes, not a whole number of 16-bit samples"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ / "odd/s1.pcm"));
  for (const auto& entry : fs::directory_iterator(dir_ / "odd"))
    ADD_FAILURE() << "left behind: " << entry.path();
  EXPECT_NE(error_line("separate --expdir=exp_causal --stream --out=x '" + wav.string() + "'")
                .find("--stream reads stdin"),
            std::string::npos);
  EXPECT_NE(error_line("separate --expdir=exp_causal --stream --stream-ms=0 --out=x < mix.pcm")
                .find("--stream-ms"),
            std::string::npos);
  auto lookahead = train_small_causal_conv_tasnet(
      "exp_ahead", 1, "--set model.cfg:main:causal=False --set model.cfg:main:norm=gLN");
  ASSERT_EQ(lookahead.exit_code, 0) << lookahead.output;
  EXPECT_NE(error_line("separate --expdir=exp_ahead --stream --out=y < mix.pcm")
                .find("conv_tasnet streams only when causal = True"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ / "y/s1.pcm"));
}

}  // namespace nabu::testing
