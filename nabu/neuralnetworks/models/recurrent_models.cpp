// Stacked recurrent models: dblstm, dlstm, dbrnn, dbgru, leaky_dblstm, leaky_dblstm_notrec,
// leaky_dblstm_iznotrec (docs/models.md; the original's models/dblstm.py, dlstm.py, dbrnn.py,
// dbgru.py, leaky_dblstm*.py and components/layer.py). All respect sequence lengths: the plain
// LSTM layers run fused_lstm.h on the CPU, the plain GRU/RNN layers LibTorch's fused kernels; the
// cell variants the original adds (layer norm, recurrent dropout, other activations, leak,
// separate directions) run the time loop of recurrent.h on reversed-by-length sequences. Padded
// output frames are zero.
#include <cmath>

#include "nabu/core/error.h"
#include "nabu/neuralnetworks/kernels/fused_lstm.h"
#include "nabu/neuralnetworks/models/recurrent_models.h"
#include "nabu/neuralnetworks/models/recurrent.h"

namespace nabu {
namespace {

using recurrent::LstmCell;
using recurrent::LstmCellOptions;
using recurrent::LstmRecurrence;
using recurrent::ResetSchedule;
using recurrent::run_direction;
using recurrent::zero_padding;
namespace rnn_utils = torch::nn::utils::rnn;

// Everything a stack needs, filled by the architecture's options struct.
struct StackSpec {
  std::string architecture;
  bool trainable = true;
  CellKind kind = CellKind::kLstm;
  bool bidirectional = true;
  bool separate_directions = false;
  std::vector<int64_t> units;           // per layer
  LstmCellOptions cell;                 // the custom LSTM cell (units set per layer)
  Activation rnn_activation = Activation::kTanh;
  double input_noise = 0.0;
  double dropout = 1.0;                 // keep probability
  bool dropout_every_layer = true;      // dblstm: after each layer; leaky: after the last only
  bool force_cells = false;             // the leaky family keeps one parameter layout
  // The fused LibTorch kernels cover the plain cells; anything else takes the time loop.
  bool fused() const {
    if (kind != CellKind::kLstm) return true;
    if (force_cells) return false;
    return cell.recurrence == LstmRecurrence::kFull && !cell.layer_norm &&
           cell.recurrent_keep >= 1.0 && cell.activation == Activation::kTanh &&
           cell.leak_factor == 1.0 && !separate_directions;
  }
};

// TF-like initialisation of a fused LibTorch layer (glorot-uniform kernels as the original's
// cells get, TF's bias initialisers, the LSTM forget bias of 1.0 folded into bias_hh).
void init_fused(torch::nn::Module& layer, CellKind kind, int64_t input_size, int64_t units) {
  torch::NoGradGuard no_grad;
  auto bound = [](int64_t fan_in, int64_t fan_out) {
    return std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  };
  for (auto& item : layer.named_parameters()) {
    auto& p = item.value();
    const std::string& name = item.key();
    bool weight = name.rfind("weight", 0) == 0;
    bool input_bias = name.rfind("bias_ih", 0) == 0;
    switch (kind) {
      case CellKind::kLstm:
        if (weight) {
          double b = bound(input_size + units, 4 * units);
          p.uniform_(-b, b);
        } else if (input_bias) {
          double b = bound(4 * units, 4 * units);
          p.uniform_(-b, b);
        } else {
          p.zero_();
          p.narrow(0, units, units).fill_(1.0);  // LibTorch gate order i, f, g, o
        }
        break;
      case CellKind::kGru:
        if (weight) {
          double b_gates = bound(input_size + units, 2 * units);
          double b_candidate = bound(input_size + units, units);
          p.narrow(0, 0, 2 * units).uniform_(-b_gates, b_gates);
          p.narrow(0, 2 * units, units).uniform_(-b_candidate, b_candidate);
        } else {
          p.zero_();
          if (input_bias) p.narrow(0, 0, 2 * units).fill_(1.0);  // TF GRUCell gate bias
        }
        break;
      case CellKind::kRnn:
        if (weight) {
          double b = bound(input_size + units, units);
          p.uniform_(-b, b);
        } else {
          p.zero_();
        }
        break;
    }
  }
}

class RecurrentStackModel : public Model {
 public:
  RecurrentStackModel(const std::string& name, const std::string& where, StackSpec spec)
      : Model(name, spec.architecture, spec.trainable, where), spec_(std::move(spec)) {}

 protected:
  void build(const std::vector<torch::Tensor>& inputs) override {
    expect_inputs(inputs, 1, 1);
    expect_rank(inputs[0], 3, "the input [B, T, D]");
    const auto device = inputs[0].device();
    int64_t forward_in = inputs[0].size(-1), backward_in = forward_in;
    for (std::size_t l = 0; l < spec_.units.size(); ++l) {
      const int64_t units = spec_.units[l];
      const std::string prefix = "layer" + std::to_string(l);
      if (spec_.fused()) {
        build_fused(prefix, forward_in, units);
      } else {
        LstmCellOptions options = spec_.cell;
        options.units = units;
        forward_cells_.push_back(
            register_module(prefix + "_fw", LstmCell(forward_in, options, device)));
        if (spec_.bidirectional)
          backward_cells_.push_back(
              register_module(prefix + "_bw", LstmCell(backward_in, options, device)));
      }
      const int64_t directions = spec_.bidirectional ? 2 : 1;
      forward_in = spec_.separate_directions ? units : directions * units;
      backward_in = forward_in;
    }
  }

  torch::Tensor forward_impl(const std::vector<torch::Tensor>& inputs,
                             const torch::Tensor& seq_lengths, bool training) override {
    expect_inputs(inputs, 1, 1);
    expect_rank(inputs[0], 3, "the input [B, T, D]");
    auto lengths = recurrent::checked_lengths(seq_lengths, inputs[0], describe());
    auto x = add_input_noise(inputs[0], spec_.input_noise, training);
    if (spec_.units.empty()) return x;  // num_layers = 0 passes the input through
    auto output = spec_.fused() ? forward_fused(x, lengths, training)
                                : forward_cells(x, lengths, training);
    if (!spec_.dropout_every_layer) output = keep_dropout(output, spec_.dropout, training);
    return output;
  }

 private:
  void build_fused(const std::string& prefix, int64_t input_size, int64_t units) {
    switch (spec_.kind) {
      case CellKind::kLstm: {
        auto layer = torch::nn::LSTM(torch::nn::LSTMOptions(input_size, units)
                                         .batch_first(true)
                                         .bidirectional(spec_.bidirectional));
        init_fused(*layer, spec_.kind, input_size, units);
        lstm_layers_.push_back(register_module(prefix, layer));
        break;
      }
      case CellKind::kGru: {
        auto layer = torch::nn::GRU(torch::nn::GRUOptions(input_size, units)
                                        .batch_first(true)
                                        .bidirectional(spec_.bidirectional));
        init_fused(*layer, spec_.kind, input_size, units);
        gru_layers_.push_back(register_module(prefix, layer));
        break;
      }
      case CellKind::kRnn: {
        auto options = torch::nn::RNNOptions(input_size, units)
                           .batch_first(true)
                           .bidirectional(spec_.bidirectional);
        if (spec_.rnn_activation == Activation::kRelu) options.nonlinearity(torch::kReLU);
        auto layer = torch::nn::RNN(options);
        init_fused(*layer, spec_.kind, input_size, units);
        rnn_layers_.push_back(register_module(prefix, layer));
        break;
      }
    }
  }

  // Fused layer `l` on [B, T, F]: one direction with its own parameters (w_ih, w_hh, b_ih, b_hh),
  // or both directions in one call with all eight (only for a batch without padding).
  torch::Tensor run_fused(std::size_t l, const torch::Tensor& x,
                          const std::vector<torch::Tensor>& parameters, bool bidirectional,
                          bool training) {
    const int64_t units = spec_.units[l];
    auto h0 = torch::zeros({bidirectional ? 2 : 1, x.size(0), units}, x.options());
    switch (spec_.kind) {
      case CellKind::kLstm:
        return std::get<0>(torch::lstm(x, {h0, torch::zeros_like(h0)}, parameters, true, 1, 0.0,
                                       training, bidirectional, true));
      case CellKind::kGru:
        return std::get<0>(torch::gru(x, h0, parameters, true, 1, 0.0, training, bidirectional, true));
      case CellKind::kRnn:
        return std::get<0>(spec_.rnn_activation == Activation::kRelu
                               ? torch::rnn_relu(x, h0, parameters, true, 1, 0.0, training,
                                                 bidirectional, true)
                               : torch::rnn_tanh(x, h0, parameters, true, 1, 0.0, training,
                                                 bidirectional, true));
    }
    return x;
  }

  std::vector<torch::Tensor> fused_weights(std::size_t l) {
    switch (spec_.kind) {
      case CellKind::kLstm: return lstm_layers_[l]->all_weights();
      case CellKind::kGru: return gru_layers_[l]->all_weights();
      case CellKind::kRnn: return rnn_layers_[l]->all_weights();
    }
    return {};
  }

  // The fused kernels run on the padded batch. Padding sits after each sequence's frames, so the
  // forward direction never sees it before a real frame; the backward direction runs on every
  // sequence reversed within its own length. (LibTorch 1.13's packed-sequence path computes the
  // same but its backward pass is about 5x slower on CPU.)
  torch::Tensor forward_fused(const torch::Tensor& input, const torch::Tensor& lengths,
                              bool training) {
    // Under autocast the input may come in bf16/fp16; the layers take their weights' type (and
    // LibTorch's kernels then cast as autocast says).
    const torch::Tensor x = input.to(fused_weights(0).front().scalar_type());
    const int64_t frames = x.size(1);
    if (frames == 0 || x.size(0) == 0) {
      const int64_t directions = spec_.bidirectional ? 2 : 1;
      return torch::zeros({x.size(0), frames, directions * spec_.units.back()}, x.options());
    }
    if (spec_.kind == CellKind::kLstm && fused_lstm::supports(x)) {
      // Time-major between layers, so only the stack's ends transpose. Padding comes out zero.
      torch::Tensor output = x.transpose(0, 1);
      for (std::size_t l = 0; l < spec_.units.size(); ++l) {
        output = fused_lstm::layer(output, fused_weights(l), lengths);
        if (spec_.dropout_every_layer) output = keep_dropout(output, spec_.dropout, training);
      }
      return output.transpose(0, 1);
    }
    const bool uniform = (lengths.to(torch::kLong) == frames).all().item<bool>();
    torch::Tensor output = x;
    for (std::size_t l = 0; l < spec_.units.size(); ++l) {
      auto weights = fused_weights(l);
      if (!spec_.bidirectional || uniform) {
        output = run_fused(l, output, weights, spec_.bidirectional, training);
      } else {
        auto forward = run_fused(l, output, {weights.begin(), weights.begin() + 4}, false, training);
        auto backward = recurrent::reverse_padded(
            run_fused(l, recurrent::reverse_padded(output, lengths),
                      {weights.begin() + 4, weights.begin() + 8}, false, training),
            lengths);
        output = torch::cat({forward, backward}, -1);
      }
      if (spec_.dropout_every_layer) output = keep_dropout(output, spec_.dropout, training);
    }
    return zero_padding(output, lengths);
  }

  torch::Tensor forward_cells(const torch::Tensor& x, const torch::Tensor& lengths,
                              bool training) {
    const ResetSchedule none;
    torch::Tensor forward_input = x, backward_input = x, output;
    for (std::size_t l = 0; l < spec_.units.size(); ++l) {
      auto forward = run_direction(*forward_cells_[l], forward_input, lengths, false, none,
                                   training)
                         .hidden;
      if (!spec_.bidirectional) {
        output = forward;
      } else {
        auto backward = run_direction(*backward_cells_[l], backward_input, lengths, true, none,
                                      training)
                            .hidden;
        if (spec_.separate_directions) {
          forward_input = keep_dropout(forward, spec_.dropout_every_layer ? spec_.dropout : 1.0,
                                       training);
          backward_input = keep_dropout(
              backward, spec_.dropout_every_layer ? spec_.dropout : 1.0, training);
          output = torch::cat({forward_input, backward_input}, -1);
          continue;
        }
        output = torch::cat({forward, backward}, -1);
      }
      if (spec_.dropout_every_layer) output = keep_dropout(output, spec_.dropout, training);
      forward_input = backward_input = output;
    }
    return output;
  }

 public:
  RecurrentStackLayout layout() const {
    return {spec_.kind, spec_.bidirectional, spec_.fused(), spec_.units, spec_.rnn_activation};
  }

 private:
  StackSpec spec_;
  std::vector<torch::nn::LSTM> lstm_layers_;
  std::vector<torch::nn::GRU> gru_layers_;
  std::vector<torch::nn::RNN> rnn_layers_;
  std::vector<LstmCell> forward_cells_, backward_cells_;
};

}  // namespace

std::optional<RecurrentStackLayout> recurrent_stack_layout(const Model& model) {
  const auto* stack = dynamic_cast<const RecurrentStackModel*>(&model);
  if (!stack) return std::nullopt;
  return stack->layout();
}

namespace {

void declare_sizes(OptionsReader& r, int& num_layers, int& num_units, double& fac_per_layer) {
  r("num_layers", num_layers, "number of stacked layers");
  r("num_units", num_units, "units per direction of the first layer");
  r("fac_per_layer", fac_per_layer, "layer l has ceil(num_units * fac_per_layer^l) units");
  r.require(num_layers >= 0, "num_layers", "must be >= 0");
  r.require(num_units > 0 || num_layers == 0, "num_units", "required: must be > 0");
  r.require(fac_per_layer > 0.0, "fac_per_layer", "must be > 0");
}

void declare_regularisation(OptionsReader& r, double& input_noise, double& dropout,
                            const std::string& dropout_help) {
  r("input_noise", input_noise, "stddev of Gaussian noise added to the input in training");
  r("dropout", dropout, dropout_help);
  r.require(input_noise >= 0.0, "input_noise", "must be >= 0");
  r.require(dropout > 0.0 && dropout <= 1.0, "dropout",
                 "is a keep probability in (0, 1]");
}

// --------------------------------------------------------------------------- dblstm, dlstm

template <bool Bidirectional>
struct DeepLstmOptions {
  std::string architecture;
  bool trainable = true;
  int num_layers = 1, num_units = 0;
  double fac_per_layer = 1.0;
  bool layer_norm = false;
  double recurrent_dropout = 1.0;
  Activation activation = Activation::kTanh;
  bool separate_directions = false;
  double input_noise = 0.0, dropout = 1.0;

  void declare(OptionsReader& r) {
    declare_common(r, architecture, trainable);
    declare_sizes(r, num_layers, num_units, fac_per_layer);
    r("layer_norm", layer_norm, "True applies layer normalisation to the gates and the state");
    r("recurrent_dropout", recurrent_dropout,
      "KEEP probability of the cell candidate in training (1.0 = none)");
    declare_activation(r, "activation_fn", activation, {"tanh", "relu", "sigmoid"},
                       "activation of the candidate and the output");
    if (Bidirectional)
      r("separate_directions", separate_directions,
        "True feeds each direction of layer l+1 only the same direction of layer l");
    declare_regularisation(r, input_noise, dropout,
                           "dropout KEEP probability after every layer in training");
    r.require(recurrent_dropout > 0.0 && recurrent_dropout <= 1.0, "recurrent_dropout",
                   "is a keep probability in (0, 1]");
  }

  StackSpec spec(const std::string& name) const {
    StackSpec spec;
    spec.architecture = name;
    spec.trainable = trainable;
    spec.bidirectional = Bidirectional;
    spec.separate_directions = separate_directions;
    spec.units = sizes_per_layer(num_units, fac_per_layer, num_layers);
    spec.cell.layer_norm = layer_norm;
    spec.cell.recurrent_keep = recurrent_dropout;
    spec.cell.activation = activation;
    spec.input_noise = input_noise;
    spec.dropout = dropout;
    return spec;
  }
};

template <bool Bidirectional>
ModelPtr make_deep_lstm(const std::string& name, const ConfigSection& section) {
  const char* architecture = Bidirectional ? "dblstm" : "dlstm";
  auto options = read_options<DeepLstmOptions<Bidirectional>>(section, "model '" + name + "'");
  return std::make_shared<RecurrentStackModel>(name, section.where(), options.spec(architecture));
}

NABU_REGISTER_WITH_OPTIONS(model_registry, "dblstm", make_deep_lstm<true>, DeepLstmOptions<true>,
                           "stacked bidirectional LSTM layers (packed, length-aware)")
NABU_REGISTER_WITH_OPTIONS(model_registry, "dlstm", make_deep_lstm<false>,
                           DeepLstmOptions<false>, "stacked unidirectional LSTM layers")

// ---------------------------------------------------------------------------- dbrnn, dbgru

template <CellKind Kind>
struct DeepSimpleRnnOptions {
  std::string architecture;
  bool trainable = true;
  int num_layers = 1, num_units = 0;
  double fac_per_layer = 1.0;
  Activation activation = Activation::kTanh;
  double input_noise = 0.0, dropout = 1.0;

  void declare(OptionsReader& r) {
    declare_common(r, architecture, trainable);
    declare_sizes(r, num_layers, num_units, fac_per_layer);
    if (Kind == CellKind::kRnn)
      declare_activation(r, "activation_fn", activation, {"tanh", "relu"},
                         "activation of the recurrent units");
    else
      declare_activation(r, "activation_fn", activation, {"tanh"},
                         "activation of the candidate (LibTorch's GRU has tanh only)");
    declare_regularisation(r, input_noise, dropout,
                           "dropout KEEP probability after every layer in training");
    r.accepted("layer_norm", "the original's dbrnn/dbgru ignore it");
    r.accepted("recurrent_dropout", "the original's dbrnn/dbgru ignore it");
  }
};

template <CellKind Kind>
ModelPtr make_deep_simple_rnn(const std::string& name, const ConfigSection& section) {
  auto options = read_options<DeepSimpleRnnOptions<Kind>>(section, "model '" + name + "'");
  StackSpec spec;
  spec.architecture = Kind == CellKind::kRnn ? "dbrnn" : "dbgru";
  spec.trainable = options.trainable;
  spec.kind = Kind;
  spec.units = sizes_per_layer(options.num_units, options.fac_per_layer, options.num_layers);
  spec.rnn_activation = options.activation;
  spec.input_noise = options.input_noise;
  spec.dropout = options.dropout;
  return std::make_shared<RecurrentStackModel>(name, section.where(), spec);
}

NABU_REGISTER_WITH_OPTIONS(model_registry, "dbrnn", make_deep_simple_rnn<CellKind::kRnn>,
                           DeepSimpleRnnOptions<CellKind::kRnn>,
                           "stacked bidirectional simple RNN layers")
NABU_REGISTER_WITH_OPTIONS(model_registry, "dbgru", make_deep_simple_rnn<CellKind::kGru>,
                           DeepSimpleRnnOptions<CellKind::kGru>,
                           "stacked bidirectional GRU layers")

// ----------------------------------------------------------------------- leaky_dblstm family

struct LeakyDblstmOptions {
  std::string architecture;
  bool trainable = true;
  int num_layers = 1, num_units = 0;
  bool layer_norm = false;
  double recurrent_dropout = 1.0;
  double leak_factor = 1.0;
  double input_noise = 0.0, dropout = 1.0;

  void declare(OptionsReader& r) {
    declare_common(r, architecture, trainable);
    r("num_layers", num_layers, "number of stacked layers");
    r("num_units", num_units, "units per direction (every layer)");
    r("layer_norm", layer_norm, "True applies layer normalisation to the gates and the state");
    r("recurrent_dropout", recurrent_dropout,
      "KEEP probability of the cell candidate in training (1.0 = none)");
    r("leak_factor", leak_factor, "the cell state is multiplied by this after every step");
    declare_regularisation(r, input_noise, dropout,
                           "dropout KEEP probability after the last layer in training");
    r.require(num_layers >= 0, "num_layers", "must be >= 0");
    r.require(num_units > 0 || num_layers == 0, "num_units", "required: must be > 0");
    r.require(recurrent_dropout > 0.0 && recurrent_dropout <= 1.0, "recurrent_dropout",
                   "is a keep probability in (0, 1]");
  }
};

template <LstmRecurrence Recurrence>
ModelPtr make_leaky_dblstm(const std::string& name, const ConfigSection& section) {
  auto options = read_options<LeakyDblstmOptions>(section, "model '" + name + "'");
  StackSpec spec;
  spec.architecture = Recurrence == LstmRecurrence::kFull      ? "leaky_dblstm"
                      : Recurrence == LstmRecurrence::kNone ? "leaky_dblstm_notrec"
                                                               : "leaky_dblstm_iznotrec";
  spec.trainable = options.trainable;
  spec.units.assign(static_cast<std::size_t>(options.num_layers), options.num_units);
  spec.cell.recurrence = Recurrence;
  spec.cell.layer_norm = options.layer_norm;
  spec.cell.recurrent_keep = options.recurrent_dropout;
  spec.cell.leak_factor = options.leak_factor;
  spec.input_noise = options.input_noise;
  spec.dropout = options.dropout;
  spec.dropout_every_layer = false;  // the original's leaky models drop out once, at the end
  // Even with leak_factor = 1.0 the cell loop runs, so the parameter layout never changes.
  spec.force_cells = true;
  return std::make_shared<RecurrentStackModel>(name, section.where(), spec);
}

NABU_REGISTER_WITH_OPTIONS(model_registry, "leaky_dblstm",
                           make_leaky_dblstm<LstmRecurrence::kFull>, LeakyDblstmOptions,
                           "bidirectional LSTM whose cell state leaks (c *= leak_factor)")
NABU_REGISTER_WITH_OPTIONS(model_registry, "leaky_dblstm_notrec",
                           make_leaky_dblstm<LstmRecurrence::kNone>, LeakyDblstmOptions,
                           "leaky bidirectional LSTM whose gates see only the input")
NABU_REGISTER_WITH_OPTIONS(model_registry, "leaky_dblstm_iznotrec",
                           make_leaky_dblstm<LstmRecurrence::kForgetOutputOnly>,
                           LeakyDblstmOptions,
                           "leaky bidirectional LSTM whose input gate and candidate see only "
                           "the input")

}  // namespace
}  // namespace nabu
