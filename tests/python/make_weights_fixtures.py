"""Weights files for testing `gputrain train --init_from FILE`, good and bad.

    python tests/python/make_weights_fixtures.py OUTDIR
    python tests/python/make_weights_fixtures.py --convert WEIGHTS.safetensors OUT.pth

The second form re-saves a safetensors file as torch.save(state_dict) (the same weights in the
other format, for the test that both give the same start).

Every file derives from one small seeded state_dict of gputrain's mlp (src/models/mlp.cpp):
fc1 (8 -> 16), fc2 (16 -> 16), fc3 (16 -> 10), i.e. a run with
`--dataset synthetic --input_shape 8 --model mlp --width 16` (10 classes).

Files gputrain must load (exit 0, an `init_from:` block):
    good.pth                 torch.save(state_dict), zip format
    good.safetensors         the same tensors as safetensors (written by hand: the package is optional)
    wrapped.pth              {"epoch": 3, "state_dict": {"module." + name: tensor}}: a wrapper and a DDP prefix

Files gputrain must refuse (exit 2, one `gputrain: error: <file>: ...` line, nothing large allocated):
    truncated.pth            good.pth cut to half its bytes
    not_weights.txt          text
    legacy.pth               torch.save(..., _use_new_zipfile_serialization=False)
    torchscript.pt           torch.jit.save(torch.jit.script(model))
    forbidden_<global>.pth   good.pth with data.pkl replaced by a pickle that would call os.system,
                             builtins.eval, subprocess.Popen, __builtin__.exec or __main__.Evil
    header_past_end.safetensors  a header length past the end of the file
    huge_shape.safetensors   a [2**29, 4] F32 tensor (8 GiB) whose data_offsets cover 16 bytes
    huge_shape.pth           a tensor of size (2**31,) over a storage of 4 floats
    huge_storage.pth         a storage claiming 2**40 floats for a member of 64 bytes
    wrong_dtype.safetensors  good.safetensors with fc1.weight stored as I32
    shape_mismatch.pth       fc2.weight of shape 17x16 instead of 16x16
    view_of_view.pth         a tensor rebuilt on another tensor (a stride-0 view claiming 2**40) instead of a storage
    overflow.pth             sizes 2**62 x 2**62 (strides 0): their product overflows
    deflated.pth             good.pth with data.pkl deflated (torch.save never compresses)
    overlap.pth              50 directory entries for one stored 64 KiB blob
    code_checkpoint.pt       a TorchScript module with gputrain's format tag and a __setstate__ that
                             would create OUTDIR/ran_code_from_the_file when loaded

Also loaded: imagenet_example.pth, pytorch/examples' ImageNet checkpoint ({'epoch', 'best_acc1' as
a tensor, 'state_dict' with 'module.' names}), and timm_train.pth, a checkpoint as timm's train.py
saves one ({'state_dict', 'state_dict_ema', 'optimizer', 'args': an argparse.Namespace, ...}).

The malicious pickles are only ever written, never loaded: the script checks each one by
disassembling it (pickletools) and by resolving its globals with an Unpickler whose
find_class records the name and refuses, so nothing in them can run here either.
"""
import argparse
import collections
import io
import json
import os
import pickle
import pickletools
import struct
import sys
import zipfile
import zlib
from typing import Tuple

import torch
import torch.nn.functional as F
from torch import nn

IN_FEATURES, HIDDEN, CLASSES = 8, 16, 10


class Mlp(nn.Module):
    """gputrain's mlp: the same parameter names and shapes (tests/python/twins.py has the full twin)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(IN_FEATURES, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.fc3 = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x.flatten(1))))))


class Evil:
    """A module-level user class: the kind of global a weights file must never be allowed to name."""


# --- safetensors, by hand -------------------------------------------------------------------

# torch dtype -> (safetensors name, little-endian numpy type).
SAFETENSORS_DTYPES = {torch.float32: ("F32", "<f4"), torch.int32: ("I32", "<i4")}


def safetensors_bytes(tensors, header_override=None):
    """The safetensors encoding of `tensors` (name -> tensor), in their order.

    `header_override` (name -> dict of header fields) replaces fields after the offsets are
    computed, so that a fixture can lie about a shape while its data stays what it is.
    """
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        # The format stores raw little-endian bytes in row-major order, whatever the host.
        dtype, np_type = SAFETENSORS_DTYPES[t.dtype]
        data = t.detach().cpu().contiguous().numpy().astype(np_type).tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    for name, fields in (header_override or {}).items():
        header[name].update(fields)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the format pads the header so the data starts 8-aligned
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


# --- torch.save zips ------------------------------------------------------------------------

def rezip(src, dst, replace):
    """Copies the zip `src` to `dst` member by member, replacing or adding those in `replace`.

    `replace` maps a member name relative to the archive folder ("data.pkl", "data/0") to its new
    bytes. Keeping every other member (byteorder, version, ...) and the folder name makes the
    result a torch.save file in every respect but the one under test.
    """
    with zipfile.ZipFile(src) as zin:
        names = zin.namelist()
        folder = next(n[: -len("data.pkl")] for n in names if n.endswith("/data.pkl"))
        todo = {folder + k: v for k, v in replace.items()}
        # torch.save stores its members uncompressed; so do we.
        with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
            for n in names:
                zout.writestr(n, todo.pop(n) if n in todo else zin.read(n))
            for n, data in todo.items():
                zout.writestr(n, data)


# --- pickles, by hand -----------------------------------------------------------------------
# Protocol 2 opcodes. Written by hand so that the bytes say exactly what the test means (pickle.dumps
# would spell os.system as posix.system and builtins as __builtin__), and so that nothing is called.

PROTO2 = b"\x80\x02"
STOP, MARK, TUPLE, EMPTY_TUPLE, EMPTY_DICT = b".", b"(", b"t", b")", b"}"
TUPLE1, REDUCE, SETITEM, BINPERSID, NEWFALSE = b"\x85", b"R", b"s", b"Q", b"\x89"


def glob(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def text(s):
    data = s.encode()
    return b"X" + struct.pack("<I", len(data)) + data  # BINUNICODE


def integer(n):
    if 0 <= n < 256:
        return b"K" + bytes([n])  # BININT1
    data = pickle.encode_long(n)
    return b"\x8a" + bytes([len(data)]) + data  # LONG1


def call_pickle(module, name, arg):
    """PROTO 2; module.name(arg); STOP: Python's pickle.loads would make that call."""
    return PROTO2 + glob(module, name) + text(arg) + TUPLE1 + REDUCE + STOP


def tensor_pickle(key, numel, size, stride):
    """{'fc1.weight': _rebuild_tensor_v2(storage, 0, size, stride, False, OrderedDict())}
    with storage = persistent id ('storage', torch.FloatStorage, key, 'cpu', numel): what
    torch.save writes for one float tensor, with whatever claims the caller makes."""
    pid = MARK + text("storage") + glob("torch", "FloatStorage") + text(key) + text("cpu") + integer(numel) + TUPLE
    tup = lambda xs: MARK + b"".join(integer(x) for x in xs) + TUPLE
    rebuild = (glob("torch._utils", "_rebuild_tensor_v2") + MARK + pid + BINPERSID + integer(0) + tup(size) +
               tup(stride) + NEWFALSE + glob("collections", "OrderedDict") + EMPTY_TUPLE + REDUCE + TUPLE + REDUCE)
    return PROTO2 + EMPTY_DICT + text("fc1.weight") + rebuild + SETITEM + STOP


class _Recorder(pickle.Unpickler):
    """Resolves no global: records its name and stops, so a malicious pickle can be checked safely."""

    def find_class(self, module, name):
        raise LookupError(f"{module}.{name}")


def first_global(data):
    """The first global Python's pickle would look up in `data` (raises if none), running nothing."""
    pickletools.dis(data, out=io.StringIO())  # well-formed, opcode by opcode
    try:
        _Recorder(io.BytesIO(data)).load()
    except LookupError as e:
        return e.args[0]
    raise AssertionError("the pickle names no global")


# --- the fixtures ---------------------------------------------------------------------------

def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    path = lambda name: os.path.join(outdir, name)

    torch.manual_seed(0)
    model = Mlp()
    sd = model.state_dict()

    torch.save(sd, path("good.pth"))
    with open(path("good.safetensors"), "wb") as f:
        f.write(safetensors_bytes(sd))
    torch.save({"epoch": 3, "state_dict": {"module." + k: v for k, v in sd.items()}}, path("wrapped.pth"))

    good = open(path("good.pth"), "rb").read()
    with open(path("truncated.pth"), "wb") as f:
        f.write(good[: len(good) // 2])
    with open(path("not_weights.txt"), "w") as f:
        f.write("These are not weights.\nJust a few lines of text,\nfor --init_from to refuse.\n")
    torch.save(sd, path("legacy.pth"), _use_new_zipfile_serialization=False)
    torch.jit.save(torch.jit.script(model), path("torchscript.pt"))

    # Each forbidden global as a real torch.save zip whose data.pkl would call it.
    forbidden = {
        "os.system": call_pickle("os", "system", "echo pwned"),
        "builtins.eval": call_pickle("builtins", "eval", "print('pwned')"),
        "subprocess.Popen": call_pickle("subprocess", "Popen", "echo pwned"),
        "__builtin__.exec": call_pickle("__builtin__", "exec", "print('pwned')"),  # Python 2's spelling
        "__main__.Evil": PROTO2 + glob("__main__", "Evil") + EMPTY_TUPLE + REDUCE + STOP,
    }
    for name, data in forbidden.items():
        assert first_global(data) == name, (name, first_global(data))
        rezip(path("good.pth"), path(f"forbidden_{name}.pth"), {"data.pkl": data})

    # A header length 1000 bytes past the end (small enough to still look like safetensors).
    body = safetensors_bytes(sd)[8:]
    with open(path("header_past_end.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(body) + 1000) + body)

    # A shape of 2**29 x 4 floats (8 GiB) over 16 real bytes: the claim must be checked, not allocated.
    with open(path("huge_shape.safetensors"), "wb") as f:
        f.write(safetensors_bytes({"fc1.weight": torch.zeros(4)}, {"fc1.weight": {"shape": [2**29, 4]}}))

    # A view of 2**31 floats over a storage that truly holds 4 (its member is 16 bytes, so the
    # storage itself is sound and only the view's reach is wrong).
    data = tensor_pickle("0", 4, (2**31,), (1,))
    assert first_global(data) == "torch._utils._rebuild_tensor_v2"
    rezip(path("good.pth"), path("huge_shape.pth"), {"data.pkl": data, "data/0": bytes(16)})
    # A storage claiming 2**40 floats (4 TiB) for a member of 64 bytes.
    data = tensor_pickle("0", 1 << 40, (4,), (1,))
    rezip(path("good.pth"), path("huge_storage.pth"), {"data.pkl": data, "data/0": bytes(64)})

    # fc1.weight as I32 of the same shape: same byte count, so only the dtype is wrong.
    wrong = dict(sd)
    wrong["fc1.weight"] = (sd["fc1.weight"] * 100).round().to(torch.int32)
    with open(path("wrong_dtype.safetensors"), "wb") as f:
        f.write(safetensors_bytes(wrong))

    # fc2.weight 17x16 where the model has 16x16 (fc2 is not the head, so it cannot be skipped).
    mismatch = dict(sd)
    mismatch["fc2.weight"] = torch.randn(HIDDEN + 1, HIDDEN)
    torch.save(mismatch, path("shape_mismatch.pth"))

    # pytorch/examples' ImageNet checkpoint: a wrapper key beside a tensor of its own.
    torch.save({"epoch": 3, "best_acc1": torch.tensor(0.5), "state_dict": {"module." + k: v for k, v in sd.items()}},
               path("imagenet_example.pth"))

    # timm's train.py checkpoint: its command line as an argparse.Namespace beside the weights,
    # their moving average and the optimizer's state (read as data; the Namespace never built).
    opt = torch.optim.SGD([torch.nn.Parameter(v.clone()) for v in sd.values()], lr=0.1, momentum=0.9)
    args = argparse.Namespace(model="mlp", lr=0.1, epochs=3, model_ema=True, mean=(0.5,), std=None, amp=False)
    torch.save({"epoch": 2, "arch": "mlp", "state_dict": sd, "state_dict_ema": {k: v + 1 for k, v in sd.items()},
                "optimizer": opt.state_dict(), "args": args, "version": 2, "metric": 0.5}, path("timm_train.pth"))

    # A tensor rebuilt on another tensor (a stride-0 view of one float claiming 2**40) instead of
    # a storage: only a storage may back a tensor.
    pid = MARK + text("storage") + glob("torch", "FloatStorage") + text("0") + text("cpu") + integer(1) + TUPLE
    tup = lambda xs: MARK + b"".join(integer(x) for x in xs) + TUPLE
    rebuild = lambda base, size, stride: (glob("torch._utils", "_rebuild_tensor_v2") + MARK + base + integer(0) +
                                          tup(size) + tup(stride) + NEWFALSE + glob("collections", "OrderedDict") +
                                          EMPTY_TUPLE + REDUCE + TUPLE + REDUCE)
    view = rebuild(rebuild(pid + BINPERSID, (1 << 40,), (0,)), (16, 8), (8, 1))
    rezip(path("good.pth"), path("view_of_view.pth"),
          {"data.pkl": PROTO2 + EMPTY_DICT + text("fc1.weight") + view + SETITEM + STOP, "data/0": bytes(4)})
    # Sizes whose product overflows 64 bits (strides 0 keep the reach inside the storage).
    rezip(path("good.pth"), path("overflow.pth"),
          {"data.pkl": tensor_pickle("0", 1, (1 << 62, 1 << 62), (0, 0)), "data/0": bytes(4)})
    # data.pkl deflated (PyTorch never compresses): a small file could inflate to a huge pickle.
    with zipfile.ZipFile(path("good.pth")) as zin, zipfile.ZipFile(path("deflated.pth"), "w") as zout:
        for n in zin.namelist():
            zout.writestr(n, zin.read(n), zipfile.ZIP_DEFLATED if n.endswith("data.pkl") else zipfile.ZIP_STORED)
    # 50 directory entries for one stored blob of 64 KiB: 50 storages from the same bytes.
    write_overlapping_zip(path("overlap.pth"), 50, bytes(64 << 10))
    # A TorchScript module carrying gputrain's format tag and a __setstate__ that would write a
    # file when loaded: loading it would run the file's code.
    torch.jit.save(torch.jit.script(Tagged(path("ran_code_from_the_file"))), path("code_checkpoint.pt"))

    for name in sorted(os.listdir(outdir)):
        print(f"{os.path.getsize(path(name)):8d}  {name}")


class Tagged(nn.Module):
    def __init__(self, marker):
        super().__init__()
        self.w = torch.zeros(3)
        self.tag = "gputrain-checkpoint-2"
        self.marker = marker

    def forward(self, x):
        return x + self.w

    @torch.jit.export
    def __getstate__(self) -> Tuple[torch.Tensor, str, str, bool]:
        return self.w, self.tag, self.marker, self.training

    @torch.jit.export
    def __setstate__(self, state: Tuple[torch.Tensor, str, str, bool]):
        torch.from_file(state[2], shared=True, size=1, dtype=torch.uint8).fill_(1)
        self.w, self.tag, self.marker, self.training = state[0], state[1], state[2], state[3]


def write_overlapping_zip(path, count, blob):
    """A zip whose `count` directory entries archive/data/<k> all point at one stored `blob`."""
    numel = len(blob) // 4
    pid = lambda k: (MARK + text("storage") + glob("torch", "FloatStorage") + text(str(k)) + text("cpu") +
                     integer(numel) + TUPLE + BINPERSID)
    tensors = b"".join(text(f"t{k}") + glob("torch._utils", "_rebuild_tensor_v2") + MARK + pid(k) + integer(0) +
                       MARK + integer(numel) + TUPLE + MARK + integer(1) + TUPLE + NEWFALSE +
                       glob("collections", "OrderedDict") + EMPTY_TUPLE + REDUCE + TUPLE + REDUCE + SETITEM
                       for k in range(count))
    pkl = PROTO2 + EMPTY_DICT + tensors + STOP
    out, directory = bytearray(), bytearray()

    def local(name, data):
        offset, n = len(out), name.encode()
        out.extend(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0, zlib.crc32(data), len(data), len(data),
                               len(n), 0) + n + data)
        return offset

    def central(name, data, offset):
        n = name.encode()
        directory.extend(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0, zlib.crc32(data), len(data),
                                     len(data), len(n), 0, 0, 0, 0, 0, offset) + n)

    pkl_at, blob_at = local("archive/data.pkl", pkl), local("archive/data/0", blob)
    central("archive/data.pkl", pkl, pkl_at)
    for k in range(count):
        central(f"archive/data/{k}", blob, blob_at)
    start = len(out)
    out.extend(directory)
    out.extend(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count + 1, count + 1, len(directory), start, 0))
    with open(path, "wb") as f:
        f.write(out)


def convert(src, dst):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from test_export import load_weights  # the safetensors package when present, else its own parser
    tensors, _, _ = load_weights(src)
    torch.save(collections.OrderedDict(sorted(tensors.items())), dst)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--convert":
        convert(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 2:
        main(sys.argv[1])
    else:
        sys.exit(__doc__)
