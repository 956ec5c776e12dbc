// Shared math of the loss computers (the original keeps it in components/ops.py): frame masks,
// shape checks, mask activations, the deep clustering terms and the permutation-invariant minimum.
// Kept separate from the loss classes so other families (evaluators, reconstructors) can reuse it.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "nabu/core/config.h"
#include "nabu/core/options.h"
#include "nabu/neuralnetworks/loss_computers/loss_computer.h"
#include "nabu/neuralnetworks/speaker_vectors.h"
#include "nabu/neuralnetworks/tensor_map.h"

namespace nabu::losses {

// ---- shapes and masks ------------------------------------------------------------------------

// Throws nabu::Error "<what>: <name> must have rank <rank> [...], got [..]" unless it does.
void expect_rank(const torch::Tensor& tensor, int64_t rank, const std::string& name,
                 const std::string& what, const std::string& layout);
// `total / part`, or an Error saying that `total_name`'s size is not a multiple of `part`.
int64_t divide_exactly(int64_t total, int64_t part, const std::string& total_name,
                       const std::string& part_name, const std::string& what);
// Checks that the frame-level tensors share B and T with each other, that seq_lengths has B
// entries and that no length exceeds T. `tensors` are (name, tensor) pairs of rank >= 2.
void check_frames(const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                  const torch::Tensor& seq_lengths, const std::string& what);
// Same-shape check for two tensors (regression losses).
void expect_same_shape(const torch::Tensor& a, const std::string& a_name, const torch::Tensor& b,
                       const std::string& b_name, const std::string& what);

// The tensor called `name`, or with an empty name the only one; `key` ("target"/"output") is the
// loss.cfg key that names it, for the error when there are several.
std::pair<std::string, torch::Tensor> pick_tensor(const TensorMap& tensors, const std::string& name,
                                                  const std::string& key, const std::string& what);
// The names a loss with optional `target`/`output` keys reads: {name}, or none when it takes the
// task's only one.
std::vector<std::string> named_if_given(const std::string& name);
// A loss whose options name its one target and one output (keys `target` and `output`, each
// optional when the task has only one): the names it reads, from its options.
template <class Options>
class NamedTargetLoss : public LossComputer {
 public:
  explicit NamedTargetLoss(Options options) : options_(std::move(options)) {}
  std::vector<std::string> target_names() const override {
    return named_if_given(options_.target);
  }
  std::vector<std::string> output_names() const override {
    return named_if_given(options_.output);
  }

 protected:
  Options options_;
};

// [B, T] mask (1 on real frames) in the dtype and device of `like`.
torch::Tensor real_frames(const torch::Tensor& seq_lengths, int64_t frames,
                          const torch::Tensor& like);
// Targets stored as bool/uint8/int arrive in many dtypes; the math runs in the outputs' dtype.
torch::Tensor as_dtype_of(const torch::Tensor& tensor, const torch::Tensor& like);

// ---- activations -----------------------------------------------------------------------------

enum class MaskActivation { kSoftmax, kSigmoid, kNone };
// Declares a mask activation key: "softmax", "sigmoid", "None"/"none". Anything else is a
// ConfigError naming the key: the original silently fell back (to softmax in PIT, to sigmoid in
// DANet), hiding typos.
void declare_mask_activation(OptionsReader& r, const std::string& key, MaskActivation& value,
                             const std::string& help);
torch::Tensor apply_activation(const torch::Tensor& logits, MaskActivation activation,
                               int64_t speaker_dim);

// neuralnetworks/speaker_vectors.h, shared with the attractor model.
using nabu::l2_normalize_last;
using nabu::mean_vector_per_speaker;

// ---- deep clustering -------------------------------------------------------------------------

// Per-utterance deep clustering loss ‖VₙᵀVₙ‖² − 2‖VₙᵀYᵤ‖² + ‖YᵤᵀYᵤ‖² (= ‖VₙVₙᵀ − YᵤYᵤᵀ‖²_F
// without forming the N×N affinities), where Vₙ = w ⊙ V/‖V‖ row-wise (norm floored at 1e-6 as
// tf.nn.l2_normalize with epsilon 1e-12) and Yᵤ = w ⊙ Y. embeddings V [B,N,D], weights w [B,N,1]
// (usedbins on real frames), labels Y [B,N,S]. Returns [B] in V's dtype. A fused autograd
// function: its closed-form backward (4(VₙG − YᵤHᵀ) through the normalisation) is several times
// faster than differentiating the graph at recipe size. Squared norms are summed in double
// because the three terms nearly cancel.
torch::Tensor deep_clustering_loss(const torch::Tensor& embeddings, const torch::Tensor& weights,
                                   const torch::Tensor& labels);

// ---- permutation invariance ------------------------------------------------------------------

// Speaker counts up to this are solved by enumerating all S! permutations (as the original);
// above it by the assignment solver, which gives the same minimum because the cost decomposes.
constexpr int64_t kMaxEnumeratedSpeakers = 3;

// All permutations of 0..n-1 in lexicographic order (itertools.permutations order).
std::vector<std::vector<int64_t>> all_permutations(int64_t n);

// Minimum-cost assignment (Hungarian / Kuhn–Munkres with potentials, O(n³)) for a row-major
// n×n cost matrix: returns, for each row, its column.
std::vector<int64_t> solve_assignment(const std::vector<double>& cost, int64_t n);

// pairwise[b, i, j] = cost of estimate i assigned to target j ([B, S, S]). Returns [B]:
// min over permutations π of Σ_j pairwise[b, π(j), j] (only the identity without
// `allow_permutation`). Differentiable through the chosen permutation, like reduce_min.
torch::Tensor min_over_permutations(const torch::Tensor& pairwise, bool allow_permutation);

// ---- scale-invariant SNR ---------------------------------------------------------------------

// si_snr[b, i, j] = SI-SNR in dB of estimate i against source j ([B, S, S]), over the first
// lengths[b] samples of utterance b, each signal made zero-mean over those samples:
// 10 log10(‖αs‖² / (‖ŝ − αs‖² + ε) + ε) with α = ⟨ŝ, s⟩ / (‖s‖² + ε). estimates and sources are
// [B, N, S]; samples past a length never count. Differentiable with respect to the estimates.
torch::Tensor pairwise_si_snr(const torch::Tensor& estimates, const torch::Tensor& sources,
                              const torch::Tensor& lengths, double epsilon = 1e-8);

}  // namespace nabu::losses
