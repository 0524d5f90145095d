#!/usr/bin/env python3
"""Benchmarks the image loader alone on JPEG folders: gputrain against torchvision and PIL.

Workload: RandomResizedCrop to 224 + horizontal flip + ImageNet normalization, batch 64, 2
loader threads or workers, shuffled, whole batches only. No model runs: each side pulls batches.

- gputrain: `build/gputrain benchmark --stage data --variants workers` (2 loader threads), with
  its default reduced-scale region decode, again from the same pictures as WebDataset shards of
  250 (tools/make_shards.py, shuffle buffer 1000), and with `--no-reduced_decode` (whole decode,
  then the same crop).
- torchvision: ImageFolder + DataLoader(num_workers=2, persistent, prefetch 2), each sample
  decoded by PIL and transformed by torchvision.transforms.v2 (RandomResizedCrop(224,
  antialias=True), RandomHorizontalFlip, PILToTensor, ToDtype(float32, scale=True), Normalize).
- PIL decode only: 2 processes, each opening and fully decoding (convert("RGB")) half the files,
  nothing else: the ceiling of any loader that decodes whole pictures with PIL.

The picture sets are generated once (--dir): --count JPEGs of each size at quality 90 in two
class folders. They are smooth fields plus fine noise (--grain), which sets the file size: the
default makes files as large as camera photos of that size (a 1600x1200 one about 480 KiB),
--grain 0 smooth ones of a third of that. Entropy decoding, which no scale reduction skips,
grows with the file size.

The machine is shared and noisy: the sides alternate for --rounds rounds and the best of each is
kept (as timeit does).

Usage: .venv/bin/python tools/bench_images.py [--sets 500x375,1600x1200] [--count 1000] [--grain 6]
                                             [--rounds 3] [--batches 12] [--json OUT] [--make_only]
"""
import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".pydeps"))
from PIL import Image  # noqa: E402  (pillow comes with torchvision in .pydeps)

BATCH = 64
SIZE = 224
WORKERS = 2
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def photo(rng, w, h, grain):
    """A smooth random field at a few scales plus fine grain: a photo's file size, not its content."""
    img = np.zeros((h, w, 3), np.float32)
    for octave in range(1, 6):
        n = 2 ** octave
        small = rng.standard_normal((max(2, n * h // w), n, 3)).astype(np.float32)
        small = ((small - small.min()) / (np.ptp(small) + 1e-6) * 255).astype(np.uint8)
        img += (np.asarray(Image.fromarray(small).resize((w, h), Image.BICUBIC), np.float32) - 128) / octave ** 0.8
    img += rng.standard_normal((h, w, 1)).astype(np.float32) * grain
    img = (img - img.mean()) / (img.std() + 1e-6) * 50 + 120
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def make_set(folder, w, h, count, grain):
    done = os.path.join(folder, "complete")
    if os.path.exists(done):
        return
    rng = np.random.default_rng(w * h)
    for i in range(count):
        d = os.path.join(folder, "train", "ab"[i % 2])
        os.makedirs(d, exist_ok=True)
        photo(rng, w, h, grain).save(os.path.join(d, f"{i:05d}.jpg"), quality=90)
    open(done, "w").close()


def files_of(folder):
    out = []
    for cls in sorted(os.listdir(os.path.join(folder, "train"))):
        d = os.path.join(folder, "train", cls)
        out += [os.path.join(d, f) for f in sorted(os.listdir(d))]
    return out


def make_shards(folder):
    """The set as WebDataset shards of 250 pictures (tools/make_shards.py), once."""
    shards = os.path.join(folder, "shards")
    if not os.path.exists(os.path.join(shards, "complete")):
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "make_shards.py"), os.path.join(folder, "train"),
                        os.path.join(shards, "train"), "--samples_per_shard", "250"], check=True,
                       stdout=subprocess.DEVNULL)
        open(os.path.join(shards, "complete"), "w").close()
    return os.path.join(shards, "train-*.tar")


def gputrain_round(binary, folder, batches, reduced, shards=None):
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "bench.json")
        data = ["--dataset", "webdataset", "--data_dir", shards] if shards else \
            ["--dataset", "image_folder", "--data_dir", os.path.join(folder, "train")]
        cmd = [binary, "benchmark", *data, "--image_size", str(SIZE), "--random_resized_crop", "--hflip", "--normalize_mean", "imagenet",
               "--normalize_std", "imagenet", "--batch_size", str(BATCH), "--num_workers", str(WORKERS),
               "--stage", "data", "--variants", "workers", "--warmup_steps", "2", "--steps", str(batches),
               "--model", "resnet18", "--json", report]
        if not reduced:
            cmd.append("--no-reduced_decode")
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(report) as f:
            v = next(v for v in json.load(f)["variants"] if v["name"] == "workers")
    if v["status"] != "ok":
        sys.exit(f"bench_images: gputrain did not run: {v}")
    return v["samples_per_sec"]


def torchvision_round(folder, batches):
    from torchvision.datasets import ImageFolder
    from torchvision.transforms import v2
    t = v2.Compose([v2.RandomResizedCrop(SIZE, antialias=True), v2.RandomHorizontalFlip(), v2.PILToTensor(),
                    v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])
    loader = torch.utils.data.DataLoader(ImageFolder(os.path.join(folder, "train"), transform=t),
                                         batch_size=BATCH, shuffle=True, drop_last=True, num_workers=WORKERS,
                                         persistent_workers=True, prefetch_factor=2)
    it = iter(loader)
    for _ in range(2):
        next(it)
    t0 = time.perf_counter()
    n = 0
    for _ in range(batches):
        try:
            next(it)
        except StopIteration:
            it = iter(loader)
            next(it)
        n += BATCH
    seconds = time.perf_counter() - t0
    # Stop the workers now: left to the garbage collector they keep prefetching into the next round.
    it._shutdown_workers()
    del it, loader
    return n / seconds


def decode_all(paths):
    for p in paths:
        with Image.open(p) as im:
            im.convert("RGB").load()


def pil_round(folder):
    paths = files_of(folder)
    halves = [paths[i::WORKERS] for i in range(WORKERS)]
    with multiprocessing.get_context("fork").Pool(WORKERS) as pool:
        pool.map(decode_all, [h[:8] for h in halves])  # warm the processes and the page cache
        t0 = time.perf_counter()
        pool.map(decode_all, halves)
        return len(paths) / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="500x375,1600x1200", help="comma list of WxH picture sizes")
    ap.add_argument("--count", type=int, default=1000, help="pictures per set")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", type=int, default=12, help="timed batches per loader run")
    ap.add_argument("--grain", type=float, default=6.0,
                    help="noise per pixel (std, in 0..255 levels): 6 gives camera-photo file sizes, 0 smooth pictures")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "gputrain-bench-images"))
    ap.add_argument("--gputrain", default=os.path.join(ROOT, "build", "gputrain"))
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--make_only", action="store_true",
                    help="generate the sets under --dir (DIR/WxH-COUNT-grainG/train/{a,b}) and stop")
    args = ap.parse_args()
    torch.set_num_threads(1)  # workers decode; the main process only collates

    rows = []
    for spec in args.sets.split(","):
        w, h = (int(v) for v in spec.split("x"))
        folder = os.path.join(args.dir, f"{w}x{h}-{args.count}-grain{args.grain:g}")
        make_set(folder, w, h, args.count, args.grain)
        if args.make_only:
            print(folder)
            continue
        kib = sum(os.path.getsize(p) for p in files_of(folder)) / len(files_of(folder)) / 1024
        shards = make_shards(folder)
        best = {"gputrain": 0.0, "gputrain_shards": 0.0, "gputrain_whole_decode": 0.0, "torchvision": 0.0,
                "pil_decode_only": 0.0}
        for r in range(args.rounds):
            got = {"pil_decode_only": pil_round(folder),
                   "gputrain": gputrain_round(args.gputrain, folder, args.batches, True),
                   "gputrain_shards": gputrain_round(args.gputrain, folder, args.batches, True, shards),
                   "gputrain_whole_decode": gputrain_round(args.gputrain, folder, args.batches, False),
                   "torchvision": torchvision_round(folder, args.batches)}
            for k, v in got.items():
                best[k] = max(best[k], v)
            print(f"{spec} round {r + 1}/{args.rounds}: " + ", ".join(f"{k} {v:.0f}" for k, v in got.items()),
                  file=sys.stderr)
        rows.append({"set": spec, "mean_file_kib": kib, **best})

    if args.make_only:
        return
    print(f"image loader alone | RandomResizedCrop {SIZE} + hflip + normalize, batch {BATCH}, {WORKERS} threads or "
          f"workers | {os.cpu_count()} CPUs | torch {torch.__version__} | best of {args.rounds} rounds, images/s")
    print(f"{'set':>10} | {'KiB':>4} | {'gputrain':>8} | {'shards':>6} | {'whole decode':>12} | {'torchvision':>11} | "
          f"{'PIL decode only':>15} | {'vs torchvision':>14} | {'vs PIL':>6}")
    for r in rows:
        print(f"{r['set']:>10} | {r['mean_file_kib']:>4.0f} | {r['gputrain']:>8.0f} | {r['gputrain_shards']:>6.0f} | "
              f"{r['gputrain_whole_decode']:>12.0f} | "
              f"{r['torchvision']:>11.0f} | {r['pil_decode_only']:>15.0f} | "
              f"{r['gputrain'] / r['torchvision']:>13.2f}x | {r['gputrain'] / r['pil_decode_only']:>5.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"batch_size": BATCH, "size": SIZE, "workers": WORKERS, "cpus": os.cpu_count(),
                       "torch": torch.__version__, "rounds": args.rounds, "batches": args.batches, "results": rows},
                      f, indent=2)


if __name__ == "__main__":
    main()
