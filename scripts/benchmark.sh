#!/usr/bin/env bash
# Measures what each optimization buys here: scripts/benchmark.sh [gputrain benchmark flags...]
# Environment: PRESET, DATA_DIR, NUM_GPUS (more than 1 adds the data-parallel row), OUT (a
# Markdown report, default benchmark.md), GPUTRAIN. Exit code: gputrain's.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "$0")/common.sh"
code=0
run_gputrain benchmark --preset "$PRESET" ${data_flags[@]+"${data_flags[@]}"} --markdown "${OUT:-benchmark.md}" "$@" || code=$?
exit "$code"
