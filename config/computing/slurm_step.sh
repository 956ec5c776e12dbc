# The training step of slurm.sbatch and slurm_gpus.sbatch (sourced by them; submit from the
# project root). What survives what (docs/trainer.md, "Runs that survive on shared clusters"):
# - a rank that crashes or is killed, or a host that stops answering: every rank's supervisor
#   (--max-restarts) starts the group again from the last checkpoint, MAX_RESTARTS times
#   (default 3); the ranks meet again on the rendezvous port + the restart's number;
# - a preemption (SIGTERM) or the time limit (SIGUSR1 90 s before it, #SBATCH --signal): every
#   rank stops after the same update, the chief writes a checkpoint, nabu exits with 75, and
#   this step requeues the job (#SBATCH --requeue), which resumes by itself: --resume is given
#   from the first start (with nothing to resume yet, the experiment simply starts).
: "${RECIPE:?export RECIPE (the recipe folder)}"
: "${EXPDIR:?export EXPDIR (on a shared file system)}"
# The batch shell itself gets SIGTERM on a preemption: it must outlive srun to requeue.
trap 'echo "nabu job: SIGTERM; waiting for the checkpoint"' TERM
trap 'echo "nabu job: SIGUSR1; waiting for the checkpoint"' USR1
# NABU_TRAIN_ARGS: more options for nabu train, as on a command line (quotes are respected), e.g.
# --export=ALL,...,NABU_TRAIN_ARGS="--set model.cfg:main:num_units=64".
eval "extra=(${NABU_TRAIN_ARGS:-})"
srun --kill-on-bad-exit=1 "$NABU" train --recipe="$RECIPE" --expdir="$EXPDIR" --resume \
  --max-restarts="${MAX_RESTARTS:-3}" --threads="${SLURM_CPUS_PER_TASK:-1}" "$@" "${extra[@]}"
status=$?
if [ "$status" -eq 75 ]; then
  echo "nabu job: stopped with a checkpoint (preempted or out of time); requeueing $SLURM_JOB_ID"
  scontrol requeue "$SLURM_JOB_ID"
fi
exit "$status"
