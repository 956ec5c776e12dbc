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

constexpr double kPeak = 0.9;  // of full scale, as wsj0-2mix

}  // namespace

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
  double g = uniform_draw(rng, -half, half);
  d.gains_db = {g, -g};
  for (int k = 2; k < num_sources_; ++k) d.gains_db.push_back(uniform_draw(rng, -half, half));
  for (auto s : d.sources) d.samples.push_back(pool_->sources()[s].samples);
  if (options_.speed_range > 0) {
    // Drawn after everything else, so a run without it sees the same mixtures.
    for (std::size_t k = 0; k < d.sources.size(); ++k)
      d.speeds.push_back(uniform_draw(rng, 1.0 - options_.speed_range, 1.0 + options_.speed_range));
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
    d.first_frame = static_cast<int64_t>(draw_below(rng, d.frames - crop_frames_ + 1));
    d.length = crop_frames_;
  }
  if (options_.channels.any()) {
    // Drawn last, the same number of values for every source, so a run without channels sees
    // the same mixtures and crops.
    const ChannelOptions& o = options_.channels;
    for (std::size_t k = 0; k < d.sources.size(); ++k) {
      Channel c;
      bool room = uniform_draw(rng, 0.0, 1.0) < o.reverb;
      double rt60 = uniform_draw(rng, 0.2, 0.8), ratio_db = uniform_draw(rng, 0.0, 10.0);
      uint64_t room_seed = rng();
      if (room) c.rt60 = rt60, c.direct_to_reverberant_db = ratio_db, c.room_seed = room_seed;
      c.tilt_db = uniform_draw(rng, -o.tilt_range, o.tilt_range);
      c.telephone = uniform_draw(rng, 0.0, 1.0) < o.telephone;
      c.gsm = uniform_draw(rng, 0.0, 1.0) < o.gsm;
      d.channels.push_back(c);
    }
    // Drawn after the others and only when asked for, so runs of the other channels see the
    // draws they saw before this channel existed.
    if (o.codec2 > 0)
      for (auto& c : d.channels) {
        bool coded = uniform_draw(rng, 0.0, 1.0) < o.codec2;
        int bitrate = kCodec2Bitrates[draw_below(rng, std::size(kCodec2Bitrates))];
        if (coded) c.codec2_bitrate = bitrate;
      }
  }
  return d;
}

void DynamicMixtureSet::draw_voices(std::mt19937_64& rng, Draw& d) const {
  // Drawn only when asked for, right after the sources (a twin replaces one), so that a run
  // without virtual voices draws what it drew before they existed.
  const VirtualVoiceOptions& v = options_.virtual_voices;
  const bool twin = uniform_draw(rng, 0.0, 1.0) < v.twins;
  for (std::size_t k = 0; k < d.sources.size(); ++k) {
    const bool is_virtual = uniform_draw(rng, 0.0, 1.0) < v.share;
    const int number = 1 + static_cast<int>(draw_below(rng, static_cast<std::size_t>(v.voices)));
    d.voice_numbers.push_back(is_virtual ? number : 0);
  }
  if (twin && d.sources.size() > 1) {
    // One of the two is the recorded voice, so the twins differ by at least half of each range.
    d.sources[1] = pool_->another_utterance(rng, d.sources[0]);
    d.voice_numbers[1] =
        d.voice_numbers[0] == 0 ? 1 + static_cast<int>(draw_below(rng, static_cast<std::size_t>(v.voices)))
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
