// CTC decoding of one utterance's frame-wise label log-probabilities: the best path (greedy) and the
// prefix beam search, which sums the probabilities of all frame paths that collapse to the same
// label sequence. Both read log_probs [T, C] (log-softmax outputs, real frames only, any floating
// dtype; computed in double) and return label sequences with repeats merged and blanks removed.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace nabu {

// The most probable single frame path, collapsed. On equal scores in a frame the lowest label wins.
std::vector<int64_t> ctc_greedy_decode(const torch::Tensor& log_probs, int64_t blank);

struct CtcHypothesis {
  std::vector<int64_t> labels;
  double log_probability = 0.0;  // log of the summed probability of the paths kept for `labels`
};

// The final beam, best first (equal probabilities: lexicographically smaller labels first). With
// beam_width at least the number of distinct label sequences (C^T always suffices) it is exact:
// every label sequence with its total probability. An empty utterance (T = 0) gives one empty
// hypothesis with log-probability 0.
std::vector<CtcHypothesis> ctc_prefix_beam_search(const torch::Tensor& log_probs, int64_t blank,
                                                  int beam_width);

}  // namespace nabu
