#!/usr/bin/env python3
"""A user's whole path with a network of their own, as the README's "Train your own model" has it.

    imported_e2e.py GPUTRAIN_BIN WORKDIR

In WORKDIR: an image folder (train/ and val/, two classes of PNGs), a module file net.py, then
  1. tools/export_model.py net.py:Net --input-shape 3x16x16 --kwargs '{"classes": 2}'
     -> net.pt2 and net.eval.pt2;
  2. gputrain train --model net.pt2 on the image folder (its default recipe otherwise);
  3. gputrain eval, infer and export of the run's last checkpoint;
  4. back in PyTorch: Net(classes=2).load_state_dict(the export, strict=True), whose weights are
     the trained ones (not the exported start) and whose eval outputs on a batch equal those of
     net.eval.pt2 loaded with the same weights.
Prints one line; exit code 0 = pass, 1 = a check failed, 2 = a command failed.
"""
import json
import os
import struct
import subprocess
import sys
import zlib

import torch

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_export import load_weights  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

NET = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2))
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(8 * 8 * 8, classes)

    def forward(self, x):
        return self.head(self.drop(self.features(x).flatten(1)))
'''


def png(path, rgb, size=16):
    """A solid-colour RGB PNG, written by hand (no imaging library needed)."""
    raw = b"".join(b"\x00" + bytes(rgb) * size for _ in range(size))
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def run(cmd, cwd=None):
    done = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        print(f"FAIL (command): `{' '.join(cmd)}` exited {done.returncode}\n{done.stdout}{done.stderr}")
        sys.exit(2)
    return done.stdout


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: imported_e2e.py GPUTRAIN_BIN WORKDIR")
    gputrain, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    for split, n in (("train", 24), ("val", 8)):
        for label, base in (("red", (200, 30, 30)), ("blue", (30, 30, 200))):
            folder = os.path.join(work, "images", split, label)
            os.makedirs(folder, exist_ok=True)
            for i in range(n):
                png(os.path.join(folder, f"{i}.png"), [min(255, c + 2 * i) for c in base])
    with open(os.path.join(work, "net.py"), "w") as f:
        f.write(NET)

    run([sys.executable, os.path.join(ROOT, "tools", "export_model.py"), "net.py:Net", "--input-shape", "3x16x16",
         "--kwargs", '{"classes": 2}', "--out", "net.pt2"], cwd=work)
    start = {k: v.clone() for k, v in torch.export.load(os.path.join(work, "net.pt2")).state_dict.items()}

    run_dir = os.path.join(work, "run")
    out = run([gputrain, "train", "--dataset", "image_folder", "--data_dir", os.path.join(work, "images"),
               "--image_size", "16", "--model", os.path.join(work, "net.pt2"), "--epochs", "2", "--batch_size", "8",
               "--output_dir", run_dir])
    checkpoint = os.path.join(run_dir, "checkpoints", "last.pt")
    run([gputrain, "eval", "--checkpoint", checkpoint, "--json", os.path.join(work, "eval.json")])
    accuracy = json.load(open(os.path.join(work, "eval.json")))["test_accuracy"]
    run([gputrain, "infer", "--checkpoint", checkpoint, "--out", os.path.join(work, "preds.csv")])
    rows = open(os.path.join(work, "preds.csv")).read().splitlines()
    run([gputrain, "export", "--checkpoint", checkpoint, "--out", os.path.join(work, "net.safetensors")])

    sys.path.insert(0, work)
    from net import Net  # noqa: E402  (the user's module file, written above)
    trained, _, _ = load_weights(os.path.join(work, "net.safetensors"))
    model = Net(classes=2)
    model.load_state_dict(trained, strict=True)  # raises on a missing or extra name
    moved = max((trained[k].float() - start[k].float()).abs().max().item() for k in start)
    # The eval program with the trained weights: the same function as the module in eval mode.
    program = torch.export.load(os.path.join(work, "net.eval.pt2")).module()
    program.load_state_dict(trained, strict=True)
    x = torch.randn(4, 3, 16, 16)
    with torch.no_grad():
        diff = (program(x) - model.eval()(x)).abs().max().item()
    problems = []
    if "evaluates with" not in out or "net.eval.pt2" not in out:
        problems.append("train did not say it evaluates with net.eval.pt2")
    if len(rows) != 1 + 16:
        problems.append(f"infer wrote {len(rows)} lines, expected a header and 16 rows")
    if moved <= 0:
        problems.append("the exported weights are the start's: nothing trained")
    if diff > 1e-5:
        problems.append(f"the eval program and the module disagree by {diff:.3g}")
    line = f"test accuracy {accuracy:.3f}, weights moved {moved:.3g}, eval program vs module {diff:.3g}"
    print(("pass: " if not problems else "FAIL: " + "; ".join(problems) + ": ") + line)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
