#include "nabu/neuralnetworks/kernels/fused_lstm.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "nabu/neuralnetworks/kernels/bf16_matmul.h"
#include "nabu/neuralnetworks/kernels/lstm_frame_kernels.h"
#include "nabu/neuralnetworks/kernels/mixed_precision.h"

namespace nabu {
namespace fused_lstm {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The frames of one direction in the order it visits them.
struct Order {
  int64_t steps;
  bool reverse;
  int64_t frame(int64_t s) const { return reverse ? steps - 1 - s : s; }
  int64_t previous(int64_t t) const { return reverse ? t + 1 : t - 1; }
};

// Sizes of one direction's buffers: [T, B, 4H] gates, [T, B, H] states.
struct Sizes {
  int64_t steps, batch, units;
  int64_t gates_at(int64_t t, int64_t b) const { return (t * batch + b) * 4 * units; }
  int64_t state_at(int64_t t, int64_t b) const { return (t * batch + b) * units; }
};

Sizes sizes_of(const at::Tensor& gates) {
  return {gates.size(0), gates.size(1), gates.size(2) / 4};
}

// The type of one direction's per-frame recurrent products, [B, H] x [H, 4H] forward and
// [B, 4H] x [4H, H] backward, given that of the layer's other products. One sequence alone (B = 1,
// as nabu separate runs) makes them matrix-vector products, which stay in fp32 while the fp32
// weight fits in a core's cache: there bf16 was 2.7x to 5x slower than fp32 (LibTorch 1.13,
// AMD EPYC with avx512_bf16: H 200 to 300, weights 0.6 to 1.4 MiB), and 2.5x faster from H 400
// (2.4 MiB) up, where fp32 waits on memory. From two sequences on, bf16 was always faster.
// (Measured through at::mm, before the weights were packed once: docs/results.md.)
at::ScalarType recurrent_product_type(at::ScalarType products, const at::Tensor& w_hh,
                                      int64_t batch) {
  constexpr int64_t kCachedWeightBytes = 2 << 20;
  if (batch > 1 || w_hh.numel() * w_hh.element_size() > kCachedWeightBytes) return products;
  return w_hh.scalar_type();
}

// What one direction's forward pass keeps for its backward pass, all [T, B, *].
struct DirectionState {
  at::Tensor gates;   // [4H]: the activations i, f, g, o
  at::Tensor cells;   // [H]: c
  at::Tensor tanh_c;  // [H]: tanh(c)
  at::Tensor hidden;  // [H]: h = o * tanh(c), the output
  at::Tensor hidden_bf16;  // [H]: h rounded to bf16, where the recurrent products are bf16
};

// What one direction's bf16 backward pass gives, [T, B, 4H]: the gradient of the gate
// pre-activations (also the input projections' gradient), and the same rounded to bf16, the
// operand of the weights' gradients.
struct DirectionGradients {
  at::Tensor gates, gates_bf16;
};

// One direction forward from the input projections (biases included) [T, B, 4H]. Frames at or
// past a sequence's length get zero state and zero activations. The nonlinearities run as
// LibTorch's vectorised sigmoid and tanh over whole frames; the candidate g = tanh(a) comes out of
// the same sigmoid call as the gates, as 2 * sigmoid(2a) - 1, by doubling its pre-activations.
template <typename T>
DirectionState run_forward(const at::Tensor& projections, const at::Tensor& w_hh,
                           const int64_t* lengths, bool reverse) {
  DirectionState state;
  state.gates = projections.clone(at::MemoryFormat::Contiguous);
  const Sizes n = sizes_of(state.gates);
  const int64_t H = n.units;
  state.gates.narrow(2, 2 * H, H).mul_(2);
  at::Tensor w_rec = w_hh.clone();
  w_rec.narrow(0, 2 * H, H).mul_(2);
  const at::Tensor w_rec_t = w_rec.t();
  state.cells = at::empty({n.steps, n.batch, H}, state.gates.options());
  state.tanh_c = at::empty_like(state.cells);
  state.hidden = at::empty_like(state.cells);
  const at::Tensor zero_state = at::zeros({n.batch, H}, state.gates.options());

  const Order order{n.steps, reverse};
  T* gate_data = state.gates.data_ptr<T>();
  T* cell_data = state.cells.data_ptr<T>();
  T* tanh_data = state.tanh_c.data_ptr<T>();
  T* hidden_data = state.hidden.data_ptr<T>();
  for (int64_t s = 0; s < n.steps; ++s) {
    const int64_t t = order.frame(s);
    at::Tensor frame_gates = state.gates[t];
    if (s > 0) frame_gates.addmm_(state.hidden[order.previous(t)], w_rec_t);
    frame_gates.sigmoid_();
    const T* c_prev_frame =
        s > 0 ? cell_data + n.state_at(order.previous(t), 0) : zero_state.data_ptr<T>();
    for (int64_t b = 0; b < n.batch; ++b) {
      T* a = gate_data + n.gates_at(t, b);
      T* c = cell_data + n.state_at(t, b);
      if (t >= lengths[b]) {
        std::fill(a, a + 4 * H, T(0));
        std::fill(c, c + H, T(0));
        continue;
      }
      const T* c_prev = c_prev_frame + b * H;
      for (int64_t j = 0; j < H; ++j) {
        const T g = T(2) * a[2 * H + j] - T(1);
        a[2 * H + j] = g;
        c[j] = a[H + j] * c_prev[j] + a[j] * g;
      }
    }
    at::Tensor frame_tanh_c = state.tanh_c[t];
    at::tanh_out(frame_tanh_c, state.cells[t]);
    for (int64_t b = 0; b < n.batch; ++b) {
      const T* o = gate_data + n.gates_at(t, b) + 3 * H;  // zero on padding
      const T* tanh_c = tanh_data + n.state_at(t, b);
      T* h = hidden_data + n.state_at(t, b);
      for (int64_t j = 0; j < H; ++j) h[j] = o[j] * tanh_c[j];
    }
  }
  return state;
}

// One direction backward: from the gradient of the hidden states [T, B, H] to the gradient of the
// gate pre-activations [T, B, 4H] (which is also the input projections' gradient).
template <typename T>
at::Tensor run_backward(const at::Tensor& grad_hidden, const DirectionState& state,
                        const at::Tensor& w_hh, const int64_t* lengths, bool reverse) {
  const Sizes n = sizes_of(state.gates);
  const Order order{n.steps, reverse};
  const int64_t H = n.units;
  at::Tensor grad_gates = at::empty_like(state.gates);
  // The gradients reaching frame t's state from the frame after it (in the direction's order).
  at::Tensor grad_h_next = at::zeros({n.batch, H}, state.gates.options());
  at::Tensor grad_c_next = at::zeros({n.batch, H}, state.gates.options());
  const at::Tensor zero_state = at::zeros({n.batch, H}, state.gates.options());
  const T* act = state.gates.data_ptr<T>();
  const T* cell_data = state.cells.data_ptr<T>();
  const T* tanh_data = state.tanh_c.data_ptr<T>();
  const T* grad_h_data = grad_hidden.data_ptr<T>();
  T* out = grad_gates.data_ptr<T>();
  const T* dh_next = grad_h_next.data_ptr<T>();
  T* dc_next = grad_c_next.data_ptr<T>();
  for (int64_t s = n.steps - 1; s >= 0; --s) {
    const int64_t t = order.frame(s);
    const T* c_prev_frame =
        s > 0 ? cell_data + n.state_at(order.previous(t), 0) : zero_state.data_ptr<T>();
    for (int64_t b = 0; b < n.batch; ++b) {
      T* d = out + n.gates_at(t, b);
      T* dc = dc_next + b * H;
      if (t >= lengths[b]) {  // a constant zero state passes no gradient
        std::fill(d, d + 4 * H, T(0));
        std::fill(dc, dc + H, T(0));
        continue;
      }
      const T* a = act + n.gates_at(t, b);
      const T* tanh_c = tanh_data + n.state_at(t, b);
      const T* c_prev = c_prev_frame + b * H;
      const T* gh = grad_h_data + n.state_at(t, b);
      const T* dh_rec = dh_next + b * H;
      for (int64_t j = 0; j < H; ++j) {
        const T i = a[j], f = a[H + j], g = a[2 * H + j], o = a[3 * H + j];
        const T dh = gh[j] + dh_rec[j];
        const T d_cell = dc[j] + dh * o * (T(1) - tanh_c[j] * tanh_c[j]);
        d[j] = d_cell * g * i * (T(1) - i);
        d[H + j] = d_cell * c_prev[j] * f * (T(1) - f);
        d[2 * H + j] = d_cell * i * (T(1) - g * g);
        d[3 * H + j] = dh * tanh_c[j] * o * (T(1) - o);
        dc[j] = d_cell * f;
      }
    }
    if (s > 0) at::mm_out(grad_h_next, grad_gates[t], w_hh);
  }
  return grad_gates;
}

// The same two passes with the recurrent products in bf16 (float layers under a bf16 autocast):
// the weight packed once for the CPU's matrix units, and per frame one product from the
// previous frame's bf16 operand plus one pass of lstm_frames, which computes the frame's
// nonlinearities and rounds the next product's operand. No tensor operation inside the loop.
// `gates` holds the input projections with the biases [T, B, 4H] and becomes the activations.
DirectionState run_forward_bf16(at::Tensor gates_buffer, const at::Tensor& w_hh,
                                const int64_t* lengths, bool reverse) {
  DirectionState state;
  state.gates = std::move(gates_buffer);
  const Sizes n = sizes_of(state.gates);
  const int64_t H = n.units;
  bf16_matmul::RepeatedProduct recurrent(w_hh.t(), n.batch, /*accumulate=*/true);
  state.cells = at::empty({n.steps, n.batch, H}, state.gates.options());
  state.tanh_c = at::empty_like(state.cells);
  state.hidden = at::empty_like(state.cells);
  state.hidden_bf16 = at::empty_like(state.cells, at::kBFloat16);
  const at::Tensor zero_state = at::zeros({n.batch, H}, state.gates.options());
  float* gates = state.gates.data_ptr<float>();
  float* cells = state.cells.data_ptr<float>();
  float* tanh_c = state.tanh_c.data_ptr<float>();
  float* hidden = state.hidden.data_ptr<float>();
  auto* rounded = reinterpret_cast<uint16_t*>(state.hidden_bf16.data_ptr<c10::BFloat16>());
  const Order order{n.steps, reverse};
  for (int64_t s = 0; s < n.steps; ++s) {
    const int64_t t = order.frame(s), p = order.previous(t);
    if (s > 0) recurrent.multiply(rounded + n.state_at(p, 0), gates + n.gates_at(t, 0));
    const lstm_frames::Forward frame{
        gates + n.gates_at(t, 0),
        s > 0 ? cells + n.state_at(p, 0) : zero_state.data_ptr<float>(),
        cells + n.state_at(t, 0), tanh_c + n.state_at(t, 0), hidden + n.state_at(t, 0),
        rounded + n.state_at(t, 0)};
    lstm_frames::forward(frame, n.batch, H, lengths, t);
  }
  return state;
}

DirectionGradients run_backward_bf16(const at::Tensor& grad_hidden, const DirectionState& state,
                                     const at::Tensor& w_hh, const int64_t* lengths,
                                     bool reverse) {
  const Sizes n = sizes_of(state.gates);
  const int64_t H = n.units;
  bf16_matmul::RepeatedProduct recurrent(w_hh, n.batch, /*accumulate=*/false);
  DirectionGradients grads{at::empty_like(state.gates),
                           at::empty_like(state.gates, at::kBFloat16)};
  // The gradients reaching frame t's state from the frame after it (in the direction's order).
  at::Tensor grad_h_next = at::zeros({n.batch, H}, state.gates.options());
  at::Tensor grad_c_next = at::zeros({n.batch, H}, state.gates.options());
  const at::Tensor zero_state = at::zeros({n.batch, H}, state.gates.options());
  const float* gates = state.gates.data_ptr<float>();
  const float* cells = state.cells.data_ptr<float>();
  const float* tanh_c = state.tanh_c.data_ptr<float>();
  const float* grad_h = grad_hidden.data_ptr<float>();
  float* out = grads.gates.data_ptr<float>();
  auto* out_rounded = reinterpret_cast<uint16_t*>(grads.gates_bf16.data_ptr<c10::BFloat16>());
  float* dh_next = grad_h_next.data_ptr<float>();
  const Order order{n.steps, reverse};
  for (int64_t s = n.steps - 1; s >= 0; --s) {
    const int64_t t = order.frame(s);
    const lstm_frames::Backward frame{
        gates + n.gates_at(t, 0),
        s > 0 ? cells + n.state_at(order.previous(t), 0) : zero_state.data_ptr<float>(),
        tanh_c + n.state_at(t, 0), grad_h + n.state_at(t, 0), dh_next,
        grad_c_next.data_ptr<float>(), out + n.gates_at(t, 0), out_rounded + n.gates_at(t, 0)};
    lstm_frames::backward(frame, n.batch, H, lengths, t);
    if (s > 0) recurrent.multiply(out_rounded + n.gates_at(t, 0), dh_next);
  }
  return grads;
}

// dW_hh = sum over frames of grad_gates[t]^T h[previous(t)], one product over all frames, in
// `products` (bf16 operands: bf16_matmul.h), as w_hh's type.
at::Tensor recurrent_weight_gradient(const at::Tensor& grad_gates, const at::Tensor& hidden,
                                     bool reverse, const at::Tensor& w_hh,
                                     at::ScalarType products) {
  const int64_t steps = hidden.size(0), units = hidden.size(2);
  if (steps < 2) return at::zeros_like(w_hh);
  auto g = grad_gates.narrow(0, reverse ? 0 : 1, steps - 1).reshape({-1, 4 * units});
  auto h = hidden.narrow(0, reverse ? 1 : 0, steps - 1).reshape({-1, units});
  if (products == w_hh.scalar_type() && g.scalar_type() == w_hh.scalar_type())
    return at::mm(g.t(), h);
  return bf16_matmul::product(g.t(), h).to(w_hh.scalar_type());
}

// The recurrence of one LSTM layer over precomputed input projections, one or two directions.
struct Recurrence : public torch::autograd::Function<Recurrence> {
  static constexpr int64_t kSavedPerDirection = 5;  // gates, cells, tanh_c, hidden, w_hh
  static constexpr int64_t kWeight = 4;

  // inputs: per direction {input projections [T, B, 4H], w_hh [4H, H]}; the second direction, if
  // any, runs backwards in time. bf16_products: the recurrent weight's gradient in bf16 (the
  // recurrence itself stays in the inputs' type: a single short sequence, layer()).
  static variable_list forward(AutogradContext* ctx, at::TensorList inputs,
                               const at::Tensor& lengths, bool bf16_products) {
    const int64_t directions = static_cast<int64_t>(inputs.size() / 2);
    ctx->saved_data["bf16_products"] = bf16_products;
    const at::Tensor lengths_cpu = lengths.to(at::kLong).contiguous();
    const int64_t* length_data = lengths_cpu.data_ptr<int64_t>();
    std::vector<DirectionState> states(directions);
    // One thread per direction: each frame's work is too small to split further.
    at::parallel_for(0, directions, 1, [&](int64_t begin, int64_t end) {
      for (int64_t d = begin; d < end; ++d) {
        AT_DISPATCH_FLOATING_TYPES(inputs[2 * d].scalar_type(), "fused_lstm_forward", [&] {
          states[d] = run_forward<scalar_t>(inputs[2 * d], inputs[2 * d + 1], length_data, d == 1);
        });
      }
    });
    variable_list saved, outputs;
    for (int64_t d = 0; d < directions; ++d) {
      saved.insert(saved.end(), {states[d].gates, states[d].cells, states[d].tanh_c,
                                 states[d].hidden, inputs[2 * d + 1]});
      outputs.push_back(states[d].hidden);
    }
    saved.push_back(lengths_cpu);
    ctx->save_for_backward(saved);
    return outputs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const int64_t directions = static_cast<int64_t>((saved.size() - 1) / kSavedPerDirection);
    const int64_t* length_data = saved.back().data_ptr<int64_t>();
    const at::ScalarType products = ctx->saved_data["bf16_products"].toBool()
                                        ? at::kBFloat16
                                        : saved.front().scalar_type();
    std::vector<DirectionState> states(directions);
    std::vector<at::Tensor> grad_hidden(directions), grad_gates(directions);
    for (int64_t d = 0; d < directions; ++d) {
      const auto* p = &saved[kSavedPerDirection * d];
      states[d] = {p[0], p[1], p[2], p[3], at::Tensor()};
      grad_hidden[d] = grad_outputs[d].defined() ? grad_outputs[d].contiguous()
                                                 : at::zeros_like(states[d].hidden);
    }
    at::parallel_for(0, directions, 1, [&](int64_t begin, int64_t end) {
      for (int64_t d = begin; d < end; ++d) {
        const at::Tensor& w_hh = saved[kSavedPerDirection * d + kWeight];
        AT_DISPATCH_FLOATING_TYPES(grad_hidden[d].scalar_type(), "fused_lstm_backward", [&] {
          grad_gates[d] = run_backward<scalar_t>(grad_hidden[d], states[d], w_hh, length_data,
                                                 d == 1);
        });
      }
    });
    variable_list grads;
    for (int64_t d = 0; d < directions; ++d) {
      grads.push_back(grad_gates[d]);
      grads.push_back(recurrent_weight_gradient(grad_gates[d], states[d].hidden, d == 1,
                                                saved[kSavedPerDirection * d + kWeight],
                                                products));
    }
    grads.emplace_back();  // lengths
    grads.emplace_back();  // bf16_products
    return grads;
  }
};

// One LSTM layer, one or two directions, with every product in bf16 (float weights under a bf16
// autocast, at least two sequences or a recurrent weight too large for the cache, see
// recurrent_product_type): the input projections written with their biases straight into the
// gate buffers, the recurrence, and in the backward pass the input's, the weights' and the
// biases' gradients, all from the rounded operands the loops keep. Products accumulate and
// return fp32 (bf16_matmul.h), so no result passes through bf16 on its way.
struct Bf16Layer : public torch::autograd::Function<Bf16Layer> {
  // Saved: x in bf16; per direction gates, cells, tanh_c, hidden, hidden_bf16, w_ih, w_hh.
  static constexpr int64_t kSavedPerDirection = 7;
  static constexpr int64_t kInputWeight = 5, kRecurrentWeight = 6;

  // inputs: x [T, B, F] float, then per direction {w_ih, w_hh, b_ih, b_hh}.
  static variable_list forward(AutogradContext* ctx, at::TensorList inputs,
                               const at::Tensor& lengths) {
    const at::Tensor& x = inputs[0];
    const int64_t steps = x.size(0), batch = x.size(1), features = x.size(2);
    const int64_t directions = static_cast<int64_t>((inputs.size() - 1) / 4);
    const at::Tensor x_bf16 = x.to(at::kBFloat16).contiguous().view({steps * batch, features});
    const at::Tensor lengths_cpu = lengths.to(at::kLong).contiguous();
    const int64_t* length_data = lengths_cpu.data_ptr<int64_t>();
    std::vector<at::Tensor> gates(directions);
    for (int64_t d = 0; d < directions; ++d) {
      const auto* w = &inputs[1 + 4 * d];
      gates[d] = at::empty({steps, batch, w[0].size(0)}, x.options());
      bf16_matmul::product_into(x_bf16, w[0].t(), w[2] + w[3], gates[d].view({steps * batch, -1}));
    }
    std::vector<DirectionState> states(directions);
    at::parallel_for(0, directions, 1, [&](int64_t begin, int64_t end) {
      for (int64_t d = begin; d < end; ++d)
        states[d] = run_forward_bf16(gates[d], inputs[2 + 4 * d], length_data, d == 1);
    });
    variable_list saved{x_bf16, lengths_cpu}, outputs;
    for (int64_t d = 0; d < directions; ++d) {
      saved.insert(saved.end(), {states[d].gates, states[d].cells, states[d].tanh_c,
                                 states[d].hidden, states[d].hidden_bf16, inputs[1 + 4 * d],
                                 inputs[2 + 4 * d]});
      outputs.push_back(states[d].hidden);
    }
    ctx->save_for_backward(saved);
    return outputs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& x_bf16 = saved[0];
    const int64_t* length_data = saved[1].data_ptr<int64_t>();
    const int64_t directions = static_cast<int64_t>((saved.size() - 2) / kSavedPerDirection);
    std::vector<DirectionState> states(directions);
    std::vector<at::Tensor> grad_hidden(directions);
    std::vector<DirectionGradients> grad_gates(directions);
    // Direction d's saved tensors: gates, cells, tanh_c, hidden, hidden_bf16, w_ih, w_hh.
    auto saved_of = [&](int64_t d) { return &saved[2 + kSavedPerDirection * d]; };
    for (int64_t d = 0; d < directions; ++d) {
      const auto* p = saved_of(d);
      states[d] = {p[0], p[1], p[2], p[3], p[4]};
      grad_hidden[d] = grad_outputs[d].defined() ? grad_outputs[d].contiguous()
                                                 : at::zeros_like(states[d].hidden);
    }
    at::parallel_for(0, directions, 1, [&](int64_t begin, int64_t end) {
      for (int64_t d = begin; d < end; ++d)
        grad_gates[d] = run_backward_bf16(grad_hidden[d], states[d],
                                          saved_of(d)[kRecurrentWeight], length_data, d == 1);
    });
    const int64_t steps = states[0].hidden.size(0), batch = states[0].hidden.size(1);
    at::Tensor grad_x;
    variable_list weight_grads;
    for (int64_t d = 0; d < directions; ++d) {
      const at::Tensor& w_ih = saved_of(d)[kInputWeight];
      const int64_t units = states[d].hidden.size(2);
      const at::Tensor g = grad_gates[d].gates_bf16.view({steps * batch, 4 * units});
      // dx = sum over directions of G W_ih (unless x needs none: the features into the first
      // layer); dW_ih = G^T x; db = the column sums of G.
      if (ctx->needs_input_grad(0)) {
        const at::Tensor grad_x_direction = bf16_matmul::product(g, w_ih);
        if (grad_x.defined()) grad_x.add_(grad_x_direction);
        else grad_x = grad_x_direction;
      }
      const at::Tensor grad_bias = grad_gates[d].gates.view({steps * batch, 4 * units}).sum(0);
      weight_grads.insert(weight_grads.end(),
                          {bf16_matmul::product(g.t(), x_bf16),
                           recurrent_weight_gradient(grad_gates[d].gates_bf16,
                                                     states[d].hidden_bf16, d == 1,
                                                     saved_of(d)[kRecurrentWeight], at::kBFloat16),
                           grad_bias, grad_bias});
    }
    variable_list grads{grad_x.defined() ? grad_x.view({steps, batch, -1}) : at::Tensor()};
    grads.insert(grads.end(), weight_grads.begin(), weight_grads.end());
    grads.emplace_back();  // lengths
    return grads;
  }
};

}  // namespace

bool supports(const at::Tensor& x) {
  return x.device().is_cpu() && at::isFloatingType(x.scalar_type());
}

at::Tensor layer(const at::Tensor& input, const std::vector<at::Tensor>& weights,
                 const at::Tensor& lengths) {
  TORCH_CHECK(weights.size() == 4 || weights.size() == 8, "fused LSTM: 4 or 8 weights, got ",
              weights.size());
  TORCH_CHECK(input.dim() == 3, "fused LSTM: input [T, B, F], got ", input.sizes());
  TORCH_CHECK(weights[0].scalar_type() == at::kFloat || weights[0].scalar_type() == at::kDouble,
              "fused LSTM: float or double weights, got ", weights[0].scalar_type());
  // Under a bf16 autocast (trainer.cfg precision = bf16 on the CPU) every product of the layer,
  // the input projections and the recurrence, forward and backward, computes in bf16, where the
  // CPU's bf16 instructions do twice (avx512_bf16) or more (AMX) the fp32 work per cycle. The
  // states, gates, their gradients and the biases stay in the weights' type: autocast itself is
  // off inside, since the recurrence adds the products into buffers of that type.
  const bool bf16_products = weights[0].scalar_type() == at::kFloat && cpu_autocast_in_bf16();
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  const at::Tensor x = input.to(weights[0].scalar_type());
  if (bf16_products && recurrent_product_type(at::kBFloat16, weights[1], x.size(1)) ==
                           at::kBFloat16) {
    variable_list inputs{x};
    inputs.insert(inputs.end(), weights.begin(), weights.end());
    auto outputs = Bf16Layer::apply(at::TensorList(inputs), lengths);
    return outputs.size() == 1 ? outputs[0] : at::cat(outputs, -1);
  }
  const at::Tensor x_products = bf16_products ? x.to(at::kBFloat16) : x;
  variable_list inputs;
  for (std::size_t d = 0; d < weights.size() / 4; ++d) {
    const auto& w_ih = weights[4 * d];
    const at::Tensor bias = weights[4 * d + 2] + weights[4 * d + 3];
    inputs.push_back(bf16_products
                         ? at::linear(x_products, w_ih.to(at::kBFloat16))
                               .to(x.scalar_type())
                               .add_(bias)  // in place: 30x faster than + on LibTorch 1.13
                         : at::linear(x, w_ih, bias));
    inputs.push_back(weights[4 * d + 1]);
  }
  // A list, so that autograd sees each tensor.
  auto outputs = Recurrence::apply(at::TensorList(inputs), lengths, bf16_products);
  return outputs.size() == 1 ? outputs[0] : at::cat(outputs, -1);
}

}  // namespace fused_lstm
}  // namespace nabu
