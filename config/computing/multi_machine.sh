#!/usr/bin/env bash
# Several machines by hand, with the variables torchrun uses. Run this once on every machine,
# each with its own RANK (0 on the chief, whose address is MASTER_ADDR):
#
#   MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 RANK=0 config/computing/multi_machine.sh RECIPE EXPDIR
#   MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 RANK=1 config/computing/multi_machine.sh RECIPE EXPDIR
#
# Several processes on one machine: give each its own RANK and LOCAL_RANK and --threads.
# EXPDIR and the data stores must be on a shared file system. Port MASTER_PORT on MASTER_ADDR
# must be reachable from every machine; Gloo also opens connections between all pairs of ranks.
set -euo pipefail
: "${MASTER_ADDR:?set MASTER_ADDR to the chief's address}"
: "${WORLD_SIZE:?set WORLD_SIZE to the number of processes}"
: "${RANK:?set RANK (0 .. WORLD_SIZE-1)}"
export MASTER_PORT="${MASTER_PORT:-29500}"
recipe="${1:?recipe folder}"
expdir="${2:?experiment folder}"
shift 2
exec build/nabu train --recipe="$recipe" --expdir="$expdir" "$@"
