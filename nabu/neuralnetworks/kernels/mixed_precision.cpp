#include "nabu/neuralnetworks/kernels/mixed_precision.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <cmath>

#include "nabu/core/cpu_features.h"
#include "nabu/core/error.h"
#include "nabu/core/strings.h"

namespace nabu {

// LibTorch 2.4 replaced the per-device autocast functions (set_cpu_enabled, ...) by ones that take
// the device type; the old ones are deprecated there and absent later.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define NABU_AUTOCAST_BY_DEVICE_TYPE 1
#endif

namespace {

bool autocast_enabled(c10::DeviceType type) {
#ifdef NABU_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::is_autocast_enabled(type);
#else
  return type == c10::kCPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
#endif
}

void set_autocast_enabled(c10::DeviceType type, bool enabled) {
#ifdef NABU_AUTOCAST_BY_DEVICE_TYPE
  at::autocast::set_autocast_enabled(type, enabled);
#else
  if (type == c10::kCPU) at::autocast::set_cpu_enabled(enabled);
  else at::autocast::set_enabled(enabled);
#endif
}

at::ScalarType autocast_dtype(c10::DeviceType type) {
#ifdef NABU_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::get_autocast_dtype(type);
#else
  return type == c10::kCPU ? at::autocast::get_autocast_cpu_dtype()
                           : at::autocast::get_autocast_gpu_dtype();
#endif
}

void set_autocast_dtype(c10::DeviceType type, at::ScalarType dtype) {
#ifdef NABU_AUTOCAST_BY_DEVICE_TYPE
  at::autocast::set_autocast_dtype(type, dtype);
#else
  if (type == c10::kCPU) at::autocast::set_autocast_cpu_dtype(dtype);
  else at::autocast::set_autocast_gpu_dtype(dtype);
#endif
}

}  // namespace

Precision parse_precision(const std::string& name, const std::string& what) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "bf16") return Precision::kBf16;
  if (name == "fp16") return Precision::kFp16;
  throw Error(what + "=" + shorten(name) + ": expected fp32, bf16 or fp16");
}

std::string precision_name(Precision precision) {
  switch (precision) {
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
    default: return "fp32";
  }
}

void check_precision(Precision precision, const c10::Device& device, const std::string& what) {
  if (precision == Precision::kFp16 && !device.is_cuda())
    throw Error(what + "=fp16 needs a CUDA device (this run computes on " + device.str() +
                "); on the CPU use bf16");
}

std::string bf16_speed_warning(Precision precision, const c10::Device& device,
                               const std::string& cpu_flags) {
  if (precision != Precision::kBf16 || !device.is_cpu()) return "";
  if (has_cpu_flag(cpu_flags, "avx512_bf16") || has_cpu_flag(cpu_flags, "amx_bf16")) return "";
  return "precision = bf16 on a CPU without bfloat16 instructions (neither avx512_bf16 nor "
         "amx_bf16 among its flags): LibTorch emulates bf16 there, which trained the DC demo "
         "recipe 10.3x slower than fp32 on such a CPU (docs/results.md); fp32 is faster here";
}

bool cpu_autocast_in_bf16() {
  return autocast_enabled(c10::kCPU) && autocast_dtype(c10::kCPU) == at::kBFloat16;
}

AutocastScope::AutocastScope(Precision precision, const c10::Device& device)
    : type_(device.type()) {
  if (precision == Precision::kFp32) return;
  active_ = true;
  was_enabled_ = autocast_enabled(type_);
  previous_dtype_ = static_cast<int>(autocast_dtype(type_));
  set_autocast_dtype(type_, precision == Precision::kBf16 ? at::kBFloat16 : at::kHalf);
  set_autocast_enabled(type_, true);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // The casts of the weights are cached while autocast is on; the cache ends with the outermost
  // scope, so that the next forward pass sees the updated weights.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast_enabled(type_, was_enabled_);
  set_autocast_dtype(type_, static_cast<at::ScalarType>(previous_dtype_));
}

LossScaler::LossScaler(bool enabled, Options options)
    : enabled_(enabled), options_(options), scale_(options.initial_scale) {
  if (options_.initial_scale <= 0 || options_.growth_factor <= 1 ||
      options_.backoff_factor <= 0 || options_.backoff_factor >= 1 ||
      options_.growth_interval < 1)
    throw Error("loss scaler: the initial scale must be positive, the growth factor above 1, the "
                "backoff factor between 0 and 1 and the growth interval at least 1");
}

bool LossScaler::unscale(std::vector<torch::Tensor>& gradients) const {
  if (!enabled_) return true;
  std::vector<torch::Tensor> sums;
  const double inverse = 1.0 / scale_;
  for (auto& gradient : gradients) {
    if (!gradient.defined()) continue;
    gradient.mul_(inverse);
    sums.push_back(gradient.sum(torch::kDouble));
  }
  // One transfer for all of them: a NaN or infinity anywhere makes the total non-finite.
  return sums.empty() || std::isfinite(torch::stack(sums).sum().item<double>());
}

void LossScaler::update(bool finite) {
  if (!enabled_) return;
  if (!finite) {
    scale_ *= options_.backoff_factor;
    good_steps_ = 0;
    return;
  }
  if (++good_steps_ >= options_.growth_interval) {
    scale_ *= options_.growth_factor;
    good_steps_ = 0;
  }
}

void LossScaler::restore(double scale, int64_t good_steps) {
  if (!enabled_) return;
  if (!(scale > 0) || !std::isfinite(scale) || good_steps < 0)
    throw Error("loss scaler: a checkpoint holds scale " + std::to_string(scale) +
                " and good steps " + std::to_string(good_steps));
  scale_ = scale;
  good_steps_ = good_steps;
}

}  // namespace nabu
