#!/usr/bin/env python3
"""Benchmarks the data loader alone: gputrain's Loader versus torch.utils.data.DataLoader.

Workload: Fashion-MNIST train set, batch 256, random crop (padding 2) + horizontal flip +
normalization, shuffled, whole batches only. No model runs: each side just pulls batches.

- gputrain: `build/gputrain benchmark --stage data`, which times the loader alone after
  warm-up steps. gputrain's "baseline" variant forces num_workers=0, so W=0 uses baseline and
  W>0 uses the "workers" variant, which keeps --num_workers W but raises it to at least 2
  (src/bench/variants.cpp). The worker count gputrain really used is read back from its JSON
  and shown in the table; a row where it differs from W is marked and is not like-for-like.
- PyTorch: this process (the venv's torch), the usual map-style Dataset whose __getitem__
  converts one uint8 image to a float tensor, pads and crops it, flips it, normalizes it
  (torch ops, as torchvision's RandomCrop(28, padding=2) + RandomHorizontalFlip + Normalize
  do on tensors), with DataLoader(batch_size, shuffle, drop_last, num_workers=W,
  persistent_workers=W>0, prefetch_factor=2 if W>0) and gputrain's intra-op thread count.

Both sides: warm-up batches first (worker start-up excluded), then --steps timed batches;
samples/s = steps * batch / seconds. The machine is shared and noisy, so the two sides
alternate for --rounds rounds and the best samples/s of each is kept (as timeit does).

Usage: .venv/bin/python tools/bench_loader.py [--workers 0,2] [--rounds 3] [--steps 200]
                                             [--json OUT]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no tools/__pycache__ left in the tree by the import below
from compare_pytorch import IdxDataset, endless, find_idx, read_idx  # noqa: E402  (shared, not duplicated)

BATCH = 256
PADDING = 2
DATA_DIR = "/usr/share/datasets/fashion-mnist"


def channel_stats(images, max_samples=10000):
    """Mean/std as gputrain computes them: 10000 evenly spaced training images, in [0, 1]."""
    n = len(images)
    take = min(n, max_samples)
    x = images[np.arange(take) * n // take].astype(np.float64) / 255.0
    return float(x.mean()), float(x.std())


class AugmentedIdx(IdxDataset):
    """Per-sample Dataset as users write it: to float, pad + random crop, random flip, normalize."""

    def __getitem__(self, i):
        x = torch.from_numpy(self.images[i]).unsqueeze(0).float().div(255)  # 1x28x28 in [0, 1]
        h, w = x.shape[1:]
        # RandomCrop(28, padding=2): zero-pad, then a random 28x28 window.
        x = F.pad(x, (PADDING, PADDING, PADDING, PADDING))
        top = int(torch.randint(0, 2 * PADDING + 1, (1,)))
        left = int(torch.randint(0, 2 * PADDING + 1, (1,)))
        x = x[:, top:top + h, left:left + w]
        if torch.rand(1) < 0.5:  # RandomHorizontalFlip
            x = x.flip(-1)
        return (x - self.mean) / self.std, int(self.labels[i])


def gputrain_round(binary, workers, warmup, steps):
    """One gputrain process; returns (samples/s, workers it really used, intra-op threads)."""
    variant = "baseline" if workers == 0 else "workers"
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "bench.json")
        cmd = [binary, "benchmark", "--preset", "quickstart", "--random_crop", str(PADDING), "--hflip",
               "--batch_size", str(BATCH), "--num_workers", str(workers), "--stage", "data",
               "--variants", variant, "--warmup_steps", str(warmup), "--steps", str(steps), "--json", report]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(report) as f:
            bench = json.load(f)
    v = next(v for v in bench["variants"] if v["name"] == variant)
    if v["status"] != "ok":
        sys.exit(f"bench_loader: gputrain variant {variant} did not run: {v.get('skipped', v['status'])}")
    return v["samples_per_sec"], v["switches"]["num_workers"], int(bench["device"]["intra-op threads"])


def pytorch_round(dataset, workers, warmup, steps):
    """One DataLoader, started and warmed up untimed; returns samples/s over `steps` batches."""
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=BATCH, shuffle=True, drop_last=True, num_workers=workers,
        persistent_workers=workers > 0, prefetch_factor=2 if workers > 0 else None)
    batches = endless(loader)
    for _ in range(warmup):
        next(batches)
    t0 = time.perf_counter()
    for _ in range(steps):
        next(batches)
    seconds = time.perf_counter() - t0
    del batches, loader  # stop persistent workers before the next gputrain round
    return steps * BATCH / seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", default="0,2", help="comma list of worker counts (gputrain runs at least 2 when > 0)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=200, help="timed batches per run")
    ap.add_argument("--warmup", type=int, default=5, help="untimed batches per run")
    ap.add_argument("--gputrain", default=os.path.join(ROOT, "build", "gputrain"))
    ap.add_argument("--data_dir", default=DATA_DIR)
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    worker_counts = [int(w) for w in args.workers.split(",")]

    # Writable copies: torch.from_numpy warns on the read-only buffers read_idx returns.
    images = read_idx(find_idx(args.data_dir, "train-images-idx3-ubyte")).copy()
    labels = read_idx(find_idx(args.data_dir, "train-labels-idx1-ubyte")).copy()
    mean, std = channel_stats(images)
    dataset = AugmentedIdx(images, labels, mean, std)

    ours = {w: 0.0 for w in worker_counts}
    theirs = {w: 0.0 for w in worker_counts}
    used = {}
    threads = None
    for r in range(args.rounds):
        for w in worker_counts:
            sps, used[w], threads = gputrain_round(args.gputrain, w, args.warmup, args.steps)
            # Same intra-op threads as gputrain (its --threads 0 keeps torch's default).
            torch.set_num_threads(threads)
            theirs_sps = pytorch_round(dataset, w, args.warmup, args.steps)
            ours[w], theirs[w] = max(ours[w], sps), max(theirs[w], theirs_sps)
            print(f"round {r + 1}/{args.rounds} workers {w}: gputrain {sps:.0f}, DataLoader {theirs_sps:.0f} "
                  f"samples/s", file=sys.stderr)

    print(f"Fashion-MNIST loader alone | batch {BATCH}, random crop (padding {PADDING}) + hflip + normalize | "
          f"{os.cpu_count()} CPUs, {threads} intra-op threads | torch {torch.__version__} | "
          f"best of {args.rounds} x {args.steps} timed batches")
    print(f"{'workers':>7} | {'gputrain samples/s':>18} | {'DataLoader samples/s':>20} | {'ratio':>7}")
    rows = []
    for w in worker_counts:
        ratio = ours[w] / theirs[w]
        note = "" if used[w] == w else f"  * gputrain ran {used[w]} workers (workers variant uses at least 2)"
        print(f"{w:>7} | {ours[w]:>18.0f} | {theirs[w]:>20.0f} | {ratio:>6.2f}x{note}")
        rows.append({"workers": w, "gputrain_workers": used[w], "gputrain_samples_per_sec": ours[w],
                     "dataloader_samples_per_sec": theirs[w], "ratio": ratio})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"batch_size": BATCH, "padding": PADDING, "hflip": True, "normalize": [mean, std],
                       "intra_op_threads": threads, "cpus": os.cpu_count(), "torch": torch.__version__,
                       "rounds": args.rounds, "steps": args.steps, "warmup": args.warmup, "results": rows},
                      f, indent=2)


if __name__ == "__main__":
    main()
