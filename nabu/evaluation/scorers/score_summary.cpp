#include "nabu/evaluation/scorers/score_summary.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/strings.h"

namespace nabu {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double mean_of(const std::vector<double>& values) {
  if (values.empty()) return kNaN;
  double sum = 0.0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

// numpy's np.std (population, ddof = 0).
double std_of(const std::vector<double>& values) {
  if (values.empty()) return kNaN;
  double mean = mean_of(values), sum = 0.0;
  for (double v : values) sum += (v - mean) * (v - mean);
  return std::sqrt(sum / static_cast<double>(values.size()));
}

// numpy's np.median: the mean of the two middle values for an even count.
double median_of(std::vector<double> values) {
  // np.median gives NaN when a value is NaN (and std::sort must never see one).
  if (values.empty() || std::any_of(values.begin(), values.end(), [](double v) { return std::isnan(v); }))
    return kNaN;
  std::sort(values.begin(), values.end());
  std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

nlohmann::json number(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

nlohmann::json numbers(const std::vector<double>& values) {
  auto list = nlohmann::json::array();
  for (double v : values) list.push_back(number(v));
  return list;
}

std::vector<double> read_numbers(const nlohmann::json& list) {
  std::vector<double> values;
  for (const auto& v : list) values.push_back(v.is_number() ? v.get<double>() : kNaN);
  return values;
}

}  // namespace

SpeakerInfo read_speaker_info(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in)
    throw DataError(file.string() + ": cannot read the speaker info file" +
                    generation_hint(file) + working_directory_note(file));
  SpeakerInfo info;
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    auto fields = split_whitespace(line);
    if (fields.empty()) continue;
    // Field 1 is ignored by the original; speakers come in (id, gender) pairs after it.
    if (fields.size() < 4 || fields.size() % 2 != 0)
      throw DataError(file.string() + ":" + std::to_string(line_number) +
                      ": expected 'utt <x> id1 gender1 [id2 gender2 ...]', got '" +
                      shorten(line) + "'");
    auto& speakers = info[fields[0]];
    speakers.clear();
    for (std::size_t i = 2; i + 1 < fields.size(); i += 2)
      speakers.emplace_back(fields[i], fields[i + 1]);
  }
  return info;
}

const std::vector<std::string>& ScoreSummary::mix_types() {
  static const std::vector<std::string> types{"all_m", "all_f", "same_gen", "diff_gen"};
  return types;
}

ScoreSummary::ScoreSummary(std::vector<std::string> metrics, SpeakerInfo speakers)
    : metrics_(std::move(metrics)), speakers_(std::move(speakers)) {}

void ScoreSummary::add(const std::string& utterance, const UtteranceScore& score) {
  auto found = speakers_.find(utterance);
  if (found == speakers_.end())
    throw DataError("utterance '" + utterance + "' is not in the speaker info (spkinfo)");
  std::size_t scored = 0;
  for (const auto& [metric, scenarios] : score.values)
    for (const auto& [scenario, values] : scenarios) scored = std::max(scored, values.size());
  if (found->second.size() < scored)
    throw DataError("utterance '" + utterance + "' has " + std::to_string(scored) +
                    " scored speakers but the speaker info lists " +
                    std::to_string(found->second.size()));
  Entry entry;
  entry.score = score;
  for (std::size_t s = 0; s < scored; ++s) {
    entry.ids.push_back(found->second[s].first);
    entry.genders.push_back(found->second[s].second);
  }
  // scorer.py: all 'M' -> all_m and same_gen; all 'F' -> all_f and same_gen; else diff_gen.
  // A speaker of unknown gender ('?' from nabu prepare without --speaker-genders) puts the
  // mixture in none of them.
  auto all_are = [&](const char* gender) {
    return std::all_of(entry.genders.begin(), entry.genders.end(),
                       [&](const std::string& g) { return g == gender; });
  };
  const bool all_known =
      std::all_of(entry.genders.begin(), entry.genders.end(),
                  [](const std::string& g) { return g == "M" || g == "F"; });
  for (const auto& type : mix_types()) entry.mix_type[type] = false;
  if (all_are("M")) {
    entry.mix_type["all_m"] = entry.mix_type["same_gen"] = true;
  } else if (all_are("F")) {
    entry.mix_type["all_f"] = entry.mix_type["same_gen"] = true;
  } else if (all_known) {
    entry.mix_type["diff_gen"] = true;
  }
  results_[utterance] = std::move(entry);
}

nlohmann::json ScoreSummary::complete_json() const {
  auto all = nlohmann::json::object();
  for (const auto& [utterance, entry] : results_) {
    nlohmann::json score = nlohmann::json::object();
    for (const auto& [metric, scenarios] : entry.score.values)
      for (const auto& [scenario, values] : scenarios) score[metric][scenario] = numbers(values);
    for (const auto& [scenario, perm] : entry.score.permutation) score["perm"][scenario] = perm;
    nlohmann::json info = {{"ids", entry.ids}, {"genders", entry.genders}};
    for (const auto& [type, flag] : entry.mix_type) info["mix_type"][type] = flag;
    all[utterance] = {{"score", score}, {"spk_info", info}};
  }
  return all;
}

std::vector<double> ScoreSummary::utterance_means(const std::string& metric,
                                                  const std::string& scenario,
                                                  const std::string& group) const {
  std::vector<double> means;
  for (const auto& [utterance, entry] : results_) {
    if (group != "all" && !entry.mix_type.at(group)) continue;
    if (const auto* values = entry_values(entry, metric, scenario))
      means.push_back(mean_of(*values));
  }
  return means;
}

nlohmann::json ScoreSummary::summary_json() const {
  auto summary = nlohmann::json::object();
  std::vector<std::string> groups{"all"};
  groups.insert(groups.end(), mix_types().begin(), mix_types().end());
  for (const auto& metric : metrics_)
    for (const auto& scenario : Scorer::scenarios())
      for (const auto& group : groups) {
        auto values = utterance_means(metric, scenario, group);
        // The count says what the statistics are over (a --max-utterances subset, a group).
        summary[metric][scenario][group] = {{"mean", number(mean_of(values))},
                                            {"std", number(std_of(values))},
                                            {"median", number(median_of(values))},
                                            {"utterances", values.size()}};
      }
  return summary;
}

std::string ScoreSummary::summary_text(const std::string& scorer_name,
                                       const std::string& unit) const {
  // One compact table: per metric the mean over all mixtures, and over same- and
  // different-gender mixtures where genders are known; the rest is in the summary and complete
  // JSON files.
  const auto& scenarios = Scorer::scenarios();  // the estimates, then the mixture (base)
  std::string out = fmt::format("{} ({}, {} mixtures): mean over mixtures{}\n", scorer_name,
                                join(metrics_, ", "), results_.size(),
                                unit.empty() ? "" : ", " + unit);
  const int decimals = unit.empty() ? 3 : 2;
  out += fmt::format("  {:<8} {:<10} {:>10} {:>10} {:>12}\n", "metric", "mixtures", "separated",
                     "mixture", "improvement");
  bool artifacts = false;
  for (const auto& metric : metrics_)
    for (const std::string group : {"all", "same_gen", "diff_gen"}) {
      const auto separated = utterance_means(metric, scenarios[0], group);
      if (separated.empty()) continue;
      const double estimate = mean_of(separated);
      const double mixture = mean_of(utterance_means(metric, scenarios[1], group));
      const std::string kind =
          group == "all" ? "all"
                         : fmt::format("{} ({})", group == "same_gen" ? "same" : "diff",
                                       separated.size());
      // A mixture is its sources' exact sum: it has no artifacts, so its SAR is round-off
      // (100-300 dB) and an "improvement" of it means nothing.
      if (ends_with(metric, "SAR")) {
        artifacts = true;
        out += fmt::format("  {:<8} {:<10} {:>10.{}f} {:>10} {:>12}\n", metric, kind, estimate,
                           decimals, "-", "-");
        continue;
      }
      out += fmt::format("  {:<8} {:<10} {:>10.{}f} {:>10.{}f} {:>12.{}f}\n", metric, kind,
                         estimate, decimals, mixture, decimals, estimate - mixture, decimals);
    }
  if (artifacts)
    out += "  (a mixture has no artifacts, being its sources' sum: no mixture SAR, no improvement)\n";
  return out;
}

const std::vector<double>* ScoreSummary::entry_values(const Entry& entry,
                                                      const std::string& metric,
                                                      const std::string& scenario) {
  auto by_metric = entry.score.values.find(metric);
  if (by_metric == entry.score.values.end()) return nullptr;
  auto by_scenario = by_metric->second.find(scenario);
  return by_scenario == by_metric->second.end() ? nullptr : &by_scenario->second;
}

double ScoreSummary::entry_mean(const Entry& entry, const std::string& metric,
                                const std::string& scenario) {
  const auto* values = entry_values(entry, metric, scenario);
  return values ? mean_of(*values) : kNaN;
}

std::vector<std::pair<std::string, double>> ScoreSummary::by_improvement() const {
  std::vector<std::pair<std::string, double>> rows;
  if (metrics_.empty()) return rows;
  const auto& scenarios = Scorer::scenarios();  // the estimates, then the mixture (base)
  for (const auto& [utterance, entry] : results_)
    rows.emplace_back(utterance, entry_mean(entry, metrics_.front(), scenarios[0]) -
                                     entry_mean(entry, metrics_.front(), scenarios[1]));
  // Unscorable rows (NaN) first: they are the first to look at.
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    if (std::isnan(a.second) != std::isnan(b.second)) return std::isnan(a.second);
    return a.second < b.second;
  });
  return rows;
}

namespace {

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string csv_number(double value) {
  return std::isfinite(value) ? fmt::format("{:.4f}", value) : std::string();
}

}  // namespace

std::string ScoreSummary::utterances_csv(
    const std::map<std::string, std::vector<std::string>>& files) const {
  const auto& scenarios = Scorer::scenarios();
  std::string csv = "utterance,mixture_kind,speakers";
  for (const auto& metric : metrics_)
    csv += "," + metric + "_separated," + metric + "_mixture," + metric + "_improvement";
  csv += ",files\n";
  for (const auto& [utterance, improvement] : by_improvement()) {
    const Entry& entry = results_.at(utterance);
    const std::string kind = entry.mix_type.at("same_gen")   ? "same_gen"
                             : entry.mix_type.at("diff_gen") ? "diff_gen"
                                                             : "unknown";
    csv += csv_field(utterance) + "," + kind + "," + csv_field(join(entry.ids, " "));
    for (const auto& metric : metrics_) {
      const double separated = entry_mean(entry, metric, scenarios[0]);
      const double mixture = entry_mean(entry, metric, scenarios[1]);
      csv += "," + csv_number(separated) + "," + csv_number(mixture) + "," +
             csv_number(separated - mixture);
    }
    auto found = files.find(utterance);
    csv += "," + csv_field(found == files.end() ? "" : join(found->second, " ")) + "\n";
  }
  return csv;
}

std::string ScoreSummary::worst_text(std::size_t count,
                                     const std::map<std::string, std::vector<std::string>>& files,
                                     const std::string& unit) const {
  const auto rows = by_improvement();
  if (rows.empty() || count == 0) return "";
  std::string out = fmt::format("  the {} lowest {} improvements (all in the _utterances.csv):\n",
                                std::min(count, rows.size()), metrics_.front());
  for (std::size_t i = 0; i < rows.size() && i < count; ++i) {
    auto found = files.find(rows[i].first);
    out += fmt::format("    {:>7.{}f}{}  {}{}\n", rows[i].second, unit.empty() ? 3 : 2,
                       unit.empty() ? "" : " " + unit, rows[i].first,
                       found == files.end() || found->second.empty() ? ""
                                                                    : "  " + found->second.front());
  }
  return out;
}

void ScoreSummary::load_complete_json(const nlohmann::json& complete) {
  if (!complete.is_object()) throw DataError("complete results: expected a JSON object");
  for (const auto& [utterance, item] : complete.items()) {
    try {
      Entry entry;
      for (const auto& [metric, scenarios] : item.at("score").items())
        for (const auto& [scenario, values] : scenarios.items()) {
          if (metric == "perm")
            entry.score.permutation[scenario] = values.get<std::vector<int64_t>>();
          else
            entry.score.values[metric][scenario] = read_numbers(values);
        }
      const auto& info = item.at("spk_info");
      entry.ids = info.at("ids").get<std::vector<std::string>>();
      entry.genders = info.at("genders").get<std::vector<std::string>>();
      for (const auto& [type, flag] : info.at("mix_type").items()) entry.mix_type[type] = flag.get<bool>();
      for (const auto& type : mix_types())
        if (!entry.mix_type.count(type)) entry.mix_type[type] = false;
      results_[utterance] = std::move(entry);
    } catch (const nlohmann::json::exception& e) {
      throw DataError("complete results, utterance '" + utterance + "': " + e.what());
    }
  }
}

}  // namespace nabu
