#!/usr/bin/env bash
# One machine, N data-parallel worker processes (threads split between them). `nabu train`
# starts the workers itself with the torchrun variables on 127.0.0.1, prefixes their output
# with the rank and stops them all when one fails.
#
#   config/computing/local.sh RECIPE EXPDIR [WORKERS] [more nabu train options]
set -euo pipefail
recipe="${1:?recipe folder}"
expdir="${2:?experiment folder}"
workers="${3:-2}"
shift $(( $# < 3 ? $# : 3 ))
exec build/nabu train --recipe="$recipe" --expdir="$expdir" --workers="$workers" "$@"
