// A run stopped on request (a signal) after saving what it needs to continue, and the exit
// statuses that tell job scripts so.
#pragma once

#include <string.h>

#include <string>

#include "nabu/core/error.h"

namespace nabu {

// The CLI prints the message and exits with `exit_status` instead of 1.
class Interrupted : public Error {
 public:
  Interrupted(const std::string& message, int exit_status)
      : Error(message), exit_status(exit_status) {}
  int exit_status;
};

// The exit status of a training stopped by SIGTERM or SIGUSR1 (a preemption, a job scheduler's
// warning before its time limit) once its checkpoint is written: EX_TEMPFAIL of sysexits.h, "try
// again later". config/computing/slurm_step.sh requeues the job on it; the launcher of --workers
// does not restart on it.
constexpr int kExitPreempted = 75;
// Ctrl-C (SIGINT): the shell's 128 + 2.
constexpr int kExitInterrupted = 130;

// "SIGTERM" for the messages of a stop; "signal N" for a number glibc does not name.
inline std::string signal_name(int signal_number) {
  const char* name = sigabbrev_np(signal_number);
  return name ? std::string("SIG") + name : "signal " + std::to_string(signal_number);
}

}  // namespace nabu
