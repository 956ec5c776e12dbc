// Recognition with a trained experiment (docs/recognition.md): a task's logits -> CTC decoding ->
// label sequences (decoder.cfg, a decoder of decoders/decoder.h), written as Kaldi-style
// hypotheses and scored against reference transcriptions (scorer.cfg, a sequence scorer of
// scorers/sequence_scorer.h such as score_type = error_rate).
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "nabu/core/options.h"
#include "nabu/core/recipe.h"
#include "nabu/neuralnetworks/tensor_map.h"
#include "nabu/evaluation/decoders/decoder.h"
#include "nabu/experiment/trained_experiment.h"

namespace nabu {

// The decoder of a test task: decoder.cfg's section of the task, with the labels of its alphabet.
class Decoder {
 public:
  Decoder(const ConfigSection& section, const Recipe& recipe);
  // The labels of one utterance from its outputs ([T, C] logits, real frames only).
  std::vector<std::string> decode(const TensorMap& outputs) const;
  const DecoderOptions& options() const { return decoder_->options(); }

 private:
  CtcDecoderPtr decoder_;
  std::vector<std::string> labels_;
  std::string where_;
};

// True when decoder.cfg has a section for the task: `nabu test` recognises instead of separating.
bool is_recognition_task(const Recipe& recipe, const std::string& task);
// Every problem of the keys of a recognition task's decoder.cfg and scorer.cfg sections (`nabu
// check`), each naming file:line and key; that the database sections they name exist is the
// caller's check.
std::vector<std::string> check_recognition_task(const Recipe& recipe, const std::string& task);

// The test of one recognition task into `testdir`: <task>/hyp.txt and, with a scorer.cfg
// section, results_<task>_<score_type>_{complete,summary}.json. Returns the test loss.
EvaluationResult run_recognition_test(const Recipe& recipe, TrainedExperiment& model,
                                      const std::string& task, const std::filesystem::path& testdir,
                                      int64_t max_utterances,
                                      const std::function<void(const std::string&)>& on_summary);

// The labels of one recording of any format, rate and channel count libsndfile reads (resampled
// to the model's rate with libsoxr; `channel` 1-based, 0 = mixed down), recognised whole.
std::vector<std::string> recognize_file(TrainedExperiment& model, const std::string& task,
                                        const Decoder& decoder, const std::filesystem::path& path,
                                        int channel = 0);

}  // namespace nabu
