#!/usr/bin/env python3
"""The self-test of tools/export_model.py, run as users run it (a subprocess) on small modules
written into WORKDIR:

    export_model_check.py WORKDIR

  - good: nets.py:Net (Conv2d, BatchNorm2d, Dropout, Linear), the default --out, run from its
    folder: writes net.pt2 and net.eval.pt2; both load with torch.export.load, keep the TRAINING
    verifier (models/model.json in the zip), run a batch of 3 (the batch stays dynamic) to
    [3, outputs]; batch_norm and dropout are in training mode in net.pt2, not in net.eval.pt2.
  - weights: the module path form (nets:make_net, a function returning the module, run with
    WORKDIR as the current directory) with --args and --weights (a state_dict under a
    "state_dict" key, BatchNorm statistics set away from their defaults): every tensor of both
    programs equals the state_dict's, and the eval program gives model.eval()'s outputs.
  - cond / custom op: a forward with torch.cond, and one calling an operator registered with
    torch.library.custom_op: exit code 2, one line naming the operator, no file written.
  - fixed batch: a forward that does x.view(2, -1): exit code 2, one line on the batch size, no
    file written.
  - ids: an embedding model written as the README says (float ids cast in forward): without
    --input-range exit code 2, one line naming --input-range, no file written; with
    --input-range 0,50 it exports, and the program gives the module's outputs on ids.

Prints one summary line; exit code 0 = pass, 1 = a check failed.
"""
import json
import os
import shutil
import subprocess
import sys
import zipfile

import torch

sys.dont_write_bytecode = True  # importing nets.py below leaves no __pycache__

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "tools", "export_model.py")
OUTPUTS = 5

NETS = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, num_classes=10, width=4):
        super().__init__()
        self.conv = nn.Conv2d(3, width, 3, padding=1)
        self.bn = nn.BatchNorm2d(width)
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(width, num_classes)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x))).mean((2, 3))
        return self.fc(self.drop(x))


def make_net(num_classes, width=4):
    return Net(num_classes, width)
'''

COND = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 5)

    def forward(self, x):
        y = self.fc(x.flatten(1))
        return torch.cond(y.sum() > 0, lambda t: t * 2, lambda t: t - 1, (y,))
'''

CUSTOM = '''
import torch
from torch import nn


@torch.library.custom_op("exportcheck::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice.register_fake
def _(x):
    return torch.empty_like(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 5)

    def forward(self, x):
        return twice(self.fc(x.flatten(1)))
'''

IDS = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 4)
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        return self.fc(self.emb(x.long()).mean(1))
'''

FIXED = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 5)

    def forward(self, x):
        return self.fc(x.view(2, -1))
'''


class CheckFailed(Exception):
    pass


def expect(ok, message):
    if not ok:
        raise CheckFailed(message)


def export_model(args, cwd):
    """Runs the tool; (exit code, stdout, stderr)."""
    p = subprocess.run([sys.executable, os.path.abspath(TOOL)] + args, cwd=cwd, capture_output=True, text=True,
                       timeout=600, env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    return p.returncode, p.stdout, p.stderr


def verifiers(path):
    with zipfile.ZipFile(path) as z:
        name = next(n for n in z.namelist() if n.endswith("models/model.json"))
        return json.loads(z.read(name))["verifiers"]


def mode_flags(ep):
    """The `train` flag of each dropout and the `training` flag of each batch_norm in the graph."""
    flags = []
    for n in ep.graph.nodes:
        if n.target is torch.ops.aten.dropout.default:
            flags.append(n.args[2])
        elif n.target is torch.ops.aten.batch_norm.default:
            flags.append(n.args[5])
    return flags


def check_good(folder):
    kwargs = json.dumps({"num_classes": OUTPUTS})
    rc, out, err = export_model(["nets.py:Net", "--input-shape", "3x8x8", "--kwargs", kwargs], folder)
    expect(rc == 0, f"exit code {rc}: {err.strip()}")
    programs = {}
    for name in ("net.pt2", "net.eval.pt2"):
        path = os.path.join(folder, name)
        expect(os.path.isfile(path), f"{name} not written")
        expect(name in out, f"{name} not in the printed lines: {out.strip()}")
        expect("TRAINING" in verifiers(path), f"{name}: verifiers {verifiers(path)}, not TRAINING")
        ep = torch.export.load(path)
        with torch.no_grad():
            y = ep.module()(torch.randn(3, 3, 8, 8))
        expect(tuple(y.shape) == (3, OUTPUTS), f"{name}: a batch of 3 gives shape {list(y.shape)}")
        programs[name] = ep
    expect("gputrain train --model net.pt2" in out, f"no gputrain command line: {out.strip()}")
    train, eval_ = mode_flags(programs["net.pt2"]), mode_flags(programs["net.eval.pt2"])
    expect(train == [True, True], f"net.pt2: batch_norm and dropout flags {train}, not train mode")
    expect(eval_ == [False, False], f"net.eval.pt2: batch_norm and dropout flags {eval_}, not eval mode")
    return "net.pt2 + net.eval.pt2, TRAINING, dynamic batch"


def check_weights(workdir, folder):
    sys.path.insert(0, workdir)
    import nets  # the module file written into WORKDIR
    torch.manual_seed(7)
    model = nets.make_net(OUTPUTS, 6)
    with torch.no_grad():  # BatchNorm statistics no fresh module has
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.running_var.uniform_(0.5, 2)
        model.bn.num_batches_tracked.fill_(17)
    state = model.state_dict()
    weights = os.path.join(folder, "weights.pth")
    torch.save({"state_dict": state, "epoch": 3}, weights)
    out_path = os.path.join(folder, "out", "mine.pt2")
    rc, out, err = export_model(["nets:make_net", "--input-shape", "3x8x8", "--args", json.dumps([OUTPUTS, 6]),
                                 "--weights", weights, "--out", out_path], workdir)
    expect(rc == 0, f"exit code {rc}: {err.strip()}")
    x = torch.randn(4, 3, 8, 8)
    for path in (out_path, out_path[:-len(".pt2")] + ".eval.pt2"):
        ep = torch.export.load(path)
        got = ep.state_dict
        for k, v in state.items():
            expect(k in got, f"{os.path.basename(path)}: no tensor {k}")
            expect(torch.equal(got[k], v), f"{os.path.basename(path)}: {k} differs from the --weights file")
    with torch.no_grad():
        want = model.eval()(x)
        y = torch.export.load(out_path[:-len(".pt2")] + ".eval.pt2").module()(x)
    expect(torch.allclose(y, want, rtol=1e-4, atol=1e-5), "the eval program does not give model.eval()'s outputs")
    return f"{len(state)} tensors equal in both programs"


def check_refused(folder, source, expected, what):
    """The tool exits 2 with one line (its own) containing each of `expected`, and writes nothing."""
    with open(os.path.join(folder, "bad.py"), "w") as f:
        f.write(source)
    out_dir = os.path.join(folder, "out")
    rc, out, err = export_model(["bad.py:Net", "--input-shape", "3x2x2", "--out", os.path.join(out_dir, "bad.pt2")],
                                folder)
    expect(rc == 2, f"exit code {rc}, not 2: {err.strip()[-300:]}")
    lines = [line for line in err.splitlines() if line.startswith("export_model:")]
    expect(len(lines) == 1, f"{len(lines)} lines from export_model on stderr: {err.strip()[-300:]}")
    for word in expected:
        expect(word in lines[0], f"the line does not name {word!r}: {lines[0]}")
    expect(not os.path.exists(out_dir), f"{out_dir} was written")
    return what


def check_ids(folder):
    """An embedding model: refused with the hint without --input-range, exported with it."""
    refused = check_refused(folder, IDS, ["forward fails on the example input", "--input-range 0,VOCAB"], "refused")
    out = os.path.join(folder, "ids.pt2")
    rc, _, err = export_model(["bad.py:Net", "--input-shape", "6", "--input-range", "0,50", "--out", out], folder)
    expect(rc == 0, f"--input-range 0,50: exit code {rc}: {err.strip()[-300:]}")
    sys.path.insert(0, folder)
    import bad  # noqa: E402 (the module the tool exported)
    torch.manual_seed(0)
    model = bad.Net().eval()
    model.load_state_dict(torch.export.load(out[:-4] + ".eval.pt2").state_dict)
    ids = torch.randint(0, 50, (3, 6)).float()
    got = torch.export.load(out[:-4] + ".eval.pt2").module()(ids)
    expect(torch.allclose(got, model(ids)), "the exported eval program's outputs differ from the module's")
    return f"{refused} without --input-range, exported with it"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: export_model_check.py WORKDIR")
    workdir = os.path.abspath(sys.argv[1])
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    with open(os.path.join(workdir, "nets.py"), "w") as f:
        f.write(NETS)

    def folder(name):
        path = os.path.join(workdir, name)
        os.makedirs(path)
        return path

    good = folder("good")
    shutil.copy(os.path.join(workdir, "nets.py"), good)
    checks = [
        ("good", lambda: check_good(good)),
        ("weights", lambda: check_weights(workdir, folder("weights"))),
        ("cond", lambda: check_refused(folder("cond"), COND, ["cond", "higher-order"], "refused")),
        ("custom op", lambda: check_refused(folder("custom"), CUSTOM, ["exportcheck::twice", "custom operator"],
                                            "refused")),
        ("fixed batch", lambda: check_refused(folder("fixed"), FIXED, ["batch size"], "refused")),
        ("ids", lambda: check_ids(folder("ids"))),
    ]
    done = []
    for name, check in checks:
        try:
            done.append(f"{name}: {check()}")
        except CheckFailed as e:
            print(f"export_model_check: FAIL: {name}: {e}")
            sys.exit(1)
        except Exception as e:  # a crash in the check itself fails it too, with one line
            print(f"export_model_check: FAIL: {name}: {type(e).__name__}: {' '.join(str(e).split())[:300]}")
            sys.exit(1)
    print(f"export_model_check: pass ({'; '.join(done)})")
    sys.exit(0)


if __name__ == "__main__":
    main()
