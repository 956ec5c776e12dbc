// Fault injection (CTest label `faults`): what users' machines do to a run - SIGKILL at any
// moment, a stopped or stuck worker, a checkpoint cut short, a full disk, a damaged store, a
// corrupt wav. Each ends with a clear error or a correct resume, and nothing written before is
// lost.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <random>
#include <thread>

#include "nabu/neuralnetworks/trainers/checkpoint.h"
#include "test_helpers.h"
#include "training_fixture.h"

using namespace nabu;
using namespace nabu::testing;

namespace {

std::string file_bytes(const fs::path& path) { return read_text(path); }

class Faults : public TrainingRun {
 protected:
  // Starts `nabu train` into `expdir` and SIGKILLs it once its first stage has logged
  // `validations` validations (each one writes a checkpoint).
  void train_and_kill(const std::string& expdir, const std::string& extra, int validations) {
    pid_t pid = spawn_nabu("train --expdir=" + expdir + " " + tiny_dc(extra), dir_.path(),
                           dir_ / (expdir + ".log"));
    bool reached = wait_for_lines(dir_ / expdir / "100/metrics.jsonl", "\"type\":\"validation\"",
                                  validations, 120);
    ::kill(pid, SIGKILL);
    wait_child(pid);
    ASSERT_TRUE(reached) << read_text(dir_ / (expdir + ".log"));
  }
};

const std::string kCheckpointed = "--max-steps=30 --set trainer.cfg:trainer:valid_frequency=5";

}  // namespace

TEST_F(Faults, SigkillAtRandomMomentsThenResumeEndsBitIdentical) {
  auto reference = train("exp_ref", kCheckpointed);
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  // The same command, killed three times at random moments (seeded) and rerun with --resume
  // each time, as a job scheduler does after preemptions; then run to the end.
  std::mt19937 random(11);
  std::uniform_real_distribution<double> delay(0.05, 2.5);
  const std::string command = "train --expdir=exp_kill " + tiny_dc(kCheckpointed);
  for (int round = 0; round < 3; ++round) {
    pid_t pid = spawn_nabu(command + (round ? " --resume" : ""), dir_.path(),
                           dir_ / ("kill" + std::to_string(round) + ".log"));
    std::this_thread::sleep_for(std::chrono::duration<double>(delay(random)));
    ::kill(pid, SIGKILL);
    wait_child(pid);
  }
  auto resumed = run_nabu(command + " --resume", dir_.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  for (const std::string stage : {"100", "full"})
    expect_same_parameters(parameters("exp_ref/" + stage + "/logdir/latest.pt"),
                           parameters("exp_kill/" + stage + "/logdir/latest.pt"), 0.0);
  EXPECT_EQ(read_text(dir_ / "exp_ref/val_sum.json"), read_text(dir_ / "exp_kill/val_sum.json"));
}

TEST_F(Faults, DeletedLatestCheckpointResumesFromThePreviousOneAtItsStep) {
  train_and_kill("exp_prev", kCheckpointed, 4);
  auto logdir = dir_ / "exp_prev/100/logdir";
  ASSERT_TRUE(fs::exists(logdir / "latest.pt.prev"));
  int64_t previous_step = load_checkpoint(logdir / "latest.pt.prev", {}).state.step;
  fs::remove(logdir / "latest.pt");
  auto resumed = run_nabu("train --expdir=exp_prev --resume --threads=1", dir_.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming from " + (fs::path("exp_prev/100/logdir") /
                                                     "latest.pt.prev").string() +
                                ": latest.pt is missing"),
            std::string::npos)
      << resumed.output;
  EXPECT_NE(resumed.output.find("[100] resumed at step " + std::to_string(previous_step) + " "),
            std::string::npos)
      << resumed.output;
}

TEST_F(Faults, TruncatedLatestCheckpointFallsBackWithOneLine) {
  train_and_kill("exp_cut", kCheckpointed, 3);
  auto latest = dir_ / "exp_cut/100/logdir/latest.pt";
  fs::resize_file(latest, fs::file_size(latest) / 2);
  auto resumed = run_nabu("train --expdir=exp_cut --resume --threads=1", dir_.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("latest.pt is unreadable"), std::string::npos) << resumed.output;
  EXPECT_NO_THROW(load_checkpoint(latest, {}));  // rewritten whole
}

TEST_F(Faults, FullDiskWhileWritingACheckpointKeepsThePreviousOne) {
  // A first run leaves good checkpoints; the resumed run may write files of at most 64 KB
  // (ulimit -f): its checkpoints (bigger, with 64 units) cannot be written.
  const std::string big = kCheckpointed + " --set model.cfg:main:num_units=64";
  train_and_kill("exp_full", big, 2);
  auto latest = dir_ / "exp_full/100/logdir/latest.pt";
  ASSERT_GT(fs::file_size(latest), 64u * 1024) << "make the model larger";
  std::string before = file_bytes(latest);
  auto limited = run_shell("bash -c \"ulimit -f 64 && exec '" + std::string(NABU_BINARY) +
                               "' train --expdir=exp_full --resume --threads=1\"",
                           dir_.path());
  EXPECT_EQ(limited.exit_code, 1) << limited.output;
  EXPECT_NE(limited.output.find("checkpoint"), std::string::npos) << limited.output;
  EXPECT_NE(limited.output.find("the previous checkpoint is kept"), std::string::npos)
      << limited.output;
  EXPECT_EQ(file_bytes(latest), before);
  for (const auto& entry : fs::directory_iterator(latest.parent_path()))
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos)
        << entry.path() << " left behind";
  auto resumed = run_nabu("train --expdir=exp_full --resume --threads=1", dir_.path());
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
}

TEST_F(Faults, SigstopOfOneOfTwoWorkersEndsTheRunWithinThirtySeconds) {
  pid_t launcher = spawn_nabu("train --expdir=exp_stop --workers=2 " +
                                  tiny_dc("--max-steps=400 --set trainer.cfg:trainer:valid_frequency=5"),
                              dir_.path(), dir_ / "stop.log");
  ASSERT_TRUE(wait_for_lines(dir_ / "exp_stop/100/metrics.jsonl", "\"type\":\"validation\"", 2, 120))
      << read_text(dir_ / "stop.log");
  auto workers = children_of(launcher);
  ASSERT_EQ(workers.size(), 2u) << read_text(dir_ / "stop.log");
  auto stopped_at = Clock::now();
  ASSERT_EQ(::kill(workers[1], SIGSTOP), 0);
  auto [exited, status] = wait_child(launcher);
  double seconds = seconds_since(stopped_at);
  for (pid_t worker : workers) ::kill(worker, SIGKILL);  // nothing may be left running
  EXPECT_TRUE(exited && status != 0) << exited << " " << status;
  EXPECT_LE(seconds, 30.0);
  std::cout << "run ended " << seconds << " s after SIGSTOP of rank 1\n";
  auto log = read_text(dir_ / "stop.log");
  EXPECT_NE(log.find("rank 1 on "), std::string::npos) << log;
  EXPECT_NE(log.find("heartbeat"), std::string::npos) << log;
  EXPECT_NO_THROW(load_checkpoint(dir_ / "exp_stop/100/logdir/latest.pt", {}));
}

TEST_F(Faults, AWorkerStuckWithoutComputingIsNamed) {
  // Rank 1 blocks before update 3 (as in a hung file system read); its heartbeat goes on.
  auto started = Clock::now();
  auto result = run_shell("env NABU_TEST_HANG_AT_STEP=3 NABU_TEST_HANG_RANK=1 '" +
                              std::string(NABU_BINARY) + "' train --expdir=exp_hang --workers=2"
                              " --liveness-timeout=8 " +
                              tiny_dc("--max-steps=400 --set trainer.cfg:trainer:valid_frequency=1000"),
                          dir_.path());
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_LT(seconds_since(started), 60.0);
  EXPECT_NE(result.output.find("rank 1 on "), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("made no progress"), std::string::npos) << result.output;
}

TEST_F(Faults, DamagedStoreGivesOneLineAndLeavesTheExperimentIntact) {
  auto first = train("exp_store", "--max-steps=4 --set trainer.cfg:trainer:valid_frequency=2");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto latest = dir_ / "exp_store/full/logdir/latest.pt";
  std::string before = file_bytes(latest);
  auto store = dir_ / "data/stores/toy2spk/features/tr/full/store.h5";
  ASSERT_TRUE(fs::exists(store)) << store;
  fs::resize_file(store, fs::file_size(store) / 3);
  auto again = run_nabu("train --expdir=exp_store --resume --threads=1", dir_.path());
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_NE(again.output.find("store.h5"), std::string::npos) << again.output;
  EXPECT_EQ(std::count(again.output.begin(), again.output.end(), '\n') > 0, true);
  EXPECT_EQ(file_bytes(latest), before);
}

TEST(FaultsData, CorruptWavStopsDataPreparationNamingItAndLeavesNoStore) {
  TempDir dir;
  make_tone_corpus(dir.path(), 8, 4);
  auto wav = dir / "data/corpus/2speakers/wav8k/min/tr/mix/tr_3.wav";
  auto good = read_text(wav);
  write_text(wav, good.substr(0, 44) + std::string(200, '\xff'));  // a header and garbage
  fs::resize_file(wav, 30);                                          // cut inside the header
  auto failed = run_nabu("data --recipe=" + dc_recipe() + " --expdir=exp --threads=1", dir.path());
  EXPECT_EQ(failed.exit_code, 1) << failed.output;
  EXPECT_NE(failed.output.find("tr_3"), std::string::npos) << failed.output;
  auto stores = dir / "data/stores/toy2spk/features/tr";
  EXPECT_FALSE(fs::exists(stores / "100/store.h5"));
  if (fs::exists(stores)) {
    for (const auto& entry : fs::recursive_directory_iterator(stores)) {
      EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos)
          << entry.path() << " left behind";
    }
  }
  write_text(wav, good);
  auto repaired = run_nabu("data --recipe=" + dc_recipe() + " --expdir=exp --threads=1",
                           dir.path());
  EXPECT_EQ(repaired.exit_code, 0) << repaired.output;
}
