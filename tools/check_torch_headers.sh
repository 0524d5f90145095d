#!/usr/bin/env bash
# Compiles gputrain's torch sources against another torch release's headers (-fsyntax-only),
# e.g. the 2.11 that GPU machines and PyTorch images carry: c10d's classes and autograd's
# internals change between releases, and this says where before a GPU machine does.
#   tools/check_torch_headers.sh [VERSION] [FILES...]   (default 2.11.0; all of gputrain_core)
# Needs a configured build/ (compile_commands.json) and PyPI for `pip download` (cached).
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:-2.11.0}"
shift || true
build="${GPUTRAIN_BUILD_DIR:-build}"
cache="${HOME}/.cache/gputrain/torch-headers-${version}"
if [ ! -d "$cache/torch/include" ]; then
  mkdir -p "$cache"
  pip download "torch==${version}" --no-deps -q -d "$cache/wheel"
  unzip -q -o "$cache"/wheel/torch-*.whl 'torch/include/*' -d "$cache"
  rm -rf "$cache/wheel"
fi
list="$(mktemp)"
trap 'rm -f "$list"' EXIT
python3 - "$build/compile_commands.json" "$cache/torch/include" "$@" >"$list" <<'EOF'
import json, re, shlex, sys
commands, include, only = sys.argv[1], sys.argv[2], sys.argv[3:]
for e in json.load(open(commands)):
    f = e["file"]
    if "/src/" not in f or (only and not any(f.endswith(o) for o in only)):
        continue
    parts = shlex.split(e["command"])
    if not any("torch/include" in p for p in parts):
        continue  # a torch-free file
    out, skip = [], False
    for i, p in enumerate(parts):
        if skip:
            skip = False
        elif p in ("-o", "-MT", "-MF") or (p == "-include" and "cmake_pch" in parts[i + 1]):
            skip = True  # the output, and the precompiled header (built against the pinned torch)
        elif p not in ("ccache", "-MD", "-Winvalid-pch"):
            out.append(re.sub(r"/[^ ]*/site-packages/torch/include", include, p))
    cmd = "cd " + shlex.quote(e["directory"]) + " && " + " ".join(map(shlex.quote, out)) + " -fsyntax-only"
    print(f"{cmd} || {{ echo 'torch headers: {f} does not compile' >&2; exit 255; }}", end="\0")
EOF
count="$(tr -cd '\0' <"$list" | wc -c)"
if [ "$count" -eq 0 ]; then
  echo "torch headers: no torch-using source in build/compile_commands.json matches ${*:-the build}" >&2
  exit 2
fi
xargs -0 -P "$(nproc)" -I{} bash -c '{}' <"$list"
echo "torch headers: all ${count} sources compile against torch ${version}"
