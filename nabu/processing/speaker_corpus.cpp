#include "nabu/processing/speaker_corpus.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/progress.h"
#include "nabu/core/strings.h"
#include "nabu/processing/audio.h"
#include "nabu/processing/preparation_problems.h"
#include "nabu/processing/recording_checks.h"
#include "nabu/processing/wav_header.h"

namespace nabu {

namespace fs = std::filesystem;

namespace {

struct Recording {
  std::string speaker, name;
  fs::path path;
};

// A folder's subfolders, its wavs, or its audio files of another format, in name order.
enum class Entries { kFolders, kWavs, kOtherAudio };
std::vector<fs::path> sorted_entries(const fs::path& dir, Entries kind) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const bool wanted = kind == Entries::kFolders ? it->is_directory(ec)
                        : kind == Entries::kWavs  ? it->path().extension() == ".wav"
                                                  : is_audio_of_another_format(it->path());
    if (wanted) out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A uniform number in [0, 1) from the generator's bits (the same on every standard library).
double uniform(std::mt19937_64& generator) {
  return static_cast<double>(generator() >> 11) * 0x1.0p-53;
}

torch::Tensor normalised(const torch::Tensor& samples) {
  return samples / samples.square().mean().sqrt();
}

}  // namespace

bool is_speaker_folder_corpus(const fs::path& root) {
  std::error_code ec;
  for (const char* split : {"tr", "cv", "tt"})
    if (fs::is_directory(root / split, ec)) return false;
  for (const auto& folder : sorted_entries(root, Entries::kFolders))
    if (!sorted_entries(folder, Entries::kWavs).empty()) return true;
  return false;
}

namespace {

// Every recording by speaker: a readable mono wav at the first one's rate, complete and long
// enough (processing/recording_checks.h); the problems of all listed at once. A speaker with one
// recording is said in a warning.
std::map<std::string, std::vector<Recording>> read_recordings(const fs::path& root, int& rate) {
  const std::string corpus = root.filename().string();
  Problems problems;
  std::map<std::string, std::vector<Recording>> by_speaker;
  std::string first_file;
  for (const auto& folder : sorted_entries(root, Entries::kFolders)) {
    const std::string speaker = folder.filename().string();
    const std::string where = corpus + "/" + speaker;
    for (const auto& path : sorted_entries(folder, Entries::kOtherAudio))
      problems.add(where, other_format_problem(), path.filename().string());
    for (const auto& path : sorted_entries(folder, Entries::kWavs)) {
      const std::string name = path.filename().string();
      if (name.find_first_of(" \t") != std::string::npos ||
          speaker.find_first_of(" \t") != std::string::npos) {
        problems.add(where, "a space in a name (list files separate their fields by spaces): "
                            "rename it", name);
        continue;
      }
      WavHeader header;
      try {
        header = read_wav_header(path);
      } catch (const DataError& error) {
        problems.add(where, "unreadable or not a wav file", error.what());
        continue;
      }
      if (rate == 0) {
        rate = header.sample_rate;
        first_file = where + "/" + name;
      }
      if (header.sample_rate != rate)
        problems.add(where, fmt::format("{} Hz, not the {} Hz of {} (one rate per corpus; "
                                        "resample first)", header.sample_rate, rate, first_file),
                     name);
      else if (header.channels != 1)
        problems.add(where, fmt::format("{} channels (expected mono)", header.channels), name);
      else if (header.frames == 0)
        problems.add(where, "empty (no samples)", name);
      else if (auto truncated = truncation_problem(header); !truncated.empty())
        problems.add(where, truncated, name);
      else if (auto short_ = too_short_problem(header.seconds()); !short_.empty())
        problems.add(where, short_, name);
      else
        by_speaker[speaker].push_back({speaker, path.stem().string(), path});
    }
  }
  for (const auto& [speaker, recordings] : by_speaker)
    if (recordings.size() == 1)
      logger().warn("{}/{}: one recording ({}): the speaker enters few mixtures and is hardly "
                   "trained on or tested; add recordings or move the folder out",
                   corpus, speaker, recordings.front().path.filename().string());
  if (problems.size() > 0) {
    problems.report();
    throw DataError(root.string() + ": " + std::to_string(problems.size()) +
                    " problem(s), listed above; nothing written");
  }
  return by_speaker;
}

// The speakers of each split: tt, cv, then tr speakers, in the order of a hash of their names,
// so that adding a speaker moves no other (and in that order within a split).
std::map<std::string, std::vector<std::string>> split_speakers(
    const std::map<std::string, std::vector<Recording>>& by_speaker, int cv, int tt) {
  std::vector<std::string> order;
  for (const auto& entry : by_speaker) order.push_back(entry.first);
  std::sort(order.begin(), order.end(), [](const std::string& a, const std::string& b) {
    return std::make_pair(stable_hash(a), a) < std::make_pair(stable_hash(b), b);
  });
  std::map<std::string, std::vector<std::string>> splits;
  for (int i = 0; i < static_cast<int>(order.size()); ++i)
    splits[i < tt ? "tt" : i < tt + cv ? "cv" : "tr"].push_back(order[i]);
  return splits;
}

// Which speakers went where, and a warning for a split of fewer than 3: its mixtures are all of
// one or three pairs, and figures on them are no measurement.
void report_split(const std::string& corpus,
                  const std::map<std::string, std::vector<std::string>>& speakers) {
  for (const char* split : {"tr", "cv", "tt"}) {
    auto names = speakers.at(split);
    std::sort(names.begin(), names.end());
    logger().info("prepare: {} {}: {} speaker(s): {}", corpus, split, names.size(),
                 join(names, " "));
    if (names.size() < 3)
      logger().warn("prepare: {} {} holds {} speakers: every {} mixture is of the same pair, so "
                   "its figures measure that pair, not the model; {}",
                   corpus, split, names.size(), split,
                   std::string(split) == "tr"
                       ? "a model trained on 2 voices learns those voices"
                       : "add speaker folders, or raise --" + std::string(split) + "-speakers");
  }
}

// The recordings of each split's speakers.
std::map<std::string, std::vector<Recording>> recordings_of(
    const std::map<std::string, std::vector<Recording>>& by_speaker,
    const std::map<std::string, std::vector<std::string>>& speakers) {
  std::map<std::string, std::vector<Recording>> splits;
  for (const auto& [split, names] : speakers)
    for (const auto& name : names) {
      const auto& own = by_speaker.at(name);
      splits[split].insert(splits[split].end(), own.begin(), own.end());
    }
  return splits;
}

// As many mixtures per split as it has recordings, in `dir`/<split>/{mix,s1,s2}: each recording
// with one of another speaker of the split, at a level difference drawn in [0, 5) dB
// (wsj0-2mix's range), cut to the shorter one. Returns each mixture's two speakers.
std::map<std::string, std::vector<std::string>> write_mixtures(
    const std::map<std::string, std::vector<Recording>>& splits, const std::string& corpus,
    int rate, const fs::path& dir) {
  std::size_t total = 0;
  for (const auto& entry : splits) total += entry.second.size();
  std::map<std::string, std::vector<std::string>> speakers;
  ProgressReporter progress("prepare: mixing " + corpus, total, "mixtures");
  std::size_t done = 0;
  for (const auto& [split, recordings] : splits) {
    std::mt19937_64 generator(stable_hash("nabu prepare folder/" + corpus + "/" + split));
    for (std::size_t k = 0; k < recordings.size(); ++k) {
      const Recording& a = recordings[k];
      const Recording* b = nullptr;
      while (!b || b->speaker == a.speaker) b = &recordings[generator() % recordings.size()];
      const double difference_db = 5.0 * uniform(generator);
      auto first = read_audio(a.path.string()).samples;
      auto second = read_audio(b->path.string()).samples;
      const int64_t length = std::min(first.size(0), second.size(0));
      auto s1 = normalised(first.slice(0, 0, length)) * std::pow(10.0, difference_db / 40.0);
      auto s2 = normalised(second.slice(0, 0, length)) * std::pow(10.0, -difference_db / 40.0);
      auto mix = s1 + s2;
      if (!torch::isfinite(mix).all().item<bool>())
        throw DataError(a.path.string() + " or " + b->path.string() + ": silent (all zeros)");
      const double peak = torch::stack({mix.abs().max(), s1.abs().max(), s2.abs().max()})
                              .max()
                              .item<double>();
      const double scale = 0.9 / peak;
      const std::string name = fmt::format("{:05d}_{}-{}_{}-{}", k, a.speaker, a.name,
                                           b->speaker, b->name);
      write_audio((dir / split / "mix" / (name + ".wav")).string(), mix * scale, rate);
      write_audio((dir / split / "s1" / (name + ".wav")).string(), s1 * scale, rate);
      write_audio((dir / split / "s2" / (name + ".wav")).string(), s2 * scale, rate);
      speakers[name] = {a.speaker, b->speaker};
      progress.update(++done);
    }
  }
  return speakers;
}

}  // namespace

std::vector<PreparedVariant> prepare_speaker_corpus(const SpeakerCorpusOptions& options) {
  const fs::path root = absolute_folder(options.root);
  refuse_space_in_path(root);
  const std::string corpus = root.filename().string();
  int rate = 0;
  const auto by_speaker = read_recordings(root, rate);
  const int speakers = static_cast<int>(by_speaker.size());
  const int tenth = std::max(2, static_cast<int>(std::lround(speakers / 10.0)));
  const int cv = options.cv_speakers > 0 ? options.cv_speakers : tenth;
  const int tt = options.tt_speakers > 0 ? options.tt_speakers : tenth;
  if (cv < 2 || tt < 2 || speakers - cv - tt < 2)
    throw DataError(fmt::format(
        "{}: {} speaker folder(s) with wavs; mixtures of two speakers need at least 2 speakers "
        "in each of tr, cv ({}) and tt ({})",
        root.string(), speakers, cv, tt));

  const fs::path tree = options.out / (corpus + "_mixtures");
  ensure_directory(options.out);
  AtomicPath staged(tree);
  ensure_directory(staged.temporary());
  const auto speakers_by_split = split_speakers(by_speaker, cv, tt);
  report_split(corpus, speakers_by_split);
  CorpusPreparationOptions prepare;
  prepare.mixture_speakers = write_mixtures(recordings_of(by_speaker, speakers_by_split), corpus,
                                            rate, staged.temporary());
  std::error_code ec;
  if (fs::exists(tree, ec)) fs::remove_all(tree, ec);
  staged.commit();
  logger().info("prepare: {} speakers: {} in tr, {} in cv, {} in tt; mixtures in {}", speakers,
               speakers - cv - tt, cv, tt, tree.string());

  prepare.kind = "folder";
  prepare.root = tree;
  prepare.out = options.out;
  prepare.name = corpus;
  prepare.workers = options.workers;
  return prepare_corpus(prepare);
}

}  // namespace nabu
