// The keys of trainer.cfg that say what a training reads (DataOptions, trainer_options.h): its
// batches, and dynamic mixing's sources, channels and virtual speakers (docs/dynamic_mixing.md).
#include "nabu/neuralnetworks/trainers/trainer_options.h"

#include "nabu/core/error.h"

namespace nabu {

namespace {

// DataOptions' keys in three groups, then its rules in three, in the order of the keys.

void declare_data_batching(OptionsReader& r, DataOptions& d) {
  r("batch_size", d.batch_size, "per segment length: examples per minibatch");
  r("numbatches_to_aggregate", d.numbatches_to_aggregate,
    "per segment length: minibatches accumulated per update (0 = 1, one minibatch per update, "
    "as the original counts it)");
  r("numbuckets", d.numbuckets, "length buckets for batching (1 = none)");
  r("shuffle", d.shuffle, "shuffle the examples every epoch (new; False = the original's order)");
  r("prefetch", d.prefetch, "batches prepared ahead by the background loader");
}

void declare_dynamic_mixing_sources(OptionsReader& r, DataOptions& d) {
  r("dynamic_mixing", d.dynamic_mixing,
    "new: training examples are new mixtures every epoch, made from single-speaker sources and "
    "computed by the tasks' own processors (docs/dynamic_mixing.md)");
  r("dynamic_mixing_sources", d.mixing.source_lists,
    "new: source lists, 'utterance wav' lines (empty: the sources on the lines of each task's "
    "target section)");
  r("dynamic_mixing_utt2spk", d.mixing.utt2spk,
    "new: 'utterance speaker' lines, so that no mixture has one speaker twice: one file for all "
    "source lists, or one per list (a speaker is then a speaker of its list)");
  r("dynamic_mixing_shares", d.mixing.shares,
    "new: one weight per source list: each source of a mixture comes from list i with "
    "probability share_i / sum (then a speaker of that list not yet in the mixture), so "
    "'0.5 0.5' mixes recorded with recorded, recorded with synthetic and synthetic with "
    "synthetic as 1:2:1; empty = speakers drawn uniformly from all lists");
  r("dynamic_mixing_spk2f0", d.mixing.spk2f0,
    "new: 'speaker f0' lines, each speaker's median pitch in Hz (tools/speaker_f0 writes them), "
    "as many files as dynamic_mixing_utt2spk; for dynamic_mixing_near_pitch");
  r("dynamic_mixing_near_pitch", d.mixing.near_pitch,
    "new: share of the mixtures whose other speakers are drawn among those within "
    "dynamic_mixing_near_semitones of the first speaker's median f0 (voices of the same pitch "
    "are what a mask model separates worst); 0 = off");
  r("dynamic_mixing_near_semitones", d.mixing.near_semitones,
    "new: how close in pitch a pitch-matched mixture's speakers are, in semitones");
  r("dynamic_mixing_level_range", d.mixing.level_range,
    "new: relative level of two sources, uniform in +-this many dB");
  r("dynamic_mixing_speed_range", d.mixing.speed_range,
    "new: speed perturbation of each source, a speed uniform in 1 +- this (0.1: 0.9 to 1.1; "
    "tempo, pitch and formants together, as sox speed); 0 = off");
}

void declare_dynamic_mixing_channels(OptionsReader& r, DataOptions& d) {
  r("dynamic_mixing_reverb", d.mixing.channels.reverb,
    "new: probability that a source is heard in a synthetic room (RT60 0.2-0.8 s, direct to "
    "reverberant ratio 0-10 dB); its target is the reverberant source");
  r("dynamic_mixing_tilt_range", d.mixing.channels.tilt_range,
    "new: spectral tilt of each source (a microphone), uniform in +- this many dB between "
    "Nyquist and 0 Hz; 0 = off");
  r("dynamic_mixing_telephone", d.mixing.channels.telephone,
    "new: probability that a source is band-limited to 300-3400 Hz (a telephone line)");
  r("dynamic_mixing_gsm", d.mixing.channels.gsm,
    "new: probability that a source goes through a GSM 06.10 round trip (a mobile phone's "
    "codec; 8 kHz sources)");
  r("dynamic_mixing_codec2", d.mixing.channels.codec2,
    "new: probability that a source goes through a Codec 2 round trip at 3200, 2400, 1600 or "
    "1200 bit/s, drawn uniformly (a digital radio's vocoder; 8 kHz sources)");
}

void declare_virtual_voices(OptionsReader& r, DataOptions& d) {
  VirtualVoiceOptions& v = d.mixing.virtual_voices;
  r("dynamic_mixing_virtual_voices", v.voices,
    "new: virtual speakers: every speaker of the sources also speaks as this many virtual "
    "voices, each with its own pitch and formant (vocal-tract length) shift, fixed by the "
    "speaker and the voice (docs/dynamic_mixing.md, \"Virtual speakers\"); 0 = off");
  r("dynamic_mixing_virtual_pitch", v.pitch_semitones,
    "new: each virtual voice's pitch shift, of a size in [range / 2, range] semitones and "
    "either sign, the formants kept (the tempo follows the pitch); 0 = pitch unchanged");
  r("dynamic_mixing_virtual_formant", v.formant_semitones,
    "new: each virtual voice's formant shift, of a size in [range / 2, range] semitones and "
    "either sign (3 semitones: a vocal tract 16 % shorter or 19 % longer), the pitch kept; 0 = "
    "formants unchanged");
  r("dynamic_mixing_virtual_share", v.share,
    "new: probability that a source speaks in one of its speaker's virtual voices (else as "
    "recorded)");
  r("dynamic_mixing_virtual_twins", v.twins,
    "new: probability that a mixture's second source is another utterance of its first "
    "source's speaker in another voice (one of the two as recorded): one pitch with two vocal "
    "tracts, or the reverse");
}

void check_virtual_voices(const OptionsReader& r, const DataOptions& d) {
  const VirtualVoiceOptions& v = d.mixing.virtual_voices;
  r.require(v.voices >= 0 && v.voices <= 1000, "dynamic_mixing_virtual_voices",
            "must be in [0, 1000]");
  r.require(v.voices == 0 || d.dynamic_mixing, "dynamic_mixing_virtual_voices",
            "is set but dynamic_mixing is False (virtual voices are made in dynamic mixtures)");
  for (auto [key, value] : {std::pair<const char*, double>{"dynamic_mixing_virtual_pitch",
                                                          v.pitch_semitones},
                            {"dynamic_mixing_virtual_formant", v.formant_semitones}})
    r.require(value >= 0 && value <= 12, key, "must be in [0, 12] semitones");
  r.require(v.voices == 0 || v.pitch_semitones > 0 || v.formant_semitones > 0,
            "dynamic_mixing_virtual_voices",
            "needs dynamic_mixing_virtual_pitch or dynamic_mixing_virtual_formant above 0 (with "
            "both 0 every virtual voice would be the recording)");
  for (auto [key, value] : {std::pair<const char*, double>{"dynamic_mixing_virtual_share",
                                                          v.share},
                            {"dynamic_mixing_virtual_twins", v.twins}})
    r.require(value >= 0 && value <= 1, key, "is a probability: must be in [0, 1]");
  r.require(v.twins == 0 || v.voices > 0, "dynamic_mixing_virtual_twins",
            "needs dynamic_mixing_virtual_voices (a twin is another voice of one speaker)");
  r.require(v.twins == 0 || !d.mixing.utt2spk.empty(), "dynamic_mixing_virtual_twins",
            "needs dynamic_mixing_utt2spk (which utterances are one speaker's)");
}

void check_data_batching(const OptionsReader& r, const DataOptions& d) {
  for (int value : d.batch_size) r.require(value > 0, "batch_size", "must be positive");
  for (int value : d.numbatches_to_aggregate)
    r.require(value >= 0, "numbatches_to_aggregate", "must not be negative");
  r.require(d.numbuckets > 0, "numbuckets", "must be positive");
  r.require(d.prefetch >= 1, "prefetch", "must be at least 1");
}

void check_dynamic_mixing_ranges(const OptionsReader& r, const DataOptions& d) {
  r.require(d.mixing.level_range >= 0, "dynamic_mixing_level_range",
            "must not be negative");
  r.require(d.mixing.speed_range >= 0 && d.mixing.speed_range < 0.5,
            "dynamic_mixing_speed_range", "must be in [0, 0.5)");
  r.require(d.mixing.channels.tilt_range >= 0 && d.mixing.channels.tilt_range <= 20,
            "dynamic_mixing_tilt_range", "must be in [0, 20] dB");
  for (auto [key, value] : {std::pair<const char*, double>{"dynamic_mixing_reverb",
                                                          d.mixing.channels.reverb},
                            {"dynamic_mixing_telephone", d.mixing.channels.telephone},
                            {"dynamic_mixing_gsm", d.mixing.channels.gsm},
                            {"dynamic_mixing_codec2", d.mixing.channels.codec2},
                            {"dynamic_mixing_tilt_range", d.mixing.channels.tilt_range}}) {
    if (key != std::string("dynamic_mixing_tilt_range"))
      r.require(value >= 0 && value <= 1, key, "is a probability: must be in [0, 1]");
    r.require(d.dynamic_mixing || value == 0, key,
              "is set but dynamic_mixing is False (channels are applied to dynamic mixtures)");
  }
}

void check_dynamic_mixing_lists(const OptionsReader& r, const DataOptions& d) {
  r.require(d.dynamic_mixing || d.mixing.source_lists.empty(), "dynamic_mixing_sources",
            "is set but dynamic_mixing is False");
  r.require(d.mixing.source_lists.size() > 0 || d.mixing.utt2spk.empty(),
            "dynamic_mixing_utt2spk",
            "needs dynamic_mixing_sources (the lists it names speakers of)");
  r.require(d.mixing.utt2spk.size() <= 1 ||
                d.mixing.utt2spk.size() == d.mixing.source_lists.size(),
            "dynamic_mixing_utt2spk",
            "has " + std::to_string(d.mixing.utt2spk.size()) + " files for " +
                std::to_string(d.mixing.source_lists.size()) +
                " dynamic_mixing_sources; give one for all lists or one per list");
  r.require(d.mixing.shares.empty() ||
                d.mixing.shares.size() == d.mixing.source_lists.size(),
            "dynamic_mixing_shares",
            "needs one weight per dynamic_mixing_sources list (" +
                std::to_string(d.mixing.source_lists.size()) + ")");
  double share_total = 0;
  for (double share : d.mixing.shares) {
    r.require(share >= 0, "dynamic_mixing_shares", "must not be negative");
    share_total += share;
  }
  r.require(d.mixing.shares.empty() || share_total > 0, "dynamic_mixing_shares",
            "must not all be 0");
  r.require(d.mixing.spk2f0.empty() || !d.mixing.utt2spk.empty(), "dynamic_mixing_spk2f0",
            "needs dynamic_mixing_utt2spk (it gives the f0 of the speakers those files name)");
  r.require(d.mixing.spk2f0.empty() || d.mixing.spk2f0.size() == d.mixing.utt2spk.size(),
            "dynamic_mixing_spk2f0",
            "has " + std::to_string(d.mixing.spk2f0.size()) + " files for " +
                std::to_string(d.mixing.utt2spk.size()) +
                " dynamic_mixing_utt2spk files; give one per utt2spk file");
  r.require(d.mixing.near_pitch >= 0 && d.mixing.near_pitch <= 1, "dynamic_mixing_near_pitch",
            "is a probability: must be in [0, 1]");
  r.require(d.mixing.near_pitch == 0 || !d.mixing.spk2f0.empty(), "dynamic_mixing_near_pitch",
            "needs dynamic_mixing_spk2f0 (each speaker's median f0)");
  r.require(d.mixing.near_semitones > 0, "dynamic_mixing_near_semitones", "must be positive");
}

}  // namespace

void DataOptions::declare(OptionsReader& r) {
  declare_data_batching(r, *this);
  declare_dynamic_mixing_sources(r, *this);
  declare_dynamic_mixing_channels(r, *this);
  declare_virtual_voices(r, *this);

  check_data_batching(r, *this);
  check_dynamic_mixing_ranges(r, *this);
  check_dynamic_mixing_lists(r, *this);
  check_virtual_voices(r, *this);
}

}  // namespace nabu
