// Runs that survive on shared clusters (CTest label `faults`): --max-restarts starts a group
// whose rank died again from the last checkpoint; SIGTERM (a preemption) stops every rank after
// the same update with a checkpoint and exit status 75, and the same command continues; two
// ranks on two "hosts" (network namespaces joined by a veth pair) train as two local ranks do,
// and a cut link is detected and restarted from.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <regex>
#include <thread>

#include "nabu/core/interrupted.h"
#include "nabu/neuralnetworks/trainers/checkpoint.h"
#include "test_helpers.h"
#include "training_fixture.h"

using namespace nabu;
using namespace nabu::testing;

namespace {

// Checkpointed every 5 updates; two stages of 30 updates.
const std::string kRun = "--max-steps=30 --set trainer.cfg:trainer:valid_frequency=5";

// The last update logged in a stage's metrics (0: none yet).
int64_t last_update(const fs::path& metrics) {
  if (!fs::exists(metrics)) return 0;
  auto losses = training_losses_by_step(metrics);
  return losses.empty() ? 0 : losses.rbegin()->first;
}

// Waits until `metrics` logged update `step` (or later); false after `seconds`.
bool wait_for_update(const fs::path& metrics, int64_t step, double seconds) {
  auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (last_update(metrics) < step) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

bool wait_for_text(const fs::path& log, const std::string& text, double seconds) {
  auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (read_text(log).find(text) == std::string::npos) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

class FaultsClusterRuns : public TrainingRun {
 protected:
  // Both stages' final parameters and val_sum.json equal those of `reference`.
  void expect_same_run(const std::string& reference, const std::string& run) {
    for (const std::string stage : {"100", "full"})
      expect_same_parameters(parameters(reference + "/" + stage + "/logdir/latest.pt"),
                             parameters(run + "/" + stage + "/logdir/latest.pt"), 0.0);
    EXPECT_EQ(read_text(dir_ / reference / "val_sum.json"), read_text(dir_ / run / "val_sum.json"));
  }
};

}  // namespace

TEST_F(FaultsClusterRuns, ARankKilledTwiceIsRestartedAndTheRunEndsBitIdentical) {
  auto reference = train("exp_ref", kRun + " --workers=2");
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  pid_t launcher = spawn_nabu("train --expdir=exp_restart --max-restarts=3 " +
                                  tiny_dc(kRun + " --workers=2"),
                              dir_.path(), dir_ / "restart.log");
  auto metrics = dir_ / "exp_restart/100/metrics.jsonl";
  std::mt19937 random(5);
  int64_t step = 0;
  for (int kill = 0; kill < 2; ++kill) {
    // A random update of the first stage, after the last kill's, and a random rank.
    step = std::uniform_int_distribution<int64_t>(step + 3, 12 + 8 * kill)(random);
    int rank = std::uniform_int_distribution<int>(0, 1)(random);
    ASSERT_TRUE(wait_for_update(metrics, step, 120)) << read_text(dir_ / "restart.log");
    auto workers = children_of(launcher);
    ASSERT_EQ(workers.size(), 2u) << read_text(dir_ / "restart.log");
    int lines = count_lines_with(metrics, "\"type\":\"train\"");
    auto killed_at = Clock::now();
    ASSERT_EQ(::kill(workers[rank], SIGKILL), 0);
    // Training again: the restarted group logs an update.
    auto deadline = Clock::now() + std::chrono::seconds(120);
    while (count_lines_with(metrics, "\"type\":\"train\"") <= lines && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_LT(Clock::now(), deadline) << read_text(dir_ / "restart.log");
    std::cout << "rank " << rank << " killed after update " << step
              << ": the group trained again " << seconds_since(killed_at) << " s later\n";
  }
  auto [exited, status] = wait_child(launcher);
  auto log = read_text(dir_ / "restart.log");
  ASSERT_TRUE(exited && status == 0) << log;
  EXPECT_NE(log.find("(killed by SIGKILL)"), std::string::npos) << log;
  EXPECT_NE(log.find("restart 1 of 3 from the last checkpoint"), std::string::npos) << log;
  EXPECT_NE(log.find("restart 2 of 3 from the last checkpoint"), std::string::npos) << log;
  EXPECT_EQ(log.find("restart 3 of 3"), std::string::npos) << log;
  // The experiment's log keeps the restarts.
  EXPECT_NE(read_text(dir_ / "exp_restart/run.log").find("restart 2 of 3"), std::string::npos);
  expect_same_run("exp_ref", "exp_restart");
}

TEST_F(FaultsClusterRuns, ACrashThatRepeatsAtTheSameStepGivesUpAfterMaxRestarts) {
  auto started = Clock::now();
  auto result = run_shell("env NABU_TEST_ABORT_AT_STEP=5 '" + std::string(NABU_BINARY) +
                              "' train --expdir=exp_crash --max-restarts=2 " + tiny_dc(kRun),
                          dir_.path());
  EXPECT_LT(seconds_since(started), 120.0);
  EXPECT_EQ(result.exit_code, 128 + SIGABRT) << result.output;
  EXPECT_NE(result.output.find("worker 0 failed (killed by SIGABRT) after update 4 of stage 100; "
                               "restart 1 of 2"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("restart 2 of 2"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("it failed 3 times after update 4 of stage 100 (a crash that "
                               "repeats at the same step); giving up after --max-restarts=2"),
            std::string::npos)
      << result.output;
  // The checkpoint of update 0 (the first validation) is kept.
  EXPECT_NO_THROW(load_checkpoint(dir_ / "exp_crash/100/logdir/latest.pt", {}));

  // An error before training (here a recipe key that does not exist) is not restarted.
  auto bad = run_nabu("train --expdir=exp_bad --max-restarts=2 " +
                          tiny_dc("--set trainer.cfg:trainer:batch_size=-3"),
                      dir_.path());
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("before training started; not restarting"), std::string::npos)
      << bad.output;
  auto negative = run_nabu("train --expdir=exp_neg --max-restarts=-1 " + tiny_dc(""), dir_.path());
  EXPECT_EQ(negative.exit_code, 1);
  EXPECT_NE(negative.output.find("--max-restarts must not be negative"), std::string::npos)
      << negative.output;
}

TEST_F(FaultsClusterRuns, SigtermStopsEveryRankAfterOneUpdateAndTheSameCommandContinues) {
  auto reference = train("exp_ref", kRun + " --workers=2");
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  // The command of config/computing/slurm.sbatch: --resume from the first start.
  const std::string command = "train --expdir=exp_term --resume " + tiny_dc(kRun + " --workers=2");
  auto metrics = dir_ / "exp_term/100/metrics.jsonl";

  // 1. SIGTERM to rank 1 alone: both ranks stop after the same update, the chief writes the
  // checkpoint, and the run ends with the status a job script requeues on.
  pid_t launcher = spawn_nabu(command, dir_.path(), dir_ / "term1.log");
  ASSERT_TRUE(wait_for_update(metrics, 7, 120)) << read_text(dir_ / "term1.log");
  auto workers = children_of(launcher);
  ASSERT_EQ(workers.size(), 2u);
  ASSERT_EQ(::kill(workers[1], SIGTERM), 0);
  auto [exited, status] = wait_child(launcher);
  auto log = read_text(dir_ / "term1.log");
  ASSERT_TRUE(exited) << log;
  EXPECT_EQ(status, kExitPreempted) << log;
  std::smatch match;
  ASSERT_TRUE(std::regex_search(log, match, std::regex("stopped by SIGTERM after step ([0-9]+) of "
                                                       "stage 100: rank 0 wrote the checkpoint")))
      << log;
  const std::string stopped_step = match[1];
  EXPECT_NE(log.find("stopped by a signal to another rank after step " + stopped_step +
                     " of stage 100: checkpoint written to"),
            std::string::npos)
      << log;
  EXPECT_EQ(std::to_string(load_checkpoint(dir_ / "exp_term/100/logdir/latest.pt", {}).state.step),
            stopped_step);
  EXPECT_EQ(log.find("restart"), std::string::npos) << "a preemption is not restarted\n" << log;

  // 2. The scheduler's SIGTERM to the whole job, then its SIGKILL at a random moment (during the
  // checkpoint write, or before): what was written before stays usable.
  std::mt19937 random(3);
  for (int round = 0; round < 3; ++round) {
    int64_t before = last_update(metrics);
    launcher = spawn_nabu(command, dir_.path(), dir_ / ("term_kill" + std::to_string(round) + ".log"));
    ASSERT_TRUE(wait_for_update(metrics, before + 2, 120));
    workers = children_of(launcher);
    ::kill(launcher, SIGTERM);
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 400)(random)));
    ::kill(launcher, SIGKILL);
    for (pid_t worker : workers) ::kill(worker, SIGKILL);
    wait_child(launcher);
  }
  // 3. The same command again runs to the end: the result of the uninterrupted run.
  auto rerun = run_nabu(command, dir_.path());
  ASSERT_EQ(rerun.exit_code, 0) << rerun.output;
  expect_same_run("exp_ref", "exp_term");
}

// Two network namespaces joined by a veth pair: two "hosts" with their own addresses on one
// machine. Needs root and iproute2.
class TwoHosts {
 public:
  TwoHosts() {
    const std::string id = std::to_string(::getpid() % 100000);
    names_ = {"nabu" + id + "a", "nabu" + id + "b"};
    links_ = {"nb" + id + "a", "nb" + id + "b"};
    std::string setup =
        "ip netns add " + names_[0] + " && ip netns add " + names_[1] + " && ip link add " +
        links_[0] + " type veth peer name " + links_[1] + " && ip link set " + links_[0] +
        " netns " + names_[0] + " && ip link set " + links_[1] + " netns " + names_[1];
    for (int host = 0; host < 2; ++host)
      setup += " && ip -n " + names_[host] + " addr add " + address(host) + "/24 dev " +
               links_[host] + " && ip -n " + names_[host] + " link set " + links_[host] +
               " up && ip -n " + names_[host] + " link set lo up";
    auto result = run_shell(setup, fs::current_path());
    ready_ = result.exit_code == 0;
    why_ = result.output;
  }
  ~TwoHosts() {
    for (const auto& name : names_) run_shell("ip netns del " + name, fs::current_path());
  }
  bool ready() const { return ready_; }
  const std::string& why() const { return why_; }
  static std::string address(int host) { return "10.231.7." + std::to_string(host + 1); }
  // `command` run on `host`.
  std::string on(int host, const std::string& command) const {
    return "ip netns exec " + names_[host] + " " + command;
  }
  // The link of host 0 down or up: the "cable" between the hosts.
  void set_link(bool up) const {
    run_shell("ip -n " + names_[0] + " link set " + links_[0] + (up ? " up" : " down"),
              fs::current_path());
  }

 private:
  std::vector<std::string> names_, links_;
  bool ready_ = false;
  std::string why_;
};

TEST_F(FaultsClusterRuns, TwoRanksOnTwoHostsTrainAsTwoLocalRanksAndSurviveACutLink) {
  TwoHosts hosts;
  if (!hosts.ready()) GTEST_SKIP() << "cannot make network namespaces (root and iproute2 "
                                      "needed): " << hosts.why();
  auto local = train("exp_local", kRun + " --workers=2");
  ASSERT_EQ(local.exit_code, 0) << local.output;
  int port = 20000 + ::getpid() % 20000;
  // One rank per host, as a job scheduler starts them: the rendezvous on host 0's address.
  auto rank = [&](int r, const std::string& expdir, const std::string& extra) {
    return hosts.on(r, "env MASTER_ADDR=" + TwoHosts::address(0) + " MASTER_PORT=" +
                           std::to_string(port) + " WORLD_SIZE=2 RANK=" + std::to_string(r) +
                           " LOCAL_RANK=0 '" + std::string(NABU_BINARY) + "' train --expdir=" +
                           expdir + " --dist-timeout=60 " + extra + " " + tiny_dc(kRun));
  };
  pid_t second = spawn_shell(rank(1, "exp_hosts", ""), dir_.path(), dir_ / "hosts1.log");
  auto first = run_shell(rank(0, "exp_hosts", ""), dir_.path());
  auto [second_exited, second_status] = wait_child(second);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  ASSERT_TRUE(second_exited && second_status == 0) << read_text(dir_ / "hosts1.log");
  EXPECT_NE(first.output.find("collectives over " + TwoHosts::address(0)), std::string::npos)
      << first.output;
  EXPECT_NE(read_text(dir_ / "hosts1.log").find("collectives over " + TwoHosts::address(1)),
            std::string::npos);
  expect_same_run("exp_local", "exp_hosts");

  // The cable cut mid-run: each rank names the other within the liveness timeout; --max-restarts
  // starts both again, and once the link is back they meet and finish the same run.
  ++port;
  const std::string restarting = "--max-restarts=1 --liveness-timeout=5";
  std::vector<pid_t> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.push_back(spawn_shell(rank(r, "exp_cut", restarting), dir_.path(),
                                dir_ / ("cut" + std::to_string(r) + ".log")));
  bool trained = wait_for_update(dir_ / "exp_cut/100/metrics.jsonl", 8, 120);
  auto cut_at = Clock::now();
  hosts.set_link(false);
  bool named = trained &&
               wait_for_text(dir_ / "cut0.log", "rank 1 on ", 30) &&
               wait_for_text(dir_ / "cut1.log", "rank 0 on ", 30);
  double detected = seconds_since(cut_at);
  hosts.set_link(true);
  std::vector<std::pair<bool, int>> ends;
  for (pid_t pid : ranks) ends.push_back(wait_child(pid));
  auto log0 = read_text(dir_ / "cut0.log"), log1 = read_text(dir_ / "cut1.log");
  ASSERT_TRUE(trained) << log0;
  ASSERT_TRUE(named) << log0 << log1;
  std::cout << "cut link detected by both ranks " << detected << " s after the cut\n";
  EXPECT_LE(detected, 5 + 10.0);
  EXPECT_NE(log0.find("rank 1 on "), std::string::npos) << log0;
  EXPECT_NE(log0.find("(" + TwoHosts::address(1) + ") stopped sending heartbeats"),
            std::string::npos)
      << log0;
  for (const auto& log : {log0, log1})
    EXPECT_NE(log.find("restart 1 of 1 from the last checkpoint"), std::string::npos) << log;
  for (const auto& [exited, status] : ends) EXPECT_TRUE(exited && status == 0) << log0 << log1;
  expect_same_run("exp_local", "exp_cut");
}

TEST_F(FaultsClusterRuns, SlurmTemplateRequeuesAPreemptedJobAndTheRequeuedJobResumes) {
  // srun and scontrol stand-ins: srun runs the program in place, scontrol notes what it is asked.
  fs::create_directories(dir_ / "bin");
  write_text(dir_ / "bin/srun", "#!/bin/sh\nwhile [ \"${1#--}\" != \"$1\" ]; do shift; done\n"
                                "exec \"$@\"\n");
  write_text(dir_ / "bin/scontrol", "#!/bin/sh\necho \"$@\" >> scontrol.txt\n");
  fs::permissions(dir_ / "bin/srun", fs::perms::owner_all);
  fs::permissions(dir_ / "bin/scontrol", fs::perms::owner_all);
  // The template gives --recipe and --threads itself.
  const std::string own = "--recipe=" + dc_recipe() + " --threads=1 ";
  const std::string options = tiny_dc(kRun);
  ASSERT_EQ(options.rfind(own, 0), 0u) << options;
  std::string quoted;  // for NABU_TRAIN_ARGS inside double quotes
  for (char c : options.substr(own.size())) quoted += c == '"' ? std::string("\\\"") : std::string(1, c);
  const std::string job = "env PATH=\"" + (dir_ / "bin").string() + ":$PATH\" SLURM_JOB_ID=4242 "
                          "RECIPE=" + dc_recipe() + " EXPDIR=exp_job NABU='" +
                          std::string(NABU_BINARY) + "' NABU_TRAIN_ARGS=\"" + quoted + "\" "
                          "bash '" + (source_dir() / "config/computing/slurm.sbatch").string() + "'";
  // The job runs from the project root, where the template finds slurm_step.sh; the recipe's
  // data paths are relative to the corpus folder: link what the job reads.
  auto root = dir_ / "root";
  fs::create_directories(root / "config");
  fs::create_directory_symlink(source_dir() / "config/computing", root / "config/computing");
  fs::create_directory_symlink(dir_ / "data", root / "data");

  pid_t script = spawn_shell(job, root, dir_ / "job1.log");
  ASSERT_TRUE(wait_for_update(root / "exp_job/100/metrics.jsonl", 4, 120)) << read_text(dir_ / "job1.log");
  // The preemption: Slurm signals the batch shell and the step's processes.
  auto step = children_of(script);
  ASSERT_EQ(step.size(), 1u) << read_text(dir_ / "job1.log");
  ::kill(script, SIGTERM);
  for (pid_t pid : step) ::kill(pid, SIGTERM);
  auto [exited, status] = wait_child(script);
  auto log = read_text(dir_ / "job1.log");
  EXPECT_TRUE(exited && status == kExitPreempted) << status << "\n" << log;
  EXPECT_NE(log.find("stopped by SIGTERM after step"), std::string::npos) << log;
  EXPECT_EQ(read_text(root / "scontrol.txt"), "requeue 4242\n") << log;

  // The requeued job: the same script, which resumes by itself and finishes.
  auto requeued = run_shell(job, root);
  EXPECT_EQ(requeued.exit_code, 0) << requeued.output;
  EXPECT_NE(requeued.output.find("resuming the experiment in exp_job"), std::string::npos)
      << requeued.output;
  EXPECT_EQ(read_text(root / "scontrol.txt"), "requeue 4242\n");
  EXPECT_TRUE(fs::exists(root / "exp_job/full/model/model.pt"));
}
