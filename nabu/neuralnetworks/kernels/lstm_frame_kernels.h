// The elementwise work of one frame of the fused CPU LSTM (fused_lstm.h) when its products are
// bf16: gates, cell and output of B sequences forward, their gradients backward, each in one pass
// over the frame's values, and the operands of the next frame's product rounded to bf16 in the
// same pass.
//
// Why: with the products on the CPU's matrix units (bf16_matmul.h) a frame's product of the demo
// recipe's layer took about 20 us, and LibTorch's sigmoid, tanh and the per-frame tensor views
// around it several times that (docs/results.md, "Mixed precision on the CPU"). These loops are
// compiled for AVX-512, AVX2 and plain x86-64, the CPU picking its own at load time, and compute
// sigmoid and tanh from a polynomial exp accurate to about 2 fp32 ulp: far below the 3 significant
// digits of the bf16 products. The fp32 layer keeps LibTorch's functions (and its results).
#pragma once

#include <cstdint>

namespace nabu::lstm_frames {

// One frame of B sequences of H units, all buffers row-major per sequence. bf16 values are the
// upper 16 bits of the float (c10::BFloat16's layout), rounded to nearest even.
struct Forward {
  float* gates;                  // [B, 4H]: pre-activations in; activations i, f, g, o out
  const float* previous_cells;   // [B, H]: c of the previous frame (zeros at the first)
  float* cells;                  // [B, H] out: c = f c_prev + i g
  float* tanh_cells;             // [B, H] out: tanh(c)
  float* hidden;                 // [B, H] out: h = o tanh(c)
  uint16_t* hidden_bf16;         // [B, H] out: h rounded to bf16
};

struct Backward {
  const float* gates;            // [B, 4H]: the activations i, f, g, o
  const float* previous_cells;   // [B, H]
  const float* tanh_cells;       // [B, H]
  const float* grad_hidden;      // [B, H]: the loss's gradient at this frame's h
  const float* grad_recurrent;   // [B, H]: the gradient reaching h from the next frame
  float* grad_cells;             // [B, H]: in, from the next frame; out, to the previous one
  float* grad_gates;             // [B, 4H] out: the gradient of the pre-activations
  uint16_t* grad_gates_bf16;     // [B, 4H] out: the same rounded to bf16
};

// Sequence b takes part where frame < lengths[b]; elsewhere every output of the frame is zero
// (a constant zero state: no activation and no gradient).
void forward(const Forward& frame, int64_t batch, int64_t units, const int64_t* lengths,
             int64_t frame_index);
void backward(const Backward& frame, int64_t batch, int64_t units, const int64_t* lengths,
              int64_t frame_index);

// values rounded to bf16 into out, as c10::BFloat16 rounds (nearest even; a NaN stays a NaN).
void round_to_bf16(const float* values, uint16_t* out, int64_t count);

// The kernels' own sigmoid and tanh, for tests against std::exp.
float sigmoid(float x);
float tanh(float x);

}  // namespace nabu::lstm_frames
