#include "nabu/pipeline/source_pool.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "nabu/core/error.h"
#include "nabu/core/strings.h"
#include "nabu/processing/audio_stream.h"

namespace nabu {

namespace {

// A speaker's name in the pool. With one speaker file (utt2spk, spk2f0) per list, the list is
// part of who a speaker is, so two lists may both have an "spk1".
std::string speaker_key(std::size_t files, std::size_t list, const std::string& name) {
  return files == 1 ? name : std::to_string(list) + "/" + name;
}

}  // namespace

SourcePool SourcePool::from_lists(const std::vector<std::string>& lists,
                                  const std::vector<std::string>& utt2spk,
                                  const std::string& root,
                                  const std::vector<std::string>& spk2f0) {
  if (utt2spk.size() > 1 && utt2spk.size() != lists.size())
    throw DataError(std::to_string(utt2spk.size()) + " utt2spk files for " +
                    std::to_string(lists.size()) + " source lists; give one for all or one per list");
  SourcePool pool;
  for (std::size_t l = 0; l < lists.size(); ++l)
    for (const auto& line : read_data_lines({lists[l]}, 1, root)) {
      if (line.fields.size() != 1)
        throw DataError(line.origin + ": expected 'utterance path' for a dynamic mixing source");
      pool.sources_.push_back({line.utterance, line.fields.front(), line.utterance, 0, l});
    }
  std::vector<std::map<std::string, std::string>> speaker_of(utt2spk.size());
  for (std::size_t u = 0; u < utt2spk.size(); ++u)
    for (const auto& line : read_data_lines({utt2spk[u]}, 1, root)) {
      if (line.fields.size() != 1)
        throw DataError(line.origin + ": expected 'utterance speaker'");
      speaker_of[u][line.utterance] = line.fields.front();
    }
  for (auto& source : pool.sources_) {
    if (utt2spk.empty()) continue;
    std::size_t u = utt2spk.size() == 1 ? 0 : source.list;
    auto it = speaker_of[u].find(source.name);
    if (it == speaker_of[u].end())
      throw DataError(utt2spk[u] + ": no speaker for utterance '" + source.name + "'");
    source.speaker = speaker_key(utt2spk.size(), source.list, it->second);
  }
  pool.index();
  if (!spk2f0.empty()) {
    if (spk2f0.size() != utt2spk.size())
      throw DataError(std::to_string(spk2f0.size()) + " spk2f0 files for " +
                      std::to_string(utt2spk.size()) +
                      " utt2spk files; give one per utt2spk file (they name the same speakers)");
    pool.read_pitch(spk2f0, root);
  }
  return pool;
}

void SourcePool::read_pitch(const std::vector<std::string>& spk2f0, const std::string& root) {
  std::map<std::string, double> f0_of;
  for (std::size_t u = 0; u < spk2f0.size(); ++u)
    for (const auto& line : read_data_lines({spk2f0[u]}, 1, root)) {
      auto f0 = line.fields.size() == 1 ? parse_double(line.fields.front()) : std::nullopt;
      if (!f0 || !(*f0 > 0) || !std::isfinite(*f0))
        throw DataError(line.origin + ": expected 'speaker f0' with f0 in Hz above 0");
      f0_of[speaker_key(spk2f0.size(), u, line.utterance)] = *f0;
    }
  speaker_f0_.clear();
  for (const auto& utterances : by_speaker_) {
    const Source& source = sources_[utterances.front()];
    auto it = f0_of.find(source.speaker);
    if (it == f0_of.end()) {
      // The file that should name it, and its name there (without the list's prefix).
      const std::size_t file = spk2f0.size() == 1 ? 0 : source.list;
      const std::size_t prefix = speaker_key(spk2f0.size(), file, "").size();
      throw DataError(spk2f0[file] + ": no f0 for speaker '" + source.speaker.substr(prefix) +
                      "'");
    }
    speaker_f0_.push_back(it->second);
  }
}

SourcePool SourcePool::from_source_lines(const std::vector<DataLine>& lines) {
  SourcePool pool;
  std::set<std::string> seen;
  for (const auto& line : lines)
    for (std::size_t i = 0; i < line.fields.size(); ++i)
      if (seen.insert(line.fields[i]).second)
        pool.sources_.push_back({line.utterance + "_s" + std::to_string(i + 1), line.fields[i],
                                 line.fields[i], 0});
  pool.index();
  return pool;
}

void SourcePool::index() {
  if (sources_.empty()) throw DataError("dynamic mixing: the source lists name no utterance");
  std::map<std::string, std::size_t> speaker_index;
  for (std::size_t i = 0; i < sources_.size(); ++i) {
    Source& source = sources_[i];
    AudioReader reader(source.path);
    if (reader.channels() != 1)
      throw DataError("dynamic mixing source '" + source.path + "' has " +
                      std::to_string(reader.channels()) + " channels; expected mono");
    if (sample_rate_ == 0) sample_rate_ = reader.sample_rate();
    if (reader.sample_rate() != sample_rate_)
      throw DataError("dynamic mixing source '" + source.path + "' is at " +
                      std::to_string(reader.sample_rate()) + " Hz, '" + sources_.front().path +
                      "' at " + std::to_string(sample_rate_) + " Hz");
    source.samples = reader.frames();
    auto [it, added] = speaker_index.emplace(source.speaker, by_speaker_.size());
    if (added) {
      by_speaker_.emplace_back();
      // A speaker belongs to the list of its first utterance.
      if (speakers_of_list_.size() <= source.list) speakers_of_list_.resize(source.list + 1);
      speakers_of_list_[source.list].push_back(it->second);
    }
    by_speaker_[it->second].push_back(i);
    speaker_of_source_.push_back(it->second);
  }
}

std::size_t SourcePool::another_utterance(std::mt19937_64& rng, std::size_t source) const {
  const auto& utterances = by_speaker_[speaker_of_source_[source]];
  if (utterances.size() < 2) return source;
  // One of the speaker's other utterances, uniformly.
  std::size_t pick = draw_below(rng, utterances.size() - 1);
  if (utterances[pick] == source) pick = utterances.size() - 1;
  return utterances[pick];
}

int64_t SourcePool::num_speakers_of_list(std::size_t list) const {
  return list < speakers_of_list_.size() ? static_cast<int64_t>(speakers_of_list_[list].size())
                                         : 0;
}

std::vector<std::size_t> SourcePool::draw(std::mt19937_64& rng, int count,
                                          const std::vector<double>& shares,
                                          const NearPitch& near) const {
  std::vector<std::size_t> chosen = draw_speakers(rng, count, shares);
  if (near.share > 0 && count > 1) match_pitch(rng, near, shares, chosen);
  return chosen;
}

void SourcePool::match_pitch(std::mt19937_64& rng, const NearPitch& near,
                             const std::vector<double>& shares,
                             std::vector<std::size_t>& chosen) const {
  if (speaker_f0_.empty())
    throw DataError("pitch-matched dynamic mixing needs each speaker's f0 (spk2f0)");
  // The coin comes after the speaker draw: the first speaker is the one drawn without matching.
  if (uniform_draw(rng, 0.0, 1.0) >= near.share) return;
  const std::size_t first = speaker_of_source_[chosen.front()];
  std::vector<std::size_t> near_speakers;
  for (std::size_t s = 0; s < speaker_f0_.size(); ++s) {
    // A list with a share of 0 stays out here too.
    const std::size_t list = sources_[by_speaker_[s].front()].list;
    if (s == first || (!shares.empty() && !(list < shares.size() && shares[list] > 0))) continue;
    if (std::abs(12.0 * std::log2(speaker_f0_[s] / speaker_f0_[first])) <= near.semitones)
      near_speakers.push_back(s);
  }
  if (near_speakers.size() + 1 < chosen.size()) return;
  // A partial Fisher-Yates shuffle: distinct near speakers for the other sources.
  for (std::size_t k = 1; k < chosen.size(); ++k) {
    std::size_t pick = (k - 1) + draw_below(rng, near_speakers.size() - (k - 1));
    std::swap(near_speakers[k - 1], near_speakers[pick]);
    const auto& utterances = by_speaker_[near_speakers[k - 1]];
    chosen[k] = utterances[draw_below(rng, utterances.size())];
  }
}

std::vector<std::size_t> SourcePool::draw_speakers(std::mt19937_64& rng, int count,
                                                   const std::vector<double>& shares) const {
  if (!shares.empty()) return draw_by_shares(rng, count, shares);
  if (count > num_speakers())
    throw DataError("dynamic mixing needs " + std::to_string(count) +
                    " different speakers per mixture; the sources have " +
                    std::to_string(num_speakers()));
  // A partial Fisher-Yates shuffle of the speakers: `count` distinct ones, uniformly.
  std::vector<std::size_t> speakers(by_speaker_.size());
  for (std::size_t i = 0; i < speakers.size(); ++i) speakers[i] = i;
  std::vector<std::size_t> chosen;
  for (int k = 0; k < count; ++k) {
    std::size_t pick = k + draw_below(rng, speakers.size() - k);
    std::swap(speakers[k], speakers[pick]);
    const auto& utterances = by_speaker_[speakers[k]];
    chosen.push_back(utterances[draw_below(rng, utterances.size())]);
  }
  return chosen;
}

std::vector<std::size_t> SourcePool::draw_by_shares(std::mt19937_64& rng, int count,
                                                    const std::vector<double>& shares) const {
  std::vector<std::size_t> speakers, chosen;
  for (int k = 0; k < count; ++k) {
    // The list, by its share among the lists that still have a speaker not in the mixture.
    std::vector<double> cumulative;
    double total = 0;
    for (std::size_t l = 0; l < shares.size(); ++l) {
      int64_t unused = 0;
      if (l < speakers_of_list_.size())
        for (std::size_t s : speakers_of_list_[l])
          unused += std::find(speakers.begin(), speakers.end(), s) == speakers.end();
      total += unused > 0 ? shares[l] : 0.0;
      cumulative.push_back(total);
    }
    if (total <= 0)
      throw DataError("dynamic mixing needs " + std::to_string(count) +
                      " different speakers per mixture from the lists with a share; they have " +
                      std::to_string(speakers.size()));
    double u = uniform_draw(rng, 0.0, total);
    std::size_t list = 0;
    while (list + 1 < cumulative.size() && (cumulative[list] <= u || shares[list] <= 0)) ++list;
    std::vector<std::size_t> candidates;
    for (std::size_t s : speakers_of_list_[list])
      if (std::find(speakers.begin(), speakers.end(), s) == speakers.end()) candidates.push_back(s);
    std::size_t speaker = candidates[draw_below(rng, candidates.size())];
    speakers.push_back(speaker);
    const auto& utterances = by_speaker_[speaker];
    chosen.push_back(utterances[draw_below(rng, utterances.size())]);
  }
  return chosen;
}

}  // namespace nabu
