#include "nabu/processing/corpus_preparation.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/progress.h"
#include "nabu/core/strings.h"
#include "nabu/processing/corpus_layout.h"
#include "nabu/processing/preparation_problems.h"
#include "nabu/processing/wav_header.h"

namespace nabu {

namespace {

using namespace corpus;

std::string line_of(const std::string& utterance, const std::vector<fs::path>& files) {
  std::string line = utterance;
  for (const auto& file : files) line += " " + file.string();
  return line + "\n";
}

// The lists of one split, file name -> content.
std::map<std::string, std::string> split_lists(const Split& split, const Variant& variant,
                                               const std::map<std::string, std::string>& genders) {
  std::map<std::string, std::string> lists;
  for (const auto& folder : split.folders) {
    std::string& text = lists[folder.name + "_wav.scp"];
    for (const auto& utterance : split.utterances)
      text += line_of(utterance, {folder.files.at(utterance)});
  }
  // Sources grouped by variant: s1 s2 -> allS_wav.scp, s1_reverb s2_reverb -> allS_reverb_wav.scp.
  std::map<std::string, std::vector<const Folder*>> by_suffix;
  for (const auto& folder : split.folders) {
    auto [index, suffix] = source_folder(folder.name);
    if (index == 0) continue;
    auto& group = by_suffix[suffix];
    group.resize(variant.sources, nullptr);
    group[index - 1] = &folder;
  }
  std::string clean_suffix = by_suffix.count("") ? "" : by_suffix.count("_anechoic") ? "_anechoic"
                                                                                    : by_suffix.begin()->first;
  for (const auto& [suffix, group] : by_suffix) {
    std::string& text = lists["allS" + suffix + "_wav.scp"];
    for (const auto& utterance : split.utterances) {
      std::vector<fs::path> files;
      for (const Folder* folder : group) files.push_back(folder->files.at(utterance));
      text += line_of(utterance, files);
    }
  }
  const Folder& mixture = split.folders[split.primary];
  std::string& spkinfo = lists["utt_spkinfo.txt"];
  std::string& sources = lists["sources_wav.scp"];
  std::string& utt2spk = lists["sources_utt2spk"];
  for (const auto& utterance : split.utterances) {
    const auto& speakers = split.speakers.at(utterance);
    spkinfo += utterance + " " + mixture.files.at(utterance).string();
    for (std::size_t s = 0; s < speakers.size(); ++s) {
      auto gender = genders.find(speakers[s]);
      spkinfo += " " + speakers[s] + " " + (gender == genders.end() ? "?" : gender->second);
      const std::string source = utterance + "_s" + std::to_string(s + 1);
      sources += line_of(source, {by_suffix.at(clean_suffix)[s]->files.at(utterance)});
      utt2spk += source + " " + speakers[s] + "\n";
    }
    spkinfo += "\n";
  }
  return lists;
}

PreparedSplit summarise(const Split& split, const Variant& variant,
                        const std::map<std::string, std::string>& lists) {
  PreparedSplit out;
  out.name = split.name;
  out.utterances = static_cast<int64_t>(split.utterances.size());
  std::set<std::string> speakers;
  double samples = 0;
  for (const auto& utterance : split.utterances) {
    samples += static_cast<double>(split.frames.at(utterance));
    for (const auto& speaker : split.speakers.at(utterance)) speakers.insert(speaker);
  }
  out.hours = samples / variant.sample_rate / 3600.0;
  out.speakers = static_cast<int64_t>(speakers.size());
  for (const auto& entry : lists) out.lists.push_back(entry.first);
  return out;
}

// Writes the variant's folder next to its final place and renames it there, so that an earlier
// preparation is replaced whole or not at all (as nabu test replaces its results folder).
void write_variant(const fs::path& final_dir, const std::vector<Split>& splits,
                   const std::vector<std::map<std::string, std::string>>& lists,
                   const nlohmann::json& report) {
  ensure_directory(final_dir.parent_path());
  AtomicPath staged(final_dir);  // removed unless committed
  for (std::size_t i = 0; i < splits.size(); ++i) {
    ensure_directory(staged.temporary() / splits[i].name);
    for (const auto& [name, text] : lists[i])
      write_file(staged.temporary() / splits[i].name / name, text);
  }
  write_file(staged.temporary() / "prepared.json", report.dump(1) + "\n");
  // The earlier preparation moves aside (removed when `previous` dies), the new one into place.
  std::optional<AtomicPath> previous;
  std::error_code ec;
  if (fs::exists(final_dir, ec)) {
    previous.emplace(final_dir.string() + ".old");
    rename_replace(final_dir, previous->temporary());
  }
  staged.commit();
}

// The rate and mode folders to prepare (a folder of one's own is itself the one).
std::vector<fs::path> select_mode_dirs(const CorpusKind& kind, const fs::path& clean_root,
                                       const std::set<std::string>& rates,
                                       const std::set<std::string>& modes) {
  std::vector<fs::path> mode_dirs;
  if (kind.name == "folder") {
    std::error_code ec;
    if (!fs::is_directory(clean_root, ec)) throw DataError(clean_root.string() + ": no such folder");
    if (!rates.empty() || !modes.empty())
      throw Error("--rates and --modes select folders of the standard corpora; a folder of "
                  "one's own has one rate and no modes");
    return {clean_root};
  }
  std::set<std::string> rates_found, modes_found;
  for (const auto& speaker_dir : speaker_dirs(kind, clean_root))
    for (const auto& rate_dir : subfolders(speaker_dir)) {
      const std::string rate = rate_dir.filename().string();
      if (rate_of(rate) == 0) continue;
      rates_found.insert(rate);
      if (!rates.empty() && !rates.count(rate)) continue;
      for (const auto& mode_dir : subfolders(rate_dir)) {
        const std::string mode = mode_dir.filename().string();
        if (mode != "min" && mode != "max") continue;
        modes_found.insert(mode);
        if (modes.empty() || modes.count(mode)) mode_dirs.push_back(mode_dir);
      }
    }
  const std::string found = join({rates_found.begin(), rates_found.end()}, ", ");
  for (const auto& rate : rates)
    if (!rates_found.count(rate))
      throw DataError(clean_root.string() + ": no " + rate + " folder (found: " + found + ")");
  for (const auto& mode : modes)
    if (!modes_found.count(mode))
      throw DataError(clean_root.string() + ": no '" + mode + "' folder under " + found);
  if (mode_dirs.empty())
    throw DataError(clean_root.string() + ": no min or max folder under " + found);
  return mode_dirs;
}

// LibriMix's metadata of a split: every listed mixture must be there.
LengthsByFolder librimix_metadata(
    const Variant& variant, const Split& split, const fs::path& clean_root, Problems& problems) {
  LengthsByFolder metadata;
  for (const auto& folder : split.folders) {
    const fs::path csv =
        variant.dir / "metadata" / ("mixture_" + split.name + "_" + folder.name + ".csv");
    std::error_code ec;
    if (!is_mixture_folder(folder.name) || !fs::exists(csv, ec)) continue;
    metadata[folder.name] = read_librimix_metadata(csv, problems);
    for (const auto& [utterance, length] : metadata[folder.name])
      if (!folder.files.count(utterance))
        problems.add(relative_name(split.dir / folder.name, clean_root),
                     "listed in metadata/" + csv.filename().string() + " but missing",
                     utterance + ".wav");
  }
  return metadata;
}

// Every mixture's speakers: given (--mixture-speakers of a folder), or read from its name.
void name_speakers(const CorpusKind& kind, const CorpusPreparationOptions& options,
                   const Variant& variant, Split& split, const fs::path& clean_root,
                   Problems& problems) {
  for (const auto& utterance : split.utterances) {
    auto known = options.mixture_speakers.find(utterance);
    auto speakers = known != options.mixture_speakers.end()
                        ? known->second
                        : speakers_of(kind.name, utterance, variant.sources);
    if (speakers.empty() && variant.sources > 0)
      problems.add(relative_name(split.dir, clean_root),
                   "the name does not say its " + std::to_string(variant.sources) +
                       " speakers as " + kind.name + " names mixtures",
                   utterance);
    split.speakers[utterance] = std::move(speakers);
  }
}

// Every file of every variant read and checked, in parallel; the problems collected.
void check_variants(const CorpusKind& kind, const CorpusPreparationOptions& options,
                    std::vector<Variant>& variants, const fs::path& clean_root,
                    Problems& problems) {
  std::size_t total_files = 0;
  for (const auto& variant : variants)
    for (const auto& split : variant.splits)
      for (const auto& folder : split.folders) total_files += folder.files.size();
  const int workers = options.workers > 0
                          ? options.workers
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  ProgressReporter progress("prepare: checking " + clean_root.string(), total_files, "files");
  std::atomic<std::size_t> done{0};
  for (auto& variant : variants) {
    RateTally rates;
    for (auto& split : variant.splits) {
      auto metadata = kind.name == "librimix"
                          ? librimix_metadata(variant, split, clean_root, problems)
                          : LengthsByFolder{};
      check_split_files(split, variant, clean_root, metadata, workers, problems, progress, done,
                        rates);
      name_speakers(kind, options, variant, split, clean_root, problems);
    }
    if (rates.files > 0 && rates.wrong == rates.files && rates.wrong_rates.size() == 1) {
      // Every file at one other rate: a tree put in the wrong folder, whatever else follows.
      const int rate = *rates.wrong_rates.begin();
      const std::string where = relative_name(variant.dir, clean_root);
      problems.remove_under(where);
      problems.add(where, "every file is " + std::to_string(rate) + " Hz, not the " +
                              std::to_string(variant.sample_rate) + " Hz of " +
                              variant.rate_folder + " (a wav" + std::to_string(rate / 1000) +
                              "k tree in the " + variant.rate_folder + " folder?)");
    }
  }
  progress.update(total_files);
}

// One variant's lists and prepared.json written; what was prepared.
PreparedVariant write_prepared(const CorpusKind& kind, const CorpusPreparationOptions& options,
                               const Variant& variant, const fs::path& clean_root,
                               const std::map<std::string, std::string>& genders) {
  PreparedVariant out;
  out.corpus = variant.corpus;
  out.rate_folder = variant.rate_folder;
  out.mode = variant.mode;
  out.sample_rate = variant.sample_rate;
  out.speakers_per_mixture = variant.sources;
  if (kind.name == "folder" && !options.name.empty()) out.corpus = options.name;
  out.out = kind.name == "folder"
                ? options.out / out.corpus
                : options.out / variant.corpus / variant.rate_folder / variant.mode;
  std::vector<std::map<std::string, std::string>> lists;
  nlohmann::json report{{"corpus", out.corpus},              {"kind", kind.name},
                        {"root", clean_root.string()},       {"source", variant.dir.string()},
                        {"sample_rate", variant.sample_rate}, {"mode", variant.mode},
                        {"speakers_per_mixture", variant.sources},
                        {"genders_from", options.speaker_genders.string()}};
  for (const auto& split : variant.splits) {
    lists.push_back(split_lists(split, variant, genders));
    out.splits.push_back(summarise(split, variant, lists.back()));
    const auto& summary = out.splits.back();
    report["splits"][split.name] = {{"utterances", summary.utterances},
                                    {"hours", summary.hours},
                                    {"speakers", summary.speakers},
                                    {"lists", summary.lists}};
  }
  write_variant(out.out, variant.splits, lists, report);
  return out;
}

}  // namespace

const std::vector<std::string>& corpus_kinds() {
  static const std::vector<std::string> names{"librimix", "wham", "whamr", "wsj0-mix", "folder"};
  return names;
}

std::vector<PreparedVariant> prepare_corpus(const CorpusPreparationOptions& options) {
  const CorpusKind& kind = kind_named(options.kind);
  const fs::path clean_root = absolute_folder(options.root);
  refuse_space_in_path(clean_root);
  const auto genders = read_genders(options.speaker_genders);
  std::set<std::string> rates, modes(options.modes.begin(), options.modes.end());
  for (const auto& rate : options.rates) rates.insert(canonical_rate(rate));
  for (const auto& mode : modes)
    if (mode != "min" && mode != "max")
      throw Error("--modes: '" + mode + "' is neither min nor max");

  Problems problems;
  std::vector<Variant> variants;
  for (const auto& mode_dir : select_mode_dirs(kind, clean_root, rates, modes))
    variants.push_back(scan_variant(kind, mode_dir, clean_root, problems));
  check_variants(kind, options, variants, clean_root, problems);
  if (problems.size() > 0) {
    problems.report();
    throw DataError(clean_root.string() + ": " + std::to_string(problems.size()) +
                    " problem(s), listed above; nothing written");
  }
  std::vector<PreparedVariant> prepared;
  for (const auto& variant : variants)
    prepared.push_back(write_prepared(kind, options, variant, clean_root, genders));
  return prepared;
}

}  // namespace nabu
