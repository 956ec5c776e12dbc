// `nabu train`: flags -> run_training (neuralnetworks/trainers/training_run.h), or worker
// processes of the same command with --workers or --max-restarts (distributed/launcher.h).
#include <algorithm>
#include <thread>

#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

#include "nabu/cli/commands/cli.h"
#include "nabu/core/device.h"
#include "nabu/core/error.h"
#include "nabu/core/experiment_layout.h"
#include "nabu/distributed/launcher.h"
#include "nabu/distributed/process_group.h"
#include "nabu/neuralnetworks/trainers/training_run.h"

namespace nabu::cli {

namespace {

// `--workers=N` / `--max-restarts=N`: the same command in N worker processes (0: one that keeps
// this process's torchrun/Slurm variables), without those flags, the threads split between them;
// every restart adds --resume (and drops --overwrite, which would delete what it resumes).
int run_in_workers(const std::vector<std::string>& args, int workers, int threads,
                   int max_restarts, const std::string& expdir) {
  LaunchOptions launch;
  launch.workers = workers;
  launch.max_restarts = max_restarts;
  launch.arguments.push_back("train");
  launch.restart_arguments.push_back("train");
  auto is = [](const std::string& argument, const std::string& flag) {
    return argument == flag || argument.rfind(flag + "=", 0) == 0;
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& argument = args[i];
    bool takes_value = argument == "--workers" || argument == "--threads" ||
                       argument == "--max-restarts";
    if (is(argument, "--workers") || is(argument, "--threads") || is(argument, "--max-restarts")) {
      if (takes_value) ++i;  // the value is the next argument
      continue;
    }
    launch.arguments.push_back(argument);
    if (!is(argument, "--overwrite") && !is(argument, "--resume"))
      launch.restart_arguments.push_back(argument);
  }
  launch.restart_arguments.push_back("--resume");
  int total = threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency());
  if (workers > 1 || threads > 0) {
    int per_worker = std::max(1, total / std::max(1, workers));
    launch.arguments.push_back("--threads=" + std::to_string(per_worker));
    launch.restart_arguments.push_back("--threads=" + std::to_string(per_worker));
    if (workers > 1)
      logger().info("starting {} local workers with {} thread(s) each", workers, per_worker);
  }
  launch.position = [expdir] { return training_position(expdir); };
  launch.log_file = ExperimentLayout{expdir}.log().string();
  return nabu::launch_workers(launch);
}

// Where the flags of `nabu train` go.
struct TrainFlags {
  CommonOptions common;
  TrainingRunOptions run;
  std::string max_steps, precision;
  bool resume = false;
  int workers = 1, max_restarts = 0;
};

void add_train_options(po::options_description& description, TrainFlags& flags) {
  add_common_options(
      description, flags.common,
      "the experiment: created if missing; with --resume, the experiment to continue");
  description.add_options()
      ("resume", switch_value(&flags.resume),
       "continue the experiment in --expdir from its latest checkpoint (else latest.pt.prev,\n"
       "else validated.pt), at the exact step, with the --seed, --max-steps and --deterministic\n"
       "of its first run; the same --set values may be given again")
      ("overwrite", switch_value(&flags.run.overwrite),
       "start over in an --expdir that already holds a training")
      ("deterministic", switch_value(&flags.run.deterministic),
       "deterministic algorithms: two runs with the same seed and threads are bit-identical")
      ("max-steps", po::value(&flags.max_steps)->default_value("-1"),
       "stop every stage after this many updates; one value per stage: 700,50; replaces\n"
       "trainer.cfg's max_steps (-1 = not given: that key applies)")
      ("workers", po::value(&flags.workers)->default_value(1),
       "data-parallel worker processes on this machine (docs/trainer.md, Distributed training)")
      ("dist-timeout", po::value(&flags.run.dist_timeout_seconds)->default_value(300),
       "seconds a distributed worker waits in one collective for the others before it stops\n"
       "with an error")
      ("max-restarts", po::value(&flags.max_restarts)->default_value(0),
       "when a worker dies (a crash, a kill, a rank declared dead by the liveness check), stop\n"
       "the others and start the group again from the last checkpoint, up to N times (each\n"
       "logged with its cause). With --workers: the local group; in one rank of a job started\n"
       "by torchrun or srun: this rank (the ranks meet again on MASTER_PORT + the restart's\n"
       "number). A stop on SIGTERM/SIGUSR1 (exit status 75) is not restarted")
      ("liveness-timeout", po::value(&flags.run.liveness_timeout_seconds)->default_value(20),
       "distributed runs: a rank that stops sending heartbeats, or neither progresses nor\n"
       "computes for this many seconds, ends the run with an error naming it (0 = off)");
  add_device_option(
      description, flags.run.device, "",
      "where the models compute: auto (a GPU when there is one), cpu, cuda (this\n"
      "worker's GPU: LOCAL_RANK), cuda:N; replaces trainer.cfg's device (default auto).\n"
      "A checkpoint resumes on any device");
  description.add_options()
      ("precision", po::value(&flags.precision),
       "fp32, bf16 or fp16 (autocast; fp16 with loss scaling): replaces trainer.cfg's precision,\n"
       "as --set trainer.cfg:trainer:precision=... does (docs/devices.md)");
}

// The recipe, also positional; false when --help was given (help printed).
bool parse_train_command_line(const std::vector<std::string>& args,
                              po::options_description& description) {
  po::positional_options_description positional = recipe_positional();
  return parse_command_line(
      "train",
      "Trains the models of a recipe: one stage per value of [trainer] segment_lengths, each\n"
      "initialised from the previous stage's best model. Writes <expdir>/<stage>/{metrics.jsonl,\n"
      "logdir/, model/} and <expdir>/val_sum.json; the recipe as used is copied to <expdir>.\n\n"
      "Examples:\n"
      "  nabu train --recipe=recipes/SS/DBLSTM/toy_DC_2spk --expdir=exp/dc\n"
      "  nabu train --expdir=exp/dc --resume\n"
      "  nabu train --recipe=... --expdir=exp/small --set model.cfg:main:num_units=64\n"
      "  nabu train --recipe=... --expdir=exp/dc2 --workers=2 --max-restarts=3\n\n"
      "Exit status: 0 trained; 1 an error; 75 stopped by SIGTERM or SIGUSR1 (a preemption)\n"
      "after writing a checkpoint: rerun with --resume (config/computing/slurm.sbatch\n"
      "requeues the job); 130 stopped by Ctrl-C after writing a checkpoint.",
      args, description, &positional);
}

// Checks the flags, then trains here or in worker processes. The exit status.
int run_train(const std::vector<std::string>& args, TrainFlags& flags) {
  CommonOptions& common = flags.common;
  TrainingRunOptions& run = flags.run;
  require(common.expdir, "expdir", "train");
  run.max_steps = parse_max_steps(flags.max_steps);
  if (flags.workers < 1) throw Error("--workers must be at least 1");
  if (run.dist_timeout_seconds < 1) throw Error("--dist-timeout must be at least 1 second");
  if (run.liveness_timeout_seconds < 0) throw Error("--liveness-timeout must not be negative");
  if (flags.max_restarts < 0) throw Error("--max-restarts must not be negative");
  if (flags.workers > 1 || flags.max_restarts > 0) {
    const bool job_rank = DistributedEnvironment::from_environment().distributed();
    if (job_rank && flags.workers > 1)
      throw Error("--workers cannot be used in a process started with WORLD_SIZE > 1");
    return run_in_workers(args, job_rank ? 0 : flags.workers, common.threads, flags.max_restarts,
                          common.expdir);
  }
  if (!flags.precision.empty())
    common.sets.push_back("trainer.cfg:trainer:precision=" + flags.precision);
  run.resume = flags.resume;
  if (!run.resume) require(common.recipe, "recipe", "train");
  apply_common_options(common);
  run.recipe = common.recipe;
  run.expdir = common.expdir;
  run.sets = common.sets;
  run.seed = common.seed;
  run_training(run);
  return 0;
}

}  // namespace

int cmd_train(const std::vector<std::string>& args) {
  TrainFlags flags;
  po::options_description description("Options");
  add_train_options(description, flags);
  if (!parse_train_command_line(args, description)) return 0;
  return run_train(args, flags);
}

}  // namespace nabu::cli
