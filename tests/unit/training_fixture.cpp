// The shared fixture of whole training runs (training_fixture.h).
#include "training_fixture.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "nabu/neuralnetworks/trainers/checkpoint.h"

namespace nabu::testing {

// Two "speakers" per mixture: harmonic tones with their own pitch and a slow amplitude
// modulation, so the deep clustering targets are learnable. Written where the shipped recipes
// look for the generated corpus (data/corpus/2speakers/wav8k/min/{tr,cv,tt}) under `root`, and
// a test set where the DC recipe looks for the recorded one (data/recorded/.../tt).
void make_tone_corpus(const fs::path& root, int train_mixtures, int other_mixtures) {
  std::mt19937 generator(5);
  std::uniform_real_distribution<double> pitch(90.0, 300.0), seconds(0.9, 1.3), phase(0.0, 6.28);
  const std::string corpus = "data/corpus/2speakers/wav8k/min/";
  const std::string recorded = "data/recorded/2speakers/wav8k/min/";
  for (const auto& [base, split] : std::vector<std::pair<std::string, std::string>>{
           {corpus, "tr"}, {corpus, "cv"}, {corpus, "tt"}, {recorded, "tt"}}) {
    int count = split == "tr" ? train_mixtures : other_mixtures;
    std::string mix_list, source_list, info_list;
    for (int i = 0; i < count; ++i) {
      std::string name = split + "_" + std::to_string(i);
      int length = static_cast<int>(8000 * seconds(generator));
      std::vector<std::vector<double>> sources(2, std::vector<double>(length));
      for (auto& source : sources) {
        double f0 = pitch(generator), offset = phase(generator);
        for (int n = 0; n < length; ++n) {
          double t = n / 8000.0, value = 0.0;
          for (int h = 1; h <= 5; ++h) value += std::sin(2 * M_PI * h * f0 * t + h * offset) / h;
          source[n] = 3000.0 * value * (0.6 + 0.4 * std::sin(2 * M_PI * 3 * t + offset));
        }
      }
      std::vector<short> s1(length), s2(length), mix(length);
      for (int n = 0; n < length; ++n) {
        s1[n] = static_cast<short>(sources[0][n]);
        s2[n] = static_cast<short>(sources[1][n]);
        mix[n] = static_cast<short>(s1[n] + s2[n]);
      }
      std::string folder = base + split + "/";
      write_pcm16_wav(root / (folder + "mix/" + name + ".wav"), mix);
      write_pcm16_wav(root / (folder + "s1/" + name + ".wav"), s1);
      write_pcm16_wav(root / (folder + "s2/" + name + ".wav"), s2);
      mix_list += name + " " + folder + "mix/" + name + ".wav\n";
      source_list += name + " " + folder + "s1/" + name + ".wav " + folder + "s2/" + name + ".wav\n";
      info_list += name + " " + folder + "mix/" + name + ".wav a" + std::to_string(i) + " M b" +
                   std::to_string(i) + " F\n";
    }
    write_text(root / (base + split + "/mix_wav.scp"), mix_list);
    write_text(root / (base + split + "/allS_wav.scp"), source_list);
    write_text(root / (base + split + "/utt_spkinfo.txt"), info_list);
  }
}

std::string dc_recipe() {
  return (nabu::testing::source_dir() / "recipes/SS/DBLSTM/toy_DC_2spk").string();
}

// The DC recipe made tiny and free of randomness that differs between runs of another shape
// (no input noise); deterministic, one thread.
std::string tiny_dc(const std::string& extra) {
  return "--recipe=" + dc_recipe() +
         " --threads=1 --seed=3 --deterministic"
         " --set model.cfg:main:num_units=8 --set model.cfg:main:input_noise=0"
         " --set validation_evaluator.cfg:evaluator:batch_size=4"
         " --set 'trainer.cfg:trainer:batch_size=4 2' " +
         extra;
}

void TrainingRun::SetUp() {
  make_tone_corpus(dir_.path());
  auto result = run_nabu("data --recipe=" + dc_recipe() + " --expdir=exp_data --threads=1",
                         dir_.path());
  ASSERT_EQ(result.exit_code, 0) << result.output;
}

CommandResult TrainingRun::train(const std::string& expdir, const std::string& extra) {
  return run_nabu("train --expdir=" + expdir + " " + tiny_dc(extra), dir_.path());
}

CommandResult TrainingRun::train_small_causal_conv_tasnet(const std::string& expdir, int updates,
                                                          const std::string& extra) {
  const std::string recipe =
      (source_dir() / "recipes/SS/ConvTasNet/toy_ConvTasNet_causal_2spk").string();
  auto data = run_nabu("data --recipe=" + recipe + " --expdir=" + expdir + "_data --threads=1",
                       dir_.path());
  if (data.exit_code != 0) return data;
  const std::string steps = std::to_string(updates);
  return run_nabu("train --recipe=" + recipe + " --expdir=" + expdir + " --threads=1 --max-steps=" +
                      steps + "," + steps + " --set 'trainer.cfg:trainer:batch_size=4 2'"
                      " --set model.cfg:main:encoder_filters=8"
                      " --set model.cfg:main:bottleneck_channels=6"
                      " --set model.cfg:main:hidden_channels=8 --set model.cfg:main:skip_channels=6"
                      " --set model.cfg:main:blocks_per_repeat=3 --set model.cfg:main:repeats=1 " +
                      extra,
                  dir_.path());
}

std::map<std::string, torch::Tensor> TrainingRun::parameters(const std::string& checkpoint) {
  return load_checkpoint(dir_ / checkpoint, {}).parameters;
}

void expect_same_parameters(const std::map<std::string, torch::Tensor>& a,
                            const std::map<std::string, torch::Tensor>& b, double tolerance) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, tensor] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    if (tolerance == 0.0)
      EXPECT_TRUE(torch::equal(tensor, b.at(name))) << name << " differs";
    else
      EXPECT_TRUE(torch::allclose(tensor, b.at(name), tolerance, 1e-7))
          << name << " max difference " << (tensor - b.at(name)).abs().max().item<double>();
  }
}

std::map<int64_t, double> training_values_by_step(const fs::path& metrics,
                                                  const std::string& field) {
  std::map<int64_t, double> values;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    auto record = nlohmann::json::parse(line);
    if (record["type"] == "train") values[record["step"].get<int64_t>()] = record[field].get<double>();
  }
  return values;
}

std::map<int64_t, double> training_losses_by_step(const fs::path& metrics) {
  return training_values_by_step(metrics, "loss");
}

void kill_training_mid_first_stage(const TempDir& dir, const std::string& expdir,
                                   const std::string& options) {
  pid_t pid = spawn_nabu("train --expdir=" + expdir + " " + tiny_dc(options), dir.path(),
                         dir / (expdir + ".log"));
  auto metrics = dir / (expdir + "/100/metrics.jsonl");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (count_lines_with(metrics, "\"type\":\"validation\"") < 3 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the run ended before it was killed: make it longer";
  ASSERT_FALSE(fs::exists(dir / (expdir + "/full"))) << "killed too late";
}

std::pair<bool, int> wait_child(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) return {true, WEXITSTATUS(status)};
  return {false, WTERMSIG(status)};
}

std::vector<pid_t> children_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::vector<pid_t> children;
  for (pid_t child; in >> child;) children.push_back(child);
  return children;
}

pid_t spawn_shell(const std::string& command, const fs::path& cwd, const fs::path& log) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string line = "cd '" + cwd.string() + "' && exec " + command + " > '" + log.string() +
                       "' 2>&1";
    ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

pid_t spawn_nabu(const std::string& args, const fs::path& cwd, const fs::path& log) {
  return spawn_shell("'" + std::string(NABU_BINARY) + "' " + args, cwd, log);
}

int count_lines_with(const fs::path& path, const std::string& text) {
  std::ifstream in(path);
  std::string line;
  int count = 0;
  while (std::getline(in, line)) count += line.find(text) != std::string::npos;
  return count;
}
std::vector<double> validation_losses(const fs::path& metrics) {
  std::vector<double> losses;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    auto record = nlohmann::json::parse(line);
    if (record["type"] == "validation") losses.push_back(record["loss"].get<double>());
  }
  return losses;
}

bool wait_for_lines(const fs::path& path, const std::string& text, int count, double seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (count_lines_with(path, text) < count) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace nabu::testing
