#!/usr/bin/env python3
"""Hostile checkpoints for gputrain's reader, made at test time: each is refused at once, runs
nothing (a payload would create the file MARKER in the working folder), and costs little memory.

    crafted_checkpoints.py OUT_DIR                write the set below into OUT_DIR
    crafted_checkpoints.py --setstate IN OUT      IN (an old-format checkpoint, a TorchScript
                                                  archive) with a __setstate__ in its code
    crafted_checkpoints.py --forge-record CKPT [FILE]
                                                  CKPT (a TorchScript run's) rewritten so its
                                                  record names a net.pt2 model, untrusted, and
                                                  its program as FILE (default: kept)

The set (each a zip as torch.save lays it out, with gputrain's format tag in its pickle):
  deep_tuples.pt    a million TUPLE1s nested in each other (1 MB)
  deep_dicts.pt     dicts nested 1,000 deep, built top-down through the memo
  laughs.pt         a "billion laughs": 30 levels of dicts, each holding the one below 10 times
  flood.pt          a million empty lists on the stack (1 MB of one-byte opcodes)
  foreign.pt        os.system('touch MARKER') where the model should be
  eval.pt           builtins.eval of a string, and subprocess.Popen
  memo.pt           a memo read at index 2**32 - 1
  bomb.pt           an old-format archive whose deflated code member inflates to 200 MB
  long_string.pt    a string that claims 2**60 bytes
  shared_params.pt  one list of 20,000 parameter indices shared by 1,000 optimizer groups
  long_names.pt     2,000 weights under one 1 MB name (stored once, read through the memo)
  expanded.pt       a weight of 2**31 elements over one float (strides 0)
  format_overflow.pt  format 4294967299 (3 if read as a 32-bit int)
"""
import struct
import sys
import zipfile

TAG = "gputrain-checkpoint-3"


def unicode(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def archive(path, pkl, extra=None, torchscript=False):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")
        if torchscript:
            z.writestr("archive/constants.pkl", b"\x80\x02).")
        for name, data, method in extra or []:
            info = zipfile.ZipInfo(name)
            info.compress_type = method
            z.writestr(info, data)


def head():
    """The start of a checkpoint's dict, up to its model: a format tag and a sound "meta", so
    that the reader gets past them to the hostile part."""
    meta = b"}(" + b"".join(unicode(k) + b"K\x00" for k in ("epoch", "samples", "step", "evals_since_best"))
    meta += unicode("best_score") + b"G" + bytes(8) + unicode("config") + unicode("{}") + b"u"
    return b"\x80\x02}(" + unicode("format") + unicode(TAG) + unicode("meta") + meta


def with_model(model_ops):
    """{'format': TAG, 'meta': {...}, 'model': <model_ops>} as a pickle."""
    return head() + unicode("model") + model_ops + b"u."


def main():
    if sys.argv[1] == "--setstate":
        src, dst = sys.argv[2], sys.argv[3]
        with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
            done = False
            for info in zin.infolist():
                data = zin.read(info.filename)
                if not done and info.filename.endswith("/code/__torch__.py"):
                    # The red team's spelling: a tab after def, which a search for "def " misses.
                    data += (b"\n  def\t__setstate__(self: __torch__.Module, state: Tuple[str]) -> None:\n"
                             b"    _0 = torch.from_file(\"MARKER\", True, 1)\n    return None\n")
                    done = True
                zout.writestr(info, data)
            assert done, "no code/__torch__.py in " + src
        return

    if sys.argv[1] == "--forge-record":
        import json
        import torch
        path = sys.argv[2]
        ckpt = torch.load(path, weights_only=True)
        record = json.loads(ckpt["meta"]["config"])
        for side in ("requested", "resolved"):
            record[side]["model"], record[side]["trust_program"] = "net.pt2", False
        if len(sys.argv) > 3:
            record["program"]["file"] = sys.argv[3]
        ckpt["meta"]["config"] = json.dumps(record)
        torch.save(ckpt, path)
        return

    out = sys.argv[1]
    archive(f"{out}/deep_tuples.pt", with_model(b")" + b"\x85" * 1_000_000))
    # Dicts built top-down through the memo (each SETITEM leaves its parent on the stack: those
    # go into a "junk" list), 1,000 deep: past what a walk of the model may descend.
    chain = bytearray(b"}r" + struct.pack("<I", 0))
    for i in range(1, 1000):
        chain += b"j" + struct.pack("<I", i - 1) + unicode("a") + b"}r" + struct.pack("<I", i) + b"s"
    archive(f"{out}/deep_dicts.pt", head() + unicode("junk") + b"](" +
            bytes(chain) + b"e" + unicode("model") + b"j" + struct.pack("<I", 0) + b"u.")
    # 30 levels, each a dict holding the level below under 10 keys: 10**29 paths to the bottom.
    laughs = bytearray(b"}r" + struct.pack("<I", 0))
    for i in range(1, 30):
        laughs += b"}("
        for k in range(10):
            laughs += unicode(str(k)) + b"j" + struct.pack("<I", i - 1)
        laughs += b"ur" + struct.pack("<I", i)
    archive(f"{out}/laughs.pt", head() + unicode("junk") + b"](" +
            bytes(laughs) + b"e" + unicode("model") + b"j" + struct.pack("<I", 29) + b"u.")
    archive(f"{out}/flood.pt", b"\x80\x02" + unicode(TAG) + b"]" * 1_000_000 + b".")
    archive(f"{out}/foreign.pt", with_model(b"cos\nsystem\n(" + unicode("touch MARKER") + b"tR"))
    archive(f"{out}/eval.pt", with_model(b"cbuiltins\neval\n(" + unicode("open('MARKER','w')") + b"tR"))
    archive(f"{out}/memo.pt", with_model(b"j\xff\xff\xff\xff"))
    archive(f"{out}/bomb.pt", b"\x80\x02}(" + unicode("meta.format") + unicode("gputrain-checkpoint-2") + b"u.",
            extra=[("archive/code/__torch__.py", b"#" * (200 << 20), zipfile.ZIP_DEFLATED)], torchscript=True)
    archive(f"{out}/long_string.pt", with_model(b"\x8d" + struct.pack("<Q", 1 << 60) + b"abc"))
    # From the red team's second pass:
    # 2,000 weights under one name of 1 MB, stored once and read through the memo;
    name = unicode("w" * 1_000_000) + b"r" + struct.pack("<I", 1)
    tensor = (b"ctorch._utils\n_rebuild_tensor_v2\n((" + unicode("storage") + b"ctorch\nFloatStorage\n" +
              unicode("0") + unicode("cpu") + b"K\x01tQK\x00(K\x01t(K\x01t\x89ccollections\nOrderedDict\n)RtR")
    entries = name + tensor + b"r" + struct.pack("<I", 2) + b"".join(
        b"j" + struct.pack("<I", 1) + b"j" + struct.pack("<I", 2) for _ in range(1999))
    archive(f"{out}/long_names.pt", with_model(b"}(" + entries + b"u"), extra=[("archive/data/0", bytes(4), zipfile.ZIP_STORED)])
    # one params list of 20,000 indices shared by 1,000 optimizer groups (walked once, not 1,000 times);
    params = b"](" + b"".join(b"J" + struct.pack("<i", i) for i in range(20_000)) + b"er" + struct.pack("<I", 0)
    groups = b"](" + b"".join(b"}(" + unicode("params") + (params if g == 0 else b"j" + struct.pack("<I", 0)) + b"u"
                              for g in range(1000)) + b"e"
    archive(f"{out}/shared_params.pt", head() + unicode("model") + b"}(" + unicode("w") + tensor + b"u" +
            unicode("optimizer") + b"}(" + unicode("param_groups") + groups + unicode("state") + b"}" + b"uu.",
            extra=[("archive/data/0", bytes(4), zipfile.ZIP_STORED)])
    # a weight whose strides are 0: 2**31 elements claimed over one float;
    expanded = tensor.replace(b"(K\x01t(K\x01t", b"(J\x00\x00\x01\x00J\x00\x80\x00\x00t(K\x00K\x00t")
    archive(f"{out}/expanded.pt", with_model(b"}(" + unicode("w") + expanded + b"u"),
            extra=[("archive/data/0", bytes(4), zipfile.ZIP_STORED)])
    # and a format number past 32 bits (4294967299 read as an int is 3).
    archive(f"{out}/format_overflow.pt", head().replace(unicode(TAG), unicode("gputrain-checkpoint-4294967299")) +
            unicode("model") + b"}u.")


if __name__ == "__main__":
    main()
