// dbr_capsnet: a capsule network with bidirectional recurrence (the original's
// models/dbr_capsnet.py with components/layer.py BRNNLayer / BRCapsuleLayer and
// components/rnn_cell.py RecCapsuleCell / RecCapsuleCellRecOnlyVote; SS/BRCapsNet recipes).
//
// Primary capsules: a bidirectional simple RNN whose OUTPUT is the linear pre-activation
// z_t = x_t Wx + h_{t-1} Wh + b while its state is h_t = tanh(z_t); the two directions' outputs
// ([B, T, N*D] each) are joined and read as 2N capsules of dimension D, then squashed.
// Every further layer runs a recurrent capsule cell per direction over time: its state is the
// output capsules of the previous frame, and the output capsules are routed jointly from votes of
// the input capsules and votes of the state capsules (see route_recurrent below). The two
// directions' capsules are joined again to 2N capsules. Output: [B, T, 2*N*D].
//
// Sequence lengths are respected as TensorFlow's bidirectional_dynamic_rnn does: the backward
// direction runs over each utterance reversed within its own length, and output frames at
// t >= length are zero, so padded frames never reach real ones.
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "nabu/core/error.h"
#include "nabu/neuralnetworks/models/capsules.h"
#include "nabu/neuralnetworks/models/model.h"
#include "nabu/neuralnetworks/models/recurrent.h"

namespace nabu {
namespace {

// What turns the state (recurrent) routing logits into routing weights. The original's
// RecCapsuleCell defaults to sigmoid (recurrent_probability_fn absent); `unit` is
// ops.unit_activation, weights of one whatever the logits. The input logits always go through a
// softmax over the output capsules.
enum class StateProbability { kSigmoid, kUnit };

struct DbrCapsNetOptions : capsules::CapsuleOptions {
  bool rec_only_vote = false;
  StateProbability recurrent_probability = StateProbability::kSigmoid;
  bool accumulate_input_logits = true;
  bool accumulate_state_logits = true;

  void declare(OptionsReader& r) {
    CapsuleOptions::declare(r);
    r("rec_only_vote", rec_only_vote,
      "True: the state votes take part in the routing but not in the output capsules");
    r.choice("recurrent_probability_fn", recurrent_probability,
             {{"sigmoid", StateProbability::kSigmoid}, {"unit", StateProbability::kUnit}},
             "routing weights of the state votes from their logits (absent: sigmoid, the "
             "cell's default; unit: all ones)");
    r("accumulate_input_logits", accumulate_input_logits,
      "with rec_only_vote: False restarts the input logits from their initial values at every "
      "routing iteration instead of accumulating the agreements");
    r("accumulate_state_logits", accumulate_state_logits,
      "with rec_only_vote: the same for the state logits");
    r.accepted("accumulate_inputs_logits",
               "a misspelling in the original's SS/BRCapsNet recipe that the original never "
               "reads; ignored as there (the key is accumulate_input_logits)");
  }
};

// One direction of the primary layer (the original's RNNCellLinearOut on a BasicRNNCell).
struct LinearOutRnnParameters {
  torch::Tensor input_kernel;      // [Din, U]
  torch::Tensor recurrent_kernel;  // [U, U]
  torch::Tensor bias;              // [U]
};

// One direction of a recurrent capsule layer (RecCapsuleCell's variables).
struct CapsuleCellParameters {
  torch::Tensor input_kernel;      // [Nin, Din, N, D]
  torch::Tensor recurrent_kernel;  // [N, D, N, D]
  torch::Tensor input_logits;      // [Nin, N]: a parameter only with logits_prior
  torch::Tensor recurrent_logits;  // [N, N]: likewise
};

struct RoutingSpec {
  int iterations = 3;
  bool rec_only_vote = false;
  StateProbability state_probability = StateProbability::kSigmoid;
  bool accumulate_input = true;   // only read with rec_only_vote, as in the original
  bool accumulate_state = true;
};

// x [B, T, Din] in processing order -> the linear outputs [B, T, U]. Frames after a sequence's
// end are processed too; they come after its real frames, and the caller zeroes them.
torch::Tensor scan_linear_out_rnn(const torch::Tensor& x, const LinearOutRnnParameters& p) {
  const int64_t batch = x.size(0), frames = x.size(1), units = p.bias.size(0);
  if (frames == 0) return torch::zeros({batch, 0, units}, x.options());
  auto projected = torch::matmul(x, p.input_kernel) + p.bias;
  std::vector<torch::Tensor> outputs;
  outputs.reserve(frames);
  torch::Tensor state;  // h_{t-1}; zero (skipped) at t = 0
  for (int64_t t = 0; t < frames; ++t) {
    auto z = projected.select(1, t);
    if (t > 0) z = z + torch::matmul(state, p.recurrent_kernel);
    outputs.push_back(z);
    state = torch::tanh(z);
  }
  return torch::stack(outputs, 1);
}

// Sum of the votes [..., Nin, N, D] weighted by weights [..., Nin, N] over the voters.
torch::Tensor weighted_votes(const torch::Tensor& weights, const torch::Tensor& votes) {
  return (weights.unsqueeze(-1) * votes).sum(-3);
}

// Agreement <vote, capsule> of every vote [..., Nin, N, D] with capsules [..., N, D].
torch::Tensor agreement(const torch::Tensor& votes, const torch::Tensor& capsules) {
  return (votes * capsules.unsqueeze(-3)).sum(-1);
}

// The routing of one frame (RecCapsuleCell.cluster, RecCapsuleCellRecOnlyVote.cluster):
// votes of the input capsules and of the state capsules, each with its own logits.
torch::Tensor route_recurrent(const torch::Tensor& input_votes, const torch::Tensor& state_votes,
                              const torch::Tensor& input_logits,
                              const torch::Tensor& state_logits, const RoutingSpec& spec) {
  auto state_weights = [&](const torch::Tensor& logits) {
    return spec.state_probability == StateProbability::kUnit ? torch::ones_like(logits)
                                                             : torch::sigmoid(logits);
  };
  auto input_part = [&](const torch::Tensor& logits) {
    return weighted_votes(torch::softmax(logits, -1), input_votes);
  };
  auto state_part = [&](const torch::Tensor& logits) {
    return weighted_votes(state_weights(logits), state_votes);
  };
  const bool restart_input = spec.rec_only_vote && !spec.accumulate_input;
  const bool restart_state = spec.rec_only_vote && !spec.accumulate_state;
  torch::Tensor in_logits = input_logits, st_logits = state_logits;
  for (int iteration = 0; iteration < spec.iterations; ++iteration) {
    auto routed = capsules::squash(input_part(in_logits) + state_part(st_logits));
    in_logits = (restart_input ? input_logits : in_logits) + agreement(input_votes, routed);
    st_logits = (restart_state ? state_logits : st_logits) + agreement(state_votes, routed);
  }
  if (spec.rec_only_vote) return capsules::squash(input_part(in_logits));
  return capsules::squash(input_part(in_logits) + state_part(st_logits));
}

// x [B, T, Nin, Din] in processing order -> the output capsules [B, T, N, D]; the state of frame
// t is the output of frame t-1 (zero before the first frame).
torch::Tensor scan_capsule_cell(const torch::Tensor& x, const CapsuleCellParameters& p,
                                const RoutingSpec& spec) {
  const int64_t batch = x.size(0), frames = x.size(1);
  const int64_t count = p.recurrent_kernel.size(2), dim = p.recurrent_kernel.size(3);
  auto state = torch::zeros({batch, count, dim}, x.options());
  if (frames == 0) return torch::zeros({batch, 0, count, dim}, x.options());
  std::vector<torch::Tensor> outputs;
  outputs.reserve(frames);
  for (int64_t t = 0; t < frames; ++t) {
    auto input_votes = capsules::predict(x.select(1, t), p.input_kernel);  // [B, Nin, N, D]
    auto state_votes = capsules::predict(state, p.recurrent_kernel);       // [B, N, N, D]
    state = route_recurrent(input_votes, state_votes, p.input_logits, p.recurrent_logits, spec);
    outputs.push_back(state);
  }
  return torch::stack(outputs, 1);
}

// Both directions of a layer on x [B, T, ...]: the forward scan in time order, the backward scan
// over every sequence reversed within its length (its result put back in time order); padded
// output frames zero; the directions joined on axis 2.
template <class Forward, class Backward>
torch::Tensor bidirectional(const torch::Tensor& x, const torch::Tensor& lengths,
                            Forward&& forward, Backward&& backward) {
  auto forward_output = recurrent::zero_padding(forward(x), lengths);
  auto backward_output = recurrent::reverse_padded(
      recurrent::zero_padding(backward(recurrent::reverse_padded(x, lengths)), lengths), lengths);
  return torch::cat({forward_output, backward_output}, 2);
}

class DbrCapsNetModel : public Model {
 public:
  DbrCapsNetModel(const std::string& name, const std::string& where, DbrCapsNetOptions options)
      : Model(name, "dbr_capsnet", options.trainable, where), options_(std::move(options)) {
    routing_.iterations = options_.routing_iters;
    routing_.rec_only_vote = options_.rec_only_vote;
    routing_.state_probability = options_.recurrent_probability;
    routing_.accumulate_input = options_.accumulate_input_logits;
    routing_.accumulate_state = options_.accumulate_state_logits;
  }

 protected:
  void build(const std::vector<torch::Tensor>& inputs) override {
    expect_inputs(inputs, 1, 1);
    expect_rank(inputs[0], 3, "the input ([B, T, dim])");
    const int64_t in = inputs[0].size(-1);
    const int64_t capsules = options_.num_capsules, dim = options_.capsule_dim;
    const int64_t units = capsules * dim;
    auto float_options = torch::TensorOptions().device(inputs[0].device());
    const char* directions[] = {"fw", "bw"};
    for (int direction = 0; direction < 2; ++direction) {
      // BasicRNNCell: one glorot-uniform kernel [Din + U, U] over [x, h], a zero bias.
      std::string prefix = std::string("primary_") + directions[direction] + "_";
      auto input_kernel = torch::empty({in, units}, float_options);
      auto recurrent_kernel = torch::empty({units, units}, float_options);
      glorot_uniform_(input_kernel, in + units, units);
      glorot_uniform_(recurrent_kernel, in + units, units);
      primary_[direction].input_kernel = register_parameter(prefix + "input_kernel", input_kernel);
      primary_[direction].recurrent_kernel =
          register_parameter(prefix + "recurrent_kernel", recurrent_kernel);
      primary_[direction].bias =
          register_parameter(prefix + "bias", torch::zeros({units}, float_options));
    }
    for (int layer = 1; layer < options_.num_layers; ++layer) {
      std::array<CapsuleCellParameters, 2> cells;
      for (int direction = 0; direction < 2; ++direction) {
        std::string prefix =
            "layer" + std::to_string(layer) + "_" + directions[direction] + "_";
        auto& cell = cells[direction];
        auto input_kernel = torch::empty({2 * capsules, dim, capsules, dim}, float_options);
        auto recurrent_kernel = torch::empty({capsules, dim, capsules, dim}, float_options);
        capsules::vote_transform_uniform_(input_kernel);
        capsules::vote_transform_uniform_(recurrent_kernel);
        cell.input_kernel = register_parameter(prefix + "input_kernel", input_kernel);
        cell.recurrent_kernel = register_parameter(prefix + "recurrent_kernel", recurrent_kernel);
        // Zero initial logits; variables only with logits_prior, as in the original.
        cell.input_logits = torch::zeros({2 * capsules, capsules}, float_options);
        cell.recurrent_logits = torch::zeros({capsules, capsules}, float_options);
        if (options_.logits_prior) {
          cell.input_logits = register_parameter(prefix + "init_input_logits", cell.input_logits);
          cell.recurrent_logits =
              register_parameter(prefix + "init_recurrent_logits", cell.recurrent_logits);
        }
      }
      layers_.push_back(cells);
    }
  }

  torch::Tensor forward_impl(const std::vector<torch::Tensor>& inputs,
                             const torch::Tensor& seq_lengths, bool training) override {
    expect_inputs(inputs, 1, 1);
    expect_rank(inputs[0], 3, "the input ([B, T, dim])");
    auto lengths = recurrent::checked_lengths(seq_lengths, inputs[0], describe());
    auto x = add_input_noise(inputs[0], options_.input_noise, training);
    const int64_t batch = x.size(0), frames = x.size(1);
    const int64_t capsules = options_.num_capsules, dim = options_.capsule_dim;

    auto primary = bidirectional(
        x, lengths, [&](const torch::Tensor& in) { return scan_linear_out_rnn(in, primary_[0]); },
        [&](const torch::Tensor& in) { return scan_linear_out_rnn(in, primary_[1]); });
    auto output = capsules::squash(primary.reshape({batch, frames, 2 * capsules, dim}));

    for (const auto& cells : layers_) {
      output = bidirectional(
          output, lengths,
          [&](const torch::Tensor& in) { return scan_capsule_cell(in, cells[0], routing_); },
          [&](const torch::Tensor& in) { return scan_capsule_cell(in, cells[1], routing_); });
      output = keep_dropout(output, options_.dropout, training);
    }
    return output.reshape({batch, frames, 2 * capsules * dim});
  }

 private:
  DbrCapsNetOptions options_;
  RoutingSpec routing_;
  std::array<LinearOutRnnParameters, 2> primary_;                 // forward, backward
  std::vector<std::array<CapsuleCellParameters, 2>> layers_;     // per capsule layer
};

}  // namespace

NABU_REGISTER_WITH_OPTIONS(model_registry, "dbr_capsnet",
                           (make_model<DbrCapsNetModel, DbrCapsNetOptions>), DbrCapsNetOptions,
                           "bidirectional recurrent capsule network: linear-output BRNN primary "
                           "capsules, then recurrent capsule layers routing input and state "
                           "votes, output [B, T, 2*num_capsules*capsule_dim]")

}  // namespace nabu
