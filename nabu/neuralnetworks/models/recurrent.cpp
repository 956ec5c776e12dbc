#include "nabu/neuralnetworks/models/recurrent.h"

#include <cmath>
#include <sstream>

#include "nabu/core/error.h"
#include "nabu/neuralnetworks/kernels/fused_lstm.h"
#include "nabu/neuralnetworks/tensor_map.h"

namespace nabu::recurrent {

namespace {

// TensorFlow's contrib layer_norm epsilon (the original's cells use it).
constexpr double kLayerNormEpsilon = 1e-12;
// TensorFlow's LSTM cells add this to the forget gate pre-activation.
constexpr double kForgetBias = 1.0;

enum Norm { kInput = 0, kTransform, kForget, kOutput, kState };

// Index [B, T] -> a gather index for a tensor shaped like x [B, T, ...].
torch::Tensor expand_index(const torch::Tensor& index, const torch::Tensor& x) {
  auto view = index;
  while (view.dim() < x.dim()) view = view.unsqueeze(-1);
  return view.expand(x.sizes());
}

}  // namespace

torch::Tensor checked_lengths(const torch::Tensor& lengths, const torch::Tensor& x,
                              const std::string& who) {
  if (x.dim() < 2) throw Error(who + ": expected a [B, T, ...] input");
  int64_t batch = x.size(0), frames = x.size(1);
  if (!lengths.defined())
    return torch::full({batch}, frames, torch::TensorOptions().dtype(torch::kLong));
  if (lengths.dim() != 1 || lengths.size(0) != batch)
    throw Error(who + ": " + std::to_string(lengths.numel()) +
                " sequence lengths for a batch of " + std::to_string(batch));
  auto result = lengths.to(torch::kLong).to(x.device());
  if (batch > 0) {
    int64_t longest = result.max().item<int64_t>();
    int64_t shortest = result.min().item<int64_t>();
    if (longest > frames || shortest < 0)
      throw Error(who + ": sequence lengths must lie in [0, " + std::to_string(frames) +
                  "], got [" + std::to_string(shortest) + ", " + std::to_string(longest) + "]");
  }
  return result;
}

torch::Tensor reverse_padded(const torch::Tensor& x, const torch::Tensor& lengths) {
  int64_t frames = x.size(1);
  auto steps = torch::arange(frames, torch::TensorOptions().dtype(torch::kLong).device(x.device()))
                   .unsqueeze(0);
  auto length = lengths.to(torch::kLong).to(x.device()).unsqueeze(1);
  auto index = torch::where(steps < length, length - 1 - steps, steps);
  return x.gather(1, expand_index(index, x));
}

torch::Tensor zero_padding(const torch::Tensor& x, const torch::Tensor& lengths) {
  auto mask = frame_mask(lengths.to(x.device()), x.size(1), x.scalar_type()).to(x.device());
  while (mask.dim() < x.dim()) mask = mask.unsqueeze(-1);
  return x * mask;
}

LstmCellImpl::LstmCellImpl(int64_t input_size, const LstmCellOptions& options,
                           const torch::Device& device)
    : options_(options) {
  const int64_t units = options.units;
  const auto on = torch::TensorOptions().device(device);
  torch::NoGradGuard no_grad;
  // Bounds of TF's default glorot-uniform initialiser on the original's kernel shapes.
  auto bound = [](int64_t fan_in, int64_t fan_out) {
    return std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  };
  auto kernel_x = torch::empty({input_size, 4 * units}, on);
  switch (options.recurrence) {
    case LstmRecurrence::kFull: {
      double b = bound(input_size + units, 4 * units);
      kernel_x.uniform_(-b, b);
      kernel_h_ = torch::empty({units, 4 * units}, on).uniform_(-b, b);
      break;
    }
    case LstmRecurrence::kForgetOutputOnly: {
      double b_in = bound(input_size, 2 * units);
      double b_rec = bound(input_size + units, 2 * units);
      kernel_x.narrow(1, 0, 2 * units).uniform_(-b_in, b_in);
      kernel_x.narrow(1, 2 * units, 2 * units).uniform_(-b_rec, b_rec);
      kernel_h_ = torch::empty({units, 2 * units}, on).uniform_(-b_rec, b_rec);
      break;
    }
    case LstmRecurrence::kNone: {
      double b = bound(input_size, 4 * units);
      kernel_x.uniform_(-b, b);
      break;
    }
  }
  kernel_x_ = register_parameter("kernel_x", kernel_x);
  if (kernel_h_.defined()) kernel_h_ = register_parameter("kernel_h", kernel_h_);
  if (!options.layer_norm) {
    // TF creates the bias without an initialiser, so it gets glorot-uniform on a 1-D shape.
    double b = bound(4 * units, 4 * units);
    bias_ = register_parameter("bias", torch::empty({4 * units}, on).uniform_(-b, b));
  } else {
    const char* names[] = {"input", "transform", "forget", "output", "state"};
    for (const char* name : names) {
      gammas_.push_back(
          register_parameter(std::string("ln_") + name + "_gamma", torch::ones({units}, on)));
      betas_.push_back(
          register_parameter(std::string("ln_") + name + "_beta", torch::zeros({units}, on)));
    }
  }
}

torch::Tensor LstmCellImpl::norm(const torch::Tensor& x, int which) const {
  // Per replica over the units (the original normalises a reset cell's replicas jointly).
  return torch::layer_norm(x, {options_.units}, gammas_[which], betas_[which], kLayerNormEpsilon);
}

// kNone without layer norm: the gates do not depend on the past, so everything but the
// cell-state recursion c_t = leak * (c_{t-1} * f_t + i_t * g_t) is computed for all frames at
// once.
ScanOutput LstmCellImpl::scan_without_recurrence(const torch::Tensor& projected, bool training) {
  auto gates = projected.chunk(4, -1);
  auto g = apply_activation(options_.activation, gates[1]);
  g = keep_dropout(g, options_.recurrent_keep, training);
  auto input_part = torch::sigmoid(gates[0]) * g;
  auto forget = torch::sigmoid(gates[2] + kForgetBias);
  const int64_t frames = projected.size(1);
  std::vector<torch::Tensor> cells;
  cells.reserve(frames);
  torch::Tensor carried;
  for (int64_t t = 0; t < frames; ++t) {
    auto cell = t == 0 ? input_part.select(1, 0)
                       : carried * forget.select(1, t) + input_part.select(1, t);
    cells.push_back(cell);
    carried = options_.leak_factor != 1.0 ? cell * options_.leak_factor : cell;
  }
  auto all_cells = torch::stack(cells, 1);
  return {apply_activation(options_.activation, all_cells) * torch::sigmoid(gates[3]), {}};
}

std::array<torch::Tensor, 4> LstmCellImpl::step_gates(const torch::Tensor& z,
                                                     const torch::Tensor& h) {
  const int64_t units = options_.units;
  torch::Tensor i, j, f, o;
  switch (options_.recurrence) {
    case LstmRecurrence::kFull: {
      auto gates = (z + torch::matmul(h, kernel_h_)).chunk(4, -1);
      i = gates[0], j = gates[1], f = gates[2], o = gates[3];
      break;
    }
    case LstmRecurrence::kForgetOutputOnly: {
      auto from_input = z.narrow(-1, 0, 2 * units).chunk(2, -1);
      auto recurrent =
          (z.narrow(-1, 2 * units, 2 * units) + torch::matmul(h, kernel_h_)).chunk(2, -1);
      i = from_input[0], j = from_input[1], f = recurrent[0], o = recurrent[1];
      break;
    }
    case LstmRecurrence::kNone: {
      auto gates = z.chunk(4, -1);
      i = gates[0], j = gates[1], f = gates[2], o = gates[3];
      break;
    }
  }
  if (options_.layer_norm) {
    i = norm(i, kInput), j = norm(j, kTransform), f = norm(f, kForget), o = norm(o, kOutput);
  }
  return {i, j, f, o};
}

ScanOutput LstmCellImpl::scan(const torch::Tensor& x, const ResetSchedule& schedule,
                              bool training) {
  const int64_t units = options_.units;
  const bool replicated = schedule.active();
  if (x.dim() != (replicated ? 4 : 3)) {
    std::ostringstream message;
    message << "LSTM cell: unexpected input shape " << x.sizes();
    throw Error(message.str());
  }
  const int64_t batch = x.size(0), frames = x.size(1);
  const int64_t count = replicated ? schedule.replicas() : 0;
  auto state_options = torch::TensorOptions().dtype(x.dtype()).device(x.device());
  if (frames == 0) {
    ScanOutput empty;
    empty.hidden = torch::zeros({batch, 0, units}, state_options);
    if (replicated) empty.replicas = torch::zeros({batch, 0, count, units}, state_options);
    return empty;
  }
  auto projected = torch::matmul(x, kernel_x_);
  if (bias_.defined()) projected = projected + bias_;
  if (options_.recurrence == LstmRecurrence::kNone && !options_.layer_norm && !replicated)
    return scan_without_recurrence(projected, training);

  std::vector<int64_t> state_shape =
      replicated ? std::vector<int64_t>{batch, count, units} : std::vector<int64_t>{batch, units};
  auto c = torch::zeros(state_shape, state_options);
  auto h = torch::zeros(state_shape, state_options);

  std::vector<torch::Tensor> keep_masks;  // keep_masks[k]: 1 everywhere but replica k
  for (int64_t k = 0; k < count; ++k) {
    keep_masks.push_back(torch::ones({1, count, 1}, state_options));
    keep_masks.back().select(1, k).zero_();
  }

  std::vector<torch::Tensor> hidden, replicas;
  hidden.reserve(frames);
  if (replicated) replicas.reserve(frames);
  for (int64_t t = 0; t < frames; ++t) {
    if (replicated && schedule.resets_at(t)) {
      const auto& mask = keep_masks[schedule.reset_replica(t)];
      c = c * mask;
      h = h * mask;
    }
    auto [i, j, f, o] = step_gates(projected.select(1, t), h);
    auto g = keep_dropout(apply_activation(options_.activation, j), options_.recurrent_keep,
                          training);
    auto new_c = c * torch::sigmoid(f + kForgetBias) + torch::sigmoid(i) * g;
    if (options_.layer_norm) new_c = norm(new_c, kState);
    auto new_h = apply_activation(options_.activation, new_c) * torch::sigmoid(o);
    if (replicated) {
      hidden.push_back(new_h.select(1, schedule.output_replica(t)));
      replicas.push_back(new_h);
    } else {
      hidden.push_back(new_h);
    }
    c = options_.leak_factor != 1.0 ? new_c * options_.leak_factor : new_c;
    h = new_h;
  }
  ScanOutput output;
  output.hidden = torch::stack(hidden, 1);
  if (replicated) output.replicas = torch::stack(replicas, 1);
  return output;
}

ScanOutput run_direction(LstmCellImpl& cell, const torch::Tensor& x, const torch::Tensor& lengths,
                         bool reverse, const ResetSchedule& schedule, bool training) {
  auto input = reverse ? reverse_padded(x, lengths) : x;
  auto output = cell.scan(input, schedule, training);
  output.hidden = zero_padding(output.hidden, lengths);
  if (output.replicas.defined()) output.replicas = zero_padding(output.replicas, lengths);
  if (reverse) {
    output.hidden = reverse_padded(output.hidden, lengths);
    if (output.replicas.defined()) output.replicas = reverse_padded(output.replicas, lengths);
  }
  return output;
}

torch::Tensor bidirectional_lstm(torch::nn::LSTMImpl& layer, const torch::Tensor& input,
                                 const torch::Tensor& lengths, bool training) {
  auto weights = layer.all_weights();
  // Under autocast the input may come in bf16/fp16 from a product before; the layer takes it in
  // its weights' type (LibTorch's LSTM then casts as autocast says).
  const torch::Tensor x = input.to(weights.front().scalar_type());
  if (!fused_lstm::supports(x) || x.size(0) == 0 || x.size(1) == 0)
    return libtorch_bidirectional_lstm(layer, x, lengths, training);
  return fused_lstm::layer(x.transpose(0, 1), weights, lengths.to(torch::kLong).cpu())
      .transpose(0, 1);
}

torch::Tensor libtorch_bidirectional_lstm(torch::nn::LSTMImpl& layer, const torch::Tensor& x,
                                          const torch::Tensor& lengths, bool training) {
  auto weights = layer.all_weights();
  const int64_t units = layer.options.hidden_size();
  if (x.size(0) == 0 || x.size(1) == 0)
    return torch::zeros({x.size(0), x.size(1), 2 * units}, x.options());
  auto direction = [&](const torch::Tensor& input, std::size_t first) -> torch::Tensor {
    auto h0 = torch::zeros({1, input.size(0), units}, input.options());
    std::vector<torch::Tensor> state{h0, torch::zeros_like(h0)};
    std::vector<torch::Tensor> parameters(weights.begin() + first, weights.begin() + first + 4);
    return std::get<0>(torch::lstm(input, state, parameters, /*has_biases=*/true, 1, 0.0,
                                   training, false, /*batch_first=*/true));
  };
  auto device_lengths = lengths.to(torch::kLong).to(x.device());
  auto forward = direction(x, 0);
  auto backward = reverse_padded(direction(reverse_padded(x, device_lengths), 4), device_lengths);
  return zero_padding(torch::cat({forward, backward}, -1), device_lengths);
}

}  // namespace nabu::recurrent
