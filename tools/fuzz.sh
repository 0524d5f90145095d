#!/usr/bin/env bash
# Builds the libFuzzer targets in tests/fuzz with clang (AddressSanitizer + UBSan) and runs each
# for SECONDS (default 60). Exits non-zero on the first crash, leak or timeout; the reproducer
# is left in build/fuzz/. Run tools/setup.sh first (the checkpoint target links its build).
# Usage: tools/fuzz.sh [SECONDS]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
seconds=${1:-60}
build_dir=${GPUTRAIN_BUILD_DIR:-build}
out=$build_dir/fuzz
mkdir -p "$out"
sanitize=fuzzer,address,undefined  # per target: sanitize=... build ...
deps=""                            # per target: more files whose change means a rebuild
jobs=$(nproc)
# Each source is compiled on its own, through ccache when there is one, and the debug info names
# paths from the checkout's root: a fresh clone (CI) reuses the objects of the last one instead
# of compiling the ten targets anew (about 6 minutes on a 2-core machine).
cc=(clang++)
command -v ccache >/dev/null && cc=(env CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1 ccache clang++)
declare -A compiled=()  # objects made in this run: targets share sources

build() {  # name sources... -- other compiler and linker arguments...
  local name=$1; shift
  # fmt: header-only, from the folder the CMake configure step links to torch's bundled copy.
  local flags=(-std=c++20 -O1 -g -fsanitize="$sanitize" -fno-sanitize-recover=undefined "-fdebug-prefix-map=$root=."
               -Isrc -DFMT_HEADER_ONLY -isystem "$build_dir/fmt-include")
  local srcs=() links=() todo=() objs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do srcs+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  while [ $# -gt 0 ]; do  # the compiler's arguments apart from the linker's
    case $1 in
      -isystem) flags+=("$1" "$2"); shift 2 ;;
      -I* | -D*) flags+=("$1"); shift ;;
      *) links+=("$1"); shift ;;
    esac
  done
  # Rebuild only when a source, a header or a dependency is newer than the binary.
  # shellcheck disable=SC2086  # $deps is a list of paths
  if [ -x "$out/$name" ] && [ -z "$(find "${srcs[@]}" src $deps -newer "$out/$name" \
                                     \( -name '*.[ch]*' -o -name '*.a' \) | head -n 1)" ]; then
    return
  fi
  # Objects of the same flags share a folder (the torch targets' flags differ from the others').
  local key
  key=$(printf '%s\n' "${flags[@]}" | md5sum | cut -c1-8)
  for src in "${srcs[@]}"; do
    local obj="$out/obj/$key/${src%.cpp}.o"
    objs+=("$obj")
    [ -n "${compiled[$obj]:-}" ] && continue
    compiled[$obj]=1
    mkdir -p "$(dirname "$obj")"
    todo+=("$src" -o "$obj")
  done
  [ ${#todo[@]} -eq 0 ] || printf '%s\0' "${todo[@]}" | xargs -0 -n 3 -P "$jobs" "${cc[@]}" "${flags[@]}" -c
  clang++ -fsanitize="$sanitize" "${objs[@]}" -o "$out/$name" "${links[@]}"
}
targets=(fuzz_idx fuzz_config fuzz_csv fuzz_npy fuzz_image fuzz_tar fuzz_tokenizer)
build fuzz_idx tests/fuzz/fuzz_idx.cpp src/data/idx.cpp -- -lz
build fuzz_config tests/fuzz/fuzz_config.cpp src/config/config.cpp src/config/fields.cpp src/config/json_text.cpp \
  src/config/validate.cpp src/config/fit_target.cpp src/config/profile_range.cpp src/core/text.cpp src/core/metric.cpp
build fuzz_csv tests/fuzz/fuzz_csv.cpp src/data/csv.cpp src/data/csv_dataset.cpp src/data/labels.cpp src/core/text.cpp
build fuzz_tokenizer tests/fuzz/fuzz_tokenizer.cpp src/text/token_decoder.cpp src/text/token_encoder.cpp \
  src/text/byte_level.cpp src/text/sentencepiece.cpp -- -lpcre2-8 -ldl
build fuzz_npy tests/fuzz/fuzz_npy.cpp src/data/npy.cpp src/data/npz.cpp src/core/mapped_file.cpp src/core/zip.cpp -- -lz
image_srcs=(src/data/image_decode.cpp src/data/crop_box.cpp src/data/decode_box.cpp src/data/resample.cpp)
build fuzz_image tests/fuzz/fuzz_image.cpp "${image_srcs[@]}" -- -lpng -lturbojpeg -ljpeg -lz
build fuzz_tar tests/fuzz/fuzz_tar.cpp src/data/tar_index.cpp src/data/webdataset.cpp src/data/labels.cpp src/data/image_sample.cpp \
  "${image_srcs[@]}" src/core/text.cpp -- -lpng -lturbojpeg -ljpeg -lz

# Checkpoints are read by gputrain's own code (the unpickler, the zip reader, the checkpoint
# walk): compiled here, instrumented whole (FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION skips the
# CRC comparison so that mutated records reach the parsers); the rest comes from gputrain's
# own build and the LibTorch it was built with.
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$build_dir/CMakeCache.txt" 2>/dev/null || true; }
torch_cmake=$(cache_value Torch_DIR)
if [ -f "$build_dir/libgputrain_core.a" ] && [ -d "$torch_cmake" ]; then
  torch=$(cd "$torch_cmake/../../.." && pwd)  # <torch>/share/cmake/Torch
  # Linker flags are comma-separated by design (-Wl,a,b): not array elements run together.
  # shellcheck disable=SC2054
  args=(-isystem "$torch/include" -isystem "$torch/include/torch/csrc/api/include" -DFMT_HEADER_ONLY
        -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION "$build_dir/libgputrain_core.a" "$build_dir/libgputrain_config.a"
        -Wl,--push-state,--no-as-needed,-lstdc++,--pop-state -Wl,--no-as-needed)  # libstdc++ first: see CMakeLists.txt
  for lib in torch torch_cpu torch_cuda c10_cuda c10; do
    [ -e "$torch/lib/lib$lib.so" ] && args+=("$torch/lib/lib$lib.so")
  done
  cudart=$(cache_value CUDA_CUDART)
  [ -e "$cudart" ] && args+=("$cudart")
  # gputrain's own CPU kernels are built with OpenMP (CMakeLists.txt): the libgomp it linked.
  gomp=$(cache_value OpenMP_gomp_LIBRARY)
  [ -e "$gomp" ] && args+=("$gomp")
  # shellcheck disable=SC2054
  args+=(-Wl,--as-needed -lpng -lz -lturbojpeg -lcrypto -ldl)
  for dir in "$torch/lib" "$torch"/../nvidia/*/lib; do
    # shellcheck disable=SC2054
    [ -d "$dir" ] && dir=$(readlink -f "$dir") && args+=(-Wl,-rpath,"$dir" -Wl,-rpath-link,"$dir")
  done
  sanitize=fuzzer,address,undefined deps="$build_dir/libgputrain_core.a $build_dir/libgputrain_config.a tests/legacy_checkpoint.h" \
    build fuzz_checkpoint tests/fuzz/fuzz_checkpoint.cpp src/train/checkpoint.cpp src/train/checkpoint_file.cpp \
    src/train/optimizer_state.cpp src/weights/unpickler.cpp src/weights/torch_save.cpp src/weights/pickle_writer.cpp \
    src/weights/torch_save_writer.cpp src/core/zip.cpp src/core/mapped_file.cpp -- -Itests "${args[@]}"
  targets+=(fuzz_checkpoint)
  # --init_from's reader (gputrain's own code, so instrumented whole, AddressSanitizer included).
  sanitize=fuzzer,address,undefined deps="$build_dir/libgputrain_core.a" \
    build fuzz_weights tests/fuzz/fuzz_weights.cpp src/weights/unpickler.cpp src/weights/torch_save.cpp \
    src/core/zip.cpp src/core/mapped_file.cpp -- "${args[@]}"
  targets+=(fuzz_weights)
  # --model net.pt2's reader and graph compiler (gputrain's own code, instrumented whole).
  sanitize=fuzzer,address,undefined deps="$build_dir/libgputrain_core.a" \
    build fuzz_pt2 tests/fuzz/fuzz_pt2.cpp src/weights/pt2_archive.cpp src/models/exported_graph.cpp src/models/op_allowlist.cpp \
    src/core/zip.cpp src/core/mapped_file.cpp -- "${args[@]}"
  targets+=(fuzz_pt2)
else
  echo "fuzz: fuzz_checkpoint not built: it links gputrain's build in $build_dir (run tools/setup.sh first)"
fi

# Seeds: a tiny valid IDX file (raw and gzip) and the shipped presets.
mkdir -p "$out/seeds_idx" "$out/seeds_config"
printf '\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00\x02abcdefgh' > "$out/seeds_idx/images"
gzip -kfn "$out/seeds_idx/images"
cp presets/*.json "$out/seeds_config/"
# A tiny CSV with quotes, a fractional column and string labels.
mkdir -p "$out/seeds_csv"
printf 'x,y,label\n1,2.5,a\n"3",-4,"b"\r\n5,6,a\n' > "$out/seeds_csv/tiny.csv"
# A tiny .npy (two float32) and .npz archives of it, stored and deflated.
mkdir -p "$out/seeds_npy"
printf '\x93NUMPY\x01\x00\x76\x00%-117s\n\x00\x00\x80\x3f\x00\x00\x00\xc0' \
  "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }" > "$out/seeds_npy/tiny.npy"
if command -v zip >/dev/null; then
  (cd "$out/seeds_npy" && rm -f stored.npz deflated.npz && zip -qX0 stored.npz tiny.npy && zip -qX9 deflated.npz tiny.npy)
fi

# Small PNGs (RGB, gray, RGBA) and JPEGs (4:4:4, 4:2:0, gray), written by the target itself.
mkdir -p "$out/seeds_image"
export GPUTRAIN_FUZZ_IMAGE_SEEDS=seeds_image
# A shard of two samples (a tiny PNG and its .cls each), in the three tar formats.
mkdir -p "$out/seeds_tar"
if [ -x .venv/bin/python ]; then
  .venv/bin/python - "$out/seeds_tar" <<'PY'
import io, os, sys, tarfile, zlib, struct
def png(v):
    raw = b"".join(b"\x00" + bytes([v, v, v]) * 2 for _ in range(2))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)) + \
        chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
for name, fmt in (("ustar", tarfile.USTAR_FORMAT), ("gnu", tarfile.GNU_FORMAT), ("pax", tarfile.PAX_FORMAT)):
    with tarfile.open(os.path.join(sys.argv[1], name + ".tar"), "w", format=fmt) as t:
        for i, (data, label) in enumerate(((png(10), b"0"), (png(200), b"1"))):
            for ext, body in (("png", data), ("cls", label)):
                info = tarfile.TarInfo(f"{i:06d}.{ext}")
                info.size = len(body)
                t.addfile(info, io.BytesIO(body))
PY
fi
# Real checkpoints (cnn, AdamW, grad scaler, EMA; format 3 and the old format 2), written by the
# target itself.
mkdir -p "$out/seeds_checkpoint"
export GPUTRAIN_FUZZ_SEED=seeds_checkpoint/trained.pt

# A torch.save state_dict (tied weights, bf16, a Parameter, a wrapper key) and its pickle alone.
mkdir -p "$out/seeds_weights"
if [ -x .venv/bin/python ]; then
  .venv/bin/python - "$out/seeds_weights" <<'PY'
import collections, io, os, sys, zipfile
import torch
out = sys.argv[1]
w = torch.arange(6, dtype=torch.float32).reshape(2, 3)
sd = collections.OrderedDict(a=w, b=w, c=torch.ones(2, dtype=torch.bfloat16), d=torch.nn.Parameter(torch.zeros(1)))
torch.save(sd, os.path.join(out, "state_dict.pth"))
torch.save({"epoch": 1, "state_dict": sd}, os.path.join(out, "wrapped.pth"))
with zipfile.ZipFile(os.path.join(out, "state_dict.pth")) as z:
    pkl = [n for n in z.namelist() if n.endswith("/data.pkl")][0]
    open(os.path.join(out, "data.pkl"), "wb").write(z.read(pkl))
PY
fi

# A torch.export program of a small net (linear, batch_norm, dropout, a dynamic batch).
mkdir -p "$out/seeds_pt2"
if [ -x .venv/bin/python ]; then
  .venv/bin/python - "$out/seeds_pt2" <<'PY'
import os, sys
import torch
net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Dropout(0.1), torch.nn.Linear(8, 2))
ep = torch.export.export(net.train(), (torch.randn(2, 4),), dynamic_shapes=({0: torch.export.Dim("batch")},))
torch.export.save(ep, os.path.join(sys.argv[1], "net.pt2"))
PY
fi

# Inputs that once crashed a target, and seeds that reach past the parser's first checks (a
# tokenizer.json with every decoder step), run first, every time (tests/fuzz/regressions/<target>/).
for dir in tests/fuzz/regressions/*/; do
  name=$(basename "$dir")
  mkdir -p "$out/seeds_$name"
  cp "$dir"* "$out/seeds_$name/"
done

status=0
for target in "${targets[@]}"; do
  corpus="$out/corpus_${target#fuzz_}"
  mkdir -p "$corpus"
  # The checkpoint target may see torch fill a 4 GB string from a forged length (see above),
  # which takes seconds on a busy machine.
  rss=2048 timeout=10 max_len=4096
  [ "$target" = fuzz_checkpoint ] && rss=6144 timeout=60
  [ "$target" = fuzz_config ] && max_len=262144  # deep nesting needs long inputs
  [ "$target" = fuzz_weights ] && max_len=16384  # a torch.save zip aligns its members to 64 bytes
  [ "$target" = fuzz_pt2 ] && max_len=65536  # the program's JSON alone is ~20 KB for a small net
  [ "$target" = fuzz_tar ] && max_len=16384  # four 512-byte headers, their data and the end blocks
  echo "fuzz: $target for ${seconds}s"
  if ! (cd "$out" && ./"$target" -max_total_time="$seconds" -timeout=$timeout -rss_limit_mb=$rss -max_len=$max_len \
        -print_final_stats=1 \
        "corpus_${target#fuzz_}" "seeds_${target#fuzz_}" 2>"$target.log"); then
    echo "fuzz: $target FAILED; see $out/$target.log and the crash-* file in $out"
    tail -n 30 "$out/$target.log"
    status=1
  else
    grep -E "stat::number_of_executed_units" "$out/$target.log" | sed "s/^/fuzz: $target /"
  fi
done
exit $status
