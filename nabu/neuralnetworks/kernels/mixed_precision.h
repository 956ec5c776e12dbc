// Mixed precision (trainer.cfg [trainer] precision = fp32 | bf16 | fp16, docs/devices.md):
// autocast over the forward passes, and for fp16 the dynamic loss scale that keeps small
// gradients from vanishing in half precision. Parameters, gradients and optimizer state stay fp32.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

namespace at {
class Tensor;
}

namespace nabu {

enum class Precision { kFp32, kBf16, kFp16 };

// "fp32", "bf16" or "fp16"; anything else throws Error naming `what` (the key or flag).
Precision parse_precision(const std::string& name, const std::string& what);
std::string precision_name(Precision precision);
// fp16 autocast and its loss scale are for GPUs: on the CPU, LibTorch's autocast computes in
// bf16. Throws Error naming `what` for fp16 on a CPU device.
void check_precision(Precision precision, const c10::Device& device, const std::string& what);

// The warning bf16 on a CPU without bfloat16 instructions deserves (LibTorch emulates the type
// there: measured 10.3x slower than fp32, docs/results.md), given the CPU's flags as
// /proc/cpuinfo lists them; empty when the device is a GPU, the precision another, or the CPU
// has avx512_bf16 or amx_bf16.
std::string bf16_speed_warning(Precision precision, const c10::Device& device,
                               const std::string& cpu_flags);

// Whether this thread is inside an autocast that computes the CPU's products in bf16 (an
// AutocastScope with Precision::kBf16 on a CPU device): the layers that turn autocast off to run
// their own kernels (fused_lstm.h) ask it to compute their products in bf16 too.
bool cpu_autocast_in_bf16();

// While it lives, the operations LibTorch's autocast lists (matrix products, convolutions, LSTMs)
// compute in bf16 or fp16 on `device`'s type; the previous autocast state comes back after.
// fp32: changes nothing.
class AutocastScope {
 public:
  AutocastScope(Precision precision, const c10::Device& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  bool was_enabled_ = false;
  c10::DeviceType type_;
  int previous_dtype_ = 0;  // an at::ScalarType
};

// fp16's dynamic loss scale: the loss is multiplied by scale() before the backward pass, the
// gradients divided by it after; an update whose gradients overflowed is skipped and the scale
// halved, and after growth_interval updates in a row without overflow it doubles.
class LossScaler {
 public:
  struct Options {
    double initial_scale = 65536.0;
    double growth_factor = 2.0;
    double backoff_factor = 0.5;
    int64_t growth_interval = 2000;
  };
  LossScaler() : LossScaler(false) {}
  explicit LossScaler(bool enabled) : LossScaler(enabled, Options{}) {}
  LossScaler(bool enabled, Options options);

  bool enabled() const { return enabled_; }
  // The factor for the loss (1 when disabled).
  double scale() const { return enabled_ ? scale_ : 1.0; }
  int64_t good_steps() const { return good_steps_; }

  // Divides every defined gradient by scale() in place; false when one of them holds a NaN or an
  // infinity (then the update must be skipped). Disabled: changes nothing, returns true.
  bool unscale(std::vector<at::Tensor>& gradients) const;
  // After an update (finite = true) or a skipped one (false).
  void update(bool finite);
  // For a resumed run: the state a checkpoint kept.
  void restore(double scale, int64_t good_steps);

 private:
  bool enabled_ = false;
  Options options_;
  double scale_ = 1.0;
  int64_t good_steps_ = 0;
};

}  // namespace nabu
