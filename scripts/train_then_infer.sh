#!/usr/bin/env bash
# Trains, then predicts with the result: scripts/train_then_infer.sh [gputrain train flags...]
# Environment: as train.sh and infer.sh. Stops at the first failure with its exit code; a
# SIGTERM during training ends the script with 143 and no inference.
set -euo pipefail
here="$(dirname "$0")"
for arg in "$@"; do
  if [[ "$arg" == --help || "$arg" == -h ]]; then
    sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"
    exit 0
  fi
done
RUN_DIR="${RUN_DIR:-runs/${PRESET:-quickstart}}"  # as common.sh: both halves find the one run
export RUN_DIR
child=
trap '[[ -n "$child" ]] && kill -TERM "$child" 2>/dev/null' TERM INT
code=0
"$here/train.sh" "$@" &
child=$!
wait "$child" || code=$?
while kill -0 "$child" 2>/dev/null; do wait "$child" || code=$?; done
if [[ "$code" != 0 ]]; then exit "$code"; fi
"$here/infer.sh" &
child=$!
wait "$child" || code=$?
while kill -0 "$child" 2>/dev/null; do wait "$child" || code=$?; done
exit "$code"
