#include "nabu/distributed/process_group.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL  // defined by the CMake package of a LibTorch built with NCCL
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

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

std::string host_name() {
  char name[256] = {0};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

bool is_loopback(const std::string& address) {
  return address == "localhost" || address.rfind("127.", 0) == 0;
}

// The address of this host on the route to `host` (the rendezvous host): a UDP socket connected
// there (nothing is sent) is bound to it. Empty when the host cannot be resolved or reached.
std::string local_address_towards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found)
    return "";
  std::string address;
  int socket_fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (socket_fd >= 0 && ::connect(socket_fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t length = sizeof(local);
    char text[INET_ADDRSTRLEN] = {0};
    if (::getsockname(socket_fd, reinterpret_cast<sockaddr*>(&local), &length) == 0 &&
        ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text)))
      address = text;
  }
  if (socket_fd >= 0) ::close(socket_fd);
  ::freeaddrinfo(found);
  return address;
}

// Where Gloo listens and what it tells the other ranks: GLOO_SOCKET_IFNAME's interface when set
// (as in PyTorch), 127.0.0.1 for a rendezvous on loopback, else this host's address on the route
// to the rendezvous host - not the address its host name resolves to, which is often 127.0.1.1
// or an interface the others cannot reach. `address` receives what was chosen.
auto gloo_device(const DistributedEnvironment& environment, std::string& address) {
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME"); interface && *interface) {
    address = std::string("interface ") + interface;
    return c10d::ProcessGroupGloo::createDeviceForInterface(interface);
  }
  address = is_loopback(environment.master_addr)
                ? "127.0.0.1"
                : local_address_towards(environment.master_addr, environment.master_port);
  if (address.empty()) return c10d::ProcessGroupGloo::createDefaultDevice();
  return c10d::ProcessGroupGloo::createDeviceForHostname(address);
}

double process_cpu_seconds() {
  timespec time{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time);
  return time.tv_sec + time.tv_nsec * 1e-9;
}

using SteadyClock = std::chrono::steady_clock;

// The heartbeat and the watch over the other ranks (see make_communicator). Its own store
// client with a short timeout, so a frozen store (a stopped chief) cannot block the check.
class LivenessMonitor {
 public:
  LivenessMonitor(const DistributedEnvironment& environment, std::chrono::seconds timeout,
                  const std::string& address)
      : rank_(environment.rank), world_size_(environment.world_size), timeout_(timeout),
        host_(host_name() + (address.empty() || is_loopback(address) ? "" : " (" + address + ")")),
        peers_(environment.world_size) {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(environment.master_port);
    options.isServer = false;
    options.timeout = std::chrono::seconds(5);
    store_ = c10::make_intrusive<c10d::TCPStore>(environment.master_addr, options);
    auto now = SteadyClock::now();
    for (auto& peer : peers_) peer.beat_seen = peer.progress_seen = now;
    store_answered_.store(now.time_since_epoch().count());
    check(0);  // the first heartbeat now, not a second later
    thread_ = std::thread([this] { loop(); });
    // A store call on a cut link can block far longer than its timeout: the silence of the
    // store is judged apart from the calls.
    if (rank_ != 0) watchdog_ = std::thread([this] { watch_store(); });
  }
  ~LivenessMonitor() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    thread_.join();
    if (watchdog_.joinable()) watchdog_.join();
    // A rank that ends normally says so, so the others do not take its silence for a hang.
    try {
      const std::string done = "done";
      store_->set(key(rank_), std::vector<uint8_t>(done.begin(), done.end()));
    } catch (const std::exception&) {
    }
  }
  void tick() { progress_.fetch_add(1, std::memory_order_relaxed); }
  void set_waiting(bool waiting) { waiting_.store(waiting, std::memory_order_relaxed); }

 private:
  struct Peer {
    std::string last_beat, host = "?";
    int64_t progress = -1;
    double cpu = -1;
    bool waiting = false, done = false;
    SteadyClock::time_point beat_seen, progress_seen;
  };

  void loop() {
    int64_t beat = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    while (!changed_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) {
      lock.unlock();
      check(++beat);
      lock.lock();
    }
  }

  void watch_store() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!changed_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; }))
      if (store_silent(SteadyClock::now())) {
        std::string host;
        {
          std::lock_guard<std::mutex> host_lock(chief_mutex_);
          host = chief_host_;
        }
        fail("rank 0 on " + host + " (the rendezvous store) does not answer");
      }
  }

  bool store_silent(SteadyClock::time_point now) const {
    auto answered = SteadyClock::time_point(SteadyClock::duration(store_answered_.load()));
    return now - answered > timeout_ && !chief_done_.load();
  }

  void check(int64_t beat) {
    auto now = SteadyClock::now();
    std::string mine = std::to_string(beat) + " " + std::to_string(progress_.load()) + " " +
                       (waiting_.load() ? "1" : "0") + " " +
                       std::to_string(static_cast<int64_t>(process_cpu_seconds() * 1000)) + " " +
                       host_;
    try {
      store_->set(key(rank_), std::vector<uint8_t>(mine.begin(), mine.end()));
      for (int r = 0; r < world_size_; ++r) {
        if (r == rank_ || !store_->check({key(r)})) continue;
        auto bytes = store_->get(key(r));
        observe(peers_[r], std::string(bytes.begin(), bytes.end()), now);
      }
      store_answered_.store(now.time_since_epoch().count());
      std::lock_guard<std::mutex> host_lock(chief_mutex_);
      chief_host_ = peers_[0].host;
      chief_done_.store(peers_[0].done);
    } catch (const std::exception&) {
      // The store does not answer (its host, rank 0, is stopped or gone): judged below.
    }
    if (store_silent(now))
      fail("rank 0 on " + peers_[0].host + " (the rendezvous store) does not answer");
    for (int r = 0; r < world_size_; ++r) {
      if (r == rank_ || peers_[r].done) continue;
      const Peer& peer = peers_[r];
      if (now - peer.beat_seen > timeout_)
        fail("rank " + std::to_string(r) + " on " + peer.host +
             (peer.last_beat.empty() ? " never sent a heartbeat" : " stopped sending heartbeats"));
      if (now - peer.progress_seen > timeout_)
        fail("rank " + std::to_string(r) + " on " + peer.host +
             " made no progress (no training step, no computation, no waiting for the others)");
    }
  }

  static void observe(Peer& peer, const std::string& text, SteadyClock::time_point now) {
    if (text == peer.last_beat) return;
    peer.last_beat = text;
    peer.beat_seen = now;
    if (text == "done") {
      peer.done = true;
      return;
    }
    std::istringstream in(text);
    int64_t beat = 0, progress = 0, cpu_ms = 0;
    int waiting = 0;
    in >> beat >> progress >> waiting >> cpu_ms;
    std::getline(in >> std::ws, peer.host);  // the rest: "name (address)"
    double cpu = cpu_ms / 1000.0;
    // Alive and working: a step, half a second of CPU time, or waiting in a collective.
    if (progress != peer.progress || waiting || cpu - peer.cpu >= 0.5) {
      peer.progress = progress;
      peer.cpu = cpu;
      peer.progress_seen = now;
    }
    peer.waiting = waiting != 0;
  }

  [[noreturn]] void fail(const std::string& what) {
    std::string message = what + " for " + std::to_string(timeout_.count()) +
                          " s (--liveness-timeout); stopping this rank (" + std::to_string(rank_) +
                          " on " + host_ + "); the chief's last checkpoint is kept, continue with "
                          "--resume";
    logger().error("{}", message);
    logger().flush();
    std::cerr << "nabu train: error: " << message << std::endl;
    std::_Exit(1);
  }

  static std::string key(int rank) { return "nabu/liveness/" + std::to_string(rank); }

  int rank_, world_size_;
  std::chrono::seconds timeout_;
  std::string host_;
  c10::intrusive_ptr<c10d::TCPStore> store_;
  std::vector<Peer> peers_;
  std::atomic<SteadyClock::rep> store_answered_{0};  // when the store last answered
  std::atomic<bool> chief_done_{false};
  std::mutex chief_mutex_;
  std::string chief_host_ = "?";
  std::atomic<int64_t> progress_{0};
  std::atomic<bool> waiting_{false};
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stop_ = false;
  std::thread thread_, watchdog_;
};

class GlooCommunicator : public Communicator {
 public:
  GlooCommunicator(const DistributedEnvironment& environment, std::chrono::seconds timeout,
                   std::chrono::seconds liveness_timeout, const c10::Device& device)
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
      std::string address;
      options->devices.push_back(gloo_device(environment, address));
      if (!is_loopback(address))
        logger().info("rank {}: collectives over {}", rank_, address.empty() ? host_name() : address);
      group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, rank_, world_size_, options);
#ifdef USE_C10D_NCCL
      if (device.is_cuda() && !gpu_shared(device)) {
        auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
        nccl_options->timeout = timeout;
        nccl_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(
            c10::make_intrusive<c10d::PrefixStore>("nccl/", store_), rank_, world_size_,
            nccl_options);
      }
#endif
      if (liveness_timeout.count() > 0)
        liveness_ = std::make_unique<LivenessMonitor>(environment, liveness_timeout, address);
    } catch (const std::exception& e) {
      throw Error("distributed rendezvous at " + environment.master_addr + ":" +
                  std::to_string(environment.master_port) + " failed for rank " +
                  std::to_string(rank_) + " of " + std::to_string(world_size_) + ": " +
                  first_line(e.what()));
    }
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }

  // Whether two ranks compute on one GPU (more ranks on a host than it has GPUs): NCCL refuses
  // that ("invalid usage"), so then no rank uses it and Gloo copies GPU tensors through the host.
  // Every rank counts itself on its host and GPU in the store and all agree on the answer.
  bool gpu_shared(const c10::Device& device) {
    const std::string key = "nabu/gpu/" + host_name() + "/" + std::to_string(device.index());
    store_->add(key, 1);
    group_->barrier()->wait();
    auto shared = torch::tensor({store_->add(key, 0) > 1 ? 1.0 : 0.0}, torch::kFloat64);
    std::vector<at::Tensor> one{shared};
    group_->allreduce(one)->wait();
    if (shared.item<double>() == 0) return false;
    if (rank_ == 0)
      logger().warn("ranks share a GPU (more ranks on a machine than GPUs): gradients are summed "
                   "through the host (Gloo), not NCCL");
    return true;
  }

  void all_reduce_sum(std::vector<torch::Tensor>& tensors) override {
    for (auto& tensor : tensors) {
      std::vector<at::Tensor> one{tensor};
      wait(group_for(tensor).allreduce(one), "all-reduce");
    }
  }

  void broadcast(std::vector<torch::Tensor>& tensors, int root) override {
    c10d::BroadcastOptions options;
    options.rootRank = root;
    for (auto& tensor : tensors) {
      std::vector<at::Tensor> one{tensor};
      wait(group_for(tensor).broadcast(one, options), "broadcast");
    }
  }

  void barrier() override { wait(group_->barrier(), "barrier"); }
  void tick() override {
    if (liveness_) liveness_->tick();
  }

 private:
  // NCCL for GPU tensors where there is one; Gloo otherwise (it copies GPU tensors through the
  // host).
#ifdef USE_C10D_NCCL
  c10d::Backend& group_for(const torch::Tensor& tensor) {
    if (nccl_ && tensor.is_cuda()) return *nccl_;
    return *group_;
  }
#else
  c10d::ProcessGroupGloo& group_for(const torch::Tensor&) { return *group_; }
#endif

  static std::string first_line(const std::string& text) {
    return text.substr(0, text.find('\n'));
  }

  void wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what) {
    // Waiting for the others is not a hang of this rank (the liveness check).
    struct Waiting {
      LivenessMonitor* monitor;
      explicit Waiting(LivenessMonitor* m) : monitor(m) {
        if (monitor) monitor->set_waiting(true);
      }
      ~Waiting() {
        if (monitor) {
          monitor->set_waiting(false);
          monitor->tick();
        }
      }
    } waiting(liveness_.get());
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
#ifdef USE_C10D_NCCL
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl_;
#endif
  std::unique_ptr<LivenessMonitor> liveness_;  // destroyed first: it uses the store
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
                                                std::chrono::seconds timeout,
                                                std::chrono::seconds liveness_timeout,
                                                const c10::Device& device) {
  if (!environment.distributed()) return std::make_unique<LocalCommunicator>();
  return std::make_unique<GlooCommunicator>(environment, timeout, liveness_timeout, device);
}

}  // namespace nabu
