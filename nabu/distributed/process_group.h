// Multi-process training over LibTorch's c10d: a TCPStore rendezvous configured like torchrun
// (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK) and a Gloo process group (CPU). Under
// Slurm (srun), SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID stand in for RANK, WORLD_SIZE and
// LOCAL_RANK, and the first host of SLURM_JOB_NODELIST (or SLURM_NODELIST) for MASTER_ADDR. With
// none of these the world size is 1 and the LocalCommunicator is used: nothing changes.
#pragma once

#include <c10/core/Device.h>

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
  std::string source = "none";  // "torchrun" or "slurm": which variables were read
  // Reads the torchrun variables, else the Slurm ones; throws Error for malformed values.
  static DistributedEnvironment from_environment();
};

// The first host of a Slurm node list: "node[01-04,07],gpu5" -> "node01", "a[3]-b[1-2]" ->
// "a3-b1". Throws Error for an empty or malformed list.
std::string first_slurm_host(const std::string& nodelist);

// A Gloo-backed communicator for world_size > 1 (every collective fails with a clear Error after
// `timeout` when a rank died or hangs); a LocalCommunicator otherwise.
//
// With `liveness_timeout` > 0, every rank also runs a liveness check through the rendezvous
// store: a heartbeat each second with its progress (Communicator::tick), its CPU time and
// whether it waits in a collective. A rank whose heartbeat stops (killed, SIGSTOP, its machine
// gone), or that neither progresses nor computes nor waits for the others for that long (a
// stuck file system read), makes every other rank log one line naming it and its host and exit
// with status 1 - well before the collective timeout. Checkpoints are written atomically, so the
// chief's last one stays intact.
// With models on a GPU and a LibTorch built with NCCL, tensors on the GPU are all-reduced and
// broadcast through NCCL (the store, the liveness check and CPU tensors stay with Gloo).
std::unique_ptr<Communicator> make_communicator(const DistributedEnvironment& environment,
                                                std::chrono::seconds timeout,
                                                std::chrono::seconds liveness_timeout = {},
                                                const c10::Device& device = c10::kCPU);

}  // namespace nabu
