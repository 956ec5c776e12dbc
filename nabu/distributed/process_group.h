// Multi-process training over LibTorch's c10d: a TCPStore rendezvous configured like torchrun
// (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK) and a Gloo process group (CPU). With
// no such variables the world size is 1 and the LocalCommunicator is used: nothing changes.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "nabu/distributed/communicator.h"

namespace nabu {

struct DistributedEnvironment {
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int world_size = 1;
  int rank = 0;
  int local_rank = 0;
  bool distributed() const { return world_size > 1; }
  // Reads the torchrun variables; throws Error for malformed values.
  static DistributedEnvironment from_environment();
};

// A Gloo-backed communicator for world_size > 1 (every collective fails with a clear Error after
// `timeout` when a rank died or hangs); a LocalCommunicator otherwise.
std::unique_ptr<Communicator> make_communicator(const DistributedEnvironment& environment,
                                                std::chrono::seconds timeout);

}  // namespace nabu
