#!/usr/bin/env python3
"""Writes WebDataset tar shards from an image folder, for `gputrain train --dataset webdataset`.

  make_shards.py FOLDER OUT [--samples_per_shard 1000] [--no-shuffle] [--seed 0]

FOLDER is laid out as for --dataset image_folder: one subfolder per class (sorted names give the
class indices, as torchvision's ImageFolder), images (.jpg, .jpeg, .png) anywhere below them,
hidden files and folders left out. Each sample becomes two members of a shard: KEY.jpg (or
.jpeg, .png: the file's bytes as they are) and KEY.cls (its class index as text), KEY being the
sample's number. Shards are OUT-000000.tar, OUT-000001.tar, ...; the line to train from them is
printed at the end.

Samples are shuffled (seeded) before they are cut into shards, as WebDataset's guides advise: a
reader's shuffle buffer only mixes nearby samples, so shards in class order would train on one
class at a time. --no-shuffle keeps the folder's order (class, then path), the order gputrain's
image folder reads without shuffling.

Tars are deterministic (no dates, owners or modes taken from the files). Each shard is written
to a temporary name and renamed into place, so a stopped run leaves no half shard.
"""
import argparse
import io
import os
import random
import sys
import tarfile

EXTENSIONS = (".jpg", ".jpeg", ".png")


def image_folder(root):
    classes = sorted(d for d in os.listdir(root) if not d.startswith(".") and os.path.isdir(os.path.join(root, d)))
    if len(classes) < 2:
        sys.exit(f"make_shards: {root} needs two class subfolders or more (found {len(classes)})")
    samples = []
    for index, name in enumerate(classes):
        found = []
        for folder, dirs, files in os.walk(os.path.join(root, name), followlinks=True):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            found += [os.path.join(folder, f) for f in files
                      if not f.startswith(".") and f.lower().endswith(EXTENSIONS)]
        samples += [(path, index) for path in sorted(found)]
    return classes, samples


def add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder")
    ap.add_argument("out", help="shard name prefix, e.g. shards/train")
    ap.add_argument("--samples_per_shard", type=int, default=1000)
    ap.add_argument("--no-shuffle", dest="shuffle", action="store_false")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.samples_per_shard < 1:
        sys.exit("make_shards: --samples_per_shard must be at least 1")
    classes, samples = image_folder(args.folder)
    if args.shuffle:
        random.Random(args.seed).shuffle(samples)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    shards = (len(samples) + args.samples_per_shard - 1) // args.samples_per_shard
    for s in range(shards):
        path = f"{args.out}-{s:06d}.tar"
        tmp = path + ".tmp"
        with tarfile.open(tmp, "w", format=tarfile.USTAR_FORMAT) as tar:
            first = s * args.samples_per_shard
            for i, (image, label) in enumerate(samples[first:first + args.samples_per_shard], start=first):
                with open(image, "rb") as f:
                    add(tar, f"{i:09d}{os.path.splitext(image)[1].lower()}", f.read())
                add(tar, f"{i:09d}.cls", str(label).encode())
        os.replace(tmp, path)
    pattern = f"{args.out}-{{000000..{shards - 1:06d}}}.tar"
    print(f"make_shards: {len(samples)} samples of {len(classes)} classes in {shards} shards: {pattern}")
    print(f"train with: gputrain train --dataset webdataset --data_dir '{pattern}'")


if __name__ == "__main__":
    main()
