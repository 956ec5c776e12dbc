#include "nabu/evaluation/decoders/decoder.h"

#include "nabu/core/strings.h"
#include "nabu/evaluation/decoders/ctc_decoding.h"

namespace nabu {

void DecoderOptions::declare(OptionsReader& r) {
  r("decoder", decoder, "the decoder (nabu list decoder)");
  r("output", output, "the logits output [T, C] (default: the task's only output)");
  r("blank", blank, "index of the blank class; -1: the last class");
  r("alphabet", alphabet, "database section whose text_processor names the labels");
  r.require(blank >= -1, "blank", "must be -1 (the last class) or a class index");
  r.require(!alphabet.empty(), "alphabet", "name the database section of the transcriptions");
}

void GreedyDecoderOptions::declare(OptionsReader& r) {
  DecoderOptions::declare(r);
  // So that `--set decoder.cfg:TASK:decoder=greedy` works on a beam_search section.
  r.accepted("beam_width", "beam_search's width; greedy keeps one path");
}

void BeamSearchDecoderOptions::declare(OptionsReader& r) {
  DecoderOptions::declare(r);
  r("beam_width", beam_width, "prefixes kept per frame");
  r.require(beam_width >= 1, "beam_width", "must be at least 1");
}

namespace {

class GreedyDecoder : public CtcDecoder {
 public:
  explicit GreedyDecoder(const ConfigSection& section)
      : options_(read_options<GreedyDecoderOptions>(section, "greedy")) {}
  const DecoderOptions& options() const override { return options_; }
  std::vector<int64_t> decode(const torch::Tensor& log_probs, int64_t blank) const override {
    return ctc_greedy_decode(log_probs, blank);
  }

 private:
  GreedyDecoderOptions options_;
};

class BeamSearchDecoder : public CtcDecoder {
 public:
  explicit BeamSearchDecoder(const ConfigSection& section)
      : options_(read_options<BeamSearchDecoderOptions>(section, "beam_search")) {}
  const DecoderOptions& options() const override { return options_; }
  std::vector<int64_t> decode(const torch::Tensor& log_probs, int64_t blank) const override {
    return ctc_prefix_beam_search(log_probs, blank, options_.beam_width).front().labels;
  }

 private:
  BeamSearchDecoderOptions options_;
};

template <class T>
CtcDecoderPtr make(const ConfigSection& section) {
  return std::make_shared<T>(section);
}

}  // namespace

DecoderRegistry& decoder_registry() {
  static DecoderRegistry registry("decoder");
  return registry;
}

std::string decoder_name(const ConfigSection& section) {
  return section.has("decoder") ? trim(section.get_string("decoder")) : DecoderOptions{}.decoder;
}

CtcDecoderPtr make_decoder(const ConfigSection& section) {
  std::string name = decoder_name(section);
  if (!decoder_registry().contains(name))
    section.fail("decoder", decoder_registry().unknown_message(name));
  return decoder_registry().create(name, section);
}

std::vector<std::string> check_decoder(const ConfigSection& section) {
  std::string name = decoder_name(section);
  if (!decoder_registry().contains(name))
    return {section.where("decoder") + ": " + decoder_registry().unknown_message(name)};
  return decoder_registry().check(name, section);
}

NABU_REGISTER_WITH_OPTIONS(decoder_registry, "greedy", make<GreedyDecoder>, GreedyDecoderOptions,
                           "CTC best path: the most probable class per frame, repeats merged, "
                           "blanks removed")
NABU_REGISTER_WITH_OPTIONS(decoder_registry, "beam_search", make<BeamSearchDecoder>,
                           BeamSearchDecoderOptions,
                           "CTC prefix beam search: sums the probabilities of every frame path "
                           "of a label sequence, keeping beam_width prefixes per frame")

}  // namespace nabu
