#!/usr/bin/env bash
# CTest: `cmake --install` makes a tree that runs on its own. Installs the build into a
# temporary prefix, moves it elsewhere, hides what the build could lean on (the source tree with
# its build folder, the torch virtualenv, the system's Fashion-MNIST and CUDA toolkit) under
# empty tmpfs mounts in a private mount namespace, then runs --version, the presets and the
# quickstart (1 epoch) through the installed start script.
#   tests/install_check.sh BUILD_DIR        exit 77 (skipped) where it cannot hide them: not
#                                           root, or no mount namespaces
set -euo pipefail

build="$(cd "$1" && pwd)"
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ $EUID -ne 0 ]] || ! unshare -m true 2>/dev/null; then
  echo "install_check: skipped (needs root and unshare -m to hide the source tree and the virtualenv)"
  exit 77
fi
if [[ ! -d /usr/share/datasets/fashion-mnist ]]; then
  echo "install_check: skipped (no Fashion-MNIST in /usr/share/datasets to install; tools/setup.sh installs it)"
  exit 77
fi

work="$(mktemp -d /var/tmp/gputrain-install-check.XXXXXX)"
trap 'rm -rf "$work"' EXIT
trap 'exit 143' TERM INT  # ctest's timeout: the EXIT trap still removes the 4 GB copy
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" 2>&1 || {
  tail -20 "$work/install.log"
  exit 1
}
mv "$work/prefix" "$work/moved"  # relocatable: nothing may point into the first prefix

# What the installed binary must not need, hidden below.
hide=("$src")
if [[ "$build/" != "$src/"* ]]; then hide+=("$build"); fi
for link in .venv .pydeps .pydeps-text; do
  target="$(readlink -f "$src/$link" || true)"
  # Inside the source tree it is hidden with it (a second mount there would find no folder).
  if [[ -e "$src/$link" && "$target/" != "$src/"* ]]; then hide+=("$target"); fi
done
for dir in /usr/share/datasets /usr/local/cuda; do
  if [[ -d "$dir" ]]; then hide+=("$dir"); fi
done

# shellcheck disable=SC2016  # expanded by the inner shell
unshare -m bash -euo pipefail -c '
  moved="$1"; shift
  for dir in "$@"; do mount -t tmpfs none "$dir"; done
  cd "$moved/.."
  unset GPUTRAIN_PRESETS_DIR LD_LIBRARY_PATH GPUTRAIN
  "$moved/bin/gputrain" --version
  # Into a file: grep -q leaves a pipe at its first match, and the rest of the (line-buffered)
  # list would meet a closed pipe (SIGPIPE, which pipefail reports).
  "$moved/bin/gputrain" presets >presets.txt
  grep -q "quickstart" presets.txt
  # The start script finds the installed binary; the quickstart reads the installed dataset.
  PRESET=quickstart RUN_DIR="$moved/../run" "$moved/share/gputrain/scripts/train.sh" --epochs 1 >run.log 2>&1 ||
    { tail -20 run.log; exit 1; }
  grep -E "^(epoch 1/1|done:)" run.log
  test -f run/checkpoints/last.pt
' install_check "$work/moved" "${hide[@]}"
du -sh "$work/moved" | sed 's/^/install_check: installed tree /'
echo "install_check: passed"
