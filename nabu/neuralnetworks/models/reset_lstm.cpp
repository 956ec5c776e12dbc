// The state-reset bidirectional LSTM: dbresetlstm and dbresetlstm_insert_additional_input
// (docs/models.md; the original's models/dbresetlstm*.py, components/layer.py BResetLSTMLayer and
// rnn_cell.py LayerNorm(Group)ResetLSTMCell).
//
// Each reset direction runs t_reset / group_size replicas of its state; replicas are zeroed in
// turn so that the output at frame t has seen at most t_reset frames (see ResetSchedule). Deeper
// layers get, for each of their replicas, the previous layer's replica whose context matches
// (the original's permute_versions), so the limited context holds through the whole stack. The
// backward direction counts time from each sequence's last real frame, which makes the model
// independent of padding.
#include "nabu/core/error.h"
#include "nabu/core/strings.h"
#include "nabu/neuralnetworks/models/model.h"
#include "nabu/neuralnetworks/models/recurrent.h"

namespace nabu {
namespace {

using recurrent::LstmCell;
using recurrent::LstmCellOptions;
using recurrent::ResetSchedule;
using recurrent::ScanOutput;

template <bool InsertInput>
struct ResetLstmOptions {
  std::string architecture;
  bool trainable = true;
  int num_layers = 1, num_units = 0;
  std::vector<int> t_reset, group_size{1};
  bool forward_reset = true, backward_reset = true, separate_directions = false;
  bool layer_norm = false;
  double recurrent_dropout = 1.0;
  Activation activation = Activation::kTanh;
  double input_noise = 0.0, dropout = 1.0;
  int combine_layer = 1;

  void declare(OptionsReader& r) {
    declare_common(r, architecture, trainable);
    r("num_layers", num_layers, "number of stacked layers");
    r("num_units", num_units, "units per direction (every layer)");
    r("t_reset", t_reset,
      "the longest context in frames: one value, or one per layer (non-decreasing)");
    r("group_size", group_size,
      "frames that share a state replica (t_reset / group_size replicas): one value or one "
      "per layer");
    r("forward_reset", forward_reset, "True resets the forward direction");
    r("backward_reset", backward_reset, "True resets the backward direction");
    r("separate_directions", separate_directions,
      "True feeds each direction of layer l+1 only the same direction of layer l");
    r.accepted("symmetric_context", "the original's reset LSTM does not read it");
    r("layer_norm", layer_norm, "True applies layer normalisation (per replica)");
    r("recurrent_dropout", recurrent_dropout,
      "KEEP probability of the cell candidate in training (1.0 = none)");
    declare_activation(r, "activation_fn", activation, {"tanh", "relu", "sigmoid"},
                       "activation of the candidate and the output");
    r("input_noise", input_noise, "stddev of Gaussian noise added to the input in training");
    r("dropout", dropout, "must be 1.0: dropout is not implemented (as in the original)");
    if (InsertInput)
      r("combine_layer", combine_layer,
        "the layer (1-based) whose input gets the second model input appended");
    rules(r);
  }

  void rules(const OptionsReader& r) const {
    r.require(num_layers >= 1, "num_layers", "must be >= 1");
    r.require(num_units > 0, "num_units", "required: must be > 0");
    r.require(!t_reset.empty(), "t_reset", "required: the reset period in frames");
    auto per_layer = [&](const std::vector<int>& values, const std::string& key) {
      r.require(values.size() == 1 || static_cast<int>(values.size()) == num_layers,
                     key, "needs one value or one per layer (" + std::to_string(num_layers) +
                              ")");
      for (int value : values) r.require(value >= 1, key, "values must be >= 1");
    };
    per_layer(t_reset, "t_reset");
    per_layer(group_size, "group_size");
    if (!r.section()) return;
    auto resets = t_resets(), groups = group_sizes();
    for (int l = 0; l < num_layers; ++l) {
      r.require(resets[l] % groups[l] == 0, "group_size",
                     "t_reset must be a multiple of group_size");
      if (l > 0)
        r.require(resets[l] >= resets[l - 1], "t_reset",
                       "t_reset of a layer must be >= that of the layer below");
    }
    r.require(forward_reset || backward_reset, "forward_reset",
                   "at least one direction must reset (use dblstm otherwise)");
    r.require(dropout == 1.0, "dropout",
                   "dropout is not implemented for the state reset LSTM (as in the original)");
    r.require(recurrent_dropout > 0.0 && recurrent_dropout <= 1.0, "recurrent_dropout",
                   "is a keep probability in (0, 1]");
    if (InsertInput)
      r.require(combine_layer >= 1 && combine_layer <= num_layers, "combine_layer",
                     "must be a layer number in 1.." + std::to_string(num_layers));
  }

  std::vector<int> t_resets() const {
    return t_reset.size() == 1 ? std::vector<int>(num_layers, t_reset[0]) : t_reset;
  }
  std::vector<int> group_sizes() const {
    return group_size.size() == 1 ? std::vector<int>(num_layers, group_size[0]) : group_size;
  }
};

// Integer ceil(a / b) for b > 0 and any sign of a.
torch::Tensor ceil_div(const torch::Tensor& a, int64_t b) {
  return -torch::div(-a, b, "floor");
}

// replicas [B, T, K, U] gathered along K with index [B, T, K'] -> [B, T, K', U].
torch::Tensor gather_replicas(const torch::Tensor& replicas, const torch::Tensor& index) {
  auto expanded = index.unsqueeze(-1).expand(
      {index.size(0), index.size(1), index.size(2), replicas.size(3)});
  return replicas.gather(2, expanded);
}

class ResetLstmModel : public Model {
 public:
  template <bool InsertInput>
  ResetLstmModel(const std::string& name, const std::string& where,
                 const ResetLstmOptions<InsertInput>& options)
      : Model(name, options.architecture.empty() ? "dbresetlstm" : options.architecture,
              options.trainable, where),
        insert_input_(InsertInput),
        combine_layer_(InsertInput ? options.combine_layer - 1 : -1),
        units_(options.num_units),
        forward_reset_(options.forward_reset),
        backward_reset_(options.backward_reset),
        separate_directions_(options.separate_directions),
        input_noise_(options.input_noise) {
    auto resets = options.t_resets(), groups = options.group_sizes();
    for (int l = 0; l < options.num_layers; ++l) schedules_.push_back({resets[l], groups[l]});
    cell_.layer_norm = options.layer_norm;
    cell_.recurrent_keep = options.recurrent_dropout;
    cell_.activation = options.activation;
    cell_.units = options.num_units;
  }

 protected:
  void build(const std::vector<torch::Tensor>& inputs) override {
    check_inputs(inputs);
    const auto device = inputs[0].device();
    const int64_t extra = insert_input_ ? inputs[1].size(-1) : 0;
    int64_t input_size = inputs[0].size(-1);
    for (std::size_t l = 0; l < schedules_.size(); ++l) {
      if (static_cast<int>(l) == combine_layer_) input_size += extra;
      const std::string prefix = "layer" + std::to_string(l);
      forward_cells_.push_back(
          register_module(prefix + "_fw", LstmCell(input_size, cell_, device)));
      backward_cells_.push_back(
          register_module(prefix + "_bw", LstmCell(input_size, cell_, device)));
      input_size = separate_directions_ ? units_ : 2 * units_;
    }
  }

  torch::Tensor forward_impl(const std::vector<torch::Tensor>& inputs,
                             const torch::Tensor& seq_lengths, bool training) override {
    check_inputs(inputs);
    auto lengths = recurrent::checked_lengths(seq_lengths, inputs[0], describe());
    auto x = add_input_noise(inputs[0], input_noise_, training);
    torch::Tensor extra;
    if (insert_input_) extra = inputs[1].dim() == 3 ? inputs[1].squeeze(1) : inputs[1];

    // Layer 0: every replica sees the same frame, so one [B, T, 1, D] input serves them all.
    torch::Tensor for_forward = forward_reset_ ? x.unsqueeze(2) : x;
    torch::Tensor for_backward = backward_reset_ ? x.unsqueeze(2) : x;
    ScanOutput forward, backward;
    const ResetSchedule plain;
    for (std::size_t l = 0; l < schedules_.size(); ++l) {
      if (l > 0) std::tie(for_forward, for_backward) = next_inputs(forward, backward, lengths, l);
      if (static_cast<int>(l) == combine_layer_) {
        for_forward = append(for_forward, extra);
        for_backward = append(for_backward, extra);
      }
      forward = recurrent::run_direction(*forward_cells_[l], for_forward, lengths, false,
                                         forward_reset_ ? schedules_[l] : plain, training);
      backward = recurrent::run_direction(*backward_cells_[l], for_backward, lengths, true,
                                          backward_reset_ ? schedules_[l] : plain, training);
    }
    return torch::cat({forward.hidden, backward.hidden}, -1);
  }

 private:
  void check_inputs(const std::vector<torch::Tensor>& inputs) const {
    expect_inputs(inputs, insert_input_ ? 2 : 1, insert_input_ ? 2 : 1);
    expect_rank(inputs[0], 3, "the input [B, T, D]");
    if (insert_input_) {
      const auto& extra = inputs[1];
      bool per_utterance = extra.dim() == 2 || (extra.dim() == 3 && extra.size(1) == 1);
      if (!per_utterance || extra.size(0) != inputs[0].size(0))
        throw Error(describe() + ": the additional input must be [B, D] (one vector per "
                                 "utterance)");
    }
  }

  // Appends the per-utterance vector extra [B, E] to every frame (and replica) of input.
  static torch::Tensor append(const torch::Tensor& input, const torch::Tensor& extra) {
    std::vector<int64_t> shape(input.sizes().begin(), input.sizes().end());
    shape.back() = extra.size(-1);
    auto view = extra;
    while (view.dim() < input.dim()) view = view.unsqueeze(1);
    return torch::cat({input, view.expand(shape)}, -1);
  }

  // The inputs of layer l from the outputs of layer l-1 (the original's permute_versions): for
  // replica k of layer l at frame t, the replica of layer l-1 whose context started when k's did
  // (capped at the lower layer's t_reset - 1 frames ago).
  std::pair<torch::Tensor, torch::Tensor> next_inputs(const ScanOutput& forward,
                                                      const ScanOutput& backward,
                                                      const torch::Tensor& lengths,
                                                      std::size_t layer) const {
    const auto& current = schedules_[layer];
    const auto& previous = schedules_[layer - 1];
    const int64_t batch = forward.hidden.size(0), frames = forward.hidden.size(1);
    const int64_t count = current.replicas(), previous_count = previous.replicas();
    auto long_options = torch::TensorOptions().dtype(torch::kLong).device(lengths.device());
    auto time = torch::arange(frames, long_options).view({1, frames, 1});
    auto reversed_time = lengths.view({batch, 1, 1}) - 1 - time;
    auto replica = torch::arange(count, long_options).view({1, 1, count});
    const int64_t max_tau = previous.t_reset - 1;
    auto tau_forward =
        torch::remainder(time - current.group_size * replica, current.t_reset).clamp_max(max_tau);
    auto tau_backward =
        torch::remainder(reversed_time - current.group_size * replica, current.t_reset)
            .clamp_max(max_tau);
    auto index = [&](const torch::Tensor& steps, const torch::Tensor& tau) {
      return torch::remainder(ceil_div(steps - tau, previous.group_size), previous_count)
          .expand({batch, frames, count});
    };
    const std::vector<int64_t> tiled{batch, frames, count, units_};

    torch::Tensor forward_for_forward, backward_for_forward, forward_for_backward,
        backward_for_backward;
    forward_for_forward = forward_reset_
                              ? gather_replicas(forward.replicas, index(time, tau_forward))
                              : forward.hidden;
    backward_for_backward =
        backward_reset_ ? gather_replicas(backward.replicas, index(reversed_time, tau_backward))
                        : backward.hidden;
    if (forward_reset_ && backward_reset_) {
      backward_for_forward = gather_replicas(backward.replicas, index(reversed_time, tau_forward));
      forward_for_backward = gather_replicas(forward.replicas, index(time, tau_backward));
    } else if (forward_reset_) {
      backward_for_forward = backward.hidden.unsqueeze(2).expand(tiled);
      forward_for_backward = forward.hidden;
    } else {
      backward_for_forward = backward.hidden;
      forward_for_backward = forward.hidden.unsqueeze(2).expand(tiled);
    }
    if (separate_directions_) return {forward_for_forward, backward_for_backward};
    return {torch::cat({forward_for_forward, backward_for_forward}, -1),
            torch::cat({forward_for_backward, backward_for_backward}, -1)};
  }

  bool insert_input_;
  int combine_layer_;
  int64_t units_;
  bool forward_reset_, backward_reset_, separate_directions_;
  double input_noise_;
  LstmCellOptions cell_;
  std::vector<ResetSchedule> schedules_;
  std::vector<LstmCell> forward_cells_, backward_cells_;
};

template <bool InsertInput>
ModelPtr make_reset_lstm(const std::string& name, const ConfigSection& section) {
  auto options = read_options<ResetLstmOptions<InsertInput>>(section, "model '" + name + "'");
  options.architecture = InsertInput ? "dbresetlstm_insert_additional_input" : "dbresetlstm";
  return std::make_shared<ResetLstmModel>(name, section.where(), options);
}

NABU_REGISTER_WITH_OPTIONS(model_registry, "dbresetlstm", make_reset_lstm<false>,
                           ResetLstmOptions<false>,
                           "bidirectional LSTM whose states are reset every t_reset frames "
                           "(limited context)")
NABU_REGISTER_WITH_OPTIONS(model_registry, "dbresetlstm_insert_additional_input",
                           make_reset_lstm<true>, ResetLstmOptions<true>,
                           "dbresetlstm with a per-utterance vector (second input) appended to "
                           "the input of layer combine_layer")

}  // namespace
}  // namespace nabu
