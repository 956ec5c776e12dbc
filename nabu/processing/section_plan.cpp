#include "nabu/processing/section_plan.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include "nabu/core/error.h"
#include "nabu/core/strings.h"
#include "nabu/processing/database_section.h"
#include "nabu/processing/processor.h"

namespace nabu {

namespace {

std::string normal_path(const std::string& path) {
  return std::filesystem::path(path).lexically_normal().string();
}

std::string strip_slash(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

std::vector<std::string> keep_selected(const std::vector<std::string>& order,
                                       const std::set<std::string>& selected,
                                       const SectionChoice& choice) {
  std::vector<std::string> kept;
  for (const auto& name : order) {
    if (selected.count(name)) {
      kept.push_back(name);
      continue;
    }
    logger().info("[{}]: skipped: {}", name,
                 choice.sections.empty()
                     ? "no task of this recipe uses it (--all-sections prepares every section)"
                     : "not named by --section");
  }
  return kept;
}

// The section (other than `section`) that prepares its stores in `dir`, if any.
const ConfigSection* producer_of(const ConfigFile& database, const ConfigSection& section,
                                 const std::string& dir) {
  auto options = read_database_section(section, database);
  if (dir.empty() || same_directory(dir, options.store_dir)) return nullptr;
  for (const auto& other : database.sections()) {
    if (other.name() == "globalvars" || other.name() == section.name()) continue;
    auto other_options = read_database_section(other, database);
    if (other_options.preprocess && same_directory(other_options.store_dir, dir)) return &other;
  }
  return nullptr;
}

const ConfigSection* statistics_producer(const Recipe& recipe, const ConfigSection& section) {
  const ConfigFile& database = recipe.get("database.conf");
  return producer_of(database, section, read_database_section(section, database).meanandvar_dir);
}

bool needs_statistics(const Recipe& recipe, const ConfigSection& section) {
  auto options = read_database_section(section, recipe.get("database.conf"));
  if (options.processor_config.empty()) return false;
  return make_processor(recipe.processor_config(section))->needs_statistics();
}

}  // namespace

std::set<std::string> sections_for_tasks(const Recipe& recipe, const SectionChoice& choice,
                                         bool log) {
  const ConfigFile& database = recipe.get("database.conf");
  std::set<std::string> selected;
  std::vector<std::string> pending;
  for (const auto& [name, where] : choice.used_sections) {
    if (!database.has_section(name)) continue;  // nabu check reports it
    if (log) logger().info("[{}]: used by {}", name, join(where, ", "));
    if (selected.insert(name).second) pending.push_back(name);
  }
  // The sections that compute the statistics the used ones normalise with, transitively.
  while (!pending.empty()) {
    const ConfigSection& section = database.section(pending.back());
    pending.pop_back();
    // The section whose label numbering this one continues (strlabel2index_processor).
    if (const ConfigSection* numbering = producer_of(
            database, section, read_database_section(section, database).label2index_dir))
      if (selected.insert(numbering->name()).second) {
        if (log)
          logger().info("[{}]: numbers the labels of [{}]", numbering->name(), section.name());
        pending.push_back(numbering->name());
      }
    if (!needs_statistics(recipe, section)) continue;
    if (const ConfigSection* producer = statistics_producer(recipe, section))
      if (selected.insert(producer->name()).second) {
        if (log)
          logger().info("[{}]: computes the statistics of [{}]", producer->name(), section.name());
        pending.push_back(producer->name());
      }
  }
  return selected;
}

namespace {

void check_statistics_exist(const Recipe& recipe, const std::vector<std::string>& order,
                            const SectionChoice& choice) {
  const ConfigFile& database = recipe.get("database.conf");
  std::set<std::string> checked(order.begin(), order.end());
  // Sections computed on the fly (preprocess = False) that the tasks use need statistics too.
  for (const auto& [name, where] : choice.used_sections)
    if (database.has_section(name) && choice.sections.empty()) checked.insert(name);
  for (const auto& name : checked) {
    const ConfigSection& section = database.section(name);
    auto options = read_database_section(section, database);
    if (options.meanandvar_dir.empty() ||
        same_directory(options.meanandvar_dir, options.store_dir) || !needs_statistics(recipe, section))
      continue;
    const ConfigSection* producer = statistics_producer(recipe, section);
    if (producer && std::find(order.begin(), order.end(), producer->name()) != order.end())
      continue;  // made here, before this section
    auto statistics = std::filesystem::path(options.meanandvar_dir) / "mvn_stats.h5";
    if (std::filesystem::exists(statistics)) continue;
    section.fail("meanandvar_dir",
                 "[" + name + "] normalises with the statistics in " + options.meanandvar_dir +
                     ", which do not exist; " +
                     (producer ? "section [" + producer->name() +
                                     "] of this recipe makes them (nabu data --section " +
                                     producer->name() + ")"
                               : std::string("no section of this recipe makes them (none has "
                                             "store_dir = ") +
                                     options.meanandvar_dir + "): prepare the recipe that does"));
  }
}

}  // namespace

bool same_directory(const std::string& a, const std::string& b) {
  return strip_slash(normal_path(a)) == strip_slash(normal_path(b));
}

std::vector<std::string> preparation_order(const ConfigFile& database) {
  struct Node {
    std::string name, store_dir;
    std::vector<std::string> inputs;  // meanandvar_dir and label2index_dir
    std::vector<std::string> dependencies;
  };
  std::vector<Node> nodes;
  std::map<std::string, std::size_t> position;
  for (const auto& section : database.sections()) {
    if (section.name() == "globalvars") continue;
    auto options = read_database_section(section, database);
    if (!options.preprocess) continue;
    position[section.name()] = nodes.size();
    nodes.push_back({section.name(), options.store_dir,
                     {options.meanandvar_dir, options.label2index_dir},
                     options.dependency_names()});
  }
  // Edges: explicit dependencies that are prepared here, and the producers of the statistics
  // and label numberings a section reads.
  std::vector<std::set<std::size_t>> before(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    // `dependencies` is documentation in the original, which never reads it: a name that is no
    // section orders nothing (nabu check warns about it).
    for (const auto& dependency : nodes[i].dependencies) {
      auto it = position.find(dependency);
      if (it != position.end() && it->second != i) before[i].insert(it->second);
    }
    for (const auto& input : nodes[i].inputs)
      if (!input.empty() && !same_directory(input, nodes[i].store_dir))
        for (std::size_t j = 0; j < nodes.size(); ++j)
          if (j != i && same_directory(nodes[j].store_dir, input)) before[i].insert(j);
  }
  // Kahn's algorithm, taking the earliest ready section in file order.
  std::vector<std::string> order;
  std::vector<bool> done(nodes.size(), false);
  while (order.size() < nodes.size()) {
    bool progressed = false;
    for (std::size_t i = 0; i < nodes.size() && !progressed; ++i) {
      if (done[i]) continue;
      bool ready = std::all_of(before[i].begin(), before[i].end(),
                               [&](std::size_t j) { return done[j]; });
      if (!ready) continue;
      done[i] = true;
      order.push_back(nodes[i].name);
      progressed = true;
    }
    if (!progressed) {
      std::vector<std::string> cycle;
      for (std::size_t i = 0; i < nodes.size(); ++i)
        if (!done[i]) cycle.push_back(nodes[i].name);
      throw ConfigError(database.path() + ": dependency cycle between sections " +
                        join(cycle, ", ") + " (dependencies / meanandvar_dir / label2index_dir)");
    }
  }
  return order;
}

std::vector<std::string> plan_sections(const Recipe& recipe, const SectionChoice& choice) {
  auto order = preparation_order(recipe.get("database.conf"));
  if (!choice.sections.empty()) {
    for (const auto& name : choice.sections)
      if (std::find(order.begin(), order.end(), name) == order.end())
        throw ConfigError("--section " + name + ": not a section with preprocess = True" +
                          did_you_mean(name, order));
    order = keep_selected(order, {choice.sections.begin(), choice.sections.end()}, choice);
  } else if (choice.only_used_sections) {
    order = keep_selected(order, sections_for_tasks(recipe, choice), choice);
  }
  check_statistics_exist(recipe, order, choice);
  return order;
}

}  // namespace nabu
