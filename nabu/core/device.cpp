#include "nabu/core/device.h"

#include <dlfcn.h>
#include <torch/torch.h>

#include <cstdlib>

#include "nabu/core/error.h"
#include "nabu/core/strings.h"

namespace nabu {

namespace {

// LOCAL_RANK of torchrun and our own --workers launcher, Slurm's SLURM_LOCALID, else RANK (as
// DistributedEnvironment reads them).
int local_rank() {
  for (const char* name : {"LOCAL_RANK", "SLURM_LOCALID", "RANK"}) {
    const char* value = std::getenv(name);
    if (!value || !*value) continue;
    auto parsed = parse_int(value);
    if (!parsed || *parsed < 0)
      throw Error(std::string("environment variable ") + name + "='" + value +
                  "' is not a rank (an integer >= 0)");
    return static_cast<int>(*parsed);
  }
  return 0;
}

// torch::cuda::device_count() is 0 both for a LibTorch without CUDA and for no GPU; a LibTorch
// with CUDA has its CUDA library loaded with it (the process links it).
std::string no_cuda_reason() {
  const std::string version = TORCH_VERSION;
  void* cuda_library = ::dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_NOLOAD);
  if (!cuda_library) return "this LibTorch (" + version + ") was built without CUDA";
  ::dlclose(cuda_library);
  return "this LibTorch (" + version + ", with CUDA) finds no GPU on this machine";
}

}  // namespace

bool is_device_name(const std::string& name) {
  if (name == "auto" || name == "cpu" || name == "cuda") return true;
  if (name.rfind("cuda:", 0) != 0) return false;
  auto index = parse_int(name.substr(5));
  return index && *index >= 0;
}

bool cuda_available() { return torch::cuda::is_available(); }

c10::Device resolve_device(const std::string& name, const std::string& what) {
  const std::string shown = what + "=" + shorten(name);
  if (name == "cpu") return c10::Device(c10::kCPU);
  bool is_auto = name == "auto";
  if (!is_device_name(name)) throw Error(shown + ": expected auto, cpu, cuda or cuda:N");
  int64_t count = static_cast<int64_t>(torch::cuda::device_count());
  if (count == 0) {
    if (is_auto) return c10::Device(c10::kCPU);
    throw Error(shown + ": " + no_cuda_reason() + "; use --device=cpu (docs/devices.md)");
  }
  int64_t index = local_rank() % count;
  if (name.rfind("cuda:", 0) == 0) {
    auto parsed = parse_int(name.substr(5));
    if (*parsed >= count)
      throw Error(shown + ": there are " + std::to_string(count) + " CUDA device(s) (0 to " +
                  std::to_string(count - 1) + ")");
    index = *parsed;
  }
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
}

std::string describe_device(const c10::Device& device) {
  if (device.is_cpu()) return "cpu (" + std::to_string(torch::get_num_threads()) + " threads)";
  return device.str();
}

}  // namespace nabu
