// The public C++ API (nabu/separator.h): a trained experiment and its exported file separate as
// `nabu separate` does, a stream gives what `nabu separate --stream` gives, bad input is one
// line; and the installed package (cmake --install) builds examples/separate_file, which
// separates a file, with nothing of the build tree.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "nabu/separator.h"
#include "test_helpers.h"
#include "training_fixture.h"

namespace nabu::testing {
namespace {

torch::Tensor tensor_of(const std::vector<float>& values) {
  return torch::tensor(values, torch::kFloat64);
}

// Largest difference of two signals relative to the reference's RMS.
double relative_difference(const std::vector<float>& ours, const std::vector<float>& reference) {
  EXPECT_EQ(ours.size(), reference.size());
  if (ours.size() != reference.size()) return 1e9;
  auto a = tensor_of(ours), b = tensor_of(reference);
  return ((a - b).abs().max() / b.pow(2).mean().sqrt()).item<double>();
}

std::string error_of_api(const std::function<void()>& action) {
  try {
    action();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "no error";
}

const char* kMixture = "data/corpus/2speakers/wav8k/min/tt/mix/tt_0.wav";

}  // namespace

TEST_F(TrainingRun, ApiSeparatesAsNabuSeparateFromAnExperimentAndItsExportedFile) {
  auto trained = train_small_causal_conv_tasnet("exp_api");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const auto wav = (dir_ / kMixture).string();
  auto separated =
      run_nabu("separate --expdir=exp_api --threads=1 --out=cli '" + wav + "'", dir_.path());
  ASSERT_EQ(separated.exit_code, 0) << separated.output;
  auto exported = run_nabu("export --expdir=exp_api --out=api.pt", dir_.path());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;

  api::SeparatorOptions options;
  options.threads = 1;
  // The library writes nothing to the application's stdout: its info lines ("model: ...") only
  // when asked, to the callback.
  std::vector<std::string> lines;
  api::SeparatorOptions told = options;
  told.log_level = "info";
  told.log = [&](const std::string& level, const std::string& message) {
    lines.push_back(level + ": " + message);
  };
  api::Separator::from_experiment((dir_ / "exp_api").string(), told);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.front().rfind("info: model: ", 0), 0u) << lines.front();
  ::testing::internal::CaptureStdout();
  auto from_experiment = api::Separator::from_experiment((dir_ / "exp_api").string(), options);
  const std::string printed = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(printed, "");
  EXPECT_THROW(api::Separator::from_exported("x.pt", [] {
    api::SeparatorOptions bad;
    bad.log_level = "loud";
    return bad;
  }()), std::runtime_error);
  auto from_file = api::Separator::from_exported((dir_ / "api.pt").string(), options);
  EXPECT_EQ(from_experiment.sample_rate(), 8000);
  EXPECT_EQ(from_file.speakers(), 2);
  const auto recording = api::read_audio(wav);
  const auto ours = from_experiment.separate(recording.samples, recording.sample_rate);
  const auto theirs = from_file.separate(recording.samples, recording.sample_rate);
  ASSERT_EQ(ours.size(), 2u);
  for (int s = 0; s < 2; ++s) {
    const auto cli =
        api::read_audio((dir_ / ("cli/tt_0_s" + std::to_string(s + 1) + ".wav")).string());
    EXPECT_LT(relative_difference(ours[s], cli.samples), 1e-5) << "speaker " << s + 1;
    EXPECT_LT(relative_difference(theirs[s], cli.samples), 1e-4) << "speaker " << s + 1;
  }
  // At another rate (resampled to the model's and back): the input's length.
  const auto at_16k = from_experiment.separate(recording.samples, 16000);
  EXPECT_EQ(at_16k[1].size(), recording.samples.size());

  // A stream: what `nabu separate --stream` writes (16-bit) to within one step.
  auto stream = from_experiment.stream();
  std::vector<float> streamed;
  for (std::size_t start = 0; start < recording.samples.size(); start += 160) {
    const std::size_t count = std::min<std::size_t>(160, recording.samples.size() - start);
    auto piece = stream.push(recording.samples.data() + start, count);
    streamed.insert(streamed.end(), piece[0].begin(), piece[0].end());
  }
  auto rest = stream.finish();
  streamed.insert(streamed.end(), rest[0].begin(), rest[0].end());
  {
    std::ofstream pcm(dir_ / "mix.pcm", std::ios::binary);
    for (float value : recording.samples) {
      auto sample = static_cast<int16_t>(std::lround(value * 32768.0F));
      pcm.write(reinterpret_cast<const char*>(&sample), 2);
    }
  }
  auto cli_stream = run_nabu(
      "separate --expdir=exp_api --threads=1 --stream --stream-ms=20 "
      "--out=live < mix.pcm",
      dir_.path());
  ASSERT_EQ(cli_stream.exit_code, 0) << cli_stream.output;
  std::ifstream live(dir_ / "live/s1.pcm", std::ios::binary);
  std::vector<int16_t> written(streamed.size() + 1);
  live.read(reinterpret_cast<char*>(written.data()),
            static_cast<std::streamsize>(written.size() * 2));
  ASSERT_EQ(live.gcount(), static_cast<std::streamsize>(streamed.size() * 2));
  double largest = 0;
  for (std::size_t i = 0; i < streamed.size(); ++i)
    largest = std::max(largest, std::fabs(streamed[i] * 32768.0 - written[i]));
  EXPECT_LE(largest, 1.01);

  // Bad input: one line each, as std::runtime_error.
  EXPECT_NE(error_of_api([&] {
              from_experiment.separate({}, 8000);
            }).find("shorter than one analysis frame"),
            std::string::npos);
  EXPECT_NE(error_of_api([&] {
              from_experiment.separate(std::vector<float>(8000, 0.0F), 8000);
            }).find("silent"),
            std::string::npos);
  auto with_nan = recording.samples;
  with_nan[100] = std::nanf("");
  EXPECT_NE(error_of_api([&] { from_file.separate(with_nan, 8000); }).find("sample 100"),
            std::string::npos);
  EXPECT_NE(error_of_api([&] { from_file.separate(recording.samples, 0); }).find("sample rate"),
            std::string::npos);
  EXPECT_NE(error_of_api([&] { from_file.stream(); }).find("takes an experiment"),
            std::string::npos);
  EXPECT_NE(error_of_api([&] {
              api::Separator::from_experiment((dir_ / "nowhere").string());
            }).find("holds no trained experiment"),
            std::string::npos);
  EXPECT_NE(error_of_api([&] {
              api::Separator::from_exported((source_dir() / "README.md").string());
            }).find("not a file nabu export wrote"),
            std::string::npos);
  EXPECT_NE(error_of_api([&] {
              api::Separator::from_exported((dir_ / "missing.pt").string());
            }).find("missing.pt: no such file"),
            std::string::npos);
  options.task = "task_nope";
  EXPECT_NE(error_of_api([&] {
              api::Separator::from_experiment((dir_ / "exp_api").string(), options);
            }).find("task task_nope"),
            std::string::npos);
}

// `cmake --install` into a folder of the test, the example configured with only that folder as
// CMAKE_PREFIX_PATH, built and run on an experiment and on an exported file.
TEST_F(TrainingRun, ExampleBuildsAgainstTheInstalledPackageAndSeparatesAFile) {
  const fs::path build = fs::path(NABU_BINARY).parent_path();
  auto installed =
      run_shell("cmake --install '" + build.string() + "' --prefix prefix", dir_.path());
  ASSERT_EQ(installed.exit_code, 0) << installed.output;
  // The public header is the only one installed, and it includes only the standard library.
  std::set<std::string> headers;
  for (const auto& entry : fs::recursive_directory_iterator(dir_ / "prefix/include"))
    if (entry.is_regular_file()) headers.insert(entry.path().filename().string());
  EXPECT_EQ(headers, (std::set<std::string>{"separator.h"}));
  std::ifstream header(dir_ / "prefix/include/nabu/separator.h");
  const std::regex include(R"(#include\s*[<"]([^>"]+)[>"])");
  for (std::string line; std::getline(header, line);) {
    std::smatch match;
    if (std::regex_search(line, match, include)) {
      EXPECT_EQ(match[1].str().find_first_of("/."), std::string::npos) << line;
    }
  }

  // libnabu exports the API and nothing else of Nabu: every defined dynamic symbol that names
  // nabu names nabu::api; it is versioned (libnabu.so.<major>.<minor>) and says its version.
  auto symbols = run_shell("nm -D --defined-only -C prefix/lib/libnabu.so", dir_.path());
  ASSERT_EQ(symbols.exit_code, 0) << symbols.output;
  int api_symbols = 0;
  std::istringstream lines(symbols.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("nabu::") == std::string::npos) continue;
    EXPECT_NE(line.find("nabu::api::"), std::string::npos) << line;
    ++api_symbols;
  }
  EXPECT_GT(api_symbols, 10) << symbols.output;
  EXPECT_EQ(symbols.output.find("nabu::TrainedExperiment"), std::string::npos);
  const std::string version = api::version();
  EXPECT_NE(run_nabu("--version", dir_.path()).output.find("nabu " + version + " "),
            std::string::npos);
  EXPECT_TRUE(fs::is_symlink(dir_ / "prefix/lib/libnabu.so"));
  EXPECT_EQ(fs::read_symlink(dir_ / "prefix/lib/libnabu.so").string(),
            "libnabu.so." + version.substr(0, version.rfind('.')));

  auto configured = run_shell("cmake -S '" + (source_dir() / "examples/separate_file").string() +
                                  "' -B example -DCMAKE_PREFIX_PATH=" + (dir_ / "prefix").string() +
                                  " && cmake --build example",
                              dir_.path());
  ASSERT_EQ(configured.exit_code, 0) << configured.output;
  std::ifstream cache(dir_ / "example/CMakeCache.txt");
  const std::string cached((std::istreambuf_iterator<char>(cache)),
                           std::istreambuf_iterator<char>());
  EXPECT_NE(cached.find("Nabu_DIR:PATH=" + (dir_ / "prefix/lib/cmake/Nabu").string()),
            std::string::npos);

  auto trained = train_small_causal_conv_tasnet("exp_ex");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  ASSERT_EQ(run_nabu("export --expdir=exp_ex --out=ex.pt", dir_.path()).exit_code, 0);
  const auto wav = (dir_ / kMixture).string();
  ASSERT_EQ(run_nabu("separate --expdir=exp_ex --threads=1 --out=cli '" + wav + "'", dir_.path())
                .exit_code,
            0);
  for (const std::string model : {"exp_ex", "ex.pt"}) {
    auto run =
        run_shell("example/separate_file " + model + " '" + wav + "' out_" + model, dir_.path());
    ASSERT_EQ(run.exit_code, 0) << run.output;
    for (int s = 1; s <= 2; ++s) {
      const auto ours =
          api::read_audio((dir_ / ("out_" + model + "_s" + std::to_string(s) + ".wav")).string());
      const auto cli =
          api::read_audio((dir_ / ("cli/tt_0_s" + std::to_string(s) + ".wav")).string());
      EXPECT_LT(relative_difference(ours.samples, cli.samples), 1e-4) << model << " " << s;
    }
  }
  auto missing = run_shell("example/separate_file nowhere '" + wav + "' x", dir_.path());
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("separate_file: nowhere: no such file"), std::string::npos)
      << missing.output;

  // The installed tree moved elsewhere still finds its shipped models, beside its library,
  // before the install prefix's and the source tree's.
  fs::rename(dir_ / "prefix", dir_ / "moved");
  auto listed = run_shell("env -u NABU_MODELS_PATH moved/bin/nabu models", dir_.path());
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find((dir_ / "moved/share/nabu/models/pit_blstm_2spk_8k").string()),
            std::string::npos)
      << listed.output;
}

}  // namespace nabu::testing
