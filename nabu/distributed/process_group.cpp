#include "nabu/distributed/process_group.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdlib>

#include <spdlog/spdlog.h>

#include "nabu/core/error.h"
#include "nabu/core/strings.h"

namespace nabu {

namespace {

int environment_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  if (!value || !*value) return fallback;
  auto parsed = parse_int(value);
  if (!parsed) throw Error(std::string("environment variable ") + name + "='" + value +
                           "' is not an integer");
  return static_cast<int>(*parsed);
}

class GlooCommunicator : public Communicator {
 public:
  GlooCommunicator(const DistributedEnvironment& environment, std::chrono::seconds timeout)
      : rank_(environment.rank), world_size_(environment.world_size), timeout_(timeout) {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<std::uint16_t>(environment.master_port);
    store_options.isServer = environment.rank == 0;
    store_options.numWorkers = environment.world_size;
    store_options.waitWorkers = true;
    store_options.timeout = timeout;
    try {
      store_ = c10::make_intrusive<c10d::TCPStore>(environment.master_addr, store_options);
      auto options = c10d::ProcessGroupGloo::Options::create(timeout);
      // Loopback runs (the local launcher) bind to 127.0.0.1; otherwise Gloo picks the
      // interface of this host's name, as torchrun does.
      bool loopback = environment.master_addr == "127.0.0.1" ||
                      environment.master_addr == "localhost";
      options->devices.push_back(loopback
                                     ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                     : c10d::ProcessGroupGloo::createDefaultDevice());
      group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, rank_, world_size_, options);
    } catch (const std::exception& e) {
      throw Error("distributed rendezvous at " + environment.master_addr + ":" +
                  std::to_string(environment.master_port) + " failed for rank " +
                  std::to_string(rank_) + " of " + std::to_string(world_size_) + ": " +
                  first_line(e.what()));
    }
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }

  void all_reduce_sum(std::vector<torch::Tensor>& tensors) override {
    for (auto& tensor : tensors) {
      std::vector<at::Tensor> one{tensor};
      wait(group_->allreduce(one), "all-reduce");
    }
  }

  void broadcast(std::vector<torch::Tensor>& tensors, int root) override {
    c10d::BroadcastOptions options;
    options.rootRank = root;
    for (auto& tensor : tensors) {
      std::vector<at::Tensor> one{tensor};
      wait(group_->broadcast(one, options), "broadcast");
    }
  }

  void barrier() override { wait(group_->barrier(), "barrier"); }

 private:
  static std::string first_line(const std::string& text) {
    return text.substr(0, text.find('\n'));
  }

  void wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what) {
    try {
      work->wait(std::chrono::duration_cast<std::chrono::milliseconds>(timeout_));
    } catch (const std::exception& e) {
      throw Error(std::string("distributed ") + what + " failed on rank " +
                  std::to_string(rank_) + " (another worker died or hangs; timeout " +
                  std::to_string(timeout_.count()) + " s): " + first_line(e.what()));
    }
  }

  int rank_, world_size_;
  std::chrono::seconds timeout_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
};

}  // namespace

std::string first_slurm_host(const std::string& nodelist) {
  std::string host;
  std::size_t i = 0;
  while (i < nodelist.size() && nodelist[i] != ',') {
    if (nodelist[i] != '[') {
      host += nodelist[i++];
      continue;
    }
    // A bracket: its first number (zero padding kept), then skip to the closing bracket.
    std::size_t close = nodelist.find(']', i);
    if (close == std::string::npos) throw Error("SLURM node list '" + nodelist + "': no ']'");
    std::string inside = nodelist.substr(i + 1, close - i - 1);
    std::string first = inside.substr(0, inside.find_first_of("-,"));
    if (first.empty()) throw Error("SLURM node list '" + nodelist + "': empty range");
    host += first;
    i = close + 1;
  }
  host = trim(host);
  if (host.empty()) throw Error("SLURM node list '" + nodelist + "' names no host");
  return host;
}

DistributedEnvironment DistributedEnvironment::from_environment() {
  DistributedEnvironment environment;
  if (const char* address = std::getenv("MASTER_ADDR"); address && *address)
    environment.master_addr = address;
  environment.master_port = environment_int("MASTER_PORT", environment.master_port);
  const char* world = std::getenv("WORLD_SIZE");
  const char* slurm_tasks = std::getenv("SLURM_NTASKS");
  if ((!world || !*world) && slurm_tasks && *slurm_tasks && std::getenv("SLURM_PROCID")) {
    // srun: one process per task. The rendezvous host is the job's first node unless
    // MASTER_ADDR says otherwise; the port follows the job id so that jobs sharing a node do
    // not collide (MASTER_PORT wins).
    environment.source = "slurm";
    environment.world_size = environment_int("SLURM_NTASKS", 1);
    environment.rank = environment_int("SLURM_PROCID", 0);
    environment.local_rank = environment_int("SLURM_LOCALID", environment.rank);
    const char* address = std::getenv("MASTER_ADDR");
    if (!address || !*address) {
      const char* nodes = std::getenv("SLURM_JOB_NODELIST");
      if (!nodes || !*nodes) nodes = std::getenv("SLURM_NODELIST");
      if (!nodes || !*nodes)
        throw Error("SLURM_NTASKS is set but neither SLURM_JOB_NODELIST nor SLURM_NODELIST; set "
                    "MASTER_ADDR");
      environment.master_addr = first_slurm_host(nodes);
    }
    const char* port = std::getenv("MASTER_PORT");
    if (!port || !*port)
      environment.master_port = 20000 + environment_int("SLURM_JOB_ID", 9500) % 20000;
  } else {
    environment.world_size = environment_int("WORLD_SIZE", 1);
    environment.rank = environment_int("RANK", 0);
    environment.local_rank = environment_int("LOCAL_RANK", environment.rank);
    if (environment.world_size > 1) environment.source = "torchrun";
  }
  if (environment.world_size < 1) throw Error("WORLD_SIZE must be at least 1");
  if (environment.rank < 0 || environment.rank >= environment.world_size)
    throw Error("RANK=" + std::to_string(environment.rank) + " is outside WORLD_SIZE=" +
                std::to_string(environment.world_size));
  if (environment.master_port <= 0 || environment.master_port > 65535)
    throw Error("MASTER_PORT=" + std::to_string(environment.master_port) + " is not a port");
  return environment;
}

std::unique_ptr<Communicator> make_communicator(const DistributedEnvironment& environment,
                                                std::chrono::seconds timeout) {
  if (!environment.distributed()) return std::make_unique<LocalCommunicator>();
  return std::make_unique<GlooCommunicator>(environment, timeout);
}

}  // namespace nabu
