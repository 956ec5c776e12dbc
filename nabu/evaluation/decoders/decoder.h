// CTC decoders: one class per decoder.cfg `decoder` (docs/recognition.md), built from a
// recognition task's section through decoder_registry(). A decoder turns one utterance's
// log-probabilities [T, C] into label indices (repeats merged, blanks removed); which output it
// reads and which labels the indices name is the caller's (evaluation/recognition.h).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/core/options.h"
#include "nabu/core/registry.h"

namespace nabu {

// Keys every decoder accepts.
struct DecoderOptions {
  std::string decoder = "greedy";
  std::string output;    // the logits output (default: the task's only output)
  int blank = -1;        // -1: the last class
  std::string alphabet;  // database section whose processor (text_processor) names the labels
  void declare(OptionsReader& r);
};

struct GreedyDecoderOptions : DecoderOptions {
  void declare(OptionsReader& r);
};

struct BeamSearchDecoderOptions : DecoderOptions {
  int beam_width = 8;
  void declare(OptionsReader& r);
};

class CtcDecoder {
 public:
  virtual ~CtcDecoder() = default;
  virtual const DecoderOptions& options() const = 0;
  // log_probs [T, C]: log-softmax outputs of one utterance's real frames.
  virtual std::vector<int64_t> decode(const torch::Tensor& log_probs, int64_t blank) const = 0;
};

using CtcDecoderPtr = std::shared_ptr<CtcDecoder>;
using DecoderRegistry = Registry<CtcDecoderPtr, const ConfigSection&>;
DecoderRegistry& decoder_registry();

// The decoder a section names (`decoder`, greedy when absent).
std::string decoder_name(const ConfigSection& section);
// Builds it; an unknown name or a bad key is a ConfigError naming file:line and key.
CtcDecoderPtr make_decoder(const ConfigSection& section);
// Every problem of the section for `nabu check`, by the decoder's own options.
std::vector<std::string> check_decoder(const ConfigSection& section);

}  // namespace nabu
