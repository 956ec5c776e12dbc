// A bare LibTorch training loop for the DC recipe's models on preloaded tensors: forward,
// deep clustering loss, backward, Adam update, nothing else. Compare its seconds per update with
// the "seconds" of `nabu train`'s metrics.jsonl (same recipe, batch and threads) to see what the
// trainer (data pipeline, accumulation, checks, logging) adds.
//
//   bench_train_loop --recipe=recipes/SS/DBLSTM/toy_DC_2spk [--batch=16] [--frames=100]
//                    [--steps=30] [--threads=2]
//
// Run from the project root (the recipe is read for model.cfg and the loss type).
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "nabu/core/allocator.h"
#include "nabu/core/clock.h"
#include "nabu/core/error.h"
#include "nabu/core/openblas_core.h"
#include "nabu/core/recipe.h"
#include "nabu/core/strings.h"
#include "nabu/neuralnetworks/loss_computers/loss_computer.h"
#include "nabu/neuralnetworks/models/model.h"

namespace {

std::string value_of(const std::string& argument, const std::string& name) {
  std::string prefix = "--" + name + "=";
  return argument.rfind(prefix, 0) == 0 ? argument.substr(prefix.size()) : std::string();
}

}  // namespace

int main(int argc, char** argv) {
  nabu::restart_for_openblas_core(argv);  // on the kernels the nabu program runs on
  nabu::keep_freed_buffers_for_reuse();  // as the nabu program does
  try {
    std::string recipe_dir;
    int64_t batch = 16, frames = 100, steps = 30, threads = 2;
    for (int i = 1; i < argc; ++i) {
      std::string argument = argv[i], value;
      if (!(value = value_of(argument, "recipe")).empty()) recipe_dir = value;
      else if (!(value = value_of(argument, "batch")).empty()) batch = std::stoll(value);
      else if (!(value = value_of(argument, "frames")).empty()) frames = std::stoll(value);
      else if (!(value = value_of(argument, "steps")).empty()) steps = std::stoll(value);
      else if (!(value = value_of(argument, "threads")).empty()) threads = std::stoll(value);
      else throw nabu::Error("unknown argument '" + argument + "'");
    }
    if (recipe_dir.empty()) throw nabu::Error("--recipe=DIR is required");
    torch::set_num_threads(static_cast<int>(threads));
    torch::manual_seed(1);
    auto recipe = nabu::Recipe::load(recipe_dir);
    const auto& models = recipe.get("model.cfg");
    const auto& task = recipe.get("trainer.cfg").section("task_2spk");
    auto main_model = nabu::model_registry().create(
        nabu::trim(models.section("main").get_string("architecture")), "main", models.section("main"));
    auto out_layer = nabu::model_registry().create(
        nabu::trim(models.section("outlayer").get_string("architecture")), "outlayer",
        models.section("outlayer"));
    auto loss = nabu::make_loss(task, recipe.find("loss.cfg"));

    const int64_t bins = 129, speakers = 2;
    auto features = torch::randn({batch, frames, bins});
    auto lengths = torch::full({batch}, frames, torch::kLong);
    auto labels = torch::randint(0, speakers, {batch, frames, bins}, torch::kLong);
    nabu::TensorMap targets{
        {"binary_targets", torch::one_hot(labels, speakers).reshape({batch, frames, bins * speakers})
                               .to(torch::kBool)},
        {"usedbins", torch::rand({batch, frames, bins}) > 0.3}};
    // Build the parameters with one forward pass, then the optimizer over all of them.
    out_layer->run({main_model->run({features}, lengths, true)}, lengths, true);
    std::vector<torch::Tensor> parameters = main_model->parameters();
    for (const auto& p : out_layer->parameters()) parameters.push_back(p);
    torch::optim::Adam adam(parameters, torch::optim::AdamOptions(1e-3));

    // Seconds per phase, summed over the timed updates (as nabu train's metrics.jsonl "phases").
    double forward_seconds = 0, backward_seconds = 0, optimizer_seconds = 0;
    auto step = [&]() {
      auto start = nabu::Clock::now();
      adam.zero_grad();
      auto embeddings = out_layer->run({main_model->run({features}, lengths, true)}, lengths, true);
      auto result = (*loss)(targets, {{"bin_emb", embeddings}}, lengths);
      auto normalised = result.loss / result.norm;
      normalised.item<double>();  // nabu train reads the loss here too
      forward_seconds += nabu::seconds_since(start);
      start = nabu::Clock::now();
      normalised.backward();
      backward_seconds += nabu::seconds_since(start);
      start = nabu::Clock::now();
      adam.step();
      optimizer_seconds += nabu::seconds_since(start);
    };
    for (int i = 0; i < 3; ++i) step();  // warm-up
    forward_seconds = backward_seconds = optimizer_seconds = 0;
    auto start = nabu::Clock::now();
    for (int64_t i = 0; i < steps; ++i) step();
    double seconds = nabu::seconds_since(start);
    std::cout << std::fixed << std::setprecision(3) << "bare loop, batch " << batch << " x "
              << frames << " frames, " << threads << " thread(s): " << seconds / steps
              << " s per update (" << steps / seconds << " updates/s); forward "
              << forward_seconds / steps << ", backward " << backward_seconds / steps
              << ", optimizer " << optimizer_seconds / steps << " s\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_train_loop: error: " << e.what() << "\n";
    return 1;
  }
}
