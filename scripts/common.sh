# Shared by the start scripts (sourced, not run): where gputrain is, and how to start it on
# one GPU or several. Environment:
#   GPUTRAIN   the binary (default: build/gputrain beside these scripts, the installed bin/,
#              else gputrain on PATH)
#   DATA_DIR   the dataset folder (--data_dir); unset: the preset's own
#   RUN_DIR    the run folder (--output_dir; default runs/<preset>, so that the same line,
#              run again, continues the run and infer.sh finds it)
#   PRESET     the preset (default quickstart)
#   NUM_GPUS   ranks to start: 1 (default) runs one process, N > 1 runs `gputrain launch`,
#              auto = one per visible GPU
# shellcheck shell=bash

# --help or -h anywhere: the calling script's usage (its opening comment), exit 0.
for arg in "$@"; do
  if [[ "$arg" == --help || "$arg" == -h ]]; then
    sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"
    exit 0
  fi
done

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ -z "${GPUTRAIN:-}" ]]; then
  if [[ -x "$here/../build/gputrain" ]]; then
    GPUTRAIN="$here/../build/gputrain"
  elif [[ -x "$here/../../../bin/gputrain" ]]; then  # installed: PREFIX/share/gputrain/scripts
    GPUTRAIN="$here/../../../bin/gputrain"
  else
    GPUTRAIN="$(command -v gputrain || true)"
  fi
fi
if [[ -z "$GPUTRAIN" || ! -x "$GPUTRAIN" ]]; then
  echo "$(basename "$0"): gputrain not found (set GPUTRAIN=/path/to/gputrain, or build it with tools/setup.sh)" >&2
  exit 2
fi
PRESET="${PRESET:-quickstart}"
RUN_DIR="${RUN_DIR:-runs/$PRESET}"
NUM_GPUS="${NUM_GPUS:-1}"
if [[ ! "$NUM_GPUS" =~ ^([1-9][0-9]*|auto)$ ]]; then
  echo "$(basename "$0"): NUM_GPUS='$NUM_GPUS' is not a positive number or auto" >&2
  exit 2
fi

# The data flag, when DATA_DIR is set (used by the scripts that source this file).
data_flags=()
# shellcheck disable=SC2034
if [[ -n "${DATA_DIR:-}" ]]; then data_flags=(--data_dir "$DATA_DIR"); fi

# Runs gputrain COMMAND FLAGS... on NUM_GPUS ranks, in the foreground, so that a SIGTERM to
# the script reaches it (a trap forwards it) and its exit code is the script's.
run_gputrain() {
  local cmd=("$GPUTRAIN")
  if [[ "$NUM_GPUS" != 1 ]]; then cmd+=(launch --nproc_per_node "$NUM_GPUS" --); fi
  "${cmd[@]}" "$@" &
  local child=$!
  trap 'kill -TERM "$child" 2>/dev/null' TERM INT
  local code=0
  wait "$child" || code=$?
  # A trapped signal ends the first wait early: wait again for the child's own exit code.
  while kill -0 "$child" 2>/dev/null; do wait "$child" || code=$?; done
  trap - TERM INT
  return "$code"
}
