# gputrain in a container. Build and run (README, "Docker"):
#   DOCKER_BUILDKIT=1 docker build --build-arg GIT_REVISION="$(git rev-parse --short HEAD)" -t gputrain .
#   docker run --gpus all --rm -v "$PWD/runs:/runs" gputrain train --preset quickstart
# There is no `# syntax=` line on purpose: it makes BuildKit pull a frontend image from a
# registry, and the cache mounts below work with the built-in one (DOCKER_BUILDKIT=1).
#
# BASE: plain Debian 12, not an nvidia/cuda image. The torch wheel brings its own CUDA runtime,
# cuBLAS, cuDNN and NCCL, and the NVIDIA Container Toolkit (`--gpus`) mounts the driver from
# the host, so a CUDA base image would add a second, unused CUDA of several GB. Debian 12
# because tools/setup.sh builds with Debian's packages, and the runtime stage must have the
# same glibc and libstdc++ as the build. Where no registry is reachable, make a local base
# with debootstrap and pass it: --build-arg BASE=<image> (tools/docker_check.sh does).
#
# GPUs: the pinned torch (CUDA 13.2) has kernels for sm_75 to sm_120 (T4, A10, L4, RTX 30/40/50,
# A100, H100/H200, B200) and needs an NVIDIA driver >= 580 on the host. P100 and V100 (sm_60,
# sm_70) are not supported: gputrain says so at start and trains on the CPU.
ARG BASE=debian:bookworm-slim

# --- build: compilers, headers, the torch virtualenv; the same tools/setup.sh as CI -----------
FROM ${BASE} AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    GPUTRAIN_VENV=/opt/torch-venv \
    GPUTRAIN_TEST_TOOLS=0 \
    CCACHE_DIR=/root/.cache/ccache
# Debian's Docker images delete downloaded packages after each install; keep them in the
# cache mount instead, so a rebuild does not download them again.
RUN rm -f /etc/apt/apt.conf.d/docker-clean
WORKDIR /src
# Dependencies first, from setup.sh alone: a code change does not invalidate this layer.
# Behind a proxy that re-signs TLS, pass its CA bundle for pip as a build secret (it stays out
# of the image): --secret id=ca,src=/etc/ssl/certs/ca-certificates.crt
COPY tools/setup.sh tools/setup.sh
RUN --mount=type=cache,target=/var/cache/apt,sharing=locked \
    --mount=type=cache,target=/var/lib/apt/lists,sharing=locked \
    --mount=type=cache,target=/root/.cache/pip \
    --mount=type=secret,id=ca \
    if [ -f /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi; tools/setup.sh deps
COPY . .
# .dockerignore keeps .git out of the context: the revision comes in as an argument.
ARG GIT_REVISION=unknown
RUN --mount=type=cache,target=/root/.cache/ccache \
    GPUTRAIN_SKIP_APT=1 GPUTRAIN_BUILD_TARGET=gputrain GPUTRAIN_GIT_REVISION="$GIT_REVISION" tools/setup.sh \
 && cmake --install build --prefix /opt/gputrain

# --- runtime: the installed tree (binary, torch and CUDA libraries, presets, scripts, data) ---
FROM ${BASE}
# tini as PID 1: `docker stop` sends SIGTERM to PID 1, and tini passes it on to gputrain, which
# saves a checkpoint and exits 143 (a program that is PID 1 itself gets no default signal
# handling, and nothing would reap its children). Unpinned: Debian 12 keeps its interface fixed
# and only ships fixes, which a pin would keep out. Nothing else: the install tree brings the
# libraries the binary loads (torch, CUDA, libpng, libturbojpeg, libcrypto, PCRE2, SentencePiece).
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/gputrain /opt/gputrain
ENV PATH=/opt/gputrain/bin:$PATH
# A user of its own (uid 1000, the first user on most hosts, so bind mounts made by that user
# are writable); /data for datasets, /runs for run folders. For another owner: --user UID:GID.
RUN useradd --uid 1000 --create-home gputrain \
 && mkdir -p /data /runs \
 && chown gputrain:gputrain /data /runs
USER 1000:1000
# From /, the default run folder runs/<date-time>-<preset> lands in the /runs volume.
WORKDIR /
VOLUME ["/data", "/runs"]
ENTRYPOINT ["/usr/bin/tini", "--", "gputrain"]
CMD ["train"]
