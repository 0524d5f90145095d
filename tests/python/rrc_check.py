"""gputrain's RandomResizedCrop against torchvision's, for tests/test_random_resized_crop.cpp.

  rrc_check.py boxes CASES     CASES: one case per line, "h w scale_lo scale_hi ratio_lo ratio_hi
                               top left height width d1 d2 ...": an image size, the ranges, the box
                               gputrain drew and the draws it made. Each is replayed through
                               torchvision's RandomResizedCrop.get_params (its torch.empty().uniform_
                               and torch.randint return the same draws) and the boxes compared.
  rrc_check.py pixels DIR      DIR/cases: "png out_h out_w top left height width raw" per line, raw
                               being gputrain's CHW float32 output for that crop of that PNG;
                               compared with torchvision v2's resized_crop (bilinear, antialias) on
                               the float image (max 1e-4) and on the uint8 image (max 2/255).

Without torchvision (.pydeps), boxes are checked against this file's copy of its algorithm and
"torchvision absent" is printed; pixels need it and are skipped with that line.
"""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import twins  # noqa: E402,F401  (puts the repo's .pydeps on the path)

try:
    from torchvision.transforms import RandomResizedCrop
    import torchvision.transforms.v2.functional as TF
    from PIL import Image
except ImportError:
    RandomResizedCrop = None


def copy_of_get_params(height, width, scale, ratio):
    """torchvision 0.29's RandomResizedCrop.get_params, written out (the draws replayed as below)."""
    area = height * width
    log_ratio = torch.log(torch.tensor(ratio))
    for _ in range(10):
        target_area = area * torch.empty(1).uniform_(scale[0], scale[1]).item()
        aspect_ratio = torch.exp(torch.empty(1).uniform_(log_ratio[0], log_ratio[1])).item()
        w = int(round(math.sqrt(target_area * aspect_ratio)))
        h = int(round(math.sqrt(target_area / aspect_ratio)))
        if 0 < w <= width and 0 < h <= height:
            i = torch.randint(0, height - h + 1, size=(1,)).item()
            j = torch.randint(0, width - w + 1, size=(1,)).item()
            return i, j, h, w
    in_ratio = float(width) / float(height)
    if in_ratio < min(ratio):
        w = width
        h = int(round(w / min(ratio)))
    elif in_ratio > max(ratio):
        h = height
        w = int(round(h * max(ratio)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


class Replay:
    """torch.empty(1).uniform_(lo, hi) and torch.randint(lo, hi) that return recorded draws."""

    def __init__(self, draws):
        self.draws = list(draws)
        self.saved = None

    def __enter__(self):
        self.saved = torch.empty, torch.randint
        replay = self

        class Draw:
            def uniform_(self, lo, hi):
                v = replay.draws.pop(0)
                assert float(lo) - 1e-6 <= v <= float(hi) + 1e-6, (lo, hi, v)
                return torch.tensor([v], dtype=torch.float32)

        torch.empty = lambda *a, **k: Draw()
        def randint(lo, hi, size=None, **k):
            v = int(replay.draws.pop(0))
            assert lo <= v < hi, (lo, hi, v)
            return torch.tensor([v])
        torch.randint = randint
        return self

    def __exit__(self, *exc):
        torch.empty, torch.randint = self.saved
        assert not self.draws, f"draws left over: {self.draws}"


def boxes(path):
    have_tv = RandomResizedCrop is not None
    if not have_tv:
        print("torchvision absent: boxes checked against this script's copy of get_params")
    bad = n = fallbacks = 0
    for line in open(path):
        f = line.split()
        h, w = int(f[0]), int(f[1])
        scale, ratio = (float(f[2]), float(f[3])), (float(f[4]), float(f[5]))
        ours = tuple(int(v) for v in f[6:10])
        draws = [float(v) for v in f[10:]]
        fallbacks += len(draws) == 20
        img = torch.zeros(1, h, w, dtype=torch.uint8)
        with Replay(draws):
            theirs = RandomResizedCrop.get_params(img, scale, ratio) if have_tv else copy_of_get_params(h, w, scale, ratio)
        n += 1
        if tuple(theirs) != ours:
            bad += 1
            print(f"{h}x{w} scale {scale} ratio {ratio}: gputrain {ours}, torchvision {tuple(theirs)}")
    print(f"boxes: {n - bad} of {n} equal ({fallbacks} center-crop fallbacks)")
    return bad == 0 and n > 0


def pixels(folder):
    if RandomResizedCrop is None:
        print("torchvision absent: pixels not compared")
        return True
    worst_float = worst_uint8 = 0.0
    for line in open(os.path.join(folder, "cases")):
        png, oh, ow, top, left, h, w, raw = line.split()
        oh, ow, top, left, h, w = map(int, (oh, ow, top, left, h, w))
        img = torch.from_numpy(np.asarray(Image.open(os.path.join(folder, png))).copy())
        img = img.unsqueeze(0) if img.dim() == 2 else img.permute(2, 0, 1)
        ours = torch.from_numpy(np.fromfile(os.path.join(folder, raw), dtype=np.float32)).view(-1, oh, ow)
        as_float = TF.resized_crop(img.float() / 255, top, left, h, w, [oh, ow], antialias=True)
        as_uint8 = TF.resized_crop(img, top, left, h, w, [oh, ow], antialias=True).float() / 255
        df, du = (ours - as_float).abs().max().item(), (ours - as_uint8).abs().max().item()
        worst_float, worst_uint8 = max(worst_float, df), max(worst_uint8, du)
        print(f"{png} {h}x{w}+{top}+{left} -> {oh}x{ow}: max diff {df:.2e} (float), {du * 255:.2f}/255 (uint8)")
    print(f"pixels: worst {worst_float:.2e} against the float image, {worst_uint8 * 255:.2f}/255 against uint8")
    return worst_float <= 1e-4 and worst_uint8 <= 2 / 255


if __name__ == "__main__":
    ok = boxes(sys.argv[2]) if sys.argv[1] == "boxes" else pixels(sys.argv[2])
    sys.exit(0 if ok else 1)
