// `nabu train --workers=N`: starts N worker processes of the same command on this machine with
// the torchrun variables on loopback, forwards their output with a rank prefix, and stops the
// others as soon as one fails. Workers are started with fork+exec (a fresh program): forking a
// process whose OpenMP pool already runs can deadlock the child.
#pragma once

#include <string>
#include <vector>

namespace nabu {

struct LaunchOptions {
  int workers = 2;
  std::vector<std::string> arguments;  // argv[1...] for every worker (without --workers)
  // After a failure, before SIGKILL: only the chief writes checkpoints, and it writes them
  // atomically, so the others need no time; a stopped (SIGSTOP) worker ignores SIGTERM anyway.
  int grace_seconds = 3;
};

// Returns 0 when every worker succeeded, else the first failing worker's exit status (>= 1).
int launch_local_workers(const LaunchOptions& options);

// A free TCP port on 127.0.0.1 (for the rendezvous).
int free_local_port();

}  // namespace nabu
