#include "nabu/neuralnetworks/loss_computers/loss_computer.h"

#include "nabu/core/error.h"

namespace nabu {

LossResult batch_loss(LossComputer& loss, const Batch& batch, const std::string& first_input,
                      const std::vector<std::string>& target_names, const TensorMap& outputs) {
  TensorMap target_lengths;
  for (const auto& name : target_names) target_lengths[name] = batch.lengths.at(name);
  return loss(batch_targets(batch, target_names), outputs, batch.lengths.at(first_input),
              LossComputer::SequenceInfo{target_lengths, batch.names});
}

LossRegistry& loss_registry() {
  static LossRegistry registry("loss_type");
  return registry;
}

std::string resolve_loss_type(const ConfigSection& task_section, const ConfigFile* loss_config,
                              ConfigSection* options_out) {
  std::string name = task_section.get_string("loss_type");
  ConfigSection options(name, task_section.origin());
  std::string type = name;
  if (loss_config) {
    const ConfigSection* section = loss_config->find_section(name);
    if (!section)
      task_section.fail("loss_type", "names loss.cfg section [" + name + "] which does not exist" +
                                         did_you_mean(name, loss_config->section_names()));
    type = section->get_string("loss_type");
    options = *section;
    options.erase("loss_type");
  }
  if (!loss_registry().contains(type)) {
    if (loss_config)
      loss_config->section(name).fail("loss_type", loss_registry().unknown_message(type));
    task_section.fail("loss_type", loss_registry().unknown_message(type));
  }
  if (options_out) *options_out = options;
  return type;
}

LossPtr make_loss(const ConfigSection& task_section, const ConfigFile* loss_config) {
  ConfigSection options("", {});
  std::string type = resolve_loss_type(task_section, loss_config, &options);
  return loss_registry().create(type, options);
}

}  // namespace nabu
