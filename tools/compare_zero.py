#!/usr/bin/env python3
"""Times gputrain's sharded data parallel (--shard none/optimizer/gradients) against PyTorch's own.

Both sides train the same MLP (784-1024-1024-10, 1.9 M parameters: big enough that communication
is most of a CPU step) on 2 ranks x 32 samples in memory, AdamW (fused, weight decay on the
weights alone), bf16 autocast where the CPU has native bf16 (else fp32), one intra-op thread per
rank, Gloo on this machine's loopback.

PyTorch side, what a skilled user would write for each stage, launched with torchrun:
  - ddp:   DistributedDataParallel (25 MiB buckets, gradient_as_bucket_view) + AdamW(fused=True);
  - zero1: the same DDP + ZeroRedundancyOptimizer(AdamW, fused=True), PyTorch's ZeRO-1;
  - fsdp2: fully_shard (FSDP2) with reshard_after_forward=False, PyTorch's ZeRO-2 shape (sharded
           gradients and state, parameters gathered once per step), where it runs on this device.
gputrain side: `gputrain launch -- benchmark --variants all`, whose data-parallel section times
the job with each --shard in its own alternating rounds.

Rounds alternate (gputrain, PyTorch, gputrain, ...) and each figure is the median of its rounds
(every round is printed: shared machines are noisy). Figures are the job's samples/s (all ranks).

Usage: <venv>/bin/python tools/compare_zero.py [--nproc 2] [--rounds 3] [--steps 150] [--warmup 20]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WIDTH, BATCH, CLASSES, FEATURES = 1024, 32, 10, 784
LR, WEIGHT_DECAY = 1e-3, 0.01


class Mlp(nn.Module):
    """gputrain's mlp family at --width 1024 (tools/compare_pytorch.py's twin)."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(FEATURES, WIDTH), nn.Linear(WIDTH, WIDTH), nn.Linear(WIDTH, CLASSES)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x.flatten(1))))))


def groups(model):
    params = list(model.parameters())
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": WEIGHT_DECAY},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def native_bf16():
    """Whether this CPU runs bf16 natively (AVX512-BF16 or AMX), as gputrain's auto AMP asks."""
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def build(mode):
    """(model, optimizer) for PyTorch stage `mode` on this rank."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = Mlp()
    if mode == "fsdp2":
        from torch.distributed.fsdp import fully_shard
        for layer in (model.fc1, model.fc2, model.fc3):
            fully_shard(layer, reshard_after_forward=False)
        fully_shard(model, reshard_after_forward=False)
        return model, torch.optim.AdamW(groups(model), lr=LR, fused=True)
    ddp = DDP(model, bucket_cap_mb=25, gradient_as_bucket_view=True)
    if mode == "zero1":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        return ddp, ZeroRedundancyOptimizer(groups(model), optimizer_class=torch.optim.AdamW, lr=LR, fused=True)
    return ddp, torch.optim.AdamW(groups(model), lr=LR, fused=True)


def worker(args):
    """One PyTorch round under torchrun: every stage once; rank 0 prints {stage: job samples/s}."""
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    gen = torch.Generator().manual_seed(rank)
    x = torch.randn(2048, 1, 28, 28, generator=gen)
    y = torch.randint(0, CLASSES, (2048,), generator=gen)
    amp = native_bf16()
    out = {}
    for mode in args.modes.split(","):
        try:
            model, opt = build(mode)
        except Exception as e:  # a stage this torch cannot run here (FSDP2 on a CPU build)
            out[mode] = f"not run: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
            continue

        def step(i):
            lo = (i * BATCH) % (len(y) - BATCH)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
                loss = F.cross_entropy(model(x[lo:lo + BATCH]), y[lo:lo + BATCH])
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        for i in range(args.warmup):
            step(i)
        dist.barrier()
        t0 = time.perf_counter()
        for i in range(args.steps):
            step(i)
        dist.barrier()
        rate = torch.tensor([BATCH * args.steps / (time.perf_counter() - t0)], dtype=torch.float64)
        dist.all_reduce(rate)
        out[mode] = rate.item()
        del model, opt
    if rank == 0:
        print("RESULT " + json.dumps(out), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def pytorch_round(args):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(args.nproc), os.path.abspath(__file__),
           "--worker", "--modes", args.modes, "--steps", str(args.steps), "--warmup", str(args.warmup)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for attempt in range(2):
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is not None:
            # Seen once in ten rounds here: a rank aborted in Gloo's teardown after the figures
            # were printed; the timed steps were whole, so they count, and the exit is reported.
            if done.returncode != 0:
                print(f"compare_zero: the PyTorch round exited {done.returncode} after its figures", file=sys.stderr)
            return json.loads(line[len("RESULT "):])
        print(f"compare_zero: PyTorch round failed ({done.returncode}), attempt {attempt + 1} of 2: "
              f"{done.stderr.strip()[-1500:]}", file=sys.stderr)
    sys.exit(f"compare_zero: {' '.join(cmd)} failed twice")


def gputrain_round(args):
    precision = ["--use_amp", "--amp_dtype", "bf16"] if native_bf16() else ["--no-use_amp"]
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "bench.json")
        cmd = [args.gputrain, "launch", "--nproc_per_node", str(args.nproc), "--", "benchmark", "--dataset", "synthetic",
               "--input_shape", "1x28x28", "--model", "mlp", "--width", str(WIDTH), "--batch_size", str(BATCH),
               "--optimizer", "adamw", "--lr", str(LR), "--weight_decay", str(WEIGHT_DECAY), *precision, "--variants",
               "all", "--warmup_steps", str(args.warmup), "--steps", str(args.steps), "--json", report]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"compare_zero: {' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        with open(report) as f:
            rows = json.load(f)["data_parallel"]["sharding"]
    # Its own rounds' median per mode, as the benchmark prints it.
    return {row["shard"]: row["samples_per_sec"] for row in rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--modes", default="ddp,zero1,fsdp2", help="PyTorch stages: ddp, zero1, fsdp2")
    ap.add_argument("--gputrain", default=os.path.join(ROOT, "build", "gputrain"))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    seen = {}
    for r in range(args.rounds):
        for side, fn in (("gputrain", gputrain_round), ("pytorch", pytorch_round)):
            for mode, v in fn(args).items():
                seen.setdefault((side, mode), []).append(v)
            print(f"round {r + 1}/{args.rounds} {side}: done", file=sys.stderr, flush=True)
    print(f"{args.nproc} ranks x {BATCH}, MLP 784-{WIDTH}-{WIDTH}-10, AdamW fused, "
          f"{'bf16 autocast' if native_bf16() else 'fp32'}, Gloo, torch {torch.__version__}, {args.steps} steps a round")
    print(f"{'side':9s} {'stage':22s} {'samples/s':>9s}  {'vs its unsharded':>16s}  rounds")
    pairs = [("gputrain", "none", "--shard none"), ("gputrain", "optimizer", "--shard optimizer"),
             ("gputrain", "gradients", "--shard gradients"), ("pytorch", "ddp", "DDP"),
             ("pytorch", "zero1", "DDP + ZeroRedundancyOpt"), ("pytorch", "fsdp2", "FSDP2 (no reshard)")]
    for side, mode, label in pairs:
        vals = seen.get((side, mode))
        if not vals:
            continue
        if isinstance(vals[0], str):
            print(f"{side:9s} {label:22s} {vals[0]}")
            continue
        base = statistics.median(seen[(side, "none" if side == "gputrain" else "ddp")])
        med = statistics.median(vals)
        print(f"{side:9s} {label:22s} {med:9.0f}  {100 * (med / base - 1):+15.1f}%  " + " ".join(f"{v:.0f}" for v in vals))


if __name__ == "__main__":
    main()
