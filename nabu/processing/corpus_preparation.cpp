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
#include "nabu/processing/preparation_problems.h"
#include "nabu/processing/wav_header.h"

namespace nabu {

namespace {

// How a corpus names its splits, and which it must have.
struct CorpusKind {
  std::string name;
  std::vector<std::string> splits;    // in report order
  std::vector<std::string> required;  // each must be there
  std::vector<std::string> one_of;    // at least one must be there (LibriMix's training sets)
  std::string speaker_folders;        // children of the root that hold wavNk folders
};

const std::vector<CorpusKind>& kinds() {
  static const std::vector<CorpusKind> all{
      {"librimix", {"train-360", "train-100", "dev", "test"}, {"dev", "test"},
       {"train-360", "train-100"}, "Libri[0-9]+Mix"},
      {"wham", {"tr", "cv", "tt"}, {"tr", "cv", "tt"}, {}, ""},
      {"wsj0-mix", {"tr", "cv", "tt"}, {"tr", "cv", "tt"}, {}, "[0-9]+speakers"},
      // A user's own mixtures: ROOT/{tr,cv,tt}/{mix,s1,s2,...}/*.wav at any one rate.
      {"folder", {"tr", "cv", "tt"}, {"tr", "cv", "tt"}, {}, ""}};
  return all;
}

const CorpusKind& kind_named(const std::string& name) {
  const std::string wanted = name == "whamr" ? "wham" : name;
  for (const auto& kind : kinds())
    if (kind.name == wanted) return kind;
  throw Error("unknown corpus '" + name + "'" + did_you_mean(name, corpus_kinds()) +
              "; known: " + join(corpus_kinds(), ", "));
}

struct Folder {
  std::string name;
  std::map<std::string, fs::path> files;  // utterance -> file
};

struct Split {
  std::string name;
  fs::path dir;
  std::vector<Folder> folders;
  std::vector<std::string> utterances;
  std::size_t primary = 0;  // the mixture folder utt_spkinfo.txt names
  std::map<std::string, int64_t> frames;  // of the primary mixture
  std::map<std::string, std::vector<std::string>> speakers;
};

struct Variant {
  std::string corpus, rate_folder, mode;
  std::string first_file;  // kind folder: the file whose rate is the corpus's
  int sample_rate = 0, sources = 0;
  fs::path dir;
  std::vector<Split> splits;
};

// The rates of a variant's files: a tree of another rate in the wrong folder is one problem.
struct RateTally {
  std::mutex mutex;
  std::size_t files = 0, wrong = 0;
  std::set<int> wrong_rates;
  void add(int rate, int expected) {
    std::lock_guard<std::mutex> lock(mutex);
    ++files;
    if (rate != expected) {
      ++wrong;
      wrong_rates.insert(rate);
    }
  }
};

bool is_mixture_folder(const std::string& name) { return starts_with(name, "mix"); }

// "s2" -> (2, ""), "s1_reverb" -> (1, "_reverb"); (0, "") for anything else.
std::pair<int, std::string> source_folder(const std::string& name) {
  static const std::regex pattern("s([0-9]+)(_[A-Za-z0-9]+)?");
  std::smatch match;
  if (!std::regex_match(name, match, pattern)) return {0, ""};
  return {std::stoi(match[1]), match[2]};
}

bool is_corpus_folder(const std::string& name) {
  return is_mixture_folder(name) || source_folder(name).first > 0 || name == "noise";
}

std::vector<fs::path> subfolders(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec)) out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

int rate_of(const std::string& rate_folder) {
  static const std::regex pattern("wav([0-9]+)k");
  std::smatch match;
  if (!std::regex_match(rate_folder, match, pattern)) return 0;
  return std::stoi(match[1]) * 1000;
}

bool has_rate_folders(const fs::path& dir) {
  for (const auto& child : subfolders(dir))
    if (rate_of(child.filename().string()) > 0) return true;
  return false;
}

// The folders that hold wav8k/wav16k: the root itself, or its Libri2Mix/2speakers children.
std::vector<fs::path> speaker_dirs(const CorpusKind& kind, const fs::path& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw DataError(root.string() + ": no such folder");
  if (has_rate_folders(root)) return {root};
  std::vector<fs::path> out;
  if (!kind.speaker_folders.empty()) {
    const std::regex pattern(kind.speaker_folders);
    for (const auto& child : subfolders(root))
      if (std::regex_match(child.filename().string(), pattern) && has_rate_folders(child))
        out.push_back(child);
  }
  if (out.empty())
    throw DataError(root.string() + ": no wav8k or wav16k folder" +
                    (kind.name == "librimix"   ? " (nor Libri2Mix or Libri3Mix with one)"
                     : kind.name == "wsj0-mix" ? " (nor 2speakers or 3speakers with one)"
                                               : std::string()) +
                    ": is this the " + kind.name + " root?");
  return out;
}

std::string canonical_rate(const std::string& rate) {
  std::string text = to_lower(trim(rate));
  if (starts_with(text, "wav")) text = text.substr(3);
  if (!text.empty() && text.back() != 'k') {
    auto hz = parse_int(text);
    if (hz && *hz % 1000 == 0) text = std::to_string(*hz / 1000) + "k";
  }
  if (rate_of("wav" + text) == 0)
    throw Error("--rates: '" + rate + "' is not a rate such as 8k or 16k");
  return "wav" + text;
}

// Speakers from a mixture's name: LibriMix joins LibriSpeech utterances (speaker-chapter-index)
// with '_'; wsj0-2mix, WHAM! and WHAMR! join (utterance, gain) pairs, the speaker being the
// utterance's first three characters.
std::vector<std::string> speakers_of(const std::string& kind, const std::string& utterance,
                                     int sources) {
  auto parts = split(utterance, '_');
  std::vector<std::string> out;
  if (kind == "folder") {
    // A folder of mixtures names no speakers: each source is its own (<utterance>_s<k>).
    for (int s = 1; s <= sources; ++s) out.push_back(utterance + "_s" + std::to_string(s));
  } else if (kind == "librimix") {
    if (static_cast<int>(parts.size()) != sources) return {};
    for (const auto& part : parts) {
      auto dash = part.find('-');
      if (dash == std::string::npos || dash == 0) return {};
      out.push_back(part.substr(0, dash));
    }
  } else {
    if (static_cast<int>(parts.size()) != 2 * sources) return {};
    for (int s = 0; s < sources; ++s) {
      if (parts[2 * s].size() < 3) return {};
      out.push_back(parts[2 * s].substr(0, 3));
    }
  }
  return out;
}

// "speaker ... M|F ..." lines: LibriSpeech's SPEAKERS.TXT ('|' separated), wsj0's spkrinfo.txt,
// or two columns; ';' and '#' start comments.
std::map<std::string, std::string> read_genders(const fs::path& file) {
  std::map<std::string, std::string> genders;
  if (file.empty()) return genders;
  std::ifstream in(file);
  if (!in) throw DataError(file.string() + ": cannot read the speaker genders (--speaker-genders)");
  std::string line;
  while (std::getline(in, line)) {
    std::replace(line.begin(), line.end(), '|', ' ');
    auto fields = split_whitespace(line);
    if (fields.empty() || fields[0][0] == ';' || fields[0][0] == '#') continue;
    for (std::size_t i = 1; i < fields.size(); ++i) {
      const std::string gender = to_lower(fields[i]);
      if (gender == "m" || gender == "f") {
        genders[fields[0]] = gender == "m" ? "M" : "F";
        break;
      }
    }
  }
  if (genders.empty())
    throw DataError(file.string() + ": no 'speaker ... M|F' line (--speaker-genders)");
  return genders;
}

// LibriMix's metadata/mixture_<split>_<mixture folder>.csv: utterance -> length in samples.
std::map<std::string, int64_t> read_librimix_metadata(const fs::path& csv, Problems& problems) {
  std::map<std::string, int64_t> lengths;
  std::ifstream in(csv);
  std::string line;
  if (!in || !std::getline(in, line)) {
    problems.add(csv.string(), "cannot be read");
    return lengths;
  }
  auto header = split(trim(line), ',');
  auto id_column = std::find(header.begin(), header.end(), "mixture_ID") - header.begin();
  auto length_column = std::find(header.begin(), header.end(), "length") - header.begin();
  if (id_column == static_cast<long>(header.size()) ||
      length_column == static_cast<long>(header.size())) {
    problems.add(csv.string(), "has no mixture_ID or length column");
    return lengths;
  }
  int line_number = 1;
  while (std::getline(in, line)) {
    ++line_number;
    if (trim(line).empty()) continue;
    auto fields = split(trim(line), ',');
    auto length = fields.size() == header.size() ? parse_int(fields[length_column]) : std::nullopt;
    if (!length) {
      problems.add(csv.string(), "malformed line", "line " + std::to_string(line_number));
      continue;
    }
    lengths[fields[id_column]] = *length;
  }
  return lengths;
}

std::string relative_name(const fs::path& path, const fs::path& root) {
  auto relative = path.lexically_relative(root.parent_path());
  return relative.empty() ? path.string() : relative.string();
}

// Lists the split's folders and files and reports what is missing.
Split scan_split(const std::string& name, const fs::path& dir, const fs::path& root,
                 Problems& problems) {
  Split split;
  split.name = name;
  split.dir = dir;
  for (const auto& child : subfolders(dir)) {
    Folder folder;
    folder.name = child.filename().string();
    if (!is_corpus_folder(folder.name)) continue;
    std::error_code ec;
    for (fs::directory_iterator it(child, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->path().extension() != ".wav") continue;
      const std::string name = it->path().filename().string();
      if (name.find_first_of(" \t") != std::string::npos) {
        problems.add(relative_name(child, root),
                     "a space in a file name (list files separate their fields by spaces): "
                     "rename the file",
                     name);
        continue;
      }
      folder.files[it->path().stem().string()] = it->path();
    }
    split.folders.push_back(std::move(folder));
  }
  const std::string where = relative_name(dir, root);
  std::set<std::string> utterances;
  for (const auto& folder : split.folders)
    for (const auto& entry : folder.files) utterances.insert(entry.first);
  split.utterances.assign(utterances.begin(), utterances.end());
  if (std::none_of(split.folders.begin(), split.folders.end(),
                   [](const Folder& f) { return is_mixture_folder(f.name); }))
    problems.add(where, "no mixture folder (mix, mix_clean, mix_both, ...)");
  else if (split.utterances.empty())
    problems.add(where, "no .wav files");
  for (const auto& folder : split.folders)
    for (const auto& utterance : split.utterances)
      if (!folder.files.count(utterance))
        problems.add(where + "/" + folder.name, "missing file", utterance + ".wav");
  // The mixture utt_spkinfo.txt names: the clean one where there are several.
  std::size_t best = split.folders.size();
  for (const char* preferred : {"mix_clean", "mix", "mix_clean_anechoic"})
    for (std::size_t i = 0; i < split.folders.size() && best == split.folders.size(); ++i)
      if (split.folders[i].name == preferred) best = i;
  for (std::size_t i = 0; i < split.folders.size() && best == split.folders.size(); ++i)
    if (is_mixture_folder(split.folders[i].name)) best = i;
  split.primary = best < split.folders.size() ? best : 0;
  return split;
}

// Reads every header of the split in parallel; each file must be mono, at the folder's rate,
// whole and as long as the primary mixture (and as LibriMix's metadata says).
void check_split_files(Split& split, const Variant& variant, const fs::path& root,
                       const std::map<std::string, std::map<std::string, int64_t>>& metadata,
                       int workers, Problems& problems, ProgressReporter& progress,
                       std::atomic<std::size_t>& done, RateTally& rates) {
  const std::string where = relative_name(split.dir, root);
  std::vector<int64_t> frames(split.utterances.size(), -1);
  std::atomic<std::size_t> next{0};
  auto work = [&](bool reports) {
    for (std::size_t u = next++; u < split.utterances.size(); u = next++) {
      const std::string& utterance = split.utterances[u];
      int64_t reference = -1;
      std::string reference_folder;
      // The primary mixture first: the other files are compared with it.
      std::vector<std::size_t> order{split.primary};
      for (std::size_t f = 0; f < split.folders.size(); ++f)
        if (f != split.primary) order.push_back(f);
      for (std::size_t f : order) {
        const Folder& folder = split.folders[f];
        auto file = folder.files.find(utterance);
        if (file == folder.files.end()) continue;
        const std::string place = where + "/" + folder.name;
        const std::string example = utterance + ".wav";
        ++done;
        WavHeader header;
        try {
          header = read_wav_header(file->second);
        } catch (const DataError& error) {
          problems.add(place, "unreadable or not a wav file", error.what());
          continue;
        }
        rates.add(header.sample_rate, variant.sample_rate);
        if (header.sample_rate != variant.sample_rate)
          problems.add(place,
                       variant.first_file.empty()
                           ? std::to_string(header.sample_rate) + " Hz under " +
                                 variant.rate_folder + " (expected " +
                                 std::to_string(variant.sample_rate) + ")"
                           : std::to_string(header.sample_rate) + " Hz, not the " +
                                 std::to_string(variant.sample_rate) + " Hz of " +
                                 variant.first_file + " (one rate per corpus; resample first)",
                       example);
        if (header.channels != 1)
          problems.add(place, std::to_string(header.channels) + " channels (expected mono)",
                       example);
        if (header.truncated()) {
          std::ostringstream what;
          what.precision(3);
          what << "truncated: the header declares " << header.seconds() << " s, the file holds "
               << double(header.frames_present) / std::max(1, header.sample_rate) << " s";
          problems.add(place, what.str(), example);
          continue;
        }
        auto expected = metadata.find(folder.name);
        if (expected != metadata.end()) {
          auto length = expected->second.find(utterance);
          if (length != expected->second.end() && length->second != header.frames)
            problems.add(place, "length differs from LibriMix's metadata", example);
        }
        if (reference < 0) {
          reference = header.frames;
          reference_folder = folder.name;
        } else if (header.frames != reference) {
          problems.add(place, "length differs from " + reference_folder, example);
        }
      }
      frames[u] = reference;
      if (reports) progress.update(done);
    }
  };
  std::vector<std::thread> threads;
  for (int w = 1; w < workers; ++w) threads.emplace_back(work, false);
  work(true);
  for (auto& thread : threads) thread.join();
  for (std::size_t u = 0; u < split.utterances.size(); ++u)
    if (frames[u] >= 0) split.frames[split.utterances[u]] = frames[u];
}

std::string corpus_name(const std::string& kind, int sources, const std::vector<Split>& splits) {
  if (kind == "librimix") return "Libri" + std::to_string(sources) + "Mix";
  if (kind == "wsj0-mix") return "wsj0-" + std::to_string(sources) + "mix";
  for (const auto& split : splits)
    for (const auto& folder : split.folders)
      if (folder.name.find("reverb") != std::string::npos ||
          folder.name.find("anechoic") != std::string::npos)
        return "WHAMR";
  return "WHAM";
}

Variant scan_variant(const CorpusKind& kind, const fs::path& mode_dir, const fs::path& root,
                     Problems& problems) {
  Variant variant;
  variant.dir = mode_dir;
  variant.mode = mode_dir.filename().string();
  variant.rate_folder = mode_dir.parent_path().filename().string();
  variant.sample_rate = rate_of(variant.rate_folder);
  const std::string where = relative_name(mode_dir, root);
  std::error_code ec;
  for (const auto& name : kind.splits) {
    if (fs::is_directory(mode_dir / name, ec))
      variant.splits.push_back(scan_split(name, mode_dir / name, root, problems));
    else if (std::count(kind.required.begin(), kind.required.end(), name))
      problems.add(where, "no '" + name + "' split (expected " + join(kind.splits, ", ") + ")");
  }
  if (!kind.one_of.empty() &&
      std::none_of(kind.one_of.begin(), kind.one_of.end(),
                   [&](const std::string& name) { return fs::is_directory(mode_dir / name, ec); }))
    problems.add(where, "no training split (" + join(kind.one_of, " or ") + ")");
  std::set<std::string> source_suffixes;
  for (const auto& split : variant.splits)
    for (const auto& folder : split.folders) {
      auto [index, suffix] = source_folder(folder.name);
      variant.sources = std::max(variant.sources, index);
      if (index > 0) source_suffixes.insert(suffix);
    }
  for (const auto& split : variant.splits) {
    if (variant.sources == 0) {
      problems.add(relative_name(split.dir, root), "no source folders (s1, s2, ...)");
      continue;
    }
    for (const auto& suffix : source_suffixes)
      for (int s = 1; s <= variant.sources; ++s) {
        const std::string name = "s" + std::to_string(s) + suffix;
        if (std::none_of(split.folders.begin(), split.folders.end(),
                         [&](const Folder& f) { return f.name == name; }))
          problems.add(relative_name(split.dir, root), "no '" + name + "' folder");
      }
  }
  variant.corpus = corpus_name(kind.name, variant.sources, variant.splits);
  if (kind.name == "folder") {
    // Named after its root; one rate, that of its first mixture file (tr's, in name order).
    variant.corpus = mode_dir.filename().string();
    variant.mode.clear();
    for (const auto& split : variant.splits) {
      if (split.folders.empty() || split.folders[split.primary].files.empty()) continue;
      const fs::path& first = split.folders[split.primary].files.begin()->second;
      variant.first_file = relative_name(first, root);
      try {
        variant.sample_rate = read_wav_header(first).sample_rate;
      } catch (const DataError&) {
        // Reported with the split's files; the rate is then taken as unknown.
      }
      break;
    }
    variant.rate_folder = variant.sample_rate % 1000 == 0
                              ? "wav" + std::to_string(variant.sample_rate / 1000) + "k"
                              : std::to_string(variant.sample_rate) + "Hz";
  }
  return variant;
}

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
std::map<std::string, std::map<std::string, int64_t>> librimix_metadata(
    const Variant& variant, const Split& split, const fs::path& clean_root, Problems& problems) {
  std::map<std::string, std::map<std::string, int64_t>> metadata;
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
                          : std::map<std::string, std::map<std::string, int64_t>>{};
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
