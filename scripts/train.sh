#!/usr/bin/env bash
# Trains: scripts/train.sh [gputrain train flags...]
# Environment: PRESET, DATA_DIR, RUN_DIR, NUM_GPUS, GPUTRAIN (see scripts/common.sh).
# Resumes RUN_DIR's run when it has a checkpoint (--resume auto), so the same line continues a
# run stopped by a time limit or a signal. Exit code: gputrain's (143 after SIGTERM).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "$0")/common.sh"
code=0
run_gputrain train --preset "$PRESET" ${data_flags[@]+"${data_flags[@]}"} --output_dir "$RUN_DIR" --resume auto "$@" || code=$?
exit "$code"
