#!/usr/bin/env bash
# tools/gpu_check.sh --quick --skip-build on this build, on a CPU: the script the next GPU machine
# runs works end to end, and its report has every section, each ok (cuda_tests: skipped, no GPU).
# Usage: gpu_check_quick.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check_quick.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
report=$tmp/gpu_check.md
py=$root/.venv/bin/python
[ -x "$py" ] || { echo "gpu_check_quick: no $py (run tools/setup.sh)"; exit 77; }

# No carried .debs (the build is this one), and an empty per-user presets folder: the
# benchmarks measure the built-in recipes.
set +e
(cd "$root" && GPUTRAIN_TORCH_PYTHON=$py GPUTRAIN_BUILD_DIR=$build GPU_CHECK_DEBS=$tmp/no-debs \
  GPU_CHECK_BUDGET_S=400 XDG_CONFIG_HOME=$tmp/config tools/gpu_check.sh --quick --skip-build --out "$report")
rc=$?
set -e
bad=0
for section in environment link cuda_tests info bench_resnet50 compare_resnet50 bench_mlp bench_imagenet_like compare_pytorch \
               compare_gpt2; do
  want=ok
  # On a machine with a GPU the [cuda] tests run and must pass.
  [ "$section" = cuda_tests ] && ! nvidia-smi -L >/dev/null 2>&1 && want="skipped (no GPU)"
  row=$(grep "^| $section | " "$report" || true)
  if [ -z "$row" ]; then
    echo "gpu_check_quick: the report has no '$section' row"; bad=1
  elif [[ $row != "| $section | $want |"* ]]; then
    echo "gpu_check_quick: $row (expected $want)"; bad=1
  fi
  grep -q "^## $section$" "$report" || { echo "gpu_check_quick: the report has no '## $section' part"; bad=1; }
done
# The benchmarks' own tables made it into the report.
for table in "| Optimization | samples/s |" "| side | samples/s" "| side | tokens/s"; do
  grep -qF "$table" "$report" || { echo "gpu_check_quick: no '$table' table in the report"; bad=1; }
done
[ "$rc" = 0 ] || { echo "gpu_check_quick: gpu_check.sh exited $rc"; bad=1; }
if [ "$bad" = 0 ]; then echo "gpu_check_quick: every section ok"; else sed -n '1,20p' "$report"; fi
exit "$bad"
