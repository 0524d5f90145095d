#!/usr/bin/env python3
"""A gputrain checkpoint (format 3) read by PyTorch as data: torch.load(weights_only=True) opens
it, its "model" dict loads into the family's PyTorch twin with strict=True and equals the
weights the same run exported, and its "optimizer" dict loads into torch.optim.AdamW built with
gputrain's two parameter groups (decayed weights, then biases and norms).

    checkpoint_check.py CHECKPOINT EXPORT FAMILY INPUT_SHAPE OUTPUTS WIDTH

Exit code 0 = pass.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_export import load_weights  # noqa: E402
from twins import make_twin  # noqa: E402


def main():
    path, export, family, shape, outputs, width = sys.argv[1:7]
    ck = torch.load(path, weights_only=True, map_location="cpu")
    assert ck["format"] == "gputrain-checkpoint-3", ck["format"]
    assert set(ck) >= {"format", "meta", "model", "optimizer", "scaler", "rng"}, sorted(ck)
    meta = ck["meta"]
    assert meta["step"] > 0 and meta["epoch"] >= 1 and isinstance(meta["config"], str), meta
    twin = make_twin(family, [int(d) for d in shape.split("x")], int(outputs), width=int(width))
    twin.load_state_dict(ck["model"], strict=True)
    exported = load_weights(export)[0]
    for name, t in twin.state_dict().items():
        assert torch.equal(t, exported[name].to(t.dtype)), name
    params = list(twin.parameters())
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2]},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}])
    opt.load_state_dict(ck["optimizer"])
    for p in params:
        s = opt.state[p]
        assert s["exp_avg"].shape == p.shape and float(s["step"]) == meta["step"], (p.shape, s["step"])
    print(f"ok: {len(ck['model'])} tensors into the {family} twin, AdamW state of {len(opt.state)} parameters, "
          f"step {meta['step']}")


if __name__ == "__main__":
    main()
