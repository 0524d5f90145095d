#!/usr/bin/env python3
"""Runs the same workloads in gputrain and in a plain PyTorch script, side by side.

For each workload it runs `gputrain benchmark --json`, then replays every variant that
gputrain ran in Python PyTorch (the venv's torch): the same model, batch, optimizer, thread
count and switches (AMP dtype, channels_last, DataLoader workers, pinned memory), with the
usual torch.utils.data.DataLoader over a per-sample Dataset. It prints samples/s for both
and the gputrain/PyTorch ratio per variant. Shared machines are noisy: each side runs
--rounds times, alternating, and the best samples/s of each is kept (as timeit keeps the
fastest run).

Usage: .venv/bin/python tools/compare_pytorch.py [--workloads cnn,mlp] [--steps 60]
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Workloads: gputrain flags. The MLP is small on purpose: per-op overhead dominates it.
WORKLOADS = {
    "cnn": ["--preset", "quickstart"],
    "mlp": ["--preset", "quickstart", "--model", "mlp", "--width", "128", "--batch_size", "32"],
}

# Same statistics gputrain normalizes with (src/data/make_dataset.cpp).
STATS = {"fashion-mnist": (0.2860, 0.3530), "mnist": (0.1307, 0.3081)}


def read_idx(path):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find_idx(folder, stem):
    for name in (stem, stem + ".gz"):
        if os.path.exists(os.path.join(folder, name)):
            return os.path.join(folder, name)
    sys.exit(f"compare_pytorch: no {stem}[.gz] in {folder}")


class IdxDataset(torch.utils.data.Dataset):
    """The usual per-sample Dataset: uint8 image -> normalized float tensor."""

    def __init__(self, images, labels, mean, std):
        self.images, self.labels, self.mean, self.std = images, labels, mean, std

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        x = torch.from_numpy(self.images[i].astype(np.float32) / 255.0).unsqueeze(0)
        return (x - self.mean) / self.std, int(self.labels[i])


def endless(loader):
    """Batches across epochs, restarting the loader as gputrain's benchmark does, so a run of
    --steps may exceed one epoch."""
    while True:
        yield from loader


class Cnn(nn.Module):
    """Mirror of src/models/cnn.cpp."""

    def __init__(self, c, h, w, classes, width):
        super().__init__()
        width = width or 32
        self.features = nn.Sequential(
            nn.Conv2d(c, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU(True), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1, bias=False), nn.BatchNorm2d(2 * width), nn.ReLU(True),
            nn.MaxPool2d(2))
        self.fc1 = nn.Linear(2 * width * max(h // 4, 1) * max(w // 4, 1), 128)
        self.fc2 = nn.Linear(128, classes)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(self.features(x).flatten(1))))


class Mlp(nn.Module):
    """Mirror of src/models/mlp.cpp."""

    def __init__(self, c, h, w, classes, width):
        super().__init__()
        width = width or 512
        self.fc1, self.fc2, self.fc3 = nn.Linear(c * h * w, width), nn.Linear(width, width), nn.Linear(width, classes)

    def forward(self, x):
        x = x.flatten(1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def make_optimizer(model, wl):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": wl["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}]
    betas = (wl["beta1"], wl["beta2"])
    if wl["optimizer"] == "sgd":
        return torch.optim.SGD(groups, lr=wl["lr"], momentum=wl["momentum"], nesterov=wl["nesterov"])
    cls = torch.optim.Adam if wl["optimizer"] == "adam" else torch.optim.AdamW
    return cls(groups, lr=wl["lr"], betas=betas)


def run_pytorch(wl, sw, dataset, device, warmup, steps):
    torch.manual_seed(wl["seed"])
    c, h, w = dataset[0][0].shape
    model = (Cnn if wl["model"] == "cnn" else Mlp)(c, h, w, 10, wl["width"]).to(device)
    if sw["channels_last"]:
        model = model.to(memory_format=torch.channels_last)
    opt = make_optimizer(model, wl)
    workers = sw["num_workers"]
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=sw["batch_size"], shuffle=True, drop_last=True, num_workers=workers,
        prefetch_factor=sw["prefetch_factor"] if workers else None, persistent_workers=workers > 0,
        pin_memory=sw["pin_memory"] and device.type == "cuda")
    amp_dtype = torch.bfloat16 if sw["amp_dtype"] == "bf16" or (sw["amp_dtype"] == "auto" and device.type == "cpu") \
        else torch.float16
    scaler = torch.amp.GradScaler(device.type, enabled=sw["use_amp"] and amp_dtype == torch.float16)
    torch.backends.cudnn.benchmark = sw["cudnn_benchmark"]
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = sw["tf32"]
    batches = endless(loader)

    def step():
        x, y = next(batches)
        x, y = x.to(device, non_blocking=sw["non_blocking"]), y.to(device, non_blocking=sw["non_blocking"])
        if sw["channels_last"]:
            x = x.contiguous(memory_format=torch.channels_last)
        with torch.autocast(device.type, dtype=amp_dtype, enabled=sw["use_amp"]):
            loss = F.cross_entropy(model(x).float(), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    for _ in range(warmup):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return sw["batch_size"] * steps / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="cnn,mlp", help="comma list of: " + ", ".join(WORKLOADS))
    ap.add_argument("--variants", default="baseline,amp_bf16,channels_last,workers,batch_x2,all")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gputrain", default=os.path.join(ROOT, "build", "gputrain"))
    ap.add_argument("--markdown", help="also write the tables to this file")
    args = ap.parse_args()

    out_md = []
    for name in args.workloads.split(","):
        if name not in WORKLOADS:
            sys.exit(f"compare_pytorch: unknown workload '{name}' (expected one of {', '.join(WORKLOADS)})")
        def gputrain_round():
            with tempfile.TemporaryDirectory() as tmp:
                report = os.path.join(tmp, "bench.json")
                cmd = [args.gputrain, "benchmark", *WORKLOADS[name], "--variants", args.variants,
                       "--warmup_steps", str(args.warmup), "--steps", str(args.steps), "--json", report]
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                with open(report) as f:
                    return json.load(f)

        bench = gputrain_round()
        wl = bench["workload"]
        threads = int(bench["device"].get("intra-op threads", torch.get_num_threads()))
        torch.set_num_threads(threads)
        device = torch.device("cuda" if bench["device"]["device"].startswith("cuda") else "cpu")
        folder = wl["data_dir"] or "/usr/share/datasets/" + wl["dataset"]
        mean, std = STATS[wl["dataset"]]
        dataset = IdxDataset(read_idx(find_idx(folder, "train-images-idx3-ubyte")),
                             read_idx(find_idx(folder, "train-labels-idx1-ubyte")), mean, std)

        ran = [v for v in bench["variants"] if v["status"] == "ok"]
        ours = {v["name"]: v["samples_per_sec"] for v in ran}
        theirs = {v["name"]: 0.0 for v in ran}
        for r in range(args.rounds):
            if r > 0:
                for v in gputrain_round()["variants"]:
                    if v["status"] == "ok":
                        ours[v["name"]] = max(ours[v["name"]], v["samples_per_sec"])
            for v in ran:
                sps = run_pytorch(wl, v["switches"], dataset, device, args.warmup, args.steps)
                theirs[v["name"]] = max(theirs[v["name"]], sps)
        rows = [(v["name"], ours[v["name"]], theirs[v["name"]]) for v in ran]
        title = f"{name}: {' '.join(WORKLOADS[name])} | {bench['device']['device']} | {threads} threads | " \
                f"torch {torch.__version__} | best of {args.rounds} x {args.steps} timed steps"
        print(title)
        print(f"{'variant':<15} {'gputrain':>10} {'PyTorch':>10} {'ratio':>7}")
        out_md += [f"**{title}**", "", "| variant | gputrain samples/s | PyTorch samples/s | gputrain / PyTorch |",
                   "|---|---:|---:|---:|"]
        for vname, ours, theirs in rows:
            print(f"{vname:<15} {ours:>10.0f} {theirs:>10.0f} {ours / theirs:>6.2f}x")
            out_md.append(f"| {vname} | {ours:.0f} | {theirs:.0f} | {ours / theirs:.2f}x |")
        print()
        out_md.append("")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(out_md))


if __name__ == "__main__":
    main()
