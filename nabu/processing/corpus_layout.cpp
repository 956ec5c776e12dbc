// The scans of corpus_layout.h.
#include "nabu/processing/corpus_layout.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "nabu/core/error.h"
#include "nabu/core/progress.h"
#include "nabu/core/strings.h"
#include "nabu/processing/corpus_preparation.h"
#include "nabu/processing/recording_checks.h"
#include "nabu/processing/wav_header.h"

namespace nabu::corpus {

bool is_mixture_folder(const std::string& name) { return starts_with(name, "mix"); }

const std::vector<CorpusKind>& kinds() {
  static const std::vector<CorpusKind> all{
      {"librimix",
       {"train-360", "train-100", "dev", "test"},
       {"dev", "test"},
       {"train-360", "train-100"},
       "Libri[0-9]+Mix"},
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
      if (is_audio_of_another_format(it->path()))
        problems.add(relative_name(child, root), other_format_problem(),
                     it->path().filename().string());
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

namespace {

// The header of one file of an utterance, checked against the variant: its frames, or -1 when it
// cannot be compared (unreadable, truncated).
int64_t checked_frames(const fs::path& file, const std::string& place, const std::string& example,
                       const Variant& variant, Problems& problems, RateTally& rates) {
  WavHeader header;
  try {
    header = read_wav_header(file);
  } catch (const DataError& error) {
    problems.add(place, "unreadable or not a wav file", error.what());
    return -1;
  }
  rates.add(header.sample_rate, variant.sample_rate);
  if (header.sample_rate != variant.sample_rate)
    problems.add(place,
                 variant.first_file.empty()
                     ? std::to_string(header.sample_rate) + " Hz under " + variant.rate_folder +
                           " (expected " + std::to_string(variant.sample_rate) + ")"
                     : std::to_string(header.sample_rate) + " Hz, not the " +
                           std::to_string(variant.sample_rate) + " Hz of " + variant.first_file +
                           " (one rate per corpus; resample first)",
                 example);
  if (header.channels != 1)
    problems.add(place, std::to_string(header.channels) + " channels (expected mono)", example);
  if (auto problem = truncation_problem(header); !problem.empty()) {
    problems.add(place, problem, example);
    return -1;
  }
  if (header.seconds() < variant.shortest_seconds) {
    problems.add(place, too_short_problem(header.seconds()), example);
    return -1;
  }
  return header.frames;
}

}  // namespace

int64_t check_utterance_files(const Split& split, const std::string& utterance,
                              const Variant& variant, const fs::path& root,
                              const LengthsByFolder& metadata, Problems& problems,
                              std::atomic<std::size_t>& done, RateTally& rates) {
  const std::string where = relative_name(split.dir, root);
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
    int64_t frames = checked_frames(file->second, place, example, variant, problems, rates);
    if (frames < 0) continue;
    auto expected = metadata.find(folder.name);
    if (expected != metadata.end()) {
      auto length = expected->second.find(utterance);
      if (length != expected->second.end() && length->second != frames)
        problems.add(place, "length differs from LibriMix's metadata", example);
    }
    if (reference < 0) {
      reference = frames;
      reference_folder = folder.name;
    } else if (frames != reference) {
      problems.add(place, "length differs from " + reference_folder, example);
    }
  }
  return reference;
}

void check_split_files(Split& split, const Variant& variant, const fs::path& root,
                       const LengthsByFolder& metadata, int workers, Problems& problems,
                       ProgressReporter& progress, std::atomic<std::size_t>& done,
                       RateTally& rates) {
  std::vector<int64_t> frames(split.utterances.size(), -1);
  std::atomic<std::size_t> next{0};
  auto work = [&](bool reports) {
    for (std::size_t u = next++; u < split.utterances.size(); u = next++) {
      frames[u] = check_utterance_files(split, split.utterances[u], variant, root, metadata,
                                        problems, done, rates);
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
    // A user's own recordings: the rule every command applies (processing/recording_checks.h).
    variant.shortest_seconds = kShortestRecordingSeconds;
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

}  // namespace nabu::corpus
