// `nabu separate` on recordings: reading any channel count and rate, resampling, chunked
// separation with speakers kept on their outputs, and the command on good and bad files.
#include <gtest/gtest.h>
#include <signal.h>
#include <sndfile.h>
#include <sys/wait.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <set>
#include <thread>
#include <vector>

#include "nabu/core/error.h"
#include "nabu/inference/chunked_separation.h"
#include "nabu/processing/audio.h"
#include "nabu/processing/audio_stream.h"
#include "test_helpers.h"
#include "training_fixture.h"

using namespace nabu;
using namespace nabu::testing;

namespace {

// A float wav with `channels` interleaved channels.
void write_float_wav(const fs::path& path, const std::vector<float>& interleaved, int channels,
                     int rate) {
  SF_INFO info{};
  info.samplerate = rate;
  info.channels = channels;
  info.format = SF_FORMAT_WAV | SF_FORMAT_FLOAT;
  SNDFILE* file = sf_open(path.c_str(), SFM_WRITE, &info);
  ASSERT_NE(file, nullptr) << sf_strerror(nullptr);
  sf_writef_float(file, interleaved.data(), static_cast<sf_count_t>(interleaved.size() / channels));
  sf_close(file);
}

std::vector<double> random_signal(int64_t length, int seed) {
  auto generator = at::detail::createCPUGenerator(seed);
  auto signal = torch::randn({length}, generator, torch::kFloat64) * 1000.0;
  return std::vector<double>(signal.data_ptr<double>(), signal.data_ptr<double>() + length);
}

// Chunked separation with a separator that knows the true sources and gives them back in a
// different order on every other chunk, as a model may.
struct OracleChunks {
  std::vector<double> s1, s2;
  int64_t chunk = 0, hop = 0;
  int calls = 0;
  torch::Tensor operator()(const torch::Tensor& samples) {
    const int64_t start = calls * hop, length = samples.size(0);
    auto part = [&](const std::vector<double>& source) {
      auto out = torch::zeros({length}, torch::kFloat64);
      for (int64_t t = 0; t < length && start + t < static_cast<int64_t>(source.size()); ++t)
        out[t] = source[start + t];
      return out;
    };
    auto a = part(s1), b = part(s2);
    return (calls++ % 2 == 0) ? torch::stack({a, b}) : torch::stack({b, a});
  }
};

// A mono file of `format` (libsndfile's SF_FORMAT_*) holding `samples` (int16 scale).
void write_mono(const fs::path& path, int format, const std::vector<double>& samples, int rate) {
  SF_INFO info{};
  info.samplerate = rate;
  info.channels = 1;
  info.format = format;
  SNDFILE* file = sf_open(path.c_str(), SFM_WRITE, &info);
  ASSERT_NE(file, nullptr) << path << ": " << sf_strerror(nullptr);
  std::vector<double> scaled;
  for (double value : samples) scaled.push_back(value / 32768.0);
  sf_writef_double(file, scaled.data(), static_cast<sf_count_t>(scaled.size()));
  sf_close(file);
}

std::set<std::string> files_in(const fs::path& folder) {
  std::set<std::string> names;
  if (fs::is_directory(folder))
    for (const auto& entry : fs::directory_iterator(folder))
      names.insert(entry.path().filename().string());
  return names;
}

bool any_temporary(const fs::path& folder) {
  for (const auto& name : files_in(folder))
    if (name.find(".tmp.") != std::string::npos) return true;
  return false;
}

// The lines of `output` that contain `text`.
int lines_with(const std::string& output, const std::string& text) {
  int count = 0;
  std::size_t start = 0;
  while (start < output.size()) {
    std::size_t end = output.find('\n', start);
    if (end == std::string::npos) end = output.size();
    count += output.substr(start, end - start).find(text) != std::string::npos;
    start = end + 1;
  }
  return count;
}

// `nabu separate` with a trained tiny model (exp_sep) on the fixture corpus.
class SeparateCommand : public TrainingRun {
 protected:
  void SetUp() override {
    TrainingRun::SetUp();
    auto trained =
        train("exp_sep", "--max-steps=1 --set trainer.cfg:trainer:valid_frequency=1000");
    ASSERT_EQ(trained.exit_code, 0) << trained.output;
  }
  CommandResult separate(const std::string& args) {
    return run_nabu("separate --expdir=exp_sep --threads=1 " + args, dir_.path());
  }
  // The fixture's first test mixture (int16 scale, 8 kHz).
  std::vector<double> mixture() {
    auto audio = read_audio((dir_ / "data/corpus/2speakers/wav8k/min/tt/mix/tt_0.wav").string());
    auto flat = audio.samples.contiguous();
    return std::vector<double>(flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel());
  }
};

}  // namespace

TEST(SeparateOutputNames, InputsOfOneStemKeepTheirExtensionAndCollisionsAreRefused) {
  EXPECT_EQ(output_names({"a/meeting.wav", "interview.flac"}),
            (std::vector<std::string>{"meeting", "interview"}));
  EXPECT_EQ(output_names({"mix.ogg", "x/mix.flac", "mix.aiff", "other.wav"}),
            (std::vector<std::string>{"mix.ogg", "mix.flac", "mix.aiff", "other"}));
  std::string twice = error_of([] { output_names({"a/mix.wav", "b/mix.wav"}); });
  EXPECT_NE(twice.find("a/mix.wav and b/mix.wav would both be separated into mix.wav_s<k>.wav"),
            std::string::npos)
      << twice;
  EXPECT_NE(error_of([] { output_names({"mix.wav", "mix.wav"}); }), "");
}

TEST_F(SeparateCommand, ThreeInputsOfOneStemGiveThreeTimesTheSpeakersDistinctFiles) {
  auto samples = mixture();
  write_mono(dir_ / "mix.ogg", SF_FORMAT_OGG | SF_FORMAT_VORBIS, samples, 8000);
  write_mono(dir_ / "mix.flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_16, samples, 8000);
  write_mono(dir_ / "mix.aiff", SF_FORMAT_AIFF | SF_FORMAT_PCM_16, samples, 8000);
  auto result = separate("--out=o mix.ogg mix.flac mix.aiff");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(files_in(dir_ / "o"),
            (std::set<std::string>{"mix.ogg_s1.wav", "mix.ogg_s2.wav", "mix.flac_s1.wav",
                                   "mix.flac_s2.wav", "mix.aiff_s1.wav", "mix.aiff_s2.wav"}));
  // One input keeps the plain stem.
  auto single = separate("--out=single mix.flac");
  ASSERT_EQ(single.exit_code, 0) << single.output;
  EXPECT_EQ(files_in(dir_ / "single"), (std::set<std::string>{"mix_s1.wav", "mix_s2.wav"}));
}

// Flags that cannot work are one line naming the flag before any file, not a failure per file.
TEST_F(SeparateCommand, OptionErrorsAreOneLineBeforeAnyFile) {
  write_mono(dir_ / "a.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, mixture(), 8000);
  write_mono(dir_ / "b.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, mixture(), 8000);
  for (const auto& [flags, named] : std::vector<std::pair<std::string, std::string>>{
           {"--chunk-seconds=2 --overlap-seconds=2", "--overlap-seconds=2"},
           {"--chunk-seconds=2 --overlap-seconds=-1", "--overlap-seconds=-1"},
           {"--chunk-seconds=-1", "--chunk-seconds=-1"},
           {"--model-rate=16000", "--model-rate=16000"},
           {"--precision=fp8", "--precision=fp8"},
           {"--precision=fp16", "--precision=fp16 needs a CUDA device"}}) {
    auto result = separate("--out=out " + flags + " a.wav b.wav");
    EXPECT_EQ(result.exit_code, 1) << flags << "\n" << result.output;
    EXPECT_EQ(lines_with(result.output, "error:"), 1) << flags << "\n" << result.output;
    EXPECT_EQ(lines_with(result.output, named), 1) << flags << "\n" << result.output;
    EXPECT_EQ(result.output.find("file(s) failed"), std::string::npos) << result.output;
    EXPECT_EQ(result.output.find("overlap_add_inverse"), std::string::npos) << result.output;
    EXPECT_FALSE(fs::exists(dir_ / "out")) << flags;
  }
  // The rate the model was trained at is accepted.
  auto same = separate("--out=out --model-rate=8000 a.wav");
  EXPECT_EQ(same.exit_code, 0) << same.output;
}

// --precision=bf16 separates with the products in bfloat16: the outputs are the fp32 ones up to
// bf16's rounding, which the fixture's deep clustering model (one update: many time-frequency
// bins its k-means finds ambiguous) turns into flipped binary mask bins: within 25 % (12 dB).
TEST_F(SeparateCommand, Bf16PrecisionSeparatesCloseToFp32) {
  write_mono(dir_ / "a.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, mixture(), 8000);
  auto full = separate("--out=fp32 a.wav");
  ASSERT_EQ(full.exit_code, 0) << full.output;
  auto half = separate("--out=bf16 --precision=bf16 a.wav");
  ASSERT_EQ(half.exit_code, 0) << half.output;
  for (const std::string speaker : {"a_s1.wav", "a_s2.wav"}) {
    auto reference = read_audio((dir_ / "fp32" / speaker).string()).samples;
    auto estimate = read_audio((dir_ / "bf16" / speaker).string()).samples;
    ASSERT_EQ(reference.sizes(), estimate.sizes());
    const double error = (estimate - reference).norm().item<double>() /
                         reference.norm().item<double>();
    EXPECT_GT(error, 0.0) << speaker << ": bf16 changed nothing";
    EXPECT_LT(error, 0.25) << speaker;
    std::cout << speaker << ": relative difference bf16 - fp32 " << error << "\n";
  }
}

// SIGINT while a long input is written: the file before it is complete, the interrupted one
// leaves no temporary, and the process ends by the signal.
TEST_F(SeparateCommand, InterruptLeavesNoTemporaryFiles) {
  write_mono(dir_ / "short.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, mixture(), 8000);
  nabu::testing::write_noise_wav(dir_ / "long.wav", 8000 * 1200, 7);  // 20 minutes
  pid_t pid = spawn_nabu("separate --expdir=exp_sep --threads=1 --out=out short.wav long.wav",
                         dir_.path(), dir_ / "separate.log");
  // Until the long input's outputs are being written.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool writing = false;
  while (!writing && std::chrono::steady_clock::now() < deadline) {
    for (const auto& name : files_in(dir_ / "out"))
      writing = writing || name.rfind("long_s1.wav.tmp.", 0) == 0;
    if (!writing) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(writing) << read_text(dir_ / "separate.log");
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const std::string log = read_text(dir_ / "separate.log");
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << log;
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << log;
  EXPECT_FALSE(any_temporary(dir_ / "out")) << log;
  EXPECT_EQ(files_in(dir_ / "out"), (std::set<std::string>{"short_s1.wav", "short_s2.wav"}))
      << log;
  EXPECT_NE(log.find("long.wav: interrupted by SIGINT"), std::string::npos) << log;
}

TEST(ChunkedSeparation, KeepsEachSpeakerOnItsOutputAcrossChunksAndEveryPushedSample) {
  const int rate = 8000;
  OracleChunks oracle;
  oracle.s1 = random_signal(53'123, 1);
  oracle.s2 = random_signal(53'123, 2);
  oracle.chunk = 2 * rate;           // 2 s chunks
  oracle.hop = oracle.chunk - rate / 2;  // 0.5 s overlap
  std::vector<std::vector<double>> outputs(2);
  ChunkedSeparation chunked(std::ref(oracle), 2, /*frame_length=*/256, rate,
                            ChunkOptions{2.0, 0.5},
                            [&](int s, const std::vector<double>& part) {
                              outputs[s].insert(outputs[s].end(), part.begin(), part.end());
                            });
  std::vector<double> mixture(oracle.s1.size());
  for (std::size_t t = 0; t < mixture.size(); ++t) mixture[t] = oracle.s1[t] + oracle.s2[t];
  // Blocks of odd sizes, as a resampler gives them.
  for (std::size_t start = 0; start < mixture.size(); start += 7777)
    chunked.push(std::vector<double>(
        mixture.begin() + start, mixture.begin() + std::min(mixture.size(), start + 7777)));
  chunked.finish();
  EXPECT_GE(oracle.calls, 4);
  ASSERT_EQ(outputs[0].size(), oracle.s1.size());
  ASSERT_EQ(outputs[1].size(), oracle.s2.size());
  double worst = 0;
  for (std::size_t t = 0; t < outputs[0].size(); ++t)
    worst = std::max({worst, std::fabs(outputs[0][t] - oracle.s1[t]),
                      std::fabs(outputs[1][t] - oracle.s2[t])});
  EXPECT_LT(worst, 1e-9);
}

TEST(ChunkedSeparation, CrossFadesLinearlyOverTheOverlap) {
  const int rate = 1000;
  int calls = 0;
  // Chunk k separates into the constants k and -k: the overlap must ramp from one to the next.
  auto constant = [&](const torch::Tensor& samples) {
    double value = ++calls;
    return torch::stack({torch::full({samples.size(0)}, value, torch::kFloat64),
                         torch::full({samples.size(0)}, -value, torch::kFloat64)});
  };
  std::vector<double> first;
  ChunkedSeparation chunked(constant, 2, 10, rate, ChunkOptions{1.0, 0.2},
                            [&](int s, const std::vector<double>& part) {
                              if (s == 0) first.insert(first.end(), part.begin(), part.end());
                            });
  chunked.push(std::vector<double>(1500, 1.0));
  chunked.finish();
  ASSERT_EQ(first.size(), 1500u);
  EXPECT_DOUBLE_EQ(first[0], 1.0);
  EXPECT_DOUBLE_EQ(first[799], 1.0);  // before the overlap [800, 1000)
  EXPECT_NEAR(first[800], 1.0 + 0.5 / 200, 1e-12);
  EXPECT_NEAR(first[899], 1.0 + 99.5 / 200, 1e-12);
  EXPECT_NEAR(first[999], 1.0 + 199.5 / 200, 1e-12);
  EXPECT_DOUBLE_EQ(first[1200], 2.0);
}

TEST(ChunkedSeparation, RejectsChunkSettingsThatCannotWork) {
  auto none = [](const torch::Tensor& samples) { return torch::zeros({2, samples.size(0)}); };
  auto sink = [](int, const std::vector<double>&) {};
  EXPECT_NE(error_of([&] { ChunkedSeparation(none, 2, 256, 8000, ChunkOptions{4.0, 0.01}, sink); })
                .find("shorter than two analysis frames"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ChunkedSeparation(none, 2, 256, 8000, ChunkOptions{4.0, 3.0}, sink); })
                .find("more than half of --chunk-seconds"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { ChunkedSeparation(none, 2, 256, 8000, ChunkOptions{0.0, 1.0}, sink); }),
            "");
}

TEST(AudioStream, MixesChannelsDownOrPicksOneInInt16Scale) {
  TempDir dir;
  // Left 0.5, right -0.25, for 100 frames.
  std::vector<float> interleaved;
  for (int t = 0; t < 100; ++t) interleaved.insert(interleaved.end(), {0.5f, -0.25f});
  write_float_wav(dir / "stereo.wav", interleaved, 2, 16000);
  AudioReader mixed(dir / "stereo.wav");
  EXPECT_EQ(mixed.sample_rate(), 16000);
  EXPECT_EQ(mixed.channels(), 2);
  EXPECT_EQ(mixed.frames(), 100);
  auto samples = mixed.read(60);
  ASSERT_EQ(samples.size(), 60u);
  EXPECT_DOUBLE_EQ(samples[0], 0.125 * 32768.0);
  EXPECT_EQ(mixed.read(60).size(), 40u);
  EXPECT_TRUE(mixed.read(60).empty());
  AudioReader right(dir / "stereo.wav", 2);
  EXPECT_DOUBLE_EQ(right.read(1)[0], -0.25 * 32768.0);
  EXPECT_NE(error_of([&] { AudioReader(dir / "stereo.wav", 3); }).find("has 2 channel(s)"),
            std::string::npos);
}

TEST(AudioStream, BadFilesNameTheFileAndWhatIsWrong) {
  TempDir dir;
  write_text(dir / "text.wav", "not audio at all");
  write_float_wav(dir / "empty.wav", {}, 1, 8000);
  write_float_wav(dir / "nan.wav", {0.1f, std::numeric_limits<float>::quiet_NaN(), 0.1f}, 1, 8000);
  EXPECT_NE(error_of([&] { AudioReader(dir / "missing.wav"); }).find("missing.wav: no such file"),
            std::string::npos);
  EXPECT_NE(error_of([&] { AudioReader(dir / "text.wav"); }).find("text.wav: not a readable audio"),
            std::string::npos);
  EXPECT_NE(error_of([&] { AudioReader(dir / "empty.wav"); }).find("empty.wav: empty"),
            std::string::npos);
  AudioReader nan(dir / "nan.wav");
  EXPECT_NE(error_of([&] { nan.read(3); }).find("nan.wav: sample 1"), std::string::npos);
}

TEST(AudioStream, ResamplesInBlocksAndWritesOnlyWhenCommitted) {
  // A 440 Hz tone at 16 kHz, resampled to 8 kHz block by block, is the same tone at 8 kHz.
  const int64_t length = 16000;
  std::vector<double> tone(length);
  for (int64_t t = 0; t < length; ++t) tone[t] = 1000.0 * std::sin(2 * M_PI * 440.0 * t / 16000);
  Resampler resampler(16000, 8000);
  std::vector<double> out;
  for (int64_t start = 0; start < length; start += 3001) {
    auto part = resampler.process(std::vector<double>(
        tone.begin() + start, tone.begin() + std::min<int64_t>(length, start + 3001)));
    out.insert(out.end(), part.begin(), part.end());
  }
  auto rest = resampler.flush();
  out.insert(out.end(), rest.begin(), rest.end());
  ASSERT_NEAR(static_cast<double>(out.size()), 8000.0, 2.0);
  double worst = 0;
  for (int64_t t = 500; t < 7500; ++t)
    worst = std::max(worst, std::fabs(out[t] - 1000.0 * std::sin(2 * M_PI * 440.0 * t / 8000)));
  EXPECT_LT(worst, 5.0);  // 0.5% of the amplitude

  TempDir dir;
  {
    AudioWriter abandoned(dir / "abandoned.wav", 8000);
    abandoned.write({0.1, 0.2});
  }
  EXPECT_TRUE(fs::is_empty(dir.path())) << "an uncommitted writer left a file";
  AudioWriter writer(dir / "kept.wav", 8000);
  writer.write({0.25, -0.5});
  writer.commit();
  auto audio = read_audio((dir / "kept.wav").string());
  ASSERT_EQ(audio.samples.size(0), 2);
  EXPECT_NEAR(audio.samples[1].item<double>(), -0.5, 1e-6);  // float wavs read as stored
}
