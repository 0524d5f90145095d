#!/usr/bin/env python3
"""A fine-tuning run end to end, as a user runs one: an ImageNet-layout resnet18 state_dict saved
by PyTorch (random weights, 1000 classes, torchvision's names) fine-tuned with gputrain on an
image folder of 5 classes, head first (--freeze backbone --unfreeze_at_epoch 1), then `eval`,
`infer` and `export`; the exported safetensors loads into torchvision's resnet18 with strict=True
and gives the probabilities `infer` wrote.

    fine_tune_check.py GPUTRAIN_BIN WORKDIR

Exit code 0 = pass. Prints gputrain's load report and the figures of each command.
"""
import csv
import os
import struct
import subprocess
import sys
import zlib

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_export import load_weights  # noqa: E402
from twins import make_twin  # noqa: E402

CLASSES = ["ant", "bee", "cat", "cow", "dog"]
SIZE = 32  # pixels; written at the size gputrain reads, so no resize differs between the two
IMAGENET_MEAN, IMAGENET_STD = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])


def write_png(path, rgb):
    """An 8-bit RGB PNG (zlib and struct only: no imaging library needed)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
           chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    with open(path, "wb") as f:
        f.write(png)


def make_images(root, rng):
    """train/<class>/ (12 each) and val/<class>/ (4 each): each class a colour and a stripe
    direction, with noise, so that the head alone can learn them in an epoch."""
    val = []
    for split, count in (("train", 12), ("val", 4)):
        for k, name in enumerate(CLASSES):
            os.makedirs(os.path.join(root, split, name), exist_ok=True)
            for i in range(count):
                base = np.zeros((SIZE, SIZE, 3))
                base[..., k % 3] = 0.6
                stripes = (np.arange(SIZE) // 4 % 2)[:, None] if k < 3 else (np.arange(SIZE) // 4 % 2)[None, :]
                img = base + 0.3 * stripes[..., None] + rng.normal(0, 0.08, (SIZE, SIZE, 3))
                rgb = (np.clip(img, 0, 1) * 255).round().astype(np.uint8)
                path = os.path.join(root, split, name, f"{i:02d}.png")
                write_png(path, rgb)
                if split == "val":
                    val.append((rgb, k))
    return val  # in the order gputrain lists the folder: classes sorted, then files sorted


def run(cmd):
    print("$ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(r.stdout)
    if r.returncode != 0:
        sys.exit(f"exit code {r.returncode}")
    return r.stdout


def main():
    binary, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    val = make_images(os.path.join(work, "images"), np.random.default_rng(0))
    pretrained = make_twin("resnet18", (3, 224, 224), 1000, stem="imagenet")  # torchvision's, 7x7 stem
    torch.save(pretrained.state_dict(), os.path.join(work, "resnet18.pth"))

    run_dir, ckpt = os.path.join(work, "run"), os.path.join(work, "run", "checkpoints", "last.pt")
    out = run([binary, "train", "--dataset", "image_folder", "--data_dir", os.path.join(work, "images"),
               "--image_size", str(SIZE), "--model", "resnet18", "--width", "64",
               "--init_from", os.path.join(work, "resnet18.pth"), "--freeze", "backbone",
               "--unfreeze_at_epoch", "1", "--backbone_lr_scale", "0.1", "--epochs", "2", "--batch_size", "10",
               "--optimizer", "sgd", "--lr", "0.01", "--lr_schedule", "constant", "--no-use_amp", "--normalize_mean", "imagenet",
               "--normalize_std", "imagenet", "--num_workers", "0", "--output_dir", run_dir])
    for want in ("stem                  auto -> imagenet", "skipped  fc.weight: shape 1000x512 in the file vs 5x512",
                 "loaded   120 tensors", "epoch 2: 60 frozen parameters train from here"):
        assert want in out, f"train output lacks {want!r}"
    run([binary, "eval", "--checkpoint", ckpt])
    preds = os.path.join(work, "preds.csv")
    run([binary, "infer", "--checkpoint", ckpt, "--out", preds])
    exported = os.path.join(work, "model.safetensors")
    run([binary, "export", "--checkpoint", ckpt, "--out", exported])

    # The export in torchvision's resnet18, strict, on the same (normalized) validation images.
    model = make_twin("resnet18", (3, SIZE, SIZE), len(CLASSES), stem="imagenet")
    tensors, _, loader = load_weights(exported)
    model.load_state_dict(tensors, strict=True)
    model.eval()
    x = np.stack([(rgb / 255.0 - IMAGENET_MEAN) / IMAGENET_STD for rgb, _ in val]).transpose(0, 3, 1, 2)
    with torch.no_grad():
        probs = torch.softmax(model(torch.from_numpy(x).float()), 1)
    with open(preds) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(val), f"{len(rows)} predictions for {len(val)} images"
    worst, correct = 0.0, 0
    for row, (rgb, label), p in zip(rows, val, probs):
        assert int(row["target"]) == label, (row, label)
        assert int(row["prediction"]) == int(p.argmax()), (row, p)
        worst = max(worst, abs(float(row["probability"]) - float(p.max())))
        correct += int(row["prediction"]) == label
    print(f"export in {getattr(model, 'source', 'a copy')} (strict, {loader}): argmax equal on {len(val)} images, "
          f"max |probability difference| {worst:.2g}; validation accuracy {correct}/{len(val)}")
    assert worst < 1e-4, worst


if __name__ == "__main__":
    main()
