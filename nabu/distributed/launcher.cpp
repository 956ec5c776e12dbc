#include "nabu/distributed/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <thread>

#include "nabu/core/error.h"
#include "nabu/core/interrupted.h"
#include "nabu/distributed/process_group.h"

namespace nabu {

namespace {

using SteadyClock = std::chrono::steady_clock;

volatile sig_atomic_t pending_signal = 0;
void remember_signal(int signal_number) { pending_signal = signal_number; }

struct Worker {
  pid_t pid = -1;
  int output = -1;  // read end of the worker's stdout+stderr
  std::string pending;
  bool running = true;
};

// rank < 0: the only worker of a run of one process, without a prefix.
void flush_lines(Worker& worker, int rank, bool everything) {
  const std::string prefix = rank < 0 ? "" : "[rank " + std::to_string(rank) + "] ";
  std::size_t newline;
  while ((newline = worker.pending.find('\n')) != std::string::npos) {
    std::cerr << prefix << worker.pending.substr(0, newline) << "\n";
    worker.pending.erase(0, newline + 1);
  }
  if (everything && !worker.pending.empty()) {
    std::cerr << prefix << worker.pending << "\n";
    worker.pending.clear();
  }
  std::cerr.flush();
}

// How one start of the group ended.
struct GroupEnd {
  int status = 0;           // 0, or the first failing worker's exit status (128 + signal)
  int failed_rank = -1;
  std::string cause;        // "exit status 1", "killed by SIGKILL"
  bool on_request = false;  // a signal to this process or a worker stopped it: no restart
};

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  return "killed by " + signal_name(WTERMSIG(status));
}

pid_t start_worker(const LaunchOptions& options, const std::vector<std::string>& arguments,
                   int rank, int port, int attempt, int& output) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) throw Error("cannot create a pipe for worker " + std::to_string(rank));
  // Computed before the fork: the child only sets variables and execs.
  std::string restart_port;
  if (options.workers == 0 && attempt > 0)
    restart_port = std::to_string(DistributedEnvironment::from_environment().master_port + attempt);
  pid_t pid = ::fork();
  if (pid < 0) throw Error("cannot start worker " + std::to_string(rank));
  if (pid == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    if (options.workers > 0) {
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(options.workers).c_str(), 1);
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
    } else if (!restart_port.empty()) {
      ::setenv("MASTER_PORT", restart_port.c_str(), 1);
    }
    std::vector<std::string> argv_strings{"nabu"};
    argv_strings.insert(argv_strings.end(), arguments.begin(), arguments.end());
    std::vector<char*> argv;
    for (auto& argument : argv_strings) argv.push_back(argument.data());
    argv.push_back(nullptr);
    ::execv("/proc/self/exe", argv.data());
    std::perror("nabu: cannot start a worker");
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  output = pipe_fds[0];
  return pid;
}

void signal_workers(std::vector<Worker>& workers, int signal_number) {
  for (auto& worker : workers)
    if (worker.running) ::kill(worker.pid, signal_number);
}

// A signal this process received goes on to the workers.
void forward_pending_signal(std::vector<Worker>& workers, GroupEnd& end,
                            int& forwarded_interrupts) {
  if (int signal_number = pending_signal) {
    pending_signal = 0;
    end.on_request = true;
    // The workers write a checkpoint at their next update and stop; a second Ctrl-C does not
    // wait for it.
    if (signal_number == SIGINT && forwarded_interrupts++ > 0) {
      std::cerr << "nabu: second SIGINT: killing the workers without a checkpoint\n";
      signal_workers(workers, SIGKILL);
    } else {
      signal_workers(workers, signal_number);
    }
  }
}

// The rank in the output prefix of worker `index`, the first worker being `first_rank`; -1 (no
// prefix) when the group is one local worker (--max-restarts alone).
int shown_rank(const LaunchOptions& options, int first_rank, int index) {
  return options.workers == 1 ? -1 : first_rank + index;
}

// Waits up to 200 ms for output of the workers and passes on what they wrote.
void forward_worker_output(const LaunchOptions& options, int first_rank,
                           std::vector<Worker>& workers) {
  const int count = static_cast<int>(workers.size());
  std::vector<pollfd> fds;
  std::vector<int> ranks;
  for (int rank = 0; rank < count; ++rank)
    if (workers[rank].output >= 0) {
      fds.push_back({workers[rank].output, POLLIN, 0});
      ranks.push_back(rank);
    }
  if (!fds.empty()) ::poll(fds.data(), fds.size(), 200);
  else std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (std::size_t i = 0; i < fds.size(); ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    Worker& worker = workers[ranks[i]];
    char buffer[4096];
    ssize_t read = ::read(worker.output, buffer, sizeof(buffer));
    if (read > 0) {
      worker.pending.append(buffer, read);
      flush_lines(worker, shown_rank(options, first_rank, ranks[i]), false);
    } else {
      flush_lines(worker, shown_rank(options, first_rank, ranks[i]), true);
      ::close(worker.output);
      worker.output = -1;
    }
  }
}

// Notes the workers that ended since the last call and returns how many did. The first that
// failed is the group's end; unless the group stops on a signal anyway, the others are stopped
// (SIGTERM now, SIGKILL at `kill_deadline`).
std::size_t reap_workers(const LaunchOptions& options, int first_rank,
                         std::vector<Worker>& workers, GroupEnd& end,
                         SteadyClock::time_point& kill_deadline) {
  const int count = static_cast<int>(workers.size());
  std::size_t ended = 0;
  for (int rank = 0; rank < count; ++rank) {
    Worker& worker = workers[rank];
    if (!worker.running) continue;
    int status = 0;
    if (::waitpid(worker.pid, &status, WNOHANG) != worker.pid) continue;
    worker.running = false;
    ++ended;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code == 0 || end.failed_rank >= 0) continue;
    end.failed_rank = first_rank + rank;
    end.status = code;
    end.cause = describe_status(status);
    if (code == kExitPreempted || code == kExitInterrupted) {
      // A signal reached a worker: every rank stops after the same update on its own.
      end.on_request = true;
      continue;
    }
    if (end.on_request) continue;  // stopping on a signal anyway
    if (count > 1)
      std::cerr << "nabu: worker " << end.failed_rank << " failed (" << end.cause
                << "); stopping the other workers\n";
    signal_workers(workers, SIGTERM);
    kill_deadline = SteadyClock::now() + std::chrono::seconds(options.grace_seconds);
  }
  return ended;
}

GroupEnd run_group(const LaunchOptions& options, const std::vector<std::string>& arguments,
                   int attempt) {
  const int count = std::max(1, options.workers);
  const int port = options.workers > 0 ? free_local_port() : 0;
  std::vector<Worker> workers(count);
  for (int rank = 0; rank < count; ++rank)
    workers[rank].pid = start_worker(options, arguments, rank, port, attempt, workers[rank].output);
  // The rank of each worker's output prefix: a lone worker of a job is the rank its variables
  // say; the one process of --max-restarts alone has none.
  const int first_rank = options.workers > 0 ? 0 : DistributedEnvironment::from_environment().rank;

  GroupEnd end;
  auto kill_deadline = SteadyClock::time_point::max();
  int forwarded_interrupts = 0;
  std::size_t running = workers.size();
  while (running > 0) {
    forward_pending_signal(workers, end, forwarded_interrupts);
    forward_worker_output(options, first_rank, workers);
    running -= reap_workers(options, first_rank, workers, end, kill_deadline);
    if (SteadyClock::now() > kill_deadline) {
      signal_workers(workers, SIGKILL);
      kill_deadline = SteadyClock::time_point::max();
    }
  }
  for (int rank = 0; rank < count; ++rank)
    if (workers[rank].output >= 0) {
      flush_lines(workers[rank], shown_rank(options, first_rank, rank), true);
      ::close(workers[rank].output);
    }
  return end;
}

// On the console and in the experiment's log.
void report(const LaunchOptions& options, const std::string& line) {
  std::cerr << "nabu: " << line << std::endl;
  if (options.log_file.empty()) return;
  std::ofstream log(options.log_file, std::ios::app);
  auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  log << "[" << stamp << "] [launcher] " << line << "\n";
}

}  // namespace

int free_local_port() {
  int socket_fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (socket_fd < 0) throw Error("cannot create a socket to find a free port");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (::bind(socket_fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(socket_fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(socket_fd);
    throw Error("cannot find a free port on 127.0.0.1");
  }
  int port = ntohs(address.sin_port);
  ::close(socket_fd);
  return port;
}

int launch_workers(const LaunchOptions& options) {
  if (options.workers < 0) throw Error("--workers must be at least 1");
  if (options.max_restarts < 0) throw Error("--max-restarts must not be negative");
  struct sigaction action{}, old_int{}, old_term{}, old_usr1{};
  action.sa_handler = remember_signal;
  ::sigaction(SIGINT, &action, &old_int);
  ::sigaction(SIGTERM, &action, &old_term);
  ::sigaction(SIGUSR1, &action, &old_usr1);
  struct Restore {
    struct sigaction int_, term, usr1;
    ~Restore() {
      ::sigaction(SIGINT, &int_, nullptr);
      ::sigaction(SIGTERM, &term, nullptr);
      ::sigaction(SIGUSR1, &usr1, nullptr);
    }
  } restore{old_int, old_term, old_usr1};

  std::vector<std::string> failures;  // where each start failed
  for (int attempt = 0;; ++attempt) {
    GroupEnd end = run_group(options, attempt == 0 ? options.arguments : options.restart_arguments,
                             attempt);
    if (end.status == 0 || end.on_request) return end.status;
    std::string position = options.position ? options.position() : "";
    const std::string what = "worker " + std::to_string(end.failed_rank) + " failed (" +
                             end.cause + ")" + (position.empty() ? "" : " " + position);
    failures.push_back(position);
    if (options.max_restarts == 0) return end.status;
    // A run that ended with an error before it trained has a problem in its input: a restart
    // would repeat it.
    if (attempt == 0 && position.empty() && end.cause.rfind("exit status", 0) == 0) {
      report(options, what + " before training started; not restarting");
      return end.status;
    }
    if (attempt == options.max_restarts) {
      bool same = std::all_of(failures.begin(), failures.end(),
                              [&](const std::string& p) { return p == failures.front(); });
      report(options, what + "; " +
                          (same && !position.empty()
                               ? "it failed " + std::to_string(failures.size()) + " times " +
                                     position + " (a crash that repeats at the same step)"
                               : "it failed " + std::to_string(failures.size()) + " times") +
                          "; giving up after --max-restarts=" +
                          std::to_string(options.max_restarts) +
                          "; the last checkpoint is kept (--resume continues from it)");
      return end.status;
    }
    report(options, what + "; restart " + std::to_string(attempt + 1) + " of " +
                        std::to_string(options.max_restarts) + " from the last checkpoint");
  }
}

}  // namespace nabu
