// Speed of the recurrent models against the plain (fused, packed) BLSTM of the same size:
// forward and forward+backward per batch, in training mode.
//
//   bench_models [--batch=8] [--frames=100] [--features=129] [--units=600] [--layers=2]
//                [--repeats=3] [--threads=2] [--only=name,name] [--precision=fp32|bf16]
//
// Prints one line per model with the mean time and the ratio to dblstm.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "nabu/core/allocator.h"
#include "nabu/core/config.h"
#include "nabu/core/error.h"
#include "nabu/core/openblas_core.h"
#include "nabu/core/strings.h"
#include "nabu/neuralnetworks/models/model.h"
#include "nabu/neuralnetworks/kernels/mixed_precision.h"

namespace {

struct Settings {
  int64_t batch = 8, frames = 100, features = 129, units = 600, layers = 2, repeats = 3,
          threads = 2;
  std::vector<std::string> only;
  nabu::Precision precision = nabu::Precision::kFp32;
};

Settings parse(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos)
      throw nabu::Error("expected --key=value, got '" + arg + "'");
    std::string key = arg.substr(2, eq - 2), value = arg.substr(eq + 1);
    if (key == "precision") {
      s.precision = nabu::parse_precision(value, "--precision");
      nabu::check_precision(s.precision, torch::kCPU, "--precision");
      continue;
    }
    if (key == "only") {
      for (auto& name : nabu::split(value, ',')) s.only.push_back(name);
      continue;
    }
    auto number = nabu::parse_int(value);
    if (!number || *number <= 0) throw nabu::Error("--" + key + " needs a positive integer");
    if (key == "batch") s.batch = *number;
    else if (key == "frames") s.frames = *number;
    else if (key == "features") s.features = *number;
    else if (key == "units") s.units = *number;
    else if (key == "layers") s.layers = *number;
    else if (key == "repeats") s.repeats = *number;
    else if (key == "threads") s.threads = *number;
    else throw nabu::Error("unknown option --" + key);
  }
  return s;
}

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  nabu::restart_for_openblas_core(argv);  // on the kernels the nabu program runs on
  nabu::keep_freed_buffers_for_reuse();  // as the nabu program does
  try {
    Settings s = parse(argc, argv);
    torch::set_num_threads(static_cast<int>(s.threads));
    torch::manual_seed(0);
    const std::string sizes = "num_units = " + std::to_string(s.units) +
                              "\nnum_layers = " + std::to_string(s.layers) + "\n";
    // name -> model.cfg section body. leaky_dblstm with leak 1.0 is the plain LSTM computed by
    // the time loop: the cost of the loop itself against the fused kernel.
    const std::vector<std::pair<std::string, std::string>> models = {
        {"dblstm", "architecture = dblstm\n" + sizes},
        {"dblstm_layer_norm", "architecture = dblstm\nlayer_norm = True\n" + sizes},
        {"lstm_loop (leak 1.0)", "architecture = leaky_dblstm\nleak_factor = 1.0\n" + sizes},
        {"leaky_dblstm", "architecture = leaky_dblstm\nleak_factor = 0.5\n" + sizes},
        {"leaky_dblstm_notrec",
         "architecture = leaky_dblstm_notrec\nleak_factor = 0.5\n" + sizes},
        {"leaky_dblstm_iznotrec",
         "architecture = leaky_dblstm_iznotrec\nleak_factor = 0.5\n" + sizes},
        {"dbresetlstm t_reset=10",
         "architecture = dbresetlstm\nt_reset = 10\n" + sizes},
        {"dbresetlstm t_reset=10 group=2",
         "architecture = dbresetlstm\nt_reset = 10\ngroup_size = 2\n" + sizes},
        {"dbgru", "architecture = dbgru\n" + sizes},
        {"dbrnn", "architecture = dbrnn\n" + sizes},
    };
    auto input = torch::randn({s.batch, s.frames, s.features});
    std::vector<int64_t> length_values;
    for (int64_t b = 0; b < s.batch; ++b)
      length_values.push_back(s.frames - (b * s.frames) / (4 * s.batch));  // up to 25% padding
    auto lengths = torch::tensor(length_values, torch::kLong);

    std::cout << "batch " << s.batch << " x " << s.frames << " frames x " << s.features
              << " features, " << s.layers << " layers x " << s.units << " units, "
              << s.threads << " threads, " << nabu::precision_name(s.precision) << ", mean of "
              << s.repeats << " runs\n";
    std::cout << std::left << std::setw(34) << "model" << std::right << std::setw(14)
              << "forward ms" << std::setw(18) << "fwd+bwd ms" << std::setw(14) << "x dblstm"
              << "\n";
    double reference = 0.0;
    for (const auto& [name, body] : models) {
      if (!s.only.empty() && std::find(s.only.begin(), s.only.end(), name) == s.only.end() &&
          name != "dblstm")
        continue;
      auto config = nabu::ConfigFile::parse("[m]\n" + body, "bench");
      const auto& section = config.section("m");
      auto model = nabu::model_registry().create(nabu::trim(section.get_string("architecture")),
                                                 "m", section);
      // As nabu train computes: the forward pass under autocast, the backward pass after it.
      const auto forward_pass = [&] {
        nabu::AutocastScope autocast(s.precision, torch::kCPU);
        return model->run({input}, lengths, true);
      };
      forward_pass();  // build and warm up
      double forward = 0.0, both = 0.0;
      for (int64_t r = 0; r < s.repeats; ++r) {
        auto start = std::chrono::steady_clock::now();
        {
          torch::NoGradGuard no_grad;
          forward_pass();
        }
        forward += milliseconds_since(start);
        start = std::chrono::steady_clock::now();
        model->zero_grad();
        forward_pass().sum().backward();
        both += milliseconds_since(start);
      }
      forward /= static_cast<double>(s.repeats);
      both /= static_cast<double>(s.repeats);
      if (name == "dblstm") reference = both;
      std::cout << std::left << std::setw(34) << name << std::right << std::fixed
                << std::setprecision(1) << std::setw(14) << forward << std::setw(18) << both
                << std::setw(14) << std::setprecision(2) << both / reference << "\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_models: " << e.what() << "\n";
    return 1;
  }
}
