#include "nabu/neuralnetworks/loss_computers/loss_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include "nabu/core/error.h"
#include "nabu/core/strings.h"

namespace nabu::losses {

namespace {

std::string shape_text(const torch::Tensor& tensor) {
  std::ostringstream out;
  out << "[";
  for (int64_t i = 0; i < tensor.dim(); ++i) out << (i ? ", " : "") << tensor.size(i);
  out << "]";
  return out.str();
}

}  // namespace

void expect_rank(const torch::Tensor& tensor, int64_t rank, const std::string& name,
                 const std::string& what, const std::string& layout) {
  if (!tensor.defined())
    throw Error(what + ": " + name + " is undefined (expected " + layout + ")");
  if (tensor.dim() != rank)
    throw Error(what + ": " + name + " must be " + layout + ", got shape " + shape_text(tensor));
}

int64_t divide_exactly(int64_t total, int64_t part, const std::string& total_name,
                       const std::string& part_name, const std::string& what) {
  if (part <= 0 || total % part != 0 || total == 0)
    throw Error(what + ": " + total_name + " (" + std::to_string(total) +
                ") is not a positive multiple of " + part_name + " (" + std::to_string(part) +
                ")");
  return total / part;
}

void check_frames(const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                  const torch::Tensor& seq_lengths, const std::string& what) {
  if (!seq_lengths.defined() || seq_lengths.dim() != 1)
    throw Error(what + ": sequence lengths must be a vector [B]");
  const int64_t batch = seq_lengths.size(0);
  int64_t frames = -1;
  std::string first;
  for (const auto& [name, tensor] : tensors) {
    if (tensor.dim() < 2 || tensor.size(0) != batch)
      throw Error(what + ": " + name + " has shape " + shape_text(tensor) + " but the batch has " +
                  std::to_string(batch) + " utterances");
    if (frames < 0) {
      frames = tensor.size(1);
      first = name;
    } else if (tensor.size(1) != frames) {
      throw Error(what + ": " + name + " has " + std::to_string(tensor.size(1)) +
                  " frames but " + first + " has " + std::to_string(frames));
    }
  }
  if (batch > 0 && frames >= 0) {
    auto lengths = seq_lengths.to(torch::kLong);
    int64_t longest = lengths.max().item<int64_t>();
    int64_t shortest = lengths.min().item<int64_t>();
    if (longest > frames || shortest < 0)
      throw Error(what + ": sequence lengths must lie in [0, " + std::to_string(frames) +
                  "], got " + std::to_string(shortest) + ".." + std::to_string(longest));
  }
}

void expect_same_shape(const torch::Tensor& a, const std::string& a_name, const torch::Tensor& b,
                       const std::string& b_name, const std::string& what) {
  if (a.sizes() != b.sizes())
    throw Error(what + ": " + a_name + " " + shape_text(a) + " and " + b_name + " " +
                shape_text(b) + " must have the same shape");
}

torch::Tensor real_frames(const torch::Tensor& seq_lengths, int64_t frames,
                          const torch::Tensor& like) {
  return frame_mask(seq_lengths.to(torch::kLong).cpu(), frames, like.scalar_type())
      .to(like.device());
}

std::pair<std::string, torch::Tensor> pick_tensor(const TensorMap& tensors, const std::string& name,
                                                  const std::string& key, const std::string& what) {
  if (!name.empty()) return {name, get_tensor(tensors, name, what)};
  if (tensors.size() != 1) {
    std::vector<std::string> names;
    for (const auto& entry : tensors) names.push_back(entry.first);
    throw Error(what + ": there are " + std::to_string(tensors.size()) + " " + key + "s (" +
                join(names, ", ") + "); name one with `" + key + " = NAME` in the loss.cfg section");
  }
  return *tensors.begin();
}

std::vector<std::string> named_if_given(const std::string& name) {
  return name.empty() ? std::vector<std::string>{} : std::vector<std::string>{name};
}

torch::Tensor as_dtype_of(const torch::Tensor& tensor, const torch::Tensor& like) {
  return tensor.to(like.device(), like.scalar_type());
}

void declare_mask_activation(OptionsReader& r, const std::string& key, MaskActivation& value,
                             const std::string& help) {
  r.choice(key, value,
           {{"softmax", MaskActivation::kSoftmax},
            {"sigmoid", MaskActivation::kSigmoid},
            {"None", MaskActivation::kNone},
            {"none", MaskActivation::kNone}},
           help);
}

torch::Tensor apply_activation(const torch::Tensor& logits, MaskActivation activation,
                               int64_t speaker_dim) {
  switch (activation) {
    case MaskActivation::kSoftmax: {
      // Logits of speaker-major models arrive as a transposed view, the speakers last but not
      // innermost in memory. LibTorch's CPU softmax copies such a view into that order and runs
      // its row kernel over rows of two or three speakers: 6.8 ms forward and 3.7 backward per
      // update of the demo recipe. Over the memory's own order (the speakers, then the bins
      // innermost) it runs vectorised across the bins instead.
      const int64_t last = logits.dim() - 1;
      if (speaker_dim == last && last >= 1 && logits.stride(last) != 1 &&
          logits.stride(last - 1) == 1)
        return torch::softmax(logits.transpose(last - 1, last), last - 1).transpose(last - 1, last);
      return torch::softmax(logits, speaker_dim);
    }
    case MaskActivation::kSigmoid:
      return torch::sigmoid(logits);
    case MaskActivation::kNone:
      break;
  }
  return logits;
}

namespace {

torch::Tensor squared_frobenius(const torch::Tensor& product) {
  return product.to(torch::kDouble).square().sum({1, 2});
}

// Inputs: embeddings V [B,N,D] (differentiated), weights w [B,N,1] and labels Y [B,N,S] (not).
class DeepClusteringFunction : public torch::autograd::Function<DeepClusteringFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* context,
                               const torch::Tensor& embeddings, const torch::Tensor& weights,
                               const torch::Tensor& labels) {
    constexpr double kEpsilon = 1e-12;
    auto squared = embeddings.square().sum(-1, /*keepdim=*/true);  // [B, N, 1]
    auto inverse_norm = torch::rsqrt(squared.clamp_min(kEpsilon));
    auto scale = inverse_norm * weights;
    auto normalized = embeddings * scale;
    auto weighted_labels = labels * weights;
    auto normalized_t = normalized.transpose(1, 2);
    auto gram = torch::bmm(normalized_t, normalized);         // G = VₙᵀVₙ [B, D, D]
    auto cross = torch::bmm(normalized_t, weighted_labels);   // H = VₙᵀYᵤ [B, D, S]
    auto label_gram = torch::bmm(weighted_labels.transpose(1, 2), weighted_labels);
    // ∂(1/‖v‖)/∂v contributes −w r³ (v·g) v on rows above the floor (zero below it).
    auto curvature = scale * inverse_norm.square() * (squared > kEpsilon).to(scale.dtype());
    context->save_for_backward({embeddings, normalized, weighted_labels, gram, cross, scale,
                                curvature});
    auto loss = squared_frobenius(gram) - 2.0 * squared_frobenius(cross) +
                squared_frobenius(label_gram);
    return loss.to(embeddings.scalar_type());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list grad_outputs) {
    auto saved = context->get_saved_variables();
    const auto& embeddings = saved[0];
    const auto& normalized = saved[1];
    const auto& weighted_labels = saved[2];
    auto upstream = grad_outputs[0].to(embeddings.scalar_type()).view({-1, 1, 1}) * 4.0;
    // ∂loss/∂Vₙ = 4 (Vₙ G − Yᵤ Hᵀ), the per-utterance upstream gradient folded into G and H.
    auto grad_normalized = torch::baddbmm(torch::bmm(normalized, saved[3] * upstream),
                                          weighted_labels, (saved[4] * upstream).transpose(1, 2),
                                          /*beta=*/1.0, /*alpha=*/-1.0);
    auto dot = (grad_normalized * embeddings).sum(-1, /*keepdim=*/true);
    auto grad = grad_normalized.mul_(saved[5]);
    grad.addcmul_(embeddings, saved[6] * dot, -1.0);
    return {grad, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor deep_clustering_loss(const torch::Tensor& embeddings, const torch::Tensor& weights,
                                   const torch::Tensor& labels) {
  return DeepClusteringFunction::apply(embeddings, weights.to(embeddings.scalar_type()),
                                       labels.to(embeddings.scalar_type()));
}

std::vector<std::vector<int64_t>> all_permutations(int64_t n) {
  std::vector<int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::vector<std::vector<int64_t>> out;
  do {
    out.push_back(order);
  } while (std::next_permutation(order.begin(), order.end()));
  return out;
}

std::vector<int64_t> solve_assignment(const std::vector<double>& cost, int64_t n) {
  if (n < 0 || static_cast<int64_t>(cost.size()) != n * n)
    throw Error("solve_assignment: cost must be an n×n matrix");
  // Shortest augmenting paths with row/column potentials (1-based, column 0 is a sentinel).
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> row_potential(n + 1, 0.0), col_potential(n + 1, 0.0);
  std::vector<int64_t> row_of_col(n + 1, 0), way(n + 1, 0);
  for (int64_t row = 1; row <= n; ++row) {
    row_of_col[0] = row;
    int64_t col0 = 0;
    std::vector<double> min_slack(n + 1, inf);
    std::vector<bool> used(n + 1, false);
    do {
      used[col0] = true;
      const int64_t row0 = row_of_col[col0];
      double delta = inf;
      int64_t col1 = 0;
      for (int64_t col = 1; col <= n; ++col) {
        if (used[col]) continue;
        const double reduced =
            cost[(row0 - 1) * n + (col - 1)] - row_potential[row0] - col_potential[col];
        if (reduced < min_slack[col]) {
          min_slack[col] = reduced;
          way[col] = col0;
        }
        if (min_slack[col] < delta) {
          delta = min_slack[col];
          col1 = col;
        }
      }
      if (col1 == 0) throw Error("solve_assignment: cost matrix has non-finite entries");
      for (int64_t col = 0; col <= n; ++col) {
        if (used[col]) {
          row_potential[row_of_col[col]] += delta;
          col_potential[col] -= delta;
        } else {
          min_slack[col] -= delta;
        }
      }
      col0 = col1;
    } while (row_of_col[col0] != 0);
    do {  // flip the augmenting path
      const int64_t previous = way[col0];
      row_of_col[col0] = row_of_col[previous];
      col0 = previous;
    } while (col0 != 0);
  }
  std::vector<int64_t> col_of_row(n, 0);
  for (int64_t col = 1; col <= n; ++col) col_of_row[row_of_col[col] - 1] = col - 1;
  return col_of_row;
}

torch::Tensor min_over_permutations(const torch::Tensor& pairwise, bool allow_permutation) {
  const int64_t batch = pairwise.size(0), speakers = pairwise.size(1);
  if (!allow_permutation || speakers <= 1) return pairwise.diagonal(0, 1, 2).sum(-1);
  auto long_options = torch::TensorOptions().dtype(torch::kLong).device(pairwise.device());
  if (speakers <= kMaxEnumeratedSpeakers) {
    auto permutations = all_permutations(speakers);
    const int64_t count = static_cast<int64_t>(permutations.size());
    auto estimate = torch::empty({count, speakers}, torch::kLong);
    auto accessor = estimate.accessor<int64_t, 2>();
    for (int64_t p = 0; p < count; ++p)
      for (int64_t j = 0; j < speakers; ++j) accessor[p][j] = permutations[p][j];
    estimate = estimate.to(pairwise.device());
    auto target = torch::arange(speakers, long_options).unsqueeze(0).expand({count, speakers});
    // [B, P, S]: pairwise[b, π_p(j), j], summed over j then minimised over p.
    auto costs = pairwise.index({torch::indexing::Slice(), estimate, target}).sum(-1);
    return std::get<0>(costs.min(-1));
  }
  // Larger S: the cost of a permutation is a sum of pairwise entries, so the minimum is an
  // assignment problem (targets as rows, estimates as columns).
  auto values = pairwise.detach().to(torch::kCPU, torch::kDouble).contiguous();
  auto chosen = torch::empty({batch, speakers}, torch::kLong);
  auto chosen_accessor = chosen.accessor<int64_t, 2>();
  const double* data = values.data_ptr<double>();
  std::vector<double> cost(static_cast<std::size_t>(speakers * speakers));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t j = 0; j < speakers; ++j)
      for (int64_t i = 0; i < speakers; ++i)
        cost[j * speakers + i] = data[(b * speakers + i) * speakers + j];
    // A NaN/inf output keeps the identity, so the loss stays non-finite and the trainer stops
    // on it (docs/trainer.md step 8) instead of the solver failing.
    bool finite = std::all_of(cost.begin(), cost.end(), [](double c) { return std::isfinite(c); });
    std::vector<int64_t> estimate_of_target(static_cast<std::size_t>(speakers));
    std::iota(estimate_of_target.begin(), estimate_of_target.end(), 0);
    if (finite) estimate_of_target = solve_assignment(cost, speakers);
    for (int64_t j = 0; j < speakers; ++j) chosen_accessor[b][j] = estimate_of_target[j];
  }
  chosen = chosen.to(pairwise.device());
  return pairwise.gather(1, chosen.unsqueeze(1)).squeeze(1).sum(-1);
}

torch::Tensor pairwise_si_snr(const torch::Tensor& estimates, const torch::Tensor& sources,
                              const torch::Tensor& lengths, double epsilon) {
  const int64_t samples = estimates.size(1);
  auto real = real_frames(lengths, samples, estimates).unsqueeze(2);  // [B, N, 1]
  auto count = lengths.to(estimates.device(), estimates.scalar_type())
                   .clamp_min(1.0)
                   .view({-1, 1, 1});
  auto centred = [&](const torch::Tensor& x) {
    auto masked = x * real;
    return (masked - masked.sum(1, /*keepdim=*/true) / count) * real;
  };
  auto estimate = centred(estimates);  // [B, N, S]
  auto source = centred(sources);
  // [B, S_est, S_src] inner products and the sources' energies.
  auto dot = torch::bmm(estimate.transpose(1, 2), source);
  auto source_energy = source.pow(2).sum(1).unsqueeze(1);      // [B, 1, S]
  auto estimate_energy = estimate.pow(2).sum(1).unsqueeze(2);  // [B, S, 1]
  auto alpha = dot / (source_energy + epsilon);
  // ‖αs‖² = α²‖s‖²; ‖ŝ − αs‖² = ‖ŝ‖² − 2α⟨ŝ,s⟩ + α²‖s‖², without forming the S² projections.
  auto target_energy = alpha.pow(2) * source_energy;
  auto error_energy = (estimate_energy - 2.0 * alpha * dot + target_energy).clamp_min(0.0);
  return 10.0 * torch::log10(target_energy / (error_energy + epsilon) + epsilon);
}

}  // namespace nabu::losses
