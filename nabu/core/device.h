// Where the models compute: `--device` of train, test, separate and recognize, and trainer.cfg's
// [trainer] device (docs/devices.md). The header keeps LibTorch's full headers out.
#pragma once

#include <c10/core/Device.h>

#include <string>

namespace nabu {

// Resolves a device name: "auto" (the GPU of this worker when LibTorch sees one, else the CPU),
// "cpu", "cuda" (this worker's GPU) or "cuda:N". This worker's GPU is LOCAL_RANK modulo the
// number of GPUs (0 outside a distributed run). `what` names the flag or key in errors ("--device",
// "trainer.cfg [trainer] device"). Throws Error for a malformed name, CUDA where LibTorch sees no
// GPU (saying whether this LibTorch was built with CUDA at all), or a GPU index out of range.
c10::Device resolve_device(const std::string& name, const std::string& what);

// Whether `name` has the form resolve_device accepts (whatever this machine has).
bool is_device_name(const std::string& name);

// Whether this LibTorch can run on a GPU here (built with CUDA and a device present).
bool cuda_available();

// One line for the log: "cpu (2 threads)" or "cuda:0".
std::string describe_device(const c10::Device& device);

}  // namespace nabu
