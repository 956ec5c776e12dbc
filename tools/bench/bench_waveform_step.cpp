// Seconds per training update of a waveform separation model (tf_gridnet, dprnn, conv_tasnet) on
// random mixtures, without the data pipeline: forward, pit_sisnr, backward and an Adam step, on
// the CPU or a GPU. The figure for a recipe sized for a GPU (docs/results.md, "TF-GridNet").
//
//   bench_waveform_step --model=recipes/SS/LibriMix/Libri2Mix_TFGridNet/model.cfg [--section=main]
//                       [--batch=4] [--samples=32000] [--steps=10] [--warmup=2]
//                       [--device=cpu|cuda] [--threads=2] [--precision=fp32|bf16|fp16]
//
// --precision runs the forward pass and the loss under autocast as trainer.cfg's precision does
// (fp16 without a loss scale: a speed figure only). Prints the CPU's bf16/AMX flags, the parameter count and the median, lowest and highest seconds per update of --steps
// timed updates after --warmup untimed ones.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "nabu/core/allocator.h"
#include "nabu/core/config.h"
#include "nabu/core/cpu_features.h"
#include "nabu/core/error.h"
#include "nabu/core/openblas_core.h"
#include "nabu/core/strings.h"
#include "nabu/neuralnetworks/loss_computers/loss_computer.h"
#include "nabu/neuralnetworks/models/model.h"
#include "nabu/neuralnetworks/kernels/mixed_precision.h"

namespace {

struct Settings {
  std::string model, section = "main", device = "cpu", precision = "fp32";
  int64_t batch = 4, samples = 32000, steps = 10, warmup = 2, threads = 2;
};

Settings parse(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos)
      throw nabu::Error("expected --key=value, got '" + arg + "'");
    std::string key = arg.substr(2, eq - 2), value = arg.substr(eq + 1);
    if (key == "model") s.model = value;
    else if (key == "section") s.section = value;
    else if (key == "device") s.device = value;
    else if (key == "precision") s.precision = value;
    else {
      auto number = nabu::parse_int(value);
      if (!number || *number < 0) throw nabu::Error("--" + key + " needs an integer >= 0");
      if (key == "batch") s.batch = *number;
      else if (key == "samples") s.samples = *number;
      else if (key == "steps") s.steps = *number;
      else if (key == "warmup") s.warmup = *number;
      else if (key == "threads") s.threads = *number;
      else throw nabu::Error("unknown option --" + key);
    }
  }
  if (s.model.empty()) throw nabu::Error("--model=FILE (a model.cfg) is required");
  if (s.steps < 1 || s.batch < 1 || s.samples < 1)
    throw nabu::Error("--steps, --batch and --samples must be >= 1");
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  nabu::restart_for_openblas_core(argv);  // on the kernels the nabu program runs on
  nabu::keep_freed_buffers_for_reuse();  // as the nabu program does
  try {
    const Settings s = parse(argc, argv);
    torch::set_num_threads(static_cast<int>(s.threads));
    torch::manual_seed(0);
    const torch::Device device(s.device);
    const auto precision = nabu::parse_precision(s.precision, "--precision");
    auto config = nabu::ConfigFile::load(s.model);
    const auto& section = config.section(s.section);
    auto model = nabu::model_registry().create(
        nabu::trim(section.get_string("architecture")), s.section, section);
    auto loss_options = nabu::ConfigFile::parse("[options]\n", "loss.cfg");
    auto loss = nabu::loss_registry().create("pit_sisnr", loss_options.section("options"));
    const int64_t speakers = section.get_int("num_speakers", 2);
    auto sources = torch::randn({s.batch, s.samples, speakers}, torch::TensorOptions(device));
    auto mixture = sources.sum(2, /*keepdim=*/true);
    auto lengths = torch::full({s.batch}, s.samples, torch::kLong);
    model->run({mixture}, lengths, true);  // builds the parameters
    int64_t parameters = 0;
    for (const auto& p : model->parameters()) parameters += p.numel();
    torch::optim::Adam optimiser(model->parameters(), torch::optim::AdamOptions(1e-3));
    std::vector<double> seconds;
    for (int64_t step = 0; step < s.warmup + s.steps; ++step) {
      const auto start = std::chrono::steady_clock::now();
      optimiser.zero_grad();
      torch::Tensor objective;
      {
        nabu::AutocastScope autocast(precision, device);
        auto estimates = model->run({mixture}, lengths, true);
        auto result = (*loss)({{"multi_targets", sources}}, {{"sig_est", estimates}}, lengths);
        objective = (result.loss / result.norm).to(torch::kFloat);
      }
      objective.backward();
      optimiser.step();
      // Reading a value waits for the device's queue: the update has finished.
      model->parameters().front().sum().item<double>();
      if (step >= s.warmup)
        seconds.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(seconds.begin(), seconds.end());
    std::string flags;
    const std::string cpu_flags = nabu::cpu_flags();
    for (const char* flag : {"avx512_bf16", "amx_bf16", "amx_tile"})
      if (nabu::has_cpu_flag(cpu_flags, flag))
        flags += std::string(flags.empty() ? "" : " ") + flag;
    std::cout << std::fixed << std::setprecision(4) << s.model << " [" << s.section << "]: "
              << parameters << " parameters, batch " << s.batch << " x " << s.samples
              << " samples on " << s.device << " (" << s.threads << " threads, " << s.precision
              << "; CPU flags: " << (flags.empty() ? "no bf16" : flags) << "): median "
              << seconds[seconds.size() / 2] << " s per update (" << seconds.front() << " to "
              << seconds.back() << ", " << s.steps << " updates)\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_waveform_step: " << e.what() << "\n";
    return 1;
  }
}
