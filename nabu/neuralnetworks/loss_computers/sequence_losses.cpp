// Losses over label sequences (docs/recognition.md): ctc, LibTorch's connectionist temporal
// classification over the logits of one output against the label indices of one target.
#include <torch/torch.h>

#include "nabu/core/error.h"
#include "nabu/neuralnetworks/loss_computers/loss_computer.h"
#include "nabu/neuralnetworks/loss_computers/loss_ops.h"

namespace nabu {

namespace {

using namespace losses;

struct CtcOptions {
  std::string target, output;
  int blank = -1;
  std::string reduction = "sum";
  void declare(OptionsReader& r) {
    r("target", target, "the label-sequence target (default: the task's only target)");
    r("output", output, "the logits output [B, T, C] (default: the task's only output)");
    r("blank", blank, "index of the blank class; -1: the last class (C - 1)");
    r.choice("reduction", reduction, {"sum", "mean"},
             "sum: loss summed over utterances, norm = number of target labels; mean: each "
             "utterance's loss divided by its number of labels, norm = number of utterances");
    r.require(blank >= -1, "blank", "must be -1 (the last class) or a class index");
  }
};

// Frames a CTC path needs for `labels`: one per label, plus a blank between equal neighbours.
int64_t frames_needed(const torch::Tensor& labels) {
  auto values = labels.to(torch::kLong).cpu().contiguous();
  const int64_t* v = values.data_ptr<int64_t>();
  int64_t count = values.numel();
  for (int64_t i = 1; i < values.numel(); ++i) count += v[i] == v[i - 1];
  return count;
}

class CtcLoss : public NamedTargetLoss<CtcOptions> {
 public:
  explicit CtcLoss(const CtcOptions& options) : NamedTargetLoss(options) {}

  LossResult operator()(const TensorMap& targets, const TensorMap& outputs,
                        const torch::Tensor& seq_lengths) override {
    throw Error("loss ctc needs the lengths of its target sequences");
  }

  LossResult operator()(const TensorMap& targets, const TensorMap& outputs,
                        const torch::Tensor& seq_lengths, const SequenceInfo& sequences) override {
    const std::string what = "loss ctc";
    auto [target_name, labels] = pick_tensor(targets, options_.target, "target", what);
    auto [output_name, logits] = pick_tensor(outputs, options_.output, "output", what);
    expect_rank(logits, 3, output_name, what, "[B, T, C]");
    expect_rank(labels, 2, target_name, what, "[B, L] (label indices)");
    auto found = sequences.target_lengths.find(target_name);
    if (found == sequences.target_lengths.end())
      throw Error(what + ": no lengths for target " + target_name);
    const int64_t batch = logits.size(0), frames = logits.size(1), classes = logits.size(2);
    if (labels.size(0) != batch || seq_lengths.size(0) != batch)
      throw Error(what + ": " + output_name + " and " + target_name + " disagree on the batch size");
    const int64_t blank = options_.blank < 0 ? classes - 1 : options_.blank;
    if (blank >= classes)
      throw Error(what + ": blank " + std::to_string(blank) + " is not a class of " + output_name +
                  " (" + std::to_string(classes) + " classes)");
    auto input_lengths = seq_lengths.to(torch::kLong).clamp_max(frames).cpu();
    auto label_lengths = found->second.to(torch::kLong).cpu();
    auto label_values = labels.to(torch::kLong);
    // The checks read the labels on the CPU (a GPU batch's too).
    auto host_labels = label_values.cpu();
    // The label range and the frames each sequence needs, named by example: LibTorch would
    // return an infinite loss or read out of range instead.
    for (int64_t b = 0; b < batch; ++b) {
      auto example = [&] {
        return b < static_cast<int64_t>(sequences.example_names.size())
                   ? "'" + sequences.example_names[b] + "'"
                   : "example " + std::to_string(b) + " of the batch";
      };
      int64_t length = label_lengths[b].item<int64_t>();
      auto sequence = host_labels[b].slice(0, 0, length);
      if (length > 0) {
        int64_t low = sequence.min().item<int64_t>(), high = sequence.max().item<int64_t>();
        if (low < 0 || high >= classes || (sequence == blank).any().item<bool>())
          throw DataError(what + ": " + target_name + " of " + example() +
                          " has labels outside 0.." + std::to_string(classes - 1) +
                          " or equal to the blank (" + std::to_string(blank) +
                          "): the output has one class per label plus the blank");
      }
      int64_t needed = frames_needed(sequence), available = input_lengths[b].item<int64_t>();
      if (needed > available)
        throw DataError(what + ": " + target_name + " of " + example() + " has " +
                        std::to_string(length) + " labels, which need at least " +
                        std::to_string(needed) + " frames, but " + output_name + " has " +
                        std::to_string(available));
    }
    auto log_probs = torch::log_softmax(logits, 2).transpose(0, 1);  // [T, B, C]
    auto per_utterance = torch::ctc_loss(log_probs, label_values, input_lengths, label_lengths,
                                         blank, at::Reduction::None, /*zero_infinity=*/false);
    LossResult result;
    double labels_total = label_lengths.sum().item<double>();
    if (options_.reduction == "sum") {
      result.loss = per_utterance.sum();
      result.norm = torch::full({}, labels_total, logits.options()).detach();
    } else {
      auto divisor = label_lengths.clamp_min(1).to(logits.options());
      result.loss = (per_utterance / divisor).sum();
      result.norm = torch::full({}, static_cast<double>(batch), logits.options()).detach();
    }
    return result;
  }
};

LossPtr make_ctc(const ConfigSection& section) {
  return make_configured_loss<CtcLoss, CtcOptions>(section, "ctc");
}

}  // namespace

NABU_REGISTER_WITH_OPTIONS(loss_registry, "ctc", make_ctc, CtcOptions,
                           "connectionist temporal classification of logits [B,T,C] vs label "
                           "indices [B,L]; norm = number of labels (reduction sum)")

}  // namespace nabu
