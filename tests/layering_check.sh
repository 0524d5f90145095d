#!/usr/bin/env bash
# The rooms' one-way arrows (docs/ARCHITECTURE.md), checked on the includes: parallel/ knows no
# trainer, config or model; the step engine (step/) knows no run, flag, rank or benchmark; the
# benchmark reads data through the Session alone; c10d is included in parallel/ alone; models/
# and data/ know no parallel code; weights/ (file formats) knows only core/; cli/ and config/
# include no torch header. Prints each include that breaks one.
set -u
src="$(cd "$(dirname "$0")/.." && pwd)/src"
bad=0
check() {  # check WHAT FOLDERS... -- PATTERN: no file in FOLDERS has an include line matching PATTERN
  local what=$1; shift
  local dirs=()
  while [ "$1" != "--" ]; do dirs+=("$src/$1"); shift; done
  shift
  local found
  found=$(grep -rnE "^#include +[<\"]($1)" "${dirs[@]}" | sed "s#^$src/##")
  if [ -n "$found" ]; then
    echo "layering: $what:"
    printf '  %s\n' "${found//$'\n'/$'\n'  }"
    bad=1
  fi
}
check "parallel/ includes train/, step/, config/, models/, app/ or bench/" parallel -- '(train|step|config|models|app|bench)/'
check "step/ includes train/, app/, bench/, config/ or parallel/" step -- '(train|app|bench|config|parallel)/'
check "bench/ includes data/ (its data comes through the Session)" bench -- 'data/'
check "c10d included outside parallel/" app bench cli config core data models monitor step train -- 'torch/csrc/distributed'
check "models/ or data/ include parallel/" models data -- 'parallel/'
check "weights/ includes more than core/" weights -- '(train|config|models|app|bench|parallel|data|cli|monitor)/'
check "cli/ or config/ include torch" cli config -- '(torch|ATen|c10)/'
[ "$bad" = 0 ] && echo "layering: every include follows the rooms' arrows"
exit "$bad"
