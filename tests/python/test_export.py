#!/usr/bin/env python3
"""The export round trip from Python: gputrain's model.safetensors loads into torchvision's
resnet18 (as it is for the ImageNet stem; its CIFAR variant, 3x3 stem and no max-pool, for the
small stem) with strict=True and gives gputrain's outputs.

Run by tests/test_export.cpp with the venv's Python; a plain script: exit code 0 = pass.

  test_export.py WEIGHTS INPUT.f32 OUTPUT.f32 N C H W NUM_CLASSES small|imagenet

INPUT.f32 / OUTPUT.f32 hold raw little-endian float32 (the C++ side's input batch and its
eval-mode outputs). Prints one line "max_abs_diff X via <model source>, <loader>".

torchvision comes from the repo's .pydeps folder (tools/setup.sh installs it there). Where it is
absent (an offline machine), the copy of torchvision's module tree in twins.py stands in, so the
names and layouts are still checked; the printed line says which one ran.
GPUTRAIN_TEST_NO_TORCHVISION=1 uses the copy even where torchvision is present.
"""
import json
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from twins import make_resnet  # noqa: E402  (it also puts the repo's .pydeps on the path)

NUMPY_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
                "I8": "i1", "U8": "u1", "BOOL": "?"}


def load_weights(path):
    """The safetensors package when present, else the format parsed here (json + numpy)."""
    try:
        from safetensors.torch import load_file
        from safetensors import safe_open
        with safe_open(path, "pt") as f:
            meta = f.metadata()
        return load_file(path), meta, "safetensors " + __import__("safetensors").__version__
    except ImportError:
        pass
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    assert (8 + n) % 8 == 0, "header not padded to a multiple of 8"
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = memoryview(blob)[8 + n:]
    tensors, end = {}, 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        begin, stop = info["data_offsets"]
        assert begin == end, f"{name}: data not contiguous"
        end = stop
        raw = data[begin:stop]
        if info["dtype"] == "BF16":
            t = torch.from_numpy(np.frombuffer(raw, "<i2").copy()).view(torch.bfloat16)
        else:
            t = torch.from_numpy(np.frombuffer(raw, NUMPY_DTYPES[info["dtype"]]).copy())
        tensors[name] = t.reshape(info["shape"])
    assert end == len(data), "bytes after the last tensor"
    return tensors, meta, "json+numpy parser"


def make_resnet18(num_classes, channels, stem):
    """torchvision's resnet18 with gputrain's stem, or twins.py's copy of its module tree."""
    model = make_resnet("resnet18", (channels, 224, 224), num_classes, stem=stem)
    if model.source == "torchvision":
        import torchvision
        return model, "torchvision " + torchvision.__version__
    return model, "built-in copy of torchvision's resnet18 (torchvision absent)"


def main():
    weights, x_path, y_path, n, c, h, w, k, stem = sys.argv[1:10]
    n, c, h, w, k = int(n), int(c), int(h), int(w), int(k)
    tensors, meta, loader = load_weights(weights)
    assert meta.get("format") == "pt", f"metadata format is {meta.get('format')!r}"
    assert meta.get("gputrain_model") == "resnet18", meta
    assert tensors["bn1.num_batches_tracked"].dtype == torch.int64
    model, source = make_resnet18(k, c, stem)
    model.load_state_dict(tensors, strict=True)  # raises on any missing, unexpected or misshaped name
    model.eval()
    x = torch.from_numpy(np.fromfile(x_path, "<f4").reshape(n, c, h, w))
    expected = torch.from_numpy(np.fromfile(y_path, "<f4").reshape(n, k))
    with torch.no_grad():
        got = model(x)
    diff = (got - expected).abs().max().item()
    print(f"{stem} stem: max_abs_diff {diff:.3g} (outputs up to {expected.abs().max().item():.3g}) via {source}, {loader}")
    assert torch.allclose(got, expected, atol=1e-4, rtol=0), f"outputs differ: max abs diff {diff}"


if __name__ == "__main__":
    main()
