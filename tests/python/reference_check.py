#!/usr/bin/env python3
"""The reference check of one model family: gputrain's training against PyTorch's, step for step.

    reference_check.py FAMILY GPUTRAIN_BIN WORKDIR

From one start (the PyTorch twin's weights, tests/python/twins.py, saved as WORKDIR/start.pth
and loaded by `gputrain train --init_from`), both sides run 3 full-batch SGD steps (lr 0.05,
0.001 for the resnets, which diverge at 0.05 on 16 samples; momentum 0.9, no weight decay, MSE
loss, fp32, NCHW, on the CPU, no shuffling or normalization) on the same small regression data
(.npy files in WORKDIR), then predict the test samples in eval mode. Compared:
  - gputrain's exported weights (train --export) against the twin's after its 3 steps,
    every parameter and buffer: |a - b| <= rtol |b| + atol with rtol 1e-4 and atol 1e-5 x the
    tensor's largest magnitude (BatchNorm's step counter exactly);
  - `gputrain infer` predictions of the run's last checkpoint against the twin's eval outputs:
    atol 1e-5 x max(1, the outputs' largest magnitude).

Shapes and widths are small so that one family checks in seconds on a CPU. resnet18 is also
checked with the ImageNet stem, and transformer also with flat samples (one token per feature);
such an extra case works in WORKDIR/<case>. Prints one line, the worst differences; exit code
0 = pass, 1 = a difference over tolerance, 2 = gputrain failed (its stderr is printed).
"""
import csv
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True  # no __pycache__ left in the source tree by the imports below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_export import load_weights  # noqa: E402  (safetensors package, else its json+numpy parser)
from twins import FAMILIES, make_twin  # noqa: E402

STEPS, MOMENTUM, OUTPUTS, N_TRAIN, N_TEST = 3, 0.9, 3, 16, 8
RTOL, ATOL_REL = 1e-4, 1e-5

# Per family, its cases: (label, sample shape, model options, learning rate). A diverging run
# would compare rounding noise blown up, so each rate keeps its 3 steps' loss in bounds (a resnet
# with BatchNorm fitting 16 samples blows up at 0.05). The first case works in WORKDIR
# itself. --width is always given: the default preset (quickstart) sets a width of its own. The
# resnets at torchvision's width 64 are torchvision's own modules where it is importable.
CASES = {
    "mlp": [("", (20,), {"width": 32}, 0.05)],
    "cnn": [("", (3, 16, 16), {"width": 8}, 0.05)],
    "resnet18": [("", (3, 16, 16), {"width": 64, "stem": "small"}, 0.001),
                 ("imagenet", (3, 72, 72), {"width": 64, "stem": "imagenet"}, 0.001)],
    "resnet34": [("", (3, 16, 16), {"width": 64, "stem": "small"}, 0.001)],
    "resnet50": [("", (3, 16, 16), {"width": 64, "stem": "small"}, 0.001)],
    "lstm": [("", (6, 5), {"width": 16, "depth": 2}, 0.05)],
    "gru": [("", (6, 5), {"width": 16, "depth": 2}, 0.05)],
    "transformer": [("", (6, 8), {"width": 16, "heads": 2, "depth": 1}, 0.05),
                    ("flat", (10,), {"width": 16, "heads": 2, "depth": 1}, 0.05)],
    "cnn3d": [("", (1, 4, 8, 8), {"width": 4, "depth": 2}, 0.05)],
}


class GputrainFailed(Exception):
    pass


def write_data(folder, shape, rng):
    """Fixed float32 samples and (N, OUTPUTS) regression targets as .npy: {name: array}."""
    arrays = {"x_train": rng.standard_normal((N_TRAIN, *shape)), "y_train": rng.standard_normal((N_TRAIN, OUTPUTS)),
              "x_test": rng.standard_normal((N_TEST, *shape)), "y_test": rng.standard_normal((N_TEST, OUTPUTS))}
    arrays = {k: v.astype(np.float32) for k, v in arrays.items()}
    for name, a in arrays.items():
        np.save(os.path.join(folder, name + ".npy"), a)
    return arrays


def pytorch_reference(twin, data, lr, steps=STEPS, bf16=False):
    """The twin after `steps` full-batch SGD steps, and its eval outputs on the test samples
    (with `bf16`, forward passes under bf16 autocast, as gputrain's --amp_dtype bf16 runs them)."""
    opt = torch.optim.SGD(twin.parameters(), lr=lr, momentum=MOMENTUM, weight_decay=0.0)
    x, y = torch.from_numpy(data["x_train"]), torch.from_numpy(data["y_train"])
    twin.train()
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = F.mse_loss(twin(x).float(), y)
        loss.backward()
        opt.step()
    twin.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = twin(torch.from_numpy(data["x_test"])).float()
    return {k: v.detach().clone() for k, v in twin.state_dict().items()}, out


def train_command(binary, family, folder, options, lr, steps=STEPS, init_from=True, bf16=False):
    """`gputrain train` for the same run as pytorch_reference, starting from folder/start.pth
    (without `init_from`, from the weights `family` holds: a net.pt2 file)."""
    def path(name):
        return os.path.join(folder, name)
    cmd = [binary, "train", "--dataset", "npy", "--train_file", path("x_train.npy"),
           "--train_targets", path("y_train.npy"), "--test_file", path("x_test.npy"),
           "--test_targets", path("y_test.npy"), "--task", "regression", "--loss", "mse", "--model", family]
    for name, value in options.items():
        cmd += [f"--{name}", str(value)]
    if init_from:
        cmd += ["--init_from", path("start.pth")]
    cmd += ["--optimizer", "sgd", "--momentum", str(MOMENTUM), "--no-nesterov", "--lr", str(lr),
            "--lr_schedule", "constant", "--warmup_steps", "0", "--weight_decay", "0",
            # One full batch per epoch, in file order, as given: `steps` epochs of one step each.
            "--batch_size", str(N_TRAIN), "--epochs", str(steps), "--max_steps", str(steps),
            "--no-shuffle", "--no-normalize", "--accumulation_steps", "1", "--clip_max_norm", "0",
            "--ema_decay", "0", *(["--use_amp", "--amp_dtype", "bf16"] if bf16 else ["--no-use_amp"]),
            "--no-channels_last",
            # PyTorch's side runs on the CPU: so does this one, with no device recipe on top.
            "--device", "cpu", "--device_preset", "none",
            "--export", path("final.safetensors"), "--output_dir", path("run"), "--seed", "0"]
    return cmd


def run(cmd):
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise GputrainFailed(f"`{' '.join(cmd)}` exited {done.returncode}")
    return done


def last_checkpoint(run_dir):
    """The run's final state: checkpoints/last.pt, else the newest checkpoint there."""
    folder = os.path.join(run_dir, "checkpoints")
    if os.path.exists(os.path.join(folder, "last.pt")):
        return os.path.join(folder, "last.pt")
    found = [os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".pt")] if os.path.isdir(folder) else []
    if not found:
        raise GputrainFailed(f"no checkpoint in {folder}")
    return max(found, key=os.path.getmtime)


def infer(binary, checkpoint, out_csv, expected_targets, flags=()):
    """`gputrain infer` predictions (N, OUTPUTS), rows in sample order; checks the targets it read.
    `flags` go on its command line (--trust_program for a TorchScript model)."""
    run([binary, "infer", "--checkpoint", checkpoint, "--out", out_csv, *flags])
    with open(out_csv, newline="") as f:
        rows = list(csv.DictReader(f))
    rows.sort(key=lambda r: int(r["index"]))
    k = expected_targets.shape[1]
    targets = np.array([[float(r[f"target_{j}"]) for j in range(k)] for r in rows], np.float32)
    preds = np.array([[float(r[f"prediction_{j}"]) for j in range(k)] for r in rows], np.float32)
    if targets.shape != expected_targets.shape or not np.allclose(targets, expected_targets, rtol=0, atol=1e-6):
        raise GputrainFailed(f"{out_csv}: its targets are not y_test.npy (infer read other data)")
    return torch.from_numpy(preds)


def compare_weights(got, expected):
    """(ok, worst line): every tensor of the twin's state_dict against gputrain's of that name."""
    missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
    if missing or extra:
        return False, f"names differ: missing in gputrain's {missing}, not in the twin {extra}"
    ok, worst, worst_ratio = True, "", -1.0
    for name, ref in expected.items():
        t = got[name]
        if t.shape != ref.shape:
            return False, f"{name}: shape {tuple(t.shape)} in gputrain's, {tuple(ref.shape)} in the twin"
        if not ref.is_floating_point():  # BatchNorm's num_batches_tracked: a count, exact
            if not torch.equal(t.to(ref.dtype), ref):
                return False, f"{name}: {t.tolist()} in gputrain's, {ref.tolist()} in the twin"
            continue
        t = t.to(ref.dtype)
        scale = ref.abs().max().item()
        atol = ATOL_REL * max(scale, 1e-12)
        diff = (t - ref).abs()
        ratio = (diff / (atol + RTOL * ref.abs())).max().item()  # > 1: outside the tolerance
        ok &= ratio <= 1.0
        if ratio > worst_ratio:
            worst_ratio = ratio
            worst = f"{name} max_abs_diff {diff.max().item():.3g} (scale {scale:.3g}, {ratio:.2g} of tolerance)"
    return ok, f"worst {worst}"


def check_case(family, binary, folder, shape, options, lr, seed):
    os.makedirs(folder, exist_ok=True)
    # Not gputrain's --seed 0: LibTorch draws the same initial weights as PyTorch for the same
    # seed and layer order, and a run that ignored start.pth would pass unnoticed.
    torch.manual_seed(1000 + seed)
    data = write_data(folder, shape, np.random.default_rng(seed))
    twin = make_twin(family, shape, OUTPUTS, **options)
    # The state_dict itself, as users save it: an OrderedDict with its _metadata, Parameters' data.
    torch.save(twin.state_dict(), os.path.join(folder, "start.pth"))
    ref_weights, ref_out = pytorch_reference(twin, data, lr)

    run(train_command(binary, family, folder, options, lr))
    ok, w_line, out_diff, out_scale = compare_run(binary, folder, data, ref_weights, ref_out)
    source = getattr(twin, "source", "")
    line = (f"weights after {STEPS} steps: {w_line}; eval outputs max_abs_diff {out_diff:.3g} "
            f"(scale {out_scale:.3g})" + (f"; twin {source}" if source else ""))
    return ok, line


def compare_run(binary, folder, data, ref_weights, ref_out, infer_flags=()):
    """A finished run in folder (its --export, then `gputrain infer` of its last checkpoint, with
    `infer_flags`) against the reference: (ok, the weights' worst line, the outputs' largest
    difference, their scale)."""
    weights, _, _ = load_weights(os.path.join(folder, "final.safetensors"))
    w_ok, w_line = compare_weights(weights, ref_weights)
    preds = infer(binary, last_checkpoint(os.path.join(folder, "run")), os.path.join(folder, "preds.csv"),
                  data["y_test"], infer_flags)
    out_scale = ref_out.abs().max().item()
    out_diff = (preds - ref_out).abs().max().item()
    return w_ok and out_diff <= ATOL_REL * max(1.0, out_scale), w_line, out_diff, out_scale


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in FAMILIES:
        sys.exit(f"usage: reference_check.py FAMILY GPUTRAIN_BIN WORKDIR  (FAMILY: {', '.join(FAMILIES)})")
    family, binary, workdir = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    results = []
    try:
        for i, (label, shape, options, lr) in enumerate(CASES[family]):
            ok, line = check_case(family, binary, os.path.join(workdir, label), shape, options, lr, seed=i)
            name = "x".join(map(str, shape)) + "".join(f" {k} {v}" for k, v in options.items()) + f" lr {lr}"
            results.append((ok, f"[{name}] {line}"))
    except GputrainFailed as e:
        print(f"{family}: FAIL (gputrain): {e}")
        sys.exit(2)
    passed = all(ok for ok, _ in results)
    print(f"{family}: {'pass' if passed else 'FAIL'}: " + " | ".join(line for _, line in results))
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
