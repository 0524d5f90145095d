#!/usr/bin/env bash
# Builds gputrain on a GPU machine against the torch already installed there, then runs the
# [cuda] tests, `gputrain info`, the benchmark matrix (ResNet-50 and the small MLP) and
# tools/compare_pytorch.py (ResNet-50, the MLP and GPT-2 124M against PyTorch), and writes every
# figure into one Markdown report (issue #14).
#
# Meant for a machine with a Python that has torch, CMake, ninja and nvcc, but no Debian -dev
# packages and no network: the headers and libraries the build needs travel as .deb files in
# .gpudeps/, which `--fetch-debs` downloads on the development machine (Debian, apt works).
#
# Usage:
#   tools/gpu_check.sh --fetch-debs      here: download .gpudeps/*.deb (and keep it out of git)
#   tools/gpu_check.sh [--out FILE] [--skip-build] [--quick] [--tests-only | --compare]
#       --out FILE     the report (default gpu_check.md; also copied into $OUT when that is set)
#       --skip-build   use the existing build/ (no setup.sh)
#       --quick        tiny step counts and shapes: a smoke run of the script itself (CPU too)
#       --tests-only   build and run the [cuda] tests, no benchmarks (a fix's second look)
#       --compare      build, then only the comparisons with PyTorch (eager and torch.compile):
#                      ResNet-50 (bf16, then fp16), GPT-2 124M (bf16), then `benchmark
#                      --explain` of ResNet-50's recipe: the figures a short device budget is
#                      for, without the [cuda] tests
#   Environment: GPUTRAIN_TORCH_PYTHON (the Python with torch, default python3),
#   GPUTRAIN_BUILD_DIR (default build), GPU_CHECK_DEBS (default .gpudeps),
#   GPU_CHECK_PREFIX (where the .debs are unpacked, default /tmp/gpudeps), GPU_CHECK_VARIANTS
#   (the benchmark variants; default: baseline, each GPU optimization alone, all, all_cuda_graphs),
#   GPU_CHECK_BUDGET_S (the whole run's wall-time budget, default 560: the device tool stops a
#   command at 600 s, so each section's timeout is cut to what is left of it), GPU_CHECK_COMPARE
#   (what --compare compares, in order; default resnet50,gpt2: a second call with
#   --skip-build and gpt2 alone gets the one the first call's budget did not reach).
#
# Through the device tool: run `tools/gpu_check.sh --fetch-debs` here once, then
#   run(command="tools/gpu_check.sh", carry=[".gpudeps"], timeout_s=600)
# The build happens there, against that machine's torch: do not carry build/ (it is built
# here against the CPU wheel). The report comes back as $OUT/gpu_check.md.
#
# Each section has a timeout; a failing section is recorded and the next one runs. The exit
# status is 1 if any section failed.
set -euo pipefail

here=$PWD
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

debs_dir=${GPU_CHECK_DEBS:-.gpudeps}
max_debs_bytes=$((48 * 1024 * 1024))
# Build-time packages (find_package / find_library in CMakeLists.txt and `dpkg -S` of the
# headers src/ and tests/ include), plus the runtime libraries their .so links point to: a bare
# GPU image may lack libpng16, libturbojpeg, libjpeg and OpenSSL 3, and zlib1g-dev's libz.so names
# zlib1g's exact file.
# libgloo-dev: headers only (torch's ProcessGroupGloo.hpp includes them; gloo's code is in libtorch).
# libssl-dev: libcrypto's SHA-256 (src/core/sha256.cpp), and libssl3 its library.
# libpcre2-dev: byte-level BPE's Unicode regexes (src/text/token_encoder.cpp), and libpcre2-8-0 its library.
# libsentencepiece-dev: .model tokenizers (src/text/sentencepiece.cpp), and libsentencepiece0 its library.
debs=(libcxxopts-dev nlohmann-json3-dev catch2 zlib1g-dev libpng-dev libturbojpeg0-dev libjpeg62-turbo-dev
      zlib1g libpng16-16 libturbojpeg0 libjpeg62-turbo libgloo-dev libssl-dev libssl3 libpcre2-dev libpcre2-8-0
      libsentencepiece-dev libsentencepiece0)

fetch_debs() {
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  rm -rf "$debs_dir.tmp" && mkdir -p "$debs_dir.tmp"
  (cd "$debs_dir.tmp" && apt-get download -q "${debs[@]}") || { rm -rf "$debs_dir.tmp"; exit 1; }
  rm -rf "$debs_dir" && mv "$debs_dir.tmp" "$debs_dir"
  ls -l "$debs_dir"
  local total
  total=$(du -cb "$debs_dir"/*.deb | tail -1 | cut -f1)
  echo "gpu_check: ${#debs[@]} packages, $total bytes ($((total / 1024)) KiB) in $debs_dir/"
  if [ "$total" -gt "$max_debs_bytes" ]; then
    echo "gpu_check: error: $debs_dir is over 48 MiB: too large to carry" >&2
    exit 1
  fi
  # The folder travels with `carry`, never in a commit.
  local exclude
  exclude=$(git rev-parse --git-path info/exclude)
  mkdir -p "$(dirname "$exclude")"
  if ! grep -qxF "/$debs_dir/" "$exclude" 2>/dev/null; then
    echo "/$debs_dir/" >> "$exclude"
    echo "gpu_check: added /$debs_dir/ to $exclude"
  fi
  echo "gpu_check: on the GPU machine: run(command=\"tools/gpu_check.sh\", carry=[\"$debs_dir\"])"
}

out=gpu_check.md
skip_build=0
quick=0
tests_only=0
compare_only=0
while [ $# -gt 0 ]; do
  case $1 in
    --fetch-debs) fetch_debs; exit 0 ;;
    --out) out=$2; shift ;;
    --out=*) out=${1#--out=} ;;
    --skip-build) skip_build=1 ;;
    --quick) quick=1 ;;
    --tests-only) tests_only=1 ;;
    --compare) compare_only=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check: error: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
case $out in /*) ;; *) out=$here/$out ;; esac

py=${GPUTRAIN_TORCH_PYTHON:-python3}
build_dir=${GPUTRAIN_BUILD_DIR:-build}
prefix=${GPU_CHECK_PREFIX:-/tmp/gpudeps}
budget=${GPU_CHECK_BUDGET_S:-560}
compare_list=${GPU_CHECK_COMPARE:-resnet50,gpt2}
for workload in ${compare_list//,/ }; do
  case $workload in
    resnet50 | gpt2) ;;
    *) echo "gpu_check: error: GPU_CHECK_COMPARE: unknown workload '$workload' (resnet50, gpt2)" >&2; exit 2 ;;
  esac
done
deadline=$((SECONDS + budget))
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Workload sizes. The full ones fit the budget on one H100; --quick only checks the script.
if [ "$quick" = 1 ]; then
  resnet=(--input_shape 3x64x64 --batch_size 4 --steps 2 --warmup_steps 1)
  mlp_steps=(--steps 10 --warmup_steps 2)
  compare=(--precisions fp32 --rounds 1 --steps 10 --warmup 2 --no-compile)
  # Over 64 px, so that both sides take the ImageNet stem.
  compare_resnet=(--precisions fp32 --rounds 1 --steps 2 --warmup 1 --no-compile
                  --gputrain_flags "--input_shape 3x72x72 --batch_size 2 --synthetic_train_size 8")
  imagenet=(--image_size 64 --width 8 --batch_size 8 --steps 2 --warmup_steps 1)
  imagenet_count=40
  # GPT-2's vocabulary and layout, a tiny body.
  compare_gpt2=(--precisions fp32 --rounds 1 --steps 2 --warmup 1 --no-compile
                --gputrain_flags "--depth 2 --width 64 --heads 2 --seq_len 64 --batch_size 2")
else
  # torchvision's ResNet-50 (width 64; the default preset's width 16 gave 1.5 M parameters on the
  # first GPU run), its loader threads measured at start (the preset's 2 left the GPU waiting
  # half the time on 3x224x224 samples).
  resnet=(--input_shape 3x224x224 --width 64 --num_workers auto --batch_size 64 --steps 30 --warmup_steps 10)
  mlp_steps=(--steps 500 --warmup_steps 50)
  compare=(--precisions "fp32,bf16,fp16" --rounds 3 --steps 300 --warmup 30)
  # bf16 (the precision people train ResNet-50 in on Hopper), torch.compile included.
  compare_resnet=(--precisions bf16 --rounds 2 --steps 30 --warmup 10)
  # --compare: the budget is for the comparisons, so both AMP dtypes.
  [ "$compare_only" = 1 ] && compare_resnet=(--precisions "bf16,fp16" --rounds 2 --steps 30 --warmup 10)
  # GPT-2 124M in bf16, as llm.c and nanoGPT train it (micro-batches of 16 x 1024 tokens).
  compare_gpt2=(--precisions bf16 --rounds 3 --steps 30 --warmup 10)
  # The preset as it is (224, width 64, batch 128), its loader threads measured at start.
  imagenet=(--num_workers auto --steps 20 --warmup_steps 5)
  imagenet_count=800
fi
wanted_variants=${GPU_CHECK_VARIANTS:-baseline,amp_fp16,amp_bf16,tf32,cudnn_benchmark,channels_last,fused_optimizer,cuda_graphs,all,all_cuda_graphs}

has_gpu=0
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && has_gpu=1

# --- the report: a summary table, then one part per section; rewritten after each section so
# that a run stopped from outside still leaves what it measured.
names=() statuses=() rcs=() walls=()
: > "$work/body.md"

write_report() {
  {
    echo "# gputrain GPU check"
    echo
    echo "$(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')" \
         "($(git status --porcelain 2>/dev/null | wc -l | tr -d ' ') changed files), options: ${opts:-none}; python $py, budget ${budget}s"
    echo
    echo "| section | status | exit | wall s |"
    echo "|---|---|---:|---:|"
    local i
    for i in "${!names[@]}"; do
      echo "| ${names[$i]} | ${statuses[$i]} | ${rcs[$i]} | ${walls[$i]} |"
    done
    echo
    cat "$work/body.md"
  } > "$out"
  if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then cp "$out" "$OUT/$(basename "$out")"; fi
}

# section NAME CAP_S CMD...: runs CMD under `timeout` (CAP_S, cut to what is left of the budget),
# its output on the terminal and in $work/NAME.log, and records the status.
section() {
  local name=$1 cap=$2; shift 2
  # 10 s of the budget stay for the grace between SIGTERM and SIGKILL.
  local left=$((deadline - SECONDS - 10)) t rc start wall status
  t=$(( cap < left ? cap : left ))
  echo
  echo "=== gpu_check: $name (timeout $(( t < 0 ? 0 : t ))s): $*"
  start=$SECONDS
  if [ "$t" -lt 5 ]; then
    echo "not run: the ${budget}s budget is spent" | tee "$work/$name.log"
    rc=124 status="FAILED (not run: budget spent)"
  else
    set +e
    # SIGTERM first: the benchmark then prints and keeps the variants it finished.
    timeout -k 10 "$t" "$@" < /dev/null 2>&1 | tee "$work/$name.log"
    rc=${PIPESTATUS[0]}
    set -e
    case $rc in
      0) status=ok ;;
      124|137) status="FAILED (timed out after ${t}s)" ;;
      77) if [ "$has_gpu" = 1 ]; then status="FAILED (skipped, yet nvidia-smi sees a GPU)"; else status="skipped (no GPU)"; fi ;;
      *) status=FAILED ;;
    esac
  fi
  wall=$((SECONDS - start))
  echo "=== gpu_check: $name: $status, exit $rc, ${wall}s"
  names+=("$name") statuses+=("$status") rcs+=("$rc") walls+=("$wall")
  {
    echo "## $name"
    echo
    echo "\`$*\` — $status, exit $rc, ${wall}s"
    echo
    # A benchmark's own Markdown table first, then the full output (folded away under it).
    if [ -s "$work/$name.table.md" ]; then
      cat "$work/$name.table.md"; echo; echo "<details><summary>full output</summary>"; echo
    fi
    echo '```text'
    cat "$work/$name.log"
    echo '```'
    if [ -s "$work/$name.table.md" ]; then echo; echo "</details>"; fi
    echo
  } >> "$work/body.md"
  write_report
}

# The shell functions below run under `timeout` in a child bash, so they are exported.
show_env() {
  set -uo pipefail
  echo "\$ nvidia-smi"; nvidia-smi || echo "(no nvidia-smi or no GPU)"
  echo; echo "\$ nvidia-smi --query-gpu=..."
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv 2>&1 || true
  echo; echo "os:     $(sed -n 's/^PRETTY_NAME=//p' /etc/os-release 2>/dev/null | tr -d '"'), $(uname -srm), $(nproc) cores"
  echo "nvcc:   $(nvcc --version 2>/dev/null | tail -n 2 | tr '\n' ' ' || echo absent)"
  echo "cmake:  $(cmake --version 2>/dev/null | head -n 1 || echo absent)"
  echo "ninja:  $(ninja --version 2>/dev/null || echo absent)"
  echo "c++:    $(c++ --version 2>/dev/null | head -n 1 || echo absent)"
  echo "python: $(command -v "$1") $("$1" --version 2>&1)"
  "$1" -c '
import importlib.metadata as m, torch
print("torch:", torch.__version__, "| CUDA", torch.version.cuda, "| cuDNN", torch.backends.cudnn.version(),
      "| cuda available", torch.cuda.is_available())
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("device:", p.name, "| sm", f"{p.major}.{p.minor}", "|", p.multi_processor_count, "SMs |",
          round(p.total_memory / 2**30, 1), "GiB")
for name in ("triton", "numpy"):
    try: print(name + ":", m.version(name))
    except m.PackageNotFoundError: print(name + ": absent")
'
}

# Unpacks the carried .debs into a private prefix (never into /), and points the absolute
# symlinks they hold (zlib1g-dev's libz.so -> /lib/...) into that prefix.
unpack_debs() {
  set -euo pipefail
  rm -rf "$2" && mkdir -p "$2"
  local f l
  for f in "$1"/*.deb; do echo "dpkg -x $f"; dpkg -x "$f" "$2"; done
  find "$2" -type l | while read -r l; do
    case $(readlink "$l") in /*) ln -sfn "$2$(readlink "$l")" "$l" ;; esac
  done
  echo "unpacked into $2:"
  ls "$2/usr/include" "$2/usr/lib/"*-linux-gnu/lib*.so
}
# Each [cuda] test case in its own process: a crash in one (the first GPU run had one) then
# hides none of the others. A crashed case runs again under cuda-gdb or gdb for its backtrace.
# Exit: 0 all passed, 77 skipped (no GPU), 1 otherwise.
cuda_tests_each() {
  set -uo pipefail
  local tests=$1 names name escaped rc failed=0 debugger
  # Catch2's listing exits with the number of cases listed; 77 is the runner's "no GPU".
  names=$("$tests" "[cuda]" --list-test-names-only)
  rc=$?
  [ "$rc" = 77 ] && return 77
  [ -n "$names" ] || { echo "no [cuda] test cases listed (exit $rc)"; return 1; }
  debugger=$(command -v cuda-gdb || command -v gdb || true)
  while IFS= read -r name; do
    [ -n "$name" ] || continue
    # Catch2 reads ',' '[' ']' as syntax in a test spec; a backslash takes them literally.
    escaped=$(printf '%s' "$name" | sed 's/[][,\\"]/\\&/g')
    echo "--- $name"
    timeout -k 5 150 "$tests" "$escaped" 2>&1
    rc=$?
    echo "--- exit $rc: $name"
    [ "$rc" = 0 ] && continue
    failed=$((failed + 1))
    if [ "$rc" -gt 128 ] && [ "$rc" != 137 ] && [ -n "$debugger" ]; then
      echo "--- backtrace ($debugger):"
      timeout -k 5 150 "$debugger" -q -batch -ex run -ex "thread apply all bt 25" --args "$tests" "$escaped" 2>&1 |
        grep -v '^\[New Thread\|^\[Thread .* exited' | tail -n 150
    fi
  done <<< "$names"
  echo "cuda tests: $failed failed"
  [ "$failed" = 0 ]
}
# How the binary is linked, and which library each of its std::filesystem symbols binds to:
# the first GPU run's binaries lacked libstdc++.so.6 among their NEEDED (CMakeLists.txt names it
# first), so they bound to the copy torch 2.11's libtorch.so exports (its remove_all crashed).
link_report() {
  set -uo pipefail
  echo "\$ readelf -d $1/gputrain | grep NEEDED"
  readelf -d "$1/gputrain" | grep NEEDED
  echo; echo "\$ the link command (ninja -t commands)"
  ninja -C "$1" -t commands gputrain 2>/dev/null | tail -n 1 | tr ' ' '\n' | grep -v '^$' | grep -v '\.o$' | head -n 60
  # A libstdc++ that is only static (libstdc++.a) is pulled in after libtorch.so has already
  # satisfied the std::filesystem symbols: one explanation of the missing NEEDED.
  local cxx
  cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$1/CMakeCache.txt")
  echo; echo "\$ $cxx: libstdc++ it links, and what the driver is"
  for f in libstdc++.so libstdc++.a; do echo "$f -> $("$cxx" -print-file-name=$f)"; done
  file -L "$cxx"
  if head -c 2 "$cxx" | grep -q '#!'; then head -n 30 "$cxx"; fi
  "$cxx" -dumpspecs 2>/dev/null | grep -n 'static-libstdc\|lstdc' | head -n 5
  echo; echo "\$ LD_BIND_NOW=1 LD_DEBUG=bindings gputrain --version: std::filesystem symbols bound to"
  LD_BIND_NOW=1 LD_DEBUG=bindings "$1/gputrain" --version 2>&1 | grep "binding file $1/gputrain" |
    grep -o "to [^ ]*.*symbol \`_ZNSt10filesystem[^']*" | sed 's/ \[[0-9]*\]//; s/: normal symbol//' | sort | uniq -c | sort -rn | head -n 40
}
export -f show_env unpack_debs cuda_tests_each link_report

# compare WORKLOAD CAP_S: tools/compare_pytorch.py on that workload (resnet50 or gpt2), its
# table in the report. The venv's packages (.pydeps: torchvision for ResNet-50) when carried.
compare() {
  local args
  case $1 in
    resnet50) args=("${compare_resnet[@]}") ;;
    gpt2) args=("${compare_gpt2[@]}") ;;
  esac
  section "compare_$1" "$2" env PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/.pydeps${PYTHONPATH:+:$PYTHONPATH}" \
    "$py" tools/compare_pytorch.py --workloads "$1" "${args[@]}" --gputrain "$gt" --markdown "$work/compare_$1.table.md"
}

# The summary line; status 1 if any section failed.
finish() {
  local failed=0 s
  for s in "${statuses[@]}"; do [[ $s == FAILED* ]] && failed=$((failed + 1)); done
  echo
  echo "gpu_check: report written to $out ($failed failed section(s), ${SECONDS}s)"
  [ "$failed" = 0 ]
}

opts=""
[ "$skip_build" = 1 ] && opts+="--skip-build"
[ "$quick" = 1 ] && opts+="${opts:+ }--quick"
[ "$tests_only" = 1 ] && opts+="${opts:+ }--tests-only"
[ "$compare_only" = 1 ] && opts+="${opts:+ }--compare"
echo "gpu_check: report -> $out, budget ${budget}s, GPU: $([ "$has_gpu" = 1 ] && echo yes || echo no)"

section environment 30 bash -c 'show_env "$@"' _ "$py"

# --- build ---------------------------------------------------------------------------------
if ls "$debs_dir"/*.deb >/dev/null 2>&1; then
  section debs 60 bash -c 'unpack_debs "$@"' _ "$debs_dir" "$prefix"
  # find_package/find_path/find_library look under CMAKE_PREFIX_PATH (<prefix>/usr/lib/<arch>
  # included); the rest cover what CMake's Find modules or the compiler look up by themselves.
  multiarch=$(c++ -print-multiarch 2>/dev/null || true)
  multiarch=${multiarch:-x86_64-linux-gnu}
  libdirs="$prefix/usr/lib/$multiarch:$prefix/lib/$multiarch:$prefix/usr/lib"
  export CMAKE_PREFIX_PATH="$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export CMAKE_INCLUDE_PATH="$prefix/usr/include${CMAKE_INCLUDE_PATH:+:$CMAKE_INCLUDE_PATH}"
  export CMAKE_LIBRARY_PATH="$libdirs${CMAKE_LIBRARY_PATH:+:$CMAKE_LIBRARY_PATH}"
  # The multiarch folder holds libjpeg's jconfig.h.
  export CPATH="$prefix/usr/include:$prefix/usr/include/$multiarch${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$libdirs${LIBRARY_PATH:+:$LIBRARY_PATH}"
  # Only the /usr/lib one at run time: libpng16, libturbojpeg and libcrypto; the system's own libz stays first.
  export LD_LIBRARY_PATH="$prefix/usr/lib/$multiarch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# setup.sh passes /usr/local/cuda to CMake when nvcc is there; otherwise name the nvcc on PATH.
if [ ! -x /usr/local/cuda/bin/nvcc ] && command -v nvcc >/dev/null; then
  CUDACXX=$(command -v nvcc)
  CUDAToolkit_ROOT=$(dirname "$(dirname "$CUDACXX")")
  export CUDACXX CUDAToolkit_ROOT
fi

if [ "$skip_build" = 0 ]; then
  # GPUTRAIN_SKIP_APT: no apt there; GPUTRAIN_TORCH_PYTHON: build against its torch, no pip.
  section build 360 env GPUTRAIN_SKIP_APT=1 GPUTRAIN_TORCH_PYTHON="$py" GPUTRAIN_BUILD_DIR="$build_dir" tools/setup.sh
fi
gt=$build_dir/gputrain
section link 30 bash -c 'link_report "$@"' _ "$build_dir"

# --- tests and info --------------------------------------------------------------------------
# The tests' Python side (fixtures, references) runs on this machine's Python with torch.
if [ "$compare_only" = 0 ]; then
  section cuda_tests 300 env GPUTRAIN_TORCH_PYTHON="$(command -v "$py")" bash -c 'cuda_tests_each "$@"' _ "$build_dir/gputrain_tests"
fi
section info 30 "$gt" info
if [ "$compare_only" = 1 ]; then
  for workload in ${compare_list//,/ }; do compare "$workload" 400; done
  # Where gputrain's ResNet-50 step goes: its forward, backward and optimizer shares and the
  # kernels with the most time (5 profiled steps after the timed ones).
  section explain_resnet50 120 "$gt" benchmark --dataset synthetic --model resnet50 "${resnet[@]}" --variants all \
    --explain --markdown "$work/explain_resnet50.table.md"
  finish
  exit
fi
if [ "$tests_only" = 1 ]; then
  finish
  exit
fi

# --- benchmark matrix ------------------------------------------------------------------------
# Only the variants this binary knows (cuda_graphs is newer than some builds): read them from
# the help's "subset of:" line and say which were dropped.
known=$("$gt" benchmark --help 2>/dev/null | sed -n 's/.*subset of: //p' | tr -d ' ' || true)
variants="" dropped=""
for v in ${wanted_variants//,/ }; do
  if [ -z "$known" ] || [[ ",$known," == *",$v,"* ]]; then variants+="${variants:+,}$v"; else dropped+="${dropped:+,}$v"; fi
done
echo "gpu_check: variants $variants"
if [ -n "$dropped" ]; then
  echo "gpu_check: this build has no benchmark variant(s) $dropped: dropped"
  printf 'Benchmark variants dropped (unknown to this build): %s\n\n' "$dropped" >> "$work/body.md"
fi

# ResNet-50 against the best PyTorch loop (eager and torch.compile, torchvision's own model): the
# figure a GPU session is most wanted for, so it runs first. (On the first H100 run, 2026-11-27,
# it came after the benchmark matrix and the budget ran out while torch.compile compiled.)
compare resnet50 200
section bench_resnet50 150 "$gt" benchmark --dataset synthetic --model resnet50 "${resnet[@]}" \
  --variants "$variants" --markdown "$work/bench_resnet50.table.md"
# The MLP: small enough that per-operator overhead, not arithmetic, is its cost.
section bench_mlp 60 "$gt" benchmark --dataset synthetic --input_shape 64 --model mlp --width 256 \
  --batch_size 64 --clip_max_norm 1 "${mlp_steps[@]}" --variants "$variants" --markdown "$work/bench_mlp.table.md"

# The imagenet_like preset on JPEGs: RandomResizedCrop decoded at a reduced scale,
# TrivialAugmentWide and the loader threads feeding a ResNet-50 (generated photos: pillow needed).
if "$py" -c "import numpy, PIL" 2>/dev/null ||
   PYTHONPATH="$PWD/.pydeps" "$py" -c "import numpy, PIL" 2>/dev/null; then
  images=$(PYTHONPATH="$PWD/.pydeps${PYTHONPATH:+:$PYTHONPATH}" "$py" tools/bench_images.py --make_only \
             --sets 500x375 --count "${imagenet_count}" --dir "$work/images" | tail -1)
  section bench_imagenet_like 150 "$gt" benchmark --preset imagenet_like --data_dir "$images/train" --val_split 0.1 \
    "${imagenet[@]}" --variants "baseline,all" --markdown "$work/bench_imagenet_like.table.md"
else
  echo "gpu_check: bench_imagenet_like skipped: $py has no numpy and pillow to generate the pictures"
  printf 'bench_imagenet_like: skipped (%s has no numpy and pillow to generate the pictures)\n\n' "$py" >> "$work/body.md"
fi

# --- against PyTorch eager and torch.compile -------------------------------------------------
# The mlp workload only: the cnn one reads Fashion-MNIST from /usr/share/datasets, absent there.
section compare_pytorch 200 env PYTHONUNBUFFERED=1 "$py" tools/compare_pytorch.py --workloads mlp \
  "${compare[@]}" --gputrain "$gt" --markdown "$work/compare_pytorch.table.md"
# GPT-2 124M last: the run's remaining budget (--compare gives it its own).
compare gpt2 200

finish
