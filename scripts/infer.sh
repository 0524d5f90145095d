#!/usr/bin/env bash
# Predicts with a trained run: scripts/infer.sh [gputrain infer flags...]
# Environment: RUN_DIR (the trained run; its checkpoints/best.pt, else last.pt), OUT (the
# predictions CSV, default RUN_DIR/predictions.csv), DATA_DIR, GPUTRAIN. One process: infer
# takes the GPU with the most free memory. Exit code: gputrain's.
set -euo pipefail
# shellcheck disable=SC2034  # read by common.sh: infer is one process
NUM_GPUS=1
# shellcheck source=scripts/common.sh
source "$(dirname "$0")/common.sh"
checkpoint="$RUN_DIR/checkpoints/best.pt"
[[ -f "$checkpoint" ]] || checkpoint="$RUN_DIR/checkpoints/last.pt"
if [[ ! -f "$checkpoint" ]]; then
  echo "infer.sh: no checkpoint in '$RUN_DIR/checkpoints' (set RUN_DIR to a trained run)" >&2
  exit 2
fi
code=0
run_gputrain infer --checkpoint "$checkpoint" --out "${OUT:-$RUN_DIR/predictions.csv}" ${data_flags[@]+"${data_flags[@]}"} "$@" || code=$?
exit "$code"
