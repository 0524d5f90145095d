"""gputrain's RandAugment / TrivialAugmentWide operations against torchvision v2's, for
tests/test_augment.cpp.

  augment_check.py DIR     DIR/cases: "op magnitude channels h w in out" per line, in and out being
                           gputrain's CHW float32 image before and after the operation; DIR/tables:
                           "policy op bin h w magnitude" per line.

Each operation is run through torchvision.transforms.v2's _apply_image_or_video_transform on the
same float image. Geometry (nearest sampling) must agree on all but 0.5% of the pixels (ties in
rounding a coordinate), everything else within 1e-5; the magnitude tables within 1e-6.
Without torchvision (.pydeps) it prints "torchvision absent" and checks nothing.
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import twins  # noqa: E402,F401  (puts the repo's .pydeps on the path)

try:
    from torchvision.transforms import v2
except ImportError:
    print("torchvision absent")
    sys.exit(0)

GEOMETRY = {"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate"}


def main(folder):
    rand, trivial = v2.RandAugment(), v2.TrivialAugmentWide()
    bad = 0
    worst = {}
    for line in open(os.path.join(folder, "cases")):
        op, m, c, h, w, src, out = line.split()
        m, c, h, w = float(m), int(c), int(h), int(w)
        img = torch.from_numpy(np.fromfile(os.path.join(folder, src), dtype=np.float32)).view(c, h, w)
        ours = torch.from_numpy(np.fromfile(os.path.join(folder, out), dtype=np.float32)).view(c, h, w)
        theirs = rand._apply_image_or_video_transform(img.clone(), op, m, interpolation=rand.interpolation,
                                                       fill=rand._fill)
        diff = (ours - theirs).abs()
        if op in GEOMETRY:
            share = (diff > 1e-6).float().mean().item()
            ok = share <= 0.005
            score = share
        else:
            score = diff.max().item()
            ok = score <= 1e-5
        worst[op] = max(worst.get(op, 0.0), score)
        if not ok:
            bad += 1
            print(f"{op} m={m} {c}x{h}x{w}: {'share of pixels differing' if op in GEOMETRY else 'max diff'} {score}")
    for line in open(os.path.join(folder, "tables")):
        policy, op, b, h, w, m = line.split()
        t = rand if policy == "rand" else trivial
        fn, _ = t._AUGMENTATION_SPACE[op]
        mags = fn(31, int(h), int(w))
        want = 0.0 if mags is None else float(mags[int(b)])
        if abs(want - float(m)) > 1e-6:
            bad += 1
            print(f"table {policy} {op} bin {b}: gputrain {m}, torchvision {want}")
    print("worst per op: " + ", ".join(f"{k} {v:.2g}" for k, v in sorted(worst.items())))
    print(f"augment: {bad} mismatches")
    return bad == 0


if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1]) else 1)
