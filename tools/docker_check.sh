#!/usr/bin/env bash
# Builds the Docker image and checks it end to end: `info`, a smoke run into a mounted /runs,
# the message for a /runs the container user cannot write, `docker stop` mid-run (exit 143 and a
# checkpoint in the mount), and the resume. Then, unless --no-rebuild, times a rebuild after a
# one-line code change. Not part of CI (a cold build takes tens of minutes; with the BuildKit
# caches of an earlier build, apt, pip and ccache make it minutes).
#
#   tools/docker_check.sh [--no-rebuild]
#
# Environment:
#   DOCKER     the docker client (default /usr/bin/docker when present: Debian's, which matches
#              Debian's dockerd; a newer client elsewhere on PATH may not)
#   BASE       the base image (default debian:bookworm-slim; when it cannot be found or pulled,
#              a Debian 12 minbase made here with debootstrap, imported as LOCAL_BASE)
#   LOCAL_BASE the name of that local base (default gputrain-local/debian:bookworm)
#   CA_BUNDLE  CA certificates for pip inside the build (default: this machine's bundle, which
#              also holds a TLS-re-signing proxy's CA where there is one)
#   IMAGE      the tag built (default gputrain:check)
#   WORK       scratch folder: build context copy, /runs mount (default /var/tmp/gputrain-docker-check)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rebuild=1
for arg in "$@"; do
  case "$arg" in
    --no-rebuild) rebuild=0 ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "docker_check: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

docker_given="${DOCKER:-}"
pick_client() {
  if [[ -n "$docker_given" ]]; then DOCKER="$docker_given"
  elif [[ -x /usr/bin/docker ]]; then DOCKER=/usr/bin/docker
  else DOCKER=docker; fi
}
pick_client
BASE="${BASE:-debian:bookworm-slim}"
LOCAL_BASE="${LOCAL_BASE:-gputrain-local/debian:bookworm}"
CA_BUNDLE="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
IMAGE="${IMAGE:-gputrain:check}"
WORK="${WORK:-/var/tmp/gputrain-docker-check}"
container="gputrain-check-$$"

say() { echo "docker_check: $*"; }
indent() { sed 's/^/  | /'; }
fail() { echo "docker_check: FAILED: $*" >&2; exit 1; }
cleanup() { "$DOCKER" rm -f "$container" >/dev/null 2>&1 || true; }
trap cleanup EXIT

mkdir -p "$WORK"

# --- a daemon: the running one, else dockerd started here (root only) ------------------------
if ! "$DOCKER" info >/dev/null 2>&1; then
  [[ $EUID -eq 0 ]] || fail "no Docker daemon answers, and starting one needs root"
  if ! command -v dockerd >/dev/null; then
    say "installing docker.io"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
    pick_client  # Debian's client now, not one found earlier on PATH
  fi
  # No bridge and no iptables rules: builds and containers use --network host or none, so
  # nothing is routed through a docker bridge.
  say "starting dockerd (log: /tmp/gputrain-dockerd.log)"
  nohup dockerd --bridge none --iptables=false >/tmp/gputrain-dockerd.log 2>&1 &
  for _ in $(seq 60); do "$DOCKER" info >/dev/null 2>&1 && break; sleep 1; done
  "$DOCKER" info >/dev/null 2>&1 || fail "dockerd did not start (see /tmp/gputrain-dockerd.log)"
fi
say "docker $("$DOCKER" version --format '{{.Client.Version}} client, {{.Server.Version}} server')"

# --- the base image: present, pulled, or made with debootstrap -------------------------------
if ! "$DOCKER" image inspect "$BASE" >/dev/null 2>&1 && ! timeout 60 "$DOCKER" pull -q "$BASE" >/dev/null 2>&1; then
  say "base $BASE not available (no registry?): using $LOCAL_BASE"
  BASE="$LOCAL_BASE"
  if ! "$DOCKER" image inspect "$BASE" >/dev/null 2>&1; then
    [[ $EUID -eq 0 ]] || fail "making a base image with debootstrap needs root"
    command -v debootstrap >/dev/null || {
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    }
    root="$WORK/base-root"
    rm -rf "$root"
    say "debootstrap --variant=minbase bookworm (a few minutes)"
    debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$WORK-debootstrap.log" 2>&1 ||
      fail "debootstrap failed (see $WORK-debootstrap.log)"
    tar -C "$root" -c . | "$DOCKER" import - "$BASE" >/dev/null
    rm -rf "$root"
  fi
fi

# --- the build context: the working tree as git sees it (tracked and new files, not ignored) --
ctx="$WORK/context"
rm -rf "$ctx"
mkdir -p "$ctx"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [[ -e "$f" ]] && printf '%s\0' "$f"; done |
  tar --null -T - -cf -) | tar -x -C "$ctx"
revision="$(git -C "$repo" rev-parse --short=10 HEAD)$(git -C "$repo" diff --quiet HEAD || echo -dirty)"

build() {
  local secret=()
  if [[ -f "$CA_BUNDLE" ]]; then secret=(--secret "id=ca,src=$CA_BUNDLE"); fi
  DOCKER_BUILDKIT=1 "$DOCKER" build --network host --progress plain "${secret[@]}" \
    --build-arg BASE="$BASE" --build-arg GIT_REVISION="$1" -t "$IMAGE" "$ctx" >"$WORK/build.log" 2>&1 ||
    { tail -30 "$WORK/build.log" >&2; fail "docker build (log: $WORK/build.log)"; }
}

say "building $IMAGE from $BASE (log: $WORK/build.log)"
start=$SECONDS
build "$revision"
build_s=$((SECONDS - start))
size="$("$DOCKER" image inspect -f '{{.Size}}' "$IMAGE")"
say "built in ${build_s} s; image size $((size / 1000000)) MB"

run() { "$DOCKER" run --rm --network none "$@"; }

# --- info ------------------------------------------------------------------------------------
say "docker run $IMAGE info"
run "$IMAGE" info | indent
run "$IMAGE" --version | grep -q "(git $revision" || fail "--version does not name revision $revision"

# --- a /runs mount the container's user (uid 1000) cannot write: one line, exit 2 ------------
runs="$WORK/runs"
rm -rf "$runs"
mkdir -p "$runs"
chmod 755 "$runs"  # owned by this user: writable by uid 1000 only when that is this user
if [[ $(id -u) -ne 1000 ]]; then
  set +e
  out="$(run -v "$runs:/runs" "$IMAGE" train --preset smoke 2>&1)"
  code=$?
  set -e
  indent <<<"$out"
  [[ $code -eq 2 ]] || fail "a /runs owned by uid $(id -u): exit $code, expected 2"
  grep -q -- "--user" <<<"$out" || fail "a /runs owned by uid $(id -u): no hint naming --user"
  say "a /runs owned by uid $(id -u): exit 2 with the --user hint"
else
  say "skipped the unwritable /runs check: this user is uid 1000, as is the image's"
fi

# --- a smoke run as the host's user ------------------------------------------------------------
user="$(id -u):$(id -g)"
say "smoke run into the mounted /runs (--user $user)"
out="$(run --user "$user" -v "$runs:/runs" "$IMAGE" train --preset smoke --output_dir /runs/smoke 2>&1)" ||
  { indent <<<"$out"; fail "the smoke run failed"; }
tail -3 <<<"$out" | indent
[[ -f "$runs/smoke/checkpoints/last.pt" && -f "$runs/smoke/report.html" ]] || fail "the smoke run left no last.pt/report.html in the mount"
say "smoke run: $(cd "$runs/smoke" && find . -type f ! -name .lock | sort | tr '\n' ' ')"

# --- docker stop mid-run: SIGTERM through tini, a checkpoint, exit 143; then resume ------------
say "quickstart (1 epoch) detached, docker stop once it has logged a step"
"$DOCKER" run -d --name "$container" --network none --user "$user" -v "$runs:/runs" "$IMAGE" \
  train --preset quickstart --epochs 1 --log_every 20 --output_dir /runs/stopped >/dev/null
for _ in $(seq 300); do
  grep -q '"event":"step"' "$runs/stopped/metrics.jsonl" 2>/dev/null && break
  [[ "$("$DOCKER" inspect -f '{{.State.Running}}' "$container")" == true ]] || break
  sleep 1
done
grep -q '"event":"step"' "$runs/stopped/metrics.jsonl" 2>/dev/null ||
  { "$DOCKER" logs "$container" 2>&1 | tail -10 | indent; fail "the quickstart logged no step (ended, or 300 s)"; }
start=$SECONDS
"$DOCKER" stop -t 60 "$container" >/dev/null
stop_s=$((SECONDS - start))
code="$("$DOCKER" wait "$container")"
"$DOCKER" logs "$container" 2>&1 | tail -4 | indent
"$DOCKER" rm "$container" >/dev/null
[[ "$code" == 143 ]] || fail "docker stop: exit $code, expected 143"
[[ -f "$runs/stopped/checkpoints/last.pt" ]] || fail "docker stop: no last.pt in the mount"
say "docker stop: exit 143 after ${stop_s} s, last.pt in the mount"

say "resume: train --resume auto --output_dir /runs/stopped"
out="$(run --user "$user" -v "$runs:/runs" "$IMAGE" train --resume auto --output_dir /runs/stopped 2>&1)" ||
  { tail -10 <<<"$out" | indent; fail "the resumed run failed"; }
grep -E "resum|test " <<<"$out" | tail -4 | indent || true
grep -q '"event":"resume"' "$runs/stopped/metrics.jsonl" ||
  fail "the resumed run left no record of the resume in metrics.jsonl"
[[ -f "$runs/stopped/report.html" ]] || fail "the resumed run did not finish"
say "resume: finished"

# --- a rebuild after a one-line change ------------------------------------------------------
if [[ $rebuild -eq 1 ]]; then
  echo "// docker_check: a one-line change" >>"$ctx/src/core/install_dirs.cpp"
  say "rebuilding after a one-line change to src/core/install_dirs.cpp"
  start=$SECONDS
  build "$revision-changed"
  say "rebuilt in $((SECONDS - start)) s"
  rebuild_note=", after a one-line change $((SECONDS - start)) s"
fi
say "passed: image $IMAGE, $((size / 1000000)) MB; build ${build_s} s${rebuild_note:-}"
