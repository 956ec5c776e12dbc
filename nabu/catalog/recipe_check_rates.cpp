// The keys of `nabu check` (recipe_checker.h) whose right value depends on the data's sample
// rate or on the features' framing: what nabu train and nabu test would otherwise refuse only
// at their first batch, without naming a file (a loss framed at 8 kHz over 16 kHz data, masks
// sized for 129 bins over 257-bin features, pesq at 22.05 kHz).
#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "nabu/catalog/recipe_checker.h"
#include "nabu/core/error.h"
#include "nabu/core/strings.h"
#include "nabu/neuralnetworks/loss_computers/loss_computer.h"
#include "nabu/processing/audio.h"
#include "nabu/processing/database_section.h"
#include "nabu/processing/feature_computer.h"

namespace nabu {

const RecipeChecker::SectionAudio& RecipeChecker::section_audio(const std::string& name) {
  auto cached = section_audio_.find(name);
  if (cached != section_audio_.end()) return cached->second;
  SectionAudio& audio = section_audio_[name];
  const ConfigSection* section = database_ ? database_->find_section(name) : nullptr;
  if (!section) return audio;
  try {
    const auto options = read_database_section(*section, *database_);
    if (!options.processor_config.empty()) {
      const ConfigFile& config = recipe_.processor_config(*section);
      ProcessorPtr processor = make_processor(config);
      audio.features = processor->feature_options();
      audio.processor = config.find_section("processor");
      processors_[name] = processor;
    }
    const auto* lines = data_lines(options.datafiles);
    if (!lines || lines->empty() || lines->front().fields.empty()) return audio;
    audio.rate = read_audio(lines->front().fields.front()).sample_rate;
    audio.utterance = lines->front().utterance + ", " + lines->front().origin;
  } catch (const Error&) {
    // The section's own checks name what is wrong with it.
  }
  return audio;
}

void RecipeChecker::rate_problem(const std::string& where, const std::string& message) {
  if (rate_problems_reported_.insert(where).second) problem(where + ": " + message);
}

void RecipeChecker::check_rate_dependent_keys(const ConfigSection& task, const TaskSpec& spec) {
  if (!database_ || unreadable("loss.cfg") || spec.linked_sets.empty() ||
      spec.linked_sets.front().inputs.empty() ||
      spec.linked_sets.front().inputs.front().sections.empty())
    return;
  ConfigSection loss("", {});
  std::string type;
  try {
    type = resolve_loss_type(task, loss_cfg_, &loss);
  } catch (const Error&) {
    return;  // check_task reports it
  }
  if (!loss.has("sample_rate") && !loss.has("nfft") && !loss.has("winlen") &&
      !loss.has("winstep"))
    return;
  const std::string input = spec.linked_sets.front().inputs.front().sections.front();
  const SectionAudio& audio = section_audio(input);
  const std::string whose = "[" + task.name() + "]'s input (database.conf [" + input + "]";
  guard([&] {
    if (audio.rate > 0 && loss.has("sample_rate") && loss.get_int("sample_rate") != audio.rate)
      rate_problem(loss.where("sample_rate"),
                   fmt::format("{} Hz, but {}, {}) is at {} Hz; set sample_rate = {}",
                               loss.get_int("sample_rate"), whose, audio.utterance, audio.rate,
                               audio.rate));
  });
  if (audio.features && audio.processor) {
    // The masks multiply the STFT the loss computes: framed as the features the model saw.
    const FeatureOptions& features = *audio.features;
    const std::vector<std::pair<std::string, double>> framing{
        {"winlen", features.winlen}, {"winstep", features.winstep},
        {"nfft", static_cast<double>(features.nfft)}};
    for (const auto& [key, wanted] : framing)
      guard([&] {
        if (!loss.has(key) || std::fabs(loss.get_double(key) - wanted) <= 1e-9) return;
        rate_problem(loss.where(key),
                     fmt::format("{}, but the features of {}) are framed with {} = {:g} ({}); set "
                                 "{} = {:g}",
                                 loss.get_string(key), whose, key, wanted,
                                 audio.processor->where(key), key, wanted));
      });
  }
  // The output the loss splits into frequency bins x speakers: the features' bins (which the
  // loss's nfft must equal, above), or the loss's own where the features are unknown.
  const ConfigFile* models = recipe_.find("model.cfg");
  if (!models || unreadable("model.cfg") || !loss.has("nfft")) return;
  guard([&] {
    const bool from_features = audio.features && audio.processor && audio.processor->has("nfft");
    const long long nfft = from_features ? audio.features->nfft : loss.get_int("nfft");
    const std::string nfft_where =
        from_features ? audio.processor->where("nfft") : loss.where("nfft");
    const long long bins = nfft / 2 + 1;
    const std::string output = loss.get_string("output", "bin_est");
    const ConfigSection* model = models->find_section(task.get_string(output + "_model", ""));
    if (!model || !model->has("output_dims")) return;
    const long long dims = model->get_int("output_dims");
    // The speakers: the sources of the loss's target (its first list's fields), where known.
    long long speakers = 0;
    const std::string target = loss.get_string("target", "multi_targets");
    for (const auto& binding : spec.linked_sets.front().targets)
      if (binding.name == target && !binding.sections.empty())
        if (const ConfigSection* data = database_->find_section(binding.sections.front()))
          if (const auto* lines = data_lines(read_database_section(*data, *database_).datafiles))
            if (!lines->empty()) speakers = static_cast<long long>(lines->front().fields.size());
    if (speakers > 0 ? dims == bins * speakers : dims > 0 && dims % bins == 0) return;
    rate_problem(model->where("output_dims"),
                 fmt::format("{} is not the {} frequency bins (nfft = {}, {}) x {} that [{}]'s {} "
                             "loss splits {} into; set output_dims = {}",
                             dims, bins, nfft, nfft_where,
                             speakers > 0 ? std::to_string(speakers) + " speakers (" + target + ")"
                                          : std::string("the speakers"),
                             task.name(), type, output, bins * std::max(2LL, speakers)));
  });
}

void RecipeChecker::check_reconstructed_bins(const ConfigSection& task,
                                             const ConfigSection& reconstructor) {
  const ConfigFile* models = recipe_.find("model.cfg");
  if (!models || unreadable("model.cfg") || !reconstructor.has("org_mix")) return;
  guard([&] {
    const std::string mixture = reconstructor.get_string("org_mix");
    const SectionAudio& audio = section_audio(mixture);
    static const std::set<std::string> spectra{"spec", "magspec", "logspec", "powspec"};
    if (!audio.features || !audio.processor || !spectra.count(audio.features->feature)) return;
    // Its frames are the model's: framed as the task's input features.
    TaskSpec spec;
    try {
      spec = read_task_spec(task, TaskRole::kTest, nullptr);
    } catch (const Error&) {
      spec = TaskSpec{};
    }
    if (!spec.linked_sets.empty() && !spec.linked_sets.front().inputs.empty() &&
        !spec.linked_sets.front().inputs.front().sections.empty()) {
      const std::string input = spec.linked_sets.front().inputs.front().sections.front();
      const SectionAudio& features = section_audio(input);
      if (features.features && features.processor && spectra.count(features.features->feature))
        for (const auto& [key, wanted, have] :
             {std::make_tuple("winlen", features.features->winlen, audio.features->winlen),
              std::make_tuple("winstep", features.features->winstep, audio.features->winstep)}) {
          if (std::fabs(wanted - have) <= 1e-9) continue;
          rate_problem(audio.processor->where(key),
                       fmt::format("{:g}, but [{}]'s reconstructor masks this mixture (org_mix = "
                                   "{}) with the model's frames, framed as its input (database.conf "
                                   "[{}]) with {} = {:g} ({}); set {} = {:g}",
                                   have, task.name(), mixture, input, key, wanted,
                                   features.processor->where(key), key, wanted));
        }
    }
    // The output holds bins x (speakers or embedding) in its last dimension, except where the
    // loss takes [T, F, D] (the _flat variants: output_dims is D).
    std::string type;
    try {
      type = resolve_loss_type(task, loss_cfg_);
    } catch (const Error&) {
      return;  // check_task reports it
    }
    if (ends_with(type, "_flat")) return;
    const auto outputs = task.get_list("outputs", {});
    if (outputs.empty()) return;
    const ConfigSection* model = models->find_section(task.get_string(outputs.front() + "_model", ""));
    if (!model || !model->has("output_dims")) return;
    const long long dims = model->get_int("output_dims");
    const long long bins = audio.features->nfft / 2 + 1;
    if (dims > 0 && dims % bins == 0) return;
    rate_problem(model->where("output_dims"),
                 fmt::format("{} is not a multiple of the {} frequency bins of the mixture that "
                             "[{}]'s reconstructor masks (reconstructor.cfg org_mix = {}, nfft = {}, "
                             "{}); the model's bins and the mixture's must be the same",
                             dims, bins, task.name(), mixture, audio.features->nfft,
                             audio.processor->where("nfft")));
  });
}

void RecipeChecker::check_scorer_rates(const ConfigSection& scorer) {
  if (!database_ || !scorer.has("org_src")) return;
  guard([&] {
    const auto types = split_whitespace(scorer.get_string("score_type"));
    if (std::find(types.begin(), types.end(), "pesq") == types.end()) return;
    const SectionAudio& audio = section_audio(scorer.get_string("org_src"));
    if (audio.rate == 0 || audio.rate == 8000 || audio.rate == 16000) return;
    rate_problem(scorer.where("score_type"),
                 fmt::format("pesq scores signals at 8000 or 16000 Hz (P.862, P.862.2), and org_src "
                             "= {} is at {} Hz ({}); leave pesq out (stoi scores any rate)",
                             scorer.get_string("org_src"), audio.rate, audio.utterance));
  });
}

}  // namespace nabu
