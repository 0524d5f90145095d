#!/usr/bin/env python3
"""The reference check of an imported network (--model net.pt2): gputrain's training of a
torch.export program against PyTorch's training of the module it was exported from.

    imported_check.py NET GPUTRAIN_BIN WORKDIR [--torchscript] [--bf16]

NET is one of the networks written below: convnext, vit, tabular, cnn, evalmodes (eval forms).
The module is built with torch.manual_seed(0) and exported in train mode with a dynamic batch
to WORKDIR/net.pt2, which carries the starting weights (no --init_from). cnn also gets
WORKDIR/net.eval.pt2, exported from model.eval(), so that gputrain evaluates with that program;
the others have none, so gputrain
evaluates with the training graph, batch_norm on running statistics and dropout off. Both sides
then run 10 full-batch SGD steps (momentum 0.9, no weight decay, MSE loss, fp32, NCHW, on the
CPU, no shuffling or normalization) on small regression data (.npy files in WORKDIR) and predict
the test samples in eval mode. Compared, with reference_check.py's tolerances:
  - gputrain's exported weights (train --export) against the module's after its 10 steps, every
    parameter and buffer by its state_dict name (BatchNorm's step counter exactly);
  - `gputrain infer` predictions of the run's last checkpoint against the module's eval outputs.

The outputs before training are not compared on their own: `gputrain infer` and `eval` need a
checkpoint and `train` runs at least one step (--epochs is at least 1, --max_steps 0 means no
limit), so there is no 0-step run; the comparison after training covers the eval forward.

With --torchscript the module goes to gputrain as torch.jit.script's WORKDIR/net.pt instead (the
compatibility path), which switches train/eval itself; train and infer get --trust_program. With --bf16 both sides run their forward
passes under bf16 autocast (gputrain: --use_amp --amp_dtype bf16), compared with the same
tolerances: the graph's operators autocast as eager PyTorch's do, and run the same kernels.

Prints one line, the worst differences; exit code 0 = pass, 1 = a difference over tolerance,
2 = gputrain failed (its stderr is printed).
"""
import copy
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.dont_write_bytecode = True  # no __pycache__ left in the source tree by the imports below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_check import (N_TEST, N_TRAIN, OUTPUTS, GputrainFailed, compare_run,  # noqa: E402
                             pytorch_reference, run, train_command)
from twins import make_twin  # noqa: E402

# More steps than reference_check.py's 3: an interpreted graph has more places to go wrong slowly
# (a running statistic, a layer scale, an embedding row), and 10 steps let them show.
STEPS = 10


class DropPath(nn.Module):
    """Stochastic depth as timm writes it (a per-sample bernoulli mask, scaled by 1 / keep), but
    without timm's early return for p == 0: at p 0.0 the mask is all ones, so training stays
    deterministic while the ops stay in the exported graph."""

    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        if not self.training:
            return x
        keep = 1.0 - self.p
        mask = x.new_empty((x.shape[0],) + (1,) * (x.dim() - 1)).bernoulli_(keep)
        return x * mask / keep


class ConvNeXtBlock(nn.Module):
    """Depthwise conv, LayerNorm over channels (channels last), Linear 4x, GELU, Linear back,
    layer scale, stochastic depth, residual."""

    def __init__(self, dim, kernel):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel, padding=kernel // 2, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        # ConvNeXt starts gamma at 1e-6; then the block's other weights would move by about
        # lr x 1e-6 in 10 steps, under the tolerance, and a wrong gradient there would pass.
        self.gamma = nn.Parameter(torch.full((dim,), 0.1))
        self.drop_path = DropPath(0.0)

    def forward(self, x):
        y = self.dwconv(x).permute(0, 2, 3, 1)  # NCHW -> NHWC for LayerNorm and the Linears
        y = self.pwconv2(self.act(self.pwconv1(self.norm(y))))
        y = (self.gamma * y).permute(0, 3, 1, 2)
        return x + self.drop_path(y)


class ConvNeXt(nn.Module):
    def __init__(self, channels, outputs, dim=16, kernel=7):
        super().__init__()
        self.stem = nn.Conv2d(channels, dim, 2, stride=2)  # 16x16 -> 8x8: room for the 7x7 kernel
        self.blocks = nn.Sequential(ConvNeXtBlock(dim, kernel), ConvNeXtBlock(dim, kernel))
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head_drop = nn.Dropout(0.0)
        self.head = nn.Linear(dim, outputs)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(self.head_drop(self.norm(x.mean((2, 3)))))  # global average pool


class VitBlock(nn.Module):
    """Pre-norm encoder block: attention (qkv Linear, heads, scaled_dot_product_attention, proj)
    and an MLP with GELU, each with a residual and a dropout."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.drop1 = nn.Dropout(0.0)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * dim, dim)
        self.drop2 = nn.Dropout(0.0)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # each (B, heads, tokens, head dim)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, c)
        x = x + self.drop1(self.proj(a))
        return x + self.drop2(self.fc2(self.act(self.fc1(self.norm2(x)))))


class Vit(nn.Module):
    def __init__(self, shape, outputs, dim=32, heads=4, patch=4):
        super().__init__()
        channels, h, w = shape
        tokens = (h // patch) * (w // patch) + 1
        self.patch_embed = nn.Conv2d(channels, dim, patch, stride=patch)
        # Small random starts, not ViT's zeros: a gputrain that left them at zeros instead of
        # taking them from net.pt2 would then start from the same weights and pass.
        self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, dim))
        self.pos_embed = nn.Parameter(0.02 * torch.randn(1, tokens, dim))
        self.blocks = nn.Sequential(VitBlock(dim, heads), VitBlock(dim, heads))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, outputs)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)  # (B, patches, dim)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        return self.head(self.norm(self.blocks(x))[:, 0])


CARDINALITIES = (5, 7)  # of the categorical columns 0 and 1; columns 2.. are numeric


class Tabular(nn.Module):
    """One float input (B, 6): 2 category ids stored as floats, then 4 numeric columns."""

    def __init__(self, outputs, emb_dim=4, numeric=4, hidden=32):
        super().__init__()
        self.emb_a = nn.Embedding(CARDINALITIES[0], emb_dim)
        self.emb_b = nn.Embedding(CARDINALITIES[1], emb_dim)
        self.fc1 = nn.Linear(2 * emb_dim + numeric, hidden)
        self.bn = nn.BatchNorm1d(hidden)
        self.fc2 = nn.Linear(hidden, outputs)

    def forward(self, x):
        a, b = self.emb_a(x[:, 0].long()), self.emb_b(x[:, 1].long())
        h = torch.cat([a, b, x[:, 2:]], dim=1)
        return self.fc2(self.bn(F.relu(self.fc1(h))))


# Per net: (sample shape, learning rate, whether an eval program is written beside net.pt2).
# Each rate keeps the 10 steps' loss going down, so that rounding noise is not blown up: the vit
# at 0.05 doubles its loss on the second step, the cnn at 0.05 stalls from the 7th. At these
# rates the same training in float64 ends within 5% of the tolerances of the float32 one.
NETS = {
    "convnext": ((3, 16, 16), 0.05, False),
    "vit": ((3, 16, 16), 0.02, False),
    "tabular": ((6,), 0.05, False),
    "cnn": ((1, 12, 12), 0.02, True),
    "evalmodes": ((8,), 0.0, False),
}


class EvalModes(nn.Module):
    """Operators whose eval form is more than batch_norm's and dropout's flags: attention's
    dropout_p (timm's `p if self.training else 0`), an LSTM's dropout between layers, InstanceNorm
    on running statistics; also a causal mask filled with -inf (an "Infinity" in the program's
    JSON) and sizes used as tensor operands. Its rate is 0: the weights stay, the running
    statistics move, and the eval outputs are compared."""

    def __init__(self, outputs):
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.norm = nn.InstanceNorm1d(4, track_running_stats=True)
        self.rnn = nn.LSTM(4, 4, num_layers=2, dropout=0.5, batch_first=True)
        self.out = nn.Linear(16, outputs)

    def forward(self, x):
        b = x.shape[0]
        h = self.norm(self.inp(x).view(b, 4, 4))
        h, _ = self.rnn(h)
        q = h.unsqueeze(1)
        a = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5 if self.training else 0.0)
        causal = torch.ones(4, 4, dtype=torch.bool, device=x.device).triu(1)
        scores = (h @ h.transpose(1, 2)).masked_fill(causal, float("-inf")).softmax(-1)
        y = self.out((a.squeeze(1) + scores @ h).flatten(1))
        return y * b / b


def make_net(net, shape):
    if net == "evalmodes":
        return EvalModes(OUTPUTS)
    if net == "convnext":
        return ConvNeXt(shape[0], OUTPUTS)
    if net == "vit":
        return Vit(shape, OUTPUTS)
    if net == "tabular":
        return Tabular(OUTPUTS)
    # The quickstart CNN, as the cnn family's twin writes it (its names are the family's too).
    return make_twin("cnn", shape, OUTPUTS, width=8)


def samples(net, n, shape, rng):
    x = rng.standard_normal((n, *shape))
    if net == "tabular":  # columns 0 and 1 must be valid category ids: whole numbers as floats
        for col, card in enumerate(CARDINALITIES):
            x[:, col] = rng.integers(0, card, n)
    return x.astype(np.float32)


def write_data(folder, net, shape, rng):
    """Fixed float32 samples and (N, OUTPUTS) regression targets as .npy: {name: array}."""
    arrays = {"x_train": samples(net, N_TRAIN, shape, rng),
              "y_train": rng.standard_normal((N_TRAIN, OUTPUTS)).astype(np.float32),
              "x_test": samples(net, N_TEST, shape, rng),
              "y_test": rng.standard_normal((N_TEST, OUTPUTS)).astype(np.float32)}
    for name, a in arrays.items():
        np.save(os.path.join(folder, name + ".npy"), a)
    return arrays


def export(model, example, path):
    """torch.export of the module as it is (train or eval mode), batch dimension dynamic."""
    ep = torch.export.export(model, (example,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    torch.export.save(ep, path)
    return ep


def check(net, binary, folder, script, bf16):
    shape, lr, eval_program = NETS[net]
    eval_program = eval_program and not script
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    data = write_data(folder, net, shape, rng)
    torch.manual_seed(0)
    model = make_net(net, shape)
    twin = copy.deepcopy(model)  # trained here; `model` only exported
    example = torch.from_numpy(samples(net, 4, shape, rng))
    model_file = os.path.join(folder, "net.pt" if script else "net.pt2")
    if script:
        torch.jit.save(torch.jit.script(model.train()), model_file)
    else:
        export(model.train(), example, model_file)
    if eval_program:
        export(model.eval(), example, os.path.join(folder, "net.eval.pt2"))
        model.train()
    ref_weights, ref_out = pytorch_reference(twin, data, lr, STEPS, bf16)

    # A TorchScript module is a program: train and infer load it only with --trust_program.
    trust = ["--trust_program"] if script else []
    run(train_command(binary, model_file, folder, {}, lr, STEPS, init_from=False, bf16=bf16) + trust)
    ok, w_line, out_diff, out_scale = compare_run(binary, folder, data, ref_weights, ref_out, trust)
    evaluated = ("the TorchScript module's eval()" if script else "net.eval.pt2" if eval_program
                 else "the training graph in eval mode")
    line = (f"[{'x'.join(map(str, shape))} lr {lr}] weights after {STEPS} steps: {w_line}; eval outputs "
            f"({evaluated}) max_abs_diff {out_diff:.3g} (scale {out_scale:.3g})")
    return ok, line


def main():
    options = sys.argv[4:]
    if len(sys.argv) < 4 or sys.argv[1] not in NETS or not set(options) <= {"--torchscript", "--bf16"}:
        sys.exit(f"usage: imported_check.py NET GPUTRAIN_BIN WORKDIR [--torchscript] [--bf16]  (NET: {', '.join(NETS)})")
    net, binary, workdir = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    script, bf16 = "--torchscript" in options, "--bf16" in options
    label = f"{net} ({'TorchScript' if script else 'imported'}{', bf16' if bf16 else ''})"
    try:
        ok, line = check(net, binary, workdir, script, bf16)
    except GputrainFailed as e:
        print(f"{label}: FAIL (gputrain): {e}")
        sys.exit(2)
    print(f"{label}: {'pass' if ok else 'FAIL'}: {line}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
