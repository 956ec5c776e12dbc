#include "nabu/catalog/catalog.h"

#include "nabu/neuralnetworks/evaluators/evaluator.h"
#include "nabu/neuralnetworks/loss_computers/loss_computer.h"
#include "nabu/neuralnetworks/models/model.h"
#include "nabu/neuralnetworks/trainers/trainer.h"
#include "nabu/postprocessing/reconstructors/reconstructor.h"
#include "nabu/postprocessing/scorers/scorer.h"
#include "nabu/processing/feature_computer.h"
#include "nabu/processing/processor.h"

namespace nabu {

namespace {

template <class RegistryType>
CatalogEntry entry_for(RegistryType& registry) {
  return CatalogEntry{registry.family(), [&registry] { return registry.names(); },
                      [&registry](const std::string& name) { return registry.help(name); },
                      [&registry](const std::string& name) { return registry.options(name); }};
}

}  // namespace

const std::vector<CatalogEntry>& catalog() {
  static const std::vector<CatalogEntry> entries = {
      entry_for(processor_registry()),
      entry_for(feature_registry()),
      entry_for(model_registry()),
      entry_for(loss_registry()),
      entry_for(evaluator_registry()),
      entry_for(trainer_registry()),
      entry_for(reconstructor_registry()),
      entry_for(scorer_registry()),
  };
  return entries;
}

}  // namespace nabu
