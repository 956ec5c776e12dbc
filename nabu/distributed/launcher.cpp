#include "nabu/distributed/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <thread>

#include "nabu/core/error.h"

namespace nabu {

namespace {

volatile sig_atomic_t forwarded_signal = 0;
void remember_signal(int signal_number) { forwarded_signal = signal_number; }

struct Worker {
  pid_t pid = -1;
  int output = -1;  // read end of the worker's stdout+stderr
  std::string pending;
  bool running = true;
  int status = 0;
};

void flush_lines(Worker& worker, int rank, bool everything) {
  std::size_t newline;
  while ((newline = worker.pending.find('\n')) != std::string::npos) {
    std::cerr << "[rank " << rank << "] " << worker.pending.substr(0, newline) << "\n";
    worker.pending.erase(0, newline + 1);
  }
  if (everything && !worker.pending.empty()) {
    std::cerr << "[rank " << rank << "] " << worker.pending << "\n";
    worker.pending.clear();
  }
  std::cerr.flush();
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

int launch_local_workers(const LaunchOptions& options) {
  if (options.workers < 1) throw Error("--workers must be at least 1");
  int port = free_local_port();
  std::vector<Worker> workers(options.workers);
  for (int rank = 0; rank < options.workers; ++rank) {
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0) throw Error("cannot create a pipe for worker " + std::to_string(rank));
    pid_t pid = ::fork();
    if (pid < 0) throw Error("cannot start worker " + std::to_string(rank));
    if (pid == 0) {
      ::dup2(pipe_fds[1], STDOUT_FILENO);
      ::dup2(pipe_fds[1], STDERR_FILENO);
      ::close(pipe_fds[0]);
      ::close(pipe_fds[1]);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(options.workers).c_str(), 1);
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      std::vector<std::string> arguments{"nabu"};
      arguments.insert(arguments.end(), options.arguments.begin(), options.arguments.end());
      std::vector<char*> argv;
      for (auto& argument : arguments) argv.push_back(argument.data());
      argv.push_back(nullptr);
      ::execv("/proc/self/exe", argv.data());
      std::perror("nabu: cannot start a worker");
      ::_exit(127);
    }
    ::close(pipe_fds[1]);
    workers[rank].pid = pid;
    workers[rank].output = pipe_fds[0];
  }
  struct sigaction action{}, old_int{}, old_term{};
  action.sa_handler = remember_signal;
  ::sigaction(SIGINT, &action, &old_int);
  ::sigaction(SIGTERM, &action, &old_term);

  int failed_rank = -1, failed_status = 0;
  auto stop_deadline = std::chrono::steady_clock::time_point::max();
  auto stop_all = [&](int signal_number) {
    for (auto& worker : workers)
      if (worker.running) ::kill(worker.pid, signal_number);
  };
  std::size_t running = workers.size();
  while (running > 0) {
    if (forwarded_signal) {
      stop_all(forwarded_signal);
      forwarded_signal = 0;
      if (stop_deadline == std::chrono::steady_clock::time_point::max())
        stop_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options.grace_seconds);
    }
    std::vector<pollfd> fds;
    std::vector<int> ranks;
    for (int rank = 0; rank < options.workers; ++rank)
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
      ssize_t count = ::read(worker.output, buffer, sizeof(buffer));
      if (count > 0) {
        worker.pending.append(buffer, count);
        flush_lines(worker, ranks[i], false);
      } else {
        flush_lines(worker, ranks[i], true);
        ::close(worker.output);
        worker.output = -1;
      }
    }
    for (int rank = 0; rank < options.workers; ++rank) {
      Worker& worker = workers[rank];
      if (!worker.running) continue;
      int status = 0;
      if (::waitpid(worker.pid, &status, WNOHANG) != worker.pid) continue;
      worker.running = false;
      --running;
      int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (code != 0 && failed_rank < 0) {
        failed_rank = rank;
        failed_status = code;
        std::cerr << "nabu: worker " << rank << " failed (exit status " << code
                  << "); stopping the other workers\n";
        stop_all(SIGTERM);
        stop_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options.grace_seconds);
      }
    }
    if (std::chrono::steady_clock::now() > stop_deadline) {
      stop_all(SIGKILL);
      stop_deadline = std::chrono::steady_clock::time_point::max();
    }
  }
  for (auto& worker : workers)
    if (worker.output >= 0) {
      flush_lines(worker, static_cast<int>(&worker - workers.data()), true);
      ::close(worker.output);
    }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  return failed_rank < 0 ? 0 : failed_status;
}

}  // namespace nabu
