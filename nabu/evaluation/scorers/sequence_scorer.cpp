#include "nabu/evaluation/scorers/sequence_scorer.h"

#include "nabu/core/strings.h"
#include "nabu/evaluation/scorers/scorer.h"

namespace nabu {

void SequenceScorerOptions::declare(OptionsReader& r) {
  r("score_type", score_type, "the scorer (nabu list score_type)");
  r("references", references, "database section of the reference transcriptions");
  r.require(!references.empty(), "references", "name the database section of the references");
}

SequenceScorerRegistry& sequence_scorer_registry() {
  static SequenceScorerRegistry registry("score_type");
  return registry;
}

namespace {

// The problem with the section's score_type, or "" when it names one sequence scorer.
std::string score_type_problem(const ConfigSection& section, std::string* name) {
  if (!section.has("score_type")) return section.where() + ": missing key score_type";
  auto types = split_whitespace(section.get_string("score_type"));
  if (types.size() != 1)
    return section.where("score_type") + ": a recognition task takes one score_type (" +
           join(sequence_scorer_registry().names(), ", ") + ")";
  *name = types.front();
  if (sequence_scorer_registry().contains(*name)) return "";
  std::string message = section.where("score_type") + ": " +
                        sequence_scorer_registry().unknown_message(*name);
  if (scorer_registry().contains(*name))
    message += " (" + *name + " scores separated signals, not label sequences)";
  return message;
}

}  // namespace

SequenceScorerPtr make_sequence_scorer(const ConfigSection& section) {
  std::string name;
  if (auto problem = score_type_problem(section, &name); !problem.empty())
    throw ConfigError(problem);
  return sequence_scorer_registry().create(name, section);
}

std::vector<std::string> check_sequence_scorer(const ConfigSection& section) {
  std::string name;
  if (auto problem = score_type_problem(section, &name); !problem.empty()) return {problem};
  return sequence_scorer_registry().check(name, section);
}

}  // namespace nabu
