#!/usr/bin/env python3
"""The GPT-2 training loop a skilled PyTorch user writes (nanoGPT's), on the data and recipe
gputrain's `--model gpt` runs: the reference for the quality check and the speed comparison.

What it shares with gputrain, so that the two runs can be compared step by step:
  - the model: GPT-2 with nanoGPT's parameter names, the token embedding padded to a multiple of
    128 rows and tied to the head, whose logits are over the real vocabulary only (the padded
    rows never a logit, as in src/models/gpt.cpp);
  - the data: llm.c shards (or headerless uint16 .bin, or 1-D .npy), windows of seq_len + 1 tokens
    that start seq_len apart, in gputrain's shuffled order (the same splitmix64 draw as
    src/data/loader.cpp, from --seed and the epoch), the val shards' first windows in order;
  - the recipe: a preset's JSON (presets/gpt_cpu.json by default) read for its values: AdamW
    (fused) with weight decay on 2-D weights only, clip, linear warm-up then cosine to min_lr,
    bf16 autocast when asked;
  - the initial weights: --save_init writes this side's as a state dict that `gputrain train
    --init_from` reads; --init_from reads one back (a .pth state dict of the same names).

Usage (the venv's python):
  tools/gpt_pytorch.py --train_file 'data/stdlib/train_*.bin' --test_file 'data/stdlib/val_*.bin'
      [--preset presets/gpt_cpu.json] [--max_steps N] [--precision fp32|bf16] [--init_from W.pth]
      [--save_init W.pth] [--json out.json] [--time STEPS [--warmup N] [--compile]]
Without --time it trains and prints the val loss at each evaluation; with --time it times
STEPS steps after --warmup and prints tokens/s and the peak RSS.
"""
import argparse
import glob
import json
import math
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MASK = (1 << 64) - 1


# --- data ---------------------------------------------------------------------------------

def read_shard(path):
    """A shard's tokens as a memory-mapped 1-D array (llm.c v1/v7, headerless uint16, .npy)."""
    if path.endswith(".npy"):
        return np.load(path, mmap_mode="r")
    header = np.fromfile(path, dtype="<i4", count=256)
    if len(header) == 256 and header[0] in (20240520, 20240801):
        dtype = "<u2" if header[0] == 20240520 else "<u4"
        return np.memmap(path, dtype=dtype, mode="r", offset=1024, shape=(int(header[2]),))
    return np.memmap(path, dtype="<u2", mode="r")


class Windows:
    """Windows of seq_len + 1 tokens starting seq_len apart, across the shards in glob order."""

    def __init__(self, pattern, seq_len):
        files = sorted(glob.glob(pattern))
        if not files:
            sys.exit(f"gpt_pytorch: no file matches '{pattern}'")
        self.shards = [read_shard(f) for f in files]
        self.seq_len = seq_len
        counts = [max(len(s) - 1, 0) // seq_len for s in self.shards]
        self.first = np.cumsum([0] + counts)
        self.size = int(self.first[-1])

    def window(self, i):
        shard = int(np.searchsorted(self.first, i, side="right") - 1)
        start = (i - int(self.first[shard])) * self.seq_len
        return np.asarray(self.shards[shard][start:start + self.seq_len + 1], dtype=np.int64)

    def batch(self, indices):
        w = torch.from_numpy(np.stack([self.window(i) for i in indices]))
        return w[:, :-1], w[:, 1:]


def splitmix(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def epoch_order(n, seed, epoch):
    """gputrain's training order for an epoch (src/data/loader.cpp: Fisher-Yates over splitmix64
    seeded by mix_seed(seed, 5, epoch))."""
    _, state = splitmix((seed ^ ((5 * 0xD1B54A32D192ED03) & MASK) ^ ((epoch * 0x8CB92BA72F3D8DD7) & MASK)) & MASK)
    order = list(range(n))
    for i in range(n, 1, -1):
        state, r = splitmix(state)
        j = r % i
        order[i - 1], order[j] = order[j], order[i - 1]
    return order


def train_batches(data, batch, seed):
    """Whole batches of the shuffled windows, epoch after epoch (drop_last, as gputrain trains)."""
    epoch = 0
    while True:
        order = epoch_order(data.size, seed, epoch)
        for k in range(data.size // batch):
            yield data.batch(order[k * batch:(k + 1) * batch])
        epoch += 1


# --- model --------------------------------------------------------------------------------

class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(d, 3 * d)
        self.attn.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(d, 4 * d)
        self.mlp.c_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        # nanoGPT's form: q, k and v as column blocks of c_attn's output, each [B, heads, T, head
        # size] (in bf16 its backward is ~9% faster than unbinding a [3, B, heads, T, D] view).
        B, T, d = x.shape
        q, k, v = (t.view(B, T, self.heads, d // self.heads).transpose(1, 2)
                   for t in self.attn.c_attn(self.ln_1(x)).split(d, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).contiguous().view(B, T, d)
        x = x + self.attn.c_proj(y)
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, positions, d, heads, layers):
        super().__init__()
        self.vocab = vocab
        padded = (vocab + 127) // 128 * 128
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(padded, d), wpe=nn.Embedding(positions, d),
            h=nn.ModuleList(Block(d, heads) for _ in range(layers)), ln_f=nn.LayerNorm(d)))
        # GPT-2's initialisation: N(0, 0.02), the residual projections 0.02 / sqrt(2 x layers).
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0, 0.02 / math.sqrt(2 * layers))
            elif p.dim() == 2:
                nn.init.normal_(p, 0, 0.02)
            elif name.endswith(".bias") and "ln_" not in name:
                nn.init.zeros_(p)

    def forward(self, ids):
        t = self.transformer
        x = t.wte(ids) + t.wpe(torch.arange(ids.size(1), device=ids.device))
        for block in t.h:
            x = block(x)
        return F.linear(t.ln_f(x), t.wte.weight[:self.vocab])


# --- the loop -----------------------------------------------------------------------------

def vocab_size(train_file, given=0):
    """--vocab_size, else the size of the tokenizer.json beside the shards (as gputrain finds it)."""
    if given:
        return given
    tokenizer = os.path.join(os.path.dirname(sorted(glob.glob(train_file))[0]), "tokenizer.json")
    with open(tokenizer) as f:
        j = json.load(f)
    ids = list(j["model"]["vocab"].values()) + [t["id"] for t in j.get("added_tokens", [])]
    return max(ids) + 1


class Loop:
    """nanoGPT's step: autocast forward, loss, backward, clip, fused AdamW, the scheduled lr."""

    def __init__(self, cfg, vocab, precision, compiled=False, init_from=None, device="cpu"):
        torch.manual_seed(cfg["seed"])
        self.cfg, self.precision, self.device = cfg, precision, torch.device(device)
        self.model = GPT(vocab, cfg["seq_len"], cfg["width"], cfg["heads"], cfg["depth"])
        if init_from:
            self.model.load_state_dict(torch.load(init_from, weights_only=True, map_location="cpu"))
        self.model.to(self.device)  # initialised on the CPU: the same weights on any device
        params = list(self.model.parameters())
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg["weight_decay"]},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        self.opt = torch.optim.AdamW(groups, lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), fused=True)
        self.params = params
        self.forward = torch.compile(self.model) if compiled else self.model
        self.loss_sum = torch.zeros((), device=self.device)
        self.it = 0

    def autocast(self):
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.precision == "bf16")

    def lr(self):
        c, it = self.cfg, self.it
        if it < c["warmup_steps"]:
            return c["lr"] * (it + 1) / c["warmup_steps"]
        t = min(max((it - c["warmup_steps"]) / max(1, c["max_steps"] - c["warmup_steps"]), 0.0), 1.0)
        return c["min_lr"] + (c["lr"] - c["min_lr"]) * 0.5 * (1.0 + math.cos(math.pi * t))

    def step(self, x, y):
        for g in self.opt.param_groups:
            g["lr"] = self.lr()
        x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
        with self.autocast():
            logits = self.forward(x)
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.reshape(-1))
        loss.backward()
        if self.cfg["clip_max_norm"] > 0:
            torch.nn.utils.clip_grad_norm_(self.params, self.cfg["clip_max_norm"], foreach=True)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.loss_sum += loss.detach()
        self.it += 1
        return loss

    def time(self, batches, warmup, steps):
        """Tokens/s over `steps` steps after `warmup`. The batches are made before the clock
        starts: what is compared is the step, as gputrain's benchmark times it with its loader
        running ahead on its own threads (on a GPU they are on it before the clock starts too)."""
        ready = [tuple(t.to(self.device) for t in next(batches)) for _ in range(warmup + steps)]
        for x, y in ready[:warmup]:
            self.step(x, y)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        t0 = time.perf_counter()
        for x, y in ready[warmup:]:
            self.step(x, y)
        self.loss_sum.item()
        return ready[0][0].numel() * steps / (time.perf_counter() - t0)

    @torch.no_grad()
    def evaluate(self, val, eval_tokens, batch):
        self.model.eval()
        windows = min(val.size, -(-eval_tokens // val.seq_len)) if eval_tokens else val.size
        total, count = 0.0, 0
        for b in range(0, windows, batch):
            x, y = (t.to(self.device) for t in val.batch(range(b, min(b + batch, windows))))
            with self.autocast():
                logits = self.model(x)
            total += F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.reshape(-1), reduction="sum").item()
            count += y.numel()
        self.model.train()
        return total / count


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train_file", required=True)
    ap.add_argument("--test_file")
    ap.add_argument("--preset", default=os.path.join(ROOT, "presets", "gpt_cpu.json"))
    ap.add_argument("--vocab_size", type=int, default=0, help="0: from the shards' tokenizer.json")
    ap.add_argument("--max_steps", type=int)
    ap.add_argument("--seq_len", type=int)
    ap.add_argument("--warmup_steps", type=int)
    ap.add_argument("--eval_every", type=int)
    ap.add_argument("--eval_tokens", type=int)
    ap.add_argument("--batch_size", type=int)
    ap.add_argument("--seed", type=int, default=42, help="gputrain's default --seed")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads (0: torch's default)")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    ap.add_argument("--init_from", help="a state dict (.pth) of this model's names to start from")
    ap.add_argument("--save_init", help="write the initial weights here (.pth) and stop")
    ap.add_argument("--save_nanogpt", help="write the initial weights here as nanoGPT's train.py checkpoints them "
                    "(ckpt.pt: a compiled model's names, the tied lm_head, model_args, the optimizer) and stop")
    ap.add_argument("--json", help="write the losses (or the timing) here")
    ap.add_argument("--time", type=int, default=0, help="time this many steps instead of training")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--compile", action="store_true", help="the model under torch.compile")
    args = ap.parse_args()
    with open(args.preset) as f:
        cfg = json.load(f)
    cfg["seed"] = args.seed
    for k in ("max_steps", "seq_len", "warmup_steps", "eval_every", "eval_tokens", "batch_size"):
        if getattr(args, k) is not None:
            cfg[k] = getattr(args, k)
    if args.threads:
        torch.set_num_threads(args.threads)
    vocab = vocab_size(args.train_file, args.vocab_size)
    loop = Loop(cfg, vocab, args.precision, args.compile, args.init_from, args.device)
    if args.save_init:
        torch.save({k: v.cpu() for k, v in loop.model.state_dict().items()}, args.save_init)
    if args.save_nanogpt:
        m = loop.model
        weights = {"_orig_mod." + k: v.cpu() for k, v in m.state_dict().items()}
        weights["_orig_mod.lm_head.weight"] = weights["_orig_mod.transformer.wte.weight"]  # tied: one tensor, two names
        model_args = dict(n_layer=cfg["depth"], n_head=cfg["heads"], n_embd=cfg["width"], block_size=cfg["seq_len"],
                          bias=True, vocab_size=m.transformer.wte.weight.size(0), dropout=0.0)
        torch.save({"model": weights, "optimizer": loop.opt.state_dict(), "model_args": model_args, "iter_num": 0,
                    "best_val_loss": torch.tensor(1e9), "config": dict(cfg)}, args.save_nanogpt)
    if args.save_init or args.save_nanogpt:
        return
    train = Windows(args.train_file, cfg["seq_len"])
    batches = train_batches(train, cfg["batch_size"], args.seed)
    out = {"vocab": vocab, "seq_len": cfg["seq_len"], "batch_size": cfg["batch_size"], "precision": args.precision,
           "threads": torch.get_num_threads(), "torch": torch.__version__, "python": sys.version.split()[0]}

    if args.time:
        out.update(tokens_per_sec=loop.time(batches, args.warmup, args.time), steps=args.time,
                   peak_rss_mib=peak_rss_mib(), compiled=args.compile)
        print(f"{out['tokens_per_sec']:.0f} tokens/s over {args.time} steps, peak RSS {out['peak_rss_mib']:.0f} MiB")
    else:
        val = Windows(args.test_file, cfg["seq_len"]) if args.test_file else None
        evals, losses = [], []
        for step in range(1, cfg["max_steps"] + 1):
            x, y = next(batches)
            losses.append(loop.step(x, y).item())
            if step % cfg.get("log_every", 50) == 0:
                print(f"step {step} loss {losses[-1]:.4f} lr {loop.lr():.3e}", flush=True)
            every = cfg.get("eval_every", 0)
            if val and (step == cfg["max_steps"] or (every and step % every == 0)):
                v = loop.evaluate(val, cfg.get("eval_tokens", 0), cfg["batch_size"])
                evals.append({"step": step, "val_loss": v})
                print(f"step {step} val loss {v:.4f} perplexity {math.exp(v):.2f}", flush=True)
        out.update(train_losses=losses, evals=evals, peak_rss_mib=peak_rss_mib())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
