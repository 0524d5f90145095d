#!/usr/bin/env python3
"""Times gputrain against the best plain PyTorch training loop for the same workload.

gputrain side: `gputrain benchmark --variants all` (the recipe `train` runs by default: fused
optimizer, loader threads, channels_last where it applies), its samples/s over the timed steps.

PyTorch side, the loop a skilled user would write for speed:
  - the whole dataset already in memory as one normalized tensor (no DataLoader, no per-sample
    Python): a batch is one index into it, so PyTorch pays nothing for data;
  - AdamW(fused=True) with the same two parameter groups (weights decay, biases and norm scales
    do not), clip_grad_norm_(foreach=True) when the workload clips;
  - zero_grad(set_to_none=True), the loss kept on the device and read once at the end (as
    gputrain's benchmark does), a constant learning rate (gputrain's benchmark holds it too);
  - "eager", and "compile" (the model wrapped in torch.compile) where torch.compile works here.

One protocol for both: the same intra-op thread count (gputrain's, from its report), the same
precision (fp32 against fp32; bf16 autocast against bf16 autocast where the CPU has native
bf16, or on a GPU), the same memory format, at least --steps timed steps after --warmup, and
--rounds alternating rounds (gputrain, eager, compile, gputrain, ...). The figure is the median
of the rounds; every round's figure is printed too, since shared machines are noisy.

--imported trains, on gputrain's side, the PyTorch side's own module exported with torch.export
(--model net.pt2, the graph run op by op) instead of the built-in family, and also times the
built-in family in the same rounds: what running a user's Python model costs against it.

--profile also prints, for one eager PyTorch run, where a step's time goes per operator
(torch.profiler, self CPU time).

--workloads gpt times the small GPT (preset gpt_cpu) on the shards of --token_data (default
data/stdlib, the README's language-model walk) against tools/gpt_pytorch.py's nanoGPT loop, in
tokens/s.

--workloads gpt2 times GPT-2 124M (preset gpt2: 12 layers, width 768, 1024 tokens, GPT-2's
50,257-token vocabulary, micro-batches of 16 and no accumulation) the same way, on shards of
random tokens written for it: the speed of a step does not depend on the text. Meant for a GPU.

--workloads bert times a BERT-style classifier from transformers, exported to a .pt2, against
the same transformers module in PyTorch (tools/compare_text.py; needs .pydeps-text).

Usage: <venv>/bin/python tools/compare_pytorch.py [--workloads mlp,cnn,resnet50,gpt,gpt2,bert] [--precisions fp32,bf16]
       [--rounds 3] [--markdown out.md] [--no-compile] [--profile] [--imported] [--token_data DIR]
"""
import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name: (gputrain flags, timed steps). The MLP is small on purpose: per-operator overhead is
# its cost, not arithmetic. The CNN is the quickstart run, timed over one epoch.
WORKLOADS = {
    "mlp": (["--dataset", "synthetic", "--input_shape", "64", "--model", "mlp", "--width", "256",
             "--batch_size", "64", "--optimizer", "adamw", "--clip_max_norm", "1"], 2000),
    "cnn": (["--preset", "quickstart"], 468),  # 60000 / 128: one epoch of Fashion-MNIST
    # torchvision's ResNet-50 (gputrain's resnet50 has its names and shapes) at ImageNet's 224x224,
    # batch 128 (a common per-GPU batch for it in mixed precision). 2048 samples keep the
    # in-memory copy at 1.2 GiB; gputrain measures its loader threads at start.
    # The small GPT of the README's language-model walk (preset gpt_cpu: 4 layers, width 128, 16 x
    # 256 tokens a step) on its shards (--token_data); the PyTorch side is tools/gpt_pytorch.py.
    "gpt": (["--preset", "gpt_cpu"], 60),
    # GPT-2 124M at 1024 tokens, one micro-batch of 16 a step (--tokens_per_step 0: the preset's
    # 524,288 would make a step 32 micro-batches), on random-token shards (random_token_shards).
    "gpt2": (["--preset", "gpt2", "--vocab_size", "50257", "--tokens_per_step", "0"], 30),
    # A BERT-style classifier from Hugging Face transformers (4 layers, width 256, 4 heads, BERT's
    # 30,522-word vocabulary, 3 labels) exported to a .pt2 (tools/export_model.py --hf), on texts
    # of 128 tokens each (no padding on either side), batch 32; the PyTorch side trains the same
    # transformers module (tools/compare_text.py makes both).
    "bert": (["--dataset", "text", "--batch_size", "32", "--optimizer", "adamw", "--lr", "1e-4",
              "--label_smoothing", "0", "--num_workers", "auto"], 60),
    "resnet50": (["--dataset", "synthetic", "--input_shape", "3x224x224", "--synthetic_train_size", "2048",
                  "--model", "resnet50", "--width", "64", "--batch_size", "128", "--num_workers", "auto"], 40),
}

# The statistics gputrain normalizes with (src/data/make_dataset.cpp).
STATS = {"fashion-mnist": (0.2860, 0.3530), "mnist": (0.1307, 0.3081)}


def read_idx(path):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find_idx(folder, stem):
    for name in (stem, stem + ".gz"):
        if os.path.exists(os.path.join(folder, name)):
            return os.path.join(folder, name)
    sys.exit(f"compare_pytorch: no {stem}[.gz] in {folder}")


def load_tensors(wl):
    """The training set as two in-memory tensors: normalized float inputs and labels."""
    if wl["dataset"] == "synthetic":
        shape = [int(d) for d in wl["input_shape"].split("x")]
        g = torch.Generator().manual_seed(wl["seed"])
        n = wl["synthetic_train_size"]
        return torch.randn([n, *shape], generator=g), torch.randint(0, 10, (n,), generator=g)
    folder = wl["data_dir"] or "/usr/share/datasets/" + wl["dataset"]
    mean, std = STATS[wl["dataset"]]
    images = read_idx(find_idx(folder, "train-images-idx3-ubyte"))
    labels = read_idx(find_idx(folder, "train-labels-idx1-ubyte"))
    x = (torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1) - mean) / std
    return x.contiguous(), torch.from_numpy(labels.astype(np.int64))


class Cnn(nn.Module):
    """Mirror of src/models/cnn.cpp."""

    def __init__(self, c, h, w, classes, width):
        super().__init__()
        width = width or 32
        self.features = nn.Sequential(
            nn.Conv2d(c, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU(True), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1, bias=False), nn.BatchNorm2d(2 * width), nn.ReLU(True),
            nn.MaxPool2d(2))
        self.fc1 = nn.Linear(2 * width * max(h // 4, 1) * max(w // 4, 1), 128)
        self.fc2 = nn.Linear(128, classes)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(self.features(x).flatten(1))))


class Mlp(nn.Module):
    """Mirror of src/models/mlp.cpp."""

    def __init__(self, features, classes, width):
        super().__init__()
        width = width or 512
        self.fc1, self.fc2, self.fc3 = nn.Linear(features, width), nn.Linear(width, width), nn.Linear(width, classes)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x.flatten(1))))))


def make_model(wl, shape):
    """The built-in family of workload `wl` as a PyTorch module, for samples of `shape`."""
    if wl["model"] == "cnn":
        return Cnn(shape[0], shape[1], shape[2], 10, wl["width"])
    if wl["model"] == "resnet50":
        import torchvision  # the twin itself, not a copy: torchvision is on every GPU image
        if wl["width"] not in (0, 64) or shape[1] <= 64:
            sys.exit("compare_pytorch: resnet50 is compared at width 64 with torchvision's ImageNet stem (inputs over 64x64)")
        return torchvision.models.resnet50(num_classes=10)
    return Mlp(int(np.prod(shape)), 10, wl["width"])


def export_model(wl, data, path):
    """The workload's module exported as `gputrain --model net.pt2` takes it (dynamic batch)."""
    model = make_model(wl, data[0].shape[1:]).train()
    ep = torch.export.export(model, (data[0][:2],), dynamic_shapes=({0: torch.export.Dim("batch")},))
    torch.export.save(ep, path)


class PyTorchLoop:
    """The best plain loop for workload `wl` with gputrain's switches `sw` (precision, memory format)."""

    def __init__(self, wl, sw, data, device, compiled):
        torch.manual_seed(wl["seed"])
        self.x, self.y = data[0].to(device), data[1].to(device)
        self.batch, self.device, self.clip = sw["batch_size"], device, wl["clip_max_norm"]
        model = make_model(wl, self.x.shape[1:]).to(device)
        self.channels_last = sw["channels_last"] and self.x.dim() == 4
        if self.channels_last:
            model = model.to(memory_format=torch.channels_last)
            self.x = self.x.contiguous(memory_format=torch.channels_last)
        params = list(model.parameters())
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": wl["weight_decay"]},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        self.opt = torch.optim.AdamW(groups, lr=wl["lr"], betas=(wl["beta1"], wl["beta2"]), fused=True)
        self.params = params
        self.amp = sw["use_amp"]
        self.amp_dtype = torch.bfloat16 if sw["amp_dtype"] == "bf16" else torch.float16
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.amp and self.amp_dtype == torch.float16)
        self.model = torch.compile(model) if compiled else model
        self.perm, self.at = torch.randperm(len(self.y), device=device), 0
        self.loss_sum = torch.zeros((), device=device)

    def step(self):
        if self.at + self.batch > len(self.y):
            self.perm, self.at = torch.randperm(len(self.y), device=self.device), 0
        idx = self.perm[self.at:self.at + self.batch]
        self.at += self.batch
        x, y = self.x[idx], self.y[idx]
        with torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.amp):
            loss = F.cross_entropy(self.model(x), y)
        self.scaler.scale(loss).backward()
        if self.clip > 0:
            self.scaler.unscale_(self.opt)
            torch.nn.utils.clip_grad_norm_(self.params, self.clip, foreach=True)
        self.scaler.step(self.opt)
        self.scaler.update()
        self.opt.zero_grad(set_to_none=True)
        self.loss_sum += loss.detach()

    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def time(self, warmup, steps):
        for _ in range(warmup):
            self.step()
        self.sync()
        t0 = time.perf_counter()
        for _ in range(steps):
            self.step()
        self.loss_sum.item()
        return self.batch * steps / (time.perf_counter() - t0)


class GptLoop:
    """tools/gpt_pytorch.py's nanoGPT loop on the workload's shards, timed as PyTorchLoop is."""

    def __init__(self, wl, sw, device, compiled):
        import gpt_pytorch
        cfg = {k: wl[k] for k in ("seq_len", "width", "heads", "depth", "weight_decay", "lr", "min_lr", "beta1", "beta2",
                                  "warmup_steps", "max_steps", "clip_max_norm", "seed")}
        precision = sw["amp_dtype"] if sw["use_amp"] else "fp32"
        vocab = gpt_pytorch.vocab_size(wl["train_file"], wl["vocab_size"])
        self.loop = gpt_pytorch.Loop(cfg, vocab, precision, compiled, device=device)
        self.batches = gpt_pytorch.train_batches(gpt_pytorch.Windows(wl["train_file"], wl["seq_len"]),
                                                 sw["batch_size"], wl["seed"])
        self.batch, self.loss_sum = sw["batch_size"], self.loop.loss_sum

    def step(self):
        self.loop.step(*next(self.batches))

    def time(self, warmup, steps):
        return self.loop.time(self.batches, warmup, steps)  # tokens/s: the unit language models are timed in


def random_token_shards(folder, vocab, tokens, seed=0):
    """llm.c shards (version 1: uint16 tokens) of uniform random ids: train_000000.bin and a
    small val_000000.bin, for timing a step whose speed does not depend on the text."""
    import prepare_text
    g = np.random.default_rng(seed)
    for name, count in (("train_000000.bin", tokens), ("val_000000.bin", tokens // 16)):
        prepare_text.write_shard(os.path.join(folder, name), g.integers(0, vocab, count, dtype=np.uint16),
                                 prepare_text.FORMAT_U16)
    return [os.path.join(folder, "train_*.bin"), os.path.join(folder, "val_*.bin")]


def gputrain_run(binary, flags, precision, warmup, steps, profile=None):
    """One `gputrain benchmark --variants all` run: (its JSON report, the 'all' row)."""
    amp = ["--no-use_amp"] if precision == "fp32" else ["--use_amp", "--amp_dtype", precision]
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "bench.json")
        cmd = [binary, "benchmark", *flags, *amp, "--variants", "all", "--warmup_steps", str(warmup),
               "--steps", str(steps), "--json", report]
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            sys.exit(f"compare_pytorch: {' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")
        with open(report) as f:
            bench = json.load(f)
    row = next(v for v in bench["variants"] if v["name"] == "all")
    if row["status"] != "ok":
        sys.exit(f"compare_pytorch: gputrain's 'all' variant did not run: {row.get('skipped', row['status'])}")
    return bench, row


def native_bf16():
    """Whether this CPU runs bf16 natively (AVX512-BF16 or AMX), as gputrain's auto AMP asks."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
        return "avx512_bf16" in flags or "amx_bf16" in flags
    except OSError:
        return False


def profile_pytorch(loop, steps=200):
    """Prints the operators that take a PyTorch step's time (self CPU time, per step)."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(20):
        loop.step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            loop.step()
        loop.loss_sum.item()
    rows = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in rows)
    print(f"PyTorch eager, {steps} steps: {total / steps:.0f} us of operator self time per step")
    print(f"{'operator':<45} {'us/step':>8} {'calls/step':>10}")
    for e in rows[:20]:
        print(f"{e.key[:45]:<45} {e.self_cpu_time_total / steps:>8.1f} {e.count / steps:>10.1f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="mlp,cnn", help="comma list of: " + ", ".join(WORKLOADS))
    ap.add_argument("--precisions", default="fp32,bf16", help="comma list of fp32, bf16, fp16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=0, help="timed steps (0 = the workload's: 2000, or one epoch)")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile side")
    ap.add_argument("--profile", action="store_true", help="print a per-operator profile of the PyTorch step")
    ap.add_argument("--gputrain", default=os.path.join(ROOT, "build", "gputrain"))
    ap.add_argument("--gputrain_flags", default="", help="extra gputrain flags, e.g. '--fused_optimizer off'")
    ap.add_argument("--token_data", default=os.path.join(ROOT, "data", "stdlib"),
                    help="the gpt workload's shards: a folder of train_*.bin and val_*.bin (tools/prepare_text.py)")
    ap.add_argument("--markdown", help="also write the tables to this file")
    ap.add_argument("--imported", action="store_true",
                    help="gputrain trains the PyTorch side's module exported to a .pt2 (and the built-in family is timed too)")
    args = ap.parse_args()
    if args.rounds < 1:
        sys.exit("compare_pytorch: --rounds must be at least 1")

    out_md = []
    for name in args.workloads.split(","):
        if name not in WORKLOADS:
            sys.exit(f"compare_pytorch: unknown workload '{name}' (expected one of {', '.join(WORKLOADS)})")
        flags, default_steps = WORKLOADS[name]
        if name == "gpt":
            flags = flags + ["--train_file", os.path.join(args.token_data, "train_*.bin"),
                             "--test_file", os.path.join(args.token_data, "val_*.bin")]
        if name == "gpt2":
            # 4M tokens: 244 steps of 16 x 1024, more than warm-up and timed steps take.
            token_files = tempfile.TemporaryDirectory(prefix="compare_pytorch.")  # removed with the object
            train, val = random_token_shards(token_files.name, 50257, 1 << 22)
            flags = flags + ["--train_file", train, "--test_file", val]
        if name == "bert":
            import compare_text
            text_files = tempfile.TemporaryDirectory(prefix="compare_pytorch.")  # removed with the object
            flags = flags + compare_text.prepare(text_files.name)
        flags = flags + args.gputrain_flags.split()
        steps = args.steps or default_steps
        for precision in args.precisions.split(","):
            if precision not in ("fp32", "bf16", "fp16"):
                sys.exit(f"compare_pytorch: unknown precision '{precision}' (expected fp32, bf16 or fp16)")
            bench, row = gputrain_run(args.gputrain, flags, precision, 5, 5)
            device = torch.device("cuda" if bench["device"]["device"].startswith("cuda") else "cpu")
            if device.type == "cpu" and precision != "fp32" and not (precision == "bf16" and native_bf16()):
                print(f"{name} {precision}: skipped: this CPU has no native {precision}")
                continue
            wl, sw = bench["workload"], row["switches"]
            threads = int(bench["device"].get("intra-op threads", torch.get_num_threads()))
            torch.set_num_threads(threads)
            if device.type == "cuda":
                # The switches every speed guide sets, as gputrain's side runs them: cuDNN's
                # autotuner, TF32 for fp32 matrix products and convolutions (on in its recipe).
                torch.backends.cudnn.benchmark = bool(sw["cudnn_benchmark"])
                torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = bool(sw["tf32"])
            gpt, bert = wl["model"] == "gpt", name == "bert"
            if gpt and precision == "fp16":  # tools/gpt_pytorch.py has no grad scaler
                print(f"{name} fp16: skipped: the GPT loop is compared in fp32 and bf16")
                continue
            data = None if gpt or bert else load_tensors(wl)

            # A language model is timed in tokens/s (a sample is seq_len tokens).
            unit, per_sample = ("tokens/s", wl["seq_len"]) if gpt else ("samples/s", 1)
            # MFU: gputrain's figure (its model's FLOPs over the device's peak at this precision)
            # scaled by each side's rate: the same network does the same arithmetic per sample.
            mfu_per_unit = row.get("mfu", 0) / (row["samples_per_sec"] * per_sample) if row["samples_per_sec"] > 0 else 0
            mfu = (lambda rate: f"{100 * rate * mfu_per_unit:.1f}%" if mfu_per_unit > 0 else "-")

            def pytorch_loop(compiled):
                if bert:
                    return compare_text.BertLoop(text_files.name, wl, sw, device, compiled)
                return GptLoop(wl, sw, device, compiled) if gpt else PyTorchLoop(wl, sw, data, device, compiled)

            sides = {"gputrain": [], "eager": []}
            builtin_flags, run_flags = flags, flags
            if args.imported:
                exported = tempfile.TemporaryDirectory(prefix="compare_pytorch.")  # removed with the object
                model_file = os.path.join(exported.name, "net.pt2")
                export_model(wl, data, model_file)
                run_flags = flags + ["--model", model_file]  # the last --model given wins
                sides["built-in"] = []
            compile_note = "off (--no-compile)" if args.no_compile else ""
            compiled = None
            for r in range(args.rounds):
                sides["gputrain"].append(gputrain_run(args.gputrain, run_flags, precision, args.warmup, steps)[1]
                                         ["samples_per_sec"] * per_sample)
                if "built-in" in sides:
                    sides["built-in"].append(gputrain_run(args.gputrain, builtin_flags, precision, args.warmup, steps)[1]
                                             ["samples_per_sec"])
                sides["eager"].append(pytorch_loop(False).time(args.warmup, steps))
                # Compiled after the first round's eager figures: a run stopped while it compiles
                # (minutes for a large network) still printed those.
                if r == 0 and not args.no_compile:
                    try:
                        compiled = pytorch_loop(True)
                        compiled.time(args.warmup, 5)  # compiles forward and backward
                        sides["compile"] = []
                    except Exception as e:  # torch.compile fails in many ways; say which and go on
                        compile_note = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
                if "compile" in sides:
                    sides["compile"].append(compiled.time(args.warmup, steps))
                print(f"  {name} {precision} round {r + 1}: " +
                      ", ".join(f"{k} {v[-1]:.0f}" for k, v in sides.items() if v) + " " + unit, flush=True)
            if args.profile:
                profile_pytorch(pytorch_loop(False))

            med = {k: statistics.median(v) for k, v in sides.items()}
            switches = f"channels_last {'on' if sw['channels_last'] else 'off'}, loader threads {sw['num_workers']}"
            if device.type == "cuda":
                switches += f", TF32 {'on' if sw['tf32'] else 'off'} and cuDNN autotune {'on' if sw['cudnn_benchmark'] else 'off'} (both sides)"
            what = f"{name} {precision}" + (" (gputrain: the module exported to net.pt2)" if args.imported else "")
            title = (f"{what}: {' '.join(flags)} | {bench['device']['device']} | {threads} threads | "
                     f"torch {torch.__version__} | gputrain: {switches} | median of {args.rounds} alternating "
                     f"rounds x {steps} timed steps after {args.warmup} warm-up")
            print(title)
            # Two ratios: of the medians, and the median of each round's ratio (rounds are adjacent
            # in time, so the second is less moved by load that comes and goes on a shared host).
            out_md += [f"**{title}**", "", f"| side | {unit} (median) | MFU | gputrain / side | median of round ratios | "
                       "every round |", "|---|---:|---:|---:|---:|---|"]
            for side, runs in sides.items():
                each = ", ".join(f"{r:.0f}" for r in runs)
                if side == "gputrain":
                    print(f"  {side:<9} {med[side]:>9.0f} {unit}  MFU {mfu(med[side])}  [{each}]")
                    out_md.append(f"| {side} | {med[side]:.0f} | {mfu(med[side])} | | | {each} |")
                    continue
                ratio = med["gputrain"] / med[side]
                paired = statistics.median(g / t for g, t in zip(sides["gputrain"], runs))
                print(f"  {side:<9} {med[side]:>9.0f} {unit}  MFU {mfu(med[side])}  gputrain/{side} {ratio:5.2f}x "
                      f"(round by round {paired:4.2f}x)  [{each}]")
                out_md.append(f"| {side} | {med[side]:.0f} | {mfu(med[side])} | {ratio:.2f}x | {paired:.2f}x | {each} |")
            if compile_note:
                print(f"  torch.compile: {compile_note}")
                out_md.append(f"| compile | {compile_note} | | | | |")
            print()
            out_md.append("")
            if args.markdown:  # after each table: a run stopped later (a time budget) keeps it
                with open(args.markdown, "w") as f:
                    f.write("\n".join(out_md) + "\n")


if __name__ == "__main__":
    main()
