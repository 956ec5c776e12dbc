#include "nabu/pipeline/dynamic_mixing.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "nabu/core/error.h"
#include "nabu/core/strings.h"
#include "nabu/processing/audio.h"
#include "nabu/processing/audio_stream.h"

namespace nabu {

namespace {

constexpr double kFullScale = 32768.0;
constexpr double kPeak = 0.9;  // of full scale, as wsj0-2mix

// Draws that do not depend on the standard library's distributions, so a mixture is the same
// on every platform.
double uniform(std::mt19937_64& rng, double low, double high) {
  return low + (high - low) * static_cast<double>(rng() >> 11) * 0x1.0p-53;
}
std::size_t below(std::mt19937_64& rng, std::size_t count) {
  return static_cast<std::size_t>(rng() % count);
}

// A speaker's name in the pool. With one speaker file (utt2spk, spk2f0) per list, the list is
// part of who a speaker is, so two lists may both have an "spk1".
std::string speaker_key(std::size_t files, std::size_t list, const std::string& name) {
  return files == 1 ? name : std::to_string(list) + "/" + name;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

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
  std::size_t pick = below(rng, utterances.size() - 1);
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
  if (uniform(rng, 0.0, 1.0) >= near.share) return;
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
    std::size_t pick = (k - 1) + below(rng, near_speakers.size() - (k - 1));
    std::swap(near_speakers[k - 1], near_speakers[pick]);
    const auto& utterances = by_speaker_[near_speakers[k - 1]];
    chosen[k] = utterances[below(rng, utterances.size())];
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
    std::size_t pick = k + below(rng, speakers.size() - k);
    std::swap(speakers[k], speakers[pick]);
    const auto& utterances = by_speaker_[speakers[k]];
    chosen.push_back(utterances[below(rng, utterances.size())]);
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
    double u = uniform(rng, 0.0, total);
    std::size_t list = 0;
    while (list + 1 < cumulative.size() && (cumulative[list] <= u || shares[list] <= 0)) ++list;
    std::vector<std::size_t> candidates;
    for (std::size_t s : speakers_of_list_[list])
      if (std::find(speakers.begin(), speakers.end(), s) == speakers.end()) candidates.push_back(s);
    std::size_t speaker = candidates[below(rng, candidates.size())];
    speakers.push_back(speaker);
    const auto& utterances = by_speaker_[speaker];
    chosen.push_back(utterances[below(rng, utterances.size())]);
  }
  return chosen;
}

// ---------------------------------------------------------------------------------------------

double active_rms(const torch::Tensor& signal, int sample_rate) {
  int64_t frame = sample_rate / 50;
  int64_t count = frame > 0 ? signal.size(0) / frame : 0;
  if (count == 0) return 0.0;
  auto energy = signal.slice(0, 0, count * frame)
                    .to(torch::kFloat64)
                    .reshape({count, frame})
                    .square()
                    .mean(1);
  double loudest = energy.max().item<double>();
  if (loudest <= 0) return 0.0;
  auto active = energy.masked_select(energy >= loudest * std::pow(10.0, -30.0 / 10.0));
  return std::sqrt(active.mean().item<double>());
}

MixedSignals mix_sources(const std::vector<torch::Tensor>& sources,
                         const std::vector<double>& gains_db, int sample_rate) {
  if (sources.size() < 2 || sources.size() != gains_db.size())
    throw Error("mix_sources: need at least two sources and one gain per source");
  int64_t length = sources.front().size(0);
  for (const auto& source : sources) length = std::min(length, source.size(0));
  std::vector<torch::Tensor> scaled;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    double level = active_rms(sources[i], sample_rate);
    if (level <= 0) throw DataError("a dynamic mixing source is silent");
    scaled.push_back(sources[i].slice(0, 0, length).to(torch::kFloat64) / level *
                     std::pow(10.0, gains_db[i] / 20.0));
  }
  auto sum = torch::stack(scaled).sum(0);
  double peak = sum.abs().max().item<double>();
  for (const auto& source : scaled) peak = std::max(peak, source.abs().max().item<double>());
  double factor = kPeak * (kFullScale - 1) / peak;
  MixedSignals mixed;
  for (const auto& source : scaled) mixed.sources.push_back(torch::round(source * factor));
  mixed.mixture = torch::stack(mixed.sources).sum(0);
  return mixed;
}

// ---------------------------------------------------------------------------------------------

DynamicMixtureSet::DynamicMixtureSet(const Recipe& recipe, const std::vector<DataBinding>& inputs,
                                     const std::vector<DataBinding>& targets,
                                     DynamicMixingOptions options, const std::string& what)
    : options_(std::move(options)), what_(what) {
  std::vector<DataBinding> all = inputs;
  all.insert(all.end(), targets.begin(), targets.end());
  const std::vector<DataLine> source_lines = bind_sections(recipe, all);
  load_pool(recipe, source_lines);
  check_pool_rates(source_lines);
  check_pool_speakers();
  set_framings();
  check_example_options();
}

std::vector<DataLine> DynamicMixtureSet::bind_sections(const Recipe& recipe,
                                                       const std::vector<DataBinding>& all) {
  std::vector<DataLine> source_lines;
  for (const auto& binding : all) {
    if (binding.sections.size() != 1)
      throw ConfigError(what_ + ": dynamic mixing takes one database section per input and "
                                "target; '" + binding.name + "' has " +
                        std::to_string(binding.sections.size()));
    const std::string& section_name = binding.sections.front();
    auto reader = std::make_shared<SectionReader>(recipe, section_name);
    const Processor& processor = reader->processor();
    if (processor.signal_role() == SignalRole::kOther || !processor.storable())
      throw ConfigError(what_ + ": dynamic mixing cannot compute '" + binding.name +
                        "' (section [" + section_name + "]): its processor does not take a "
                        "mixture or its sources alone");
    bool sources = processor.signal_role() == SignalRole::kSources;
    if (sources && num_sources_ == 0) {
      source_lines = reader->lines();
      if (source_lines.empty())
        throw DataError("[" + section_name + "]: its datafiles list no utterance");
      num_sources_ = static_cast<int>(source_lines.front().fields.size());
    }
    data_names_.push_back(binding.name);
    bindings_.push_back({binding.name, reader, sources, Framing::kUnknown, FrameSettings{}});
  }
  if (num_sources_ < 2)
    throw ConfigError(what_ + ": dynamic mixing needs a target computed from two or more "
                              "sources (e.g. onehotperfeature_target_processor or "
                              "multi_target_processor); this task has none");
  return source_lines;
}

void DynamicMixtureSet::load_pool(const Recipe& recipe, const std::vector<DataLine>& source_lines) {
  try {
    pool_ = std::make_shared<const SourcePool>(
        options_.source_lists.empty()
            ? SourcePool::from_source_lines(source_lines)
            : SourcePool::from_lists(options_.source_lists, options_.utt2spk,
                                     recipe.list_root(), options_.spk2f0));
  } catch (const Error& e) {
    throw DataError(what_ + ": dynamic mixing sources (" +
                    (options_.source_lists.empty() ? std::string("the task's source lines")
                                                   : "trainer.cfg dynamic_mixing_sources") +
                    "): " + e.what());
  }
}

void DynamicMixtureSet::check_pool_rates(const std::vector<DataLine>& source_lines) const {
  for (auto [key, value, codec] :
       {std::tuple<const char*, double, const char*>{"dynamic_mixing_gsm", options_.channels.gsm,
                                                     "GSM 06.10"},
        {"dynamic_mixing_codec2", options_.channels.codec2, "Codec 2"}})
    if (value > 0 && pool_->sample_rate() != 8000)
      throw ConfigError(what_ + ": " + key + " needs 8 kHz sources (" + codec +
                        " is a narrow-band codec); the sources are at " +
                        std::to_string(pool_->sample_rate()) + " Hz");
  // Features of a mixture at another rate would mean something else than the stores' (other
  // frame lengths and bins): the sources must be at the rate of the task's own training data.
  const std::string& training_file = source_lines.front().fields.front();
  int training_rate = AudioReader(training_file).sample_rate();
  if (pool_->sample_rate() != training_rate)
    throw DataError(what_ + ": dynamic mixing sources are at " +
                    std::to_string(pool_->sample_rate()) + " Hz, the task's training data ('" +
                    training_file + "') at " + std::to_string(training_rate) + " Hz");
}

void DynamicMixtureSet::check_pool_speakers() const {
  if (!options_.shares.empty()) {
    if (options_.shares.size() != options_.source_lists.size())
      throw ConfigError(what_ + ": " + std::to_string(options_.shares.size()) +
                        " dynamic mixing shares for " +
                        std::to_string(options_.source_lists.size()) + " source lists");
    for (std::size_t l = 0; l < options_.shares.size(); ++l)
      if (options_.shares[l] > 0 && pool_->num_speakers_of_list(l) == 0)
        throw DataError(what_ + ": dynamic mixing source list '" + options_.source_lists[l] +
                        "' has a share but no speaker");
  }
  if (pool_->num_speakers() < num_sources_)
    throw DataError(what_ + ": dynamic mixing needs " + std::to_string(num_sources_) +
                    " different speakers; the sources have " +
                    std::to_string(pool_->num_speakers()));
}

void DynamicMixtureSet::set_framings() {
  // The sample rate is the pool's: each binding's framing is worked out once, not per example.
  for (auto& binding : bindings_) {
    const FeatureOptions* features = binding.reader->feature_options();
    if (!features) continue;
    if (make_feature_computer(*features)->sample_domain()) {
      binding.framing = Framing::kSamples;
    } else {
      binding.framing = Framing::kFrames;
      binding.settings = features->frames(pool_->sample_rate());
    }
  }
}

void DynamicMixtureSet::check_example_options() {
  if (options_.segment_length != "full") {
    auto frames = parse_int(options_.segment_length);
    if (!frames || *frames <= 0)
      throw ConfigError(what_ + ": segment length '" + options_.segment_length +
                        "' is not 'full' or a number of frames");
    crop_frames_ = *frames;
  }
  if (options_.examples_per_epoch <= 0)
    throw ConfigError(what_ + ": dynamic mixing needs at least one example per epoch");
}

int64_t DynamicMixtureSet::predicted_frames(int64_t samples) const {
  const Binding& first = bindings_.front();
  if (first.framing != Framing::kFrames) return samples;
  return num_frames(snipped_length(samples, first.settings), first.settings);
}

DynamicMixtureSet::Draw DynamicMixtureSet::draw(int64_t epoch, int64_t index) const {
  std::mt19937_64 rng(stable_hash(std::to_string(options_.seed) + ":" + std::to_string(epoch) +
                                  ":" + std::to_string(index)));
  Draw d;
  d.sources = pool_->draw(rng, num_sources_, options_.shares,
                          {options_.near_pitch, options_.near_semitones});
  if (options_.virtual_voices.any()) draw_voices(rng, d);
  // As the corpus: s1 at +g, s2 at -g, further sources at their own g; |g| <= range / 2.
  double half = options_.level_range / 2.0;
  double g = uniform(rng, -half, half);
  d.gains_db = {g, -g};
  for (int k = 2; k < num_sources_; ++k) d.gains_db.push_back(uniform(rng, -half, half));
  for (auto s : d.sources) d.samples.push_back(pool_->sources()[s].samples);
  if (options_.speed_range > 0) {
    // Drawn after everything else, so a run without it sees the same mixtures.
    for (std::size_t k = 0; k < d.sources.size(); ++k)
      d.speeds.push_back(uniform(rng, 1.0 - options_.speed_range, 1.0 + options_.speed_range));
  }
  for (std::size_t k = 0; k < d.sources.size(); ++k) {
    // A source played faster (its speed, its voice's pitch) is shorter.
    double rate = (d.speeds.empty() ? 1.0 : d.speeds[k]) * (d.voices.empty() ? 1.0 : d.voices[k].pitch);
    if (rate != 1.0) d.samples[k] = static_cast<int64_t>(std::floor(d.samples[k] / rate));
  }
  int64_t samples = *std::min_element(d.samples.begin(), d.samples.end());
  d.frames = predicted_frames(samples);
  d.length = d.frames;
  if (crop_frames_ > 0 && d.frames > crop_frames_) {
    d.first_frame = static_cast<int64_t>(below(rng, d.frames - crop_frames_ + 1));
    d.length = crop_frames_;
  }
  if (options_.channels.any()) {
    // Drawn last, the same number of values for every source, so a run without channels sees
    // the same mixtures and crops.
    const ChannelOptions& o = options_.channels;
    for (std::size_t k = 0; k < d.sources.size(); ++k) {
      Channel c;
      bool room = uniform(rng, 0.0, 1.0) < o.reverb;
      double rt60 = uniform(rng, 0.2, 0.8), ratio_db = uniform(rng, 0.0, 10.0);
      uint64_t room_seed = rng();
      if (room) c.rt60 = rt60, c.direct_to_reverberant_db = ratio_db, c.room_seed = room_seed;
      c.tilt_db = uniform(rng, -o.tilt_range, o.tilt_range);
      c.telephone = uniform(rng, 0.0, 1.0) < o.telephone;
      c.gsm = uniform(rng, 0.0, 1.0) < o.gsm;
      d.channels.push_back(c);
    }
    // Drawn after the others and only when asked for, so runs of the other channels see the
    // draws they saw before this channel existed.
    if (o.codec2 > 0)
      for (auto& c : d.channels) {
        bool coded = uniform(rng, 0.0, 1.0) < o.codec2;
        int bitrate = kCodec2Bitrates[below(rng, std::size(kCodec2Bitrates))];
        if (coded) c.codec2_bitrate = bitrate;
      }
  }
  return d;
}

void DynamicMixtureSet::draw_voices(std::mt19937_64& rng, Draw& d) const {
  // Drawn only when asked for, right after the sources (a twin replaces one), so that a run
  // without virtual voices draws what it drew before they existed.
  const VirtualVoiceOptions& v = options_.virtual_voices;
  const bool twin = uniform(rng, 0.0, 1.0) < v.twins;
  for (std::size_t k = 0; k < d.sources.size(); ++k) {
    const bool is_virtual = uniform(rng, 0.0, 1.0) < v.share;
    const int number = 1 + static_cast<int>(below(rng, static_cast<std::size_t>(v.voices)));
    d.voice_numbers.push_back(is_virtual ? number : 0);
  }
  if (twin && d.sources.size() > 1) {
    // One of the two is the recorded voice, so the twins differ by at least half of each range.
    d.sources[1] = pool_->another_utterance(rng, d.sources[0]);
    d.voice_numbers[1] =
        d.voice_numbers[0] == 0 ? 1 + static_cast<int>(below(rng, static_cast<std::size_t>(v.voices)))
                                : 0;
  }
  for (std::size_t k = 0; k < d.sources.size(); ++k)
    d.voices.push_back(virtual_voice(pool_->sources()[d.sources[k]].speaker, d.voice_numbers[k],
                                     v.pitch_semitones, v.formant_semitones));
}

std::vector<int64_t> DynamicMixtureSet::lengths(int64_t epoch) const {
  std::vector<int64_t> out;
  out.reserve(size());
  for (int64_t i = 0; i < size(); ++i) out.push_back(draw(epoch, i).length);
  return out;
}

MixedSignals DynamicMixtureSet::signals(const Draw& d) const {
  std::vector<torch::Tensor> sources;
  for (std::size_t k = 0; k < d.sources.size(); ++k) {
    auto samples = read_audio(pool_->sources()[d.sources[k]].path).samples;
    const double speed = d.speeds.empty() ? 1.0 : d.speeds[k];
    const VoiceChange voice = d.voices.empty() ? VoiceChange{} : d.voices[k];
    if (speed != 1.0 || !voice.is_identity())
      samples = change_voice(samples, voice, speed, pool_->sample_rate(), d.samples[k]);
    if (!d.channels.empty()) samples = apply_channel(samples, d.channels[k], pool_->sample_rate());
    sources.push_back(samples);
  }
  return mix_sources(sources, d.gains_db, pool_->sample_rate());
}

DynamicMixtureSet::Crop DynamicMixtureSet::crop(const Binding& binding, const Draw& d,
                                                 int64_t samples) const {
  const Binding& lead = bindings_.front();
  if (binding.framing != Framing::kUnknown && lead.framing != Framing::kUnknown &&
      binding.framing != lead.framing) {
    // Another domain than the first binding's (the waveform targets of a spectrogram model):
    // the samples the draw's frames cover, or the frames of the draw's samples, all kept.
    if (lead.framing == Framing::kSamples)
      return {d.first_frame, std::min(d.first_frame + d.length, samples), 0, -1};
    int64_t first = d.first_frame * lead.settings.frame_step();
    return {first, std::min(first + frames_span(d.length, lead.settings), samples), 0, -1};
  }
  if (d.length == d.frames || binding.framing == Framing::kUnknown)
    return {0, samples, d.first_frame, d.length};  // whole, then sliced
  if (binding.framing == Framing::kSamples)
    return {d.first_frame, d.first_frame + d.length, 0, d.length};
  int64_t first = d.first_frame * binding.settings.frame_step();
  return {first, std::min(first + frames_span(d.length, binding.settings), samples), 0, d.length};
}

Batch DynamicMixtureSet::load(int64_t epoch, const std::vector<int64_t>& indices) const {
  std::vector<std::string> names;
  std::vector<ExampleTensors> examples;
  for (auto index : indices) {
    Draw d = draw(epoch, index);
    std::string name = "dm" + std::to_string(epoch) + "_" + std::to_string(index);
    for (std::size_t k = 0; k < d.sources.size(); ++k) {
      name += "_" + pool_->sources()[d.sources[k]].name;
      if (!d.voice_numbers.empty() && d.voice_numbers[k] > 0)
        name += "@v" + std::to_string(d.voice_numbers[k]);
    }
    try {
      MixedSignals mixed = signals(d);
      ExampleTensors tensors;
      for (const auto& binding : bindings_) {
        // A crop is computed from its own samples only (5x cheaper than the whole mixture):
        // frame-local features are exactly the frames of the whole; what a processor computes
        // over the utterance (used bins' maximum, local MVN) is over the crop.
        Crop part = crop(binding, d, mixed.mixture.size(0));
        std::vector<torch::Tensor> signals;
        if (binding.sources) {
          for (const auto& source : mixed.sources)
            signals.push_back(source.slice(0, part.first, part.last));
        } else {
          signals.push_back(mixed.mixture.slice(0, part.first, part.last));
        }
        const Processor& processor = binding.reader->processor();
        auto data = processor.process_signals(signals, pool_->sample_rate());
        int64_t end = part.rows < 0 ? data.size(0)
                                    : std::min(data.size(0), part.skip_frames + part.rows);
        tensors.push_back(data.slice(0, std::min(part.skip_frames, end), end)
                              .to(stored_scalar_type(processor.stored_type())));
      }
      examples.push_back(std::move(tensors));
    } catch (const DataError& e) {
      throw DataError(what_ + ": dynamic mixture '" + name + "': " + e.what());
    }
    names.push_back(std::move(name));
  }
  return pad_batch(data_names_, names, examples);
}

}  // namespace nabu
