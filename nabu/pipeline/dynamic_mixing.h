// Dynamic mixing (docs/dynamic_mixing.md): the training examples of a task are new mixtures every
// epoch, made on the fly from single-speaker source utterances the way the corpus makes its
// stored mixtures (active-level normalisation, relative levels, cut to the shortest source), and
// turned into inputs and targets by the very processors of the task's database sections. A
// mixture is a pure function of (seed, epoch, index), so a pipeline position is all a checkpoint
// needs, and ranks shard an epoch like any other.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "nabu/core/recipe.h"
#include "nabu/pipeline/batch.h"
#include "nabu/pipeline/dynamic_mixing_options.h"
#include "nabu/pipeline/example_source.h"
#include "nabu/pipeline/source_pool.h"
#include "nabu/processing/channels.h"
#include "nabu/processing/data_list.h"
#include "nabu/processing/section_reader.h"
#include "nabu/processing/signal.h"
#include "nabu/processing/voice_change.h"

namespace nabu {

// Active speech level: RMS over the 20 ms frames within 30 dB of the loudest one (the corpus's
// stand-in for ITU-T P.56). 0 for silence.
double active_rms(const torch::Tensor& signal, int sample_rate);

struct MixedSignals {
  torch::Tensor mixture;               // double [N], int16 values
  std::vector<torch::Tensor> sources;  // the scaled sources, int16 values; they sum to mixture
};

// wsj0-2mix "min" mixing, as tools/corpus/toy_audio.py mix_sources: each source at the same
// active level times its gain (dB), all cut to the shortest, everything rescaled jointly so the
// largest peak is 0.9 of full scale, rounded to int16; the mixture is the exact sum.
MixedSignals mix_sources(const std::vector<torch::Tensor>& sources,
                         const std::vector<double>& gains_db, int sample_rate);

class DynamicMixtureSet : public ExampleSource {
 public:
  // One database section per input and target; each section's processor takes the mixture or
  // its sources (Processor::signal_role). Errors name `what` and the section.
  DynamicMixtureSet(const Recipe& recipe, const std::vector<DataBinding>& inputs,
                    const std::vector<DataBinding>& targets, DynamicMixingOptions options,
                    const std::string& what);

  int64_t size() const override { return options_.examples_per_epoch; }
  const std::vector<std::string>& data_names() const override { return data_names_; }
  std::vector<int64_t> lengths(int64_t epoch) const override;
  bool same_every_epoch() const override { return false; }
  Batch load(int64_t epoch, const std::vector<int64_t>& indices) const override;

  int num_sources() const { return num_sources_; }
  const SourcePool& pool() const { return *pool_; }

  // What example `index` of `epoch` is: its sources, gains, and the frames it keeps.
  struct Draw {
    std::vector<std::size_t> sources;
    std::vector<double> gains_db;
    std::vector<double> speeds;               // empty: no speed perturbation
    std::vector<int64_t> samples;             // of each source after its speed change
    std::vector<Channel> channels;            // empty: no channel augmentation
    std::vector<int> voice_numbers;           // empty: no virtual voices; 0: the recording
    std::vector<VoiceChange> voices;          // of each source, by its voice number
    int64_t frames = 0;       // frames of the whole mixture (first input), predicted
    int64_t first_frame = 0;  // start of the crop
    int64_t length = 0;       // frames kept
  };
  Draw draw(int64_t epoch, int64_t index) const;
  // The mixture and sources of a draw (for tests and listening).
  MixedSignals signals(const Draw& draw) const;

 private:
  // How a binding's frames relate to samples: through the STFT framing of its features, one
  // frame per sample (raw audio), or unknown (no feature options: computed whole, then sliced).
  enum class Framing { kFrames, kSamples, kUnknown };
  struct Binding {
    std::string name;
    std::shared_ptr<SectionReader> reader;
    bool sources;  // gets the sources (else the mixture)
    Framing framing;
    FrameSettings settings;  // for kFrames
  };
  // Samples [first, last) of the mixed signals go through the binding's processor; rows
  // [skip_frames, skip_frames + rows) of its output are kept (rows < 0: all of them).
  struct Crop {
    int64_t first, last, skip_frames, rows;
  };
  // The steps of the constructor, in its order. bind_sections makes a binding per input and
  // target and returns the lines of the first section that takes the sources.
  std::vector<DataLine> bind_sections(const Recipe& recipe, const std::vector<DataBinding>& all);
  void load_pool(const Recipe& recipe, const std::vector<DataLine>& source_lines);
  // The pool's rate: 8 kHz for the codecs, and the rate of the task's training data.
  void check_pool_rates(const std::vector<DataLine>& source_lines) const;
  void check_pool_speakers() const;  // shares and enough speakers
  void set_framings();
  void check_example_options();  // segment length and examples per epoch
  int64_t predicted_frames(int64_t samples) const;
  // Each source's voice, and a twin (docs/dynamic_mixing.md, "Virtual speakers").
  void draw_voices(std::mt19937_64& rng, Draw& d) const;
  Crop crop(const Binding& binding, const Draw& d, int64_t samples) const;

  DynamicMixingOptions options_;
  std::string what_;
  std::vector<std::string> data_names_;
  std::vector<Binding> bindings_;
  std::shared_ptr<const SourcePool> pool_;
  int num_sources_ = 0;
  int64_t crop_frames_ = 0;  // 0 = full
};

}  // namespace nabu
