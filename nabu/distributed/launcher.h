// `nabu train --workers=N` and `--max-restarts=N`: starts worker processes of the same command,
// forwards their output with a rank prefix, stops the others as soon as one fails, and starts
// the group again from the last checkpoint up to max_restarts times. Workers are started with
// fork+exec (a fresh program): forking a process whose OpenMP pool already runs can deadlock
// the child.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace nabu {

struct LaunchOptions {
  // Worker processes on this machine, each given the torchrun variables on 127.0.0.1. 0: one
  // worker that keeps this process's variables (one rank of a job torchrun or srun started on
  // several machines); its restarts meet the other ranks' on MASTER_PORT + the restart's number.
  int workers = 2;
  std::vector<std::string> arguments;          // argv[1...] of the first start
  std::vector<std::string> restart_arguments;  // of every restart (the first's with --resume)
  int max_restarts = 0;
  // After a failure, before SIGKILL: only the chief writes checkpoints, and it writes them
  // atomically, so the others need no time; a stopped (SIGSTOP) worker ignores SIGTERM anyway.
  int grace_seconds = 3;
  // Where the training was when a worker failed ("after update 12 of stage 100"; empty: it had
  // not trained yet): restarts name it, and a crash that repeats there is told as such.
  std::function<std::string()> position;
  // Restarts are also logged here (the experiment's run.log); empty: the console only.
  std::string log_file;
};

// Returns 0 when every worker succeeded; else the exit status of the first worker that failed
// in the last start (>= 1), or kExitPreempted / kExitInterrupted when the workers stopped on a
// signal (this process's, forwarded, or one sent to a worker): those are never restarted.
int launch_workers(const LaunchOptions& options);

// A free TCP port on 127.0.0.1 (for the rendezvous).
int free_local_port();

}  // namespace nabu
