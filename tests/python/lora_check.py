#!/usr/bin/env python3
"""LoRA (--lora_rank) against the same adapters written in PyTorch on transformers' Llama.

    lora_check.py GPUTRAIN_BIN WORKDIR

A tiny random LlamaForCausalLM (4 heads over 2 key/value heads) is saved as a Hugging Face folder.
  1. gputrain trains --init_from it with --lora_rank 4 --lora_alpha 8 at lr 0 for one step: its
     checkpoint holds each projection's initial lora_A, every lora_B zero, and the base weights
     exactly the folder's; the first loss is the base model's;
  2. the same run at the check's learning rate for 3 AdamW steps equals PyTorch's: the folder's
     model with x A^T B^T x 2 added to each of the 7 projections of every block (A from step 1,
     B zero), the base frozen, torch's AdamW on the adapters (weight decay on them, as on every
     2-D weight), within 1e-4 of the update; the base weights have not moved;
  3. export --format hf merges the adapters: LlamaForCausalLM loads the folder with no missing or
     unexpected key, and its logits equal the PyTorch model's with adapters to 1e-5.
Needs transformers (.pydeps-text), else exit 77. One line; 0 = pass, 1 = a check failed, 2 = a
command failed.
"""
import os
import sys

import numpy as np
import torch

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from commands import run  # noqa: E402
from gpt_check import BATCH, CLIP, LR, STEPS, T, VOCAB, WD, first_loss, windows, write_shard  # noqa: E402
from llama_check import MODELS, LlamaForCausalLM, export_and_load, make_model  # noqa: E402

RANK, ALPHA = 4, 8
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class LoraLinear(torch.nn.Module):
    def __init__(self, base, a):
        super().__init__()
        self.base = base
        self.lora_A = torch.nn.Parameter(a.clone())
        self.lora_B = torch.nn.Parameter(torch.zeros(base.out_features, a.shape[0]))

    def forward(self, x):
        return self.base(x) + (x @ self.lora_A.T @ self.lora_B.T) * (ALPHA / RANK)


def with_adapters(folder, initial):
    """The folder's model with an adapter on every target, A from `initial` (name -> tensor)."""
    model = LlamaForCausalLM.from_pretrained(folder, attn_implementation="eager")
    for p in model.parameters():
        p.requires_grad_(False)
    for name, module in list(model.named_modules()):
        for target in TARGETS:
            if hasattr(module, target):
                setattr(module, target, LoraLinear(getattr(module, target), initial[f"{name}.{target}.lora_A"]))
    return model


def adapters(model):
    """name.lora_A / name.lora_B -> tensor, in gputrain's names."""
    return {k.replace(".base", ""): v.detach() for k, v in model.named_parameters() if "lora_" in k}


def main():
    gputrain, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    d = lambda name: os.path.join(work, name)  # noqa: E731
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(5)
    train = rng.integers(0, VOCAB, BATCH * T + 1).tolist()
    write_shard(d("train.bin"), train)
    write_shard(d("val.bin"), rng.integers(0, VOCAB, 4 * T + 1).tolist())
    hf = d("base")
    make_model(hf, 0.2, MODELS["gqa"], sharded=False)
    base = {k: v.clone() for k, v in LlamaForCausalLM.from_pretrained(hf).state_dict().items()}
    flags = ["--dataset", "tokens", "--train_file", d("train.bin"), "--test_file", d("val.bin"), "--vocab_size",
             str(VOCAB), "--seq_len", str(T), "--model", "llama", "--init_from", hf, "--lora_rank", str(RANK),
             "--lora_alpha", str(ALPHA), "--optimizer", "adamw", "--beta2", "0.95", "--weight_decay", str(WD),
             "--clip_max_norm", str(CLIP), "--lr_schedule", "constant", "--warmup_steps", "0", "--label_smoothing", "0",
             "--no-use_amp", "--log_every", "1", "--num_workers", "0", "--batch_size", str(BATCH), "--seed", "7"]
    problems = []

    # 1. The adapters as they start.
    run([gputrain, "train"] + flags + ["--lr", "0", "--max_steps", "1", "--epochs", "1", "--output_dir", d("start")])
    start = torch.load(d("start/checkpoints/last.pt"), weights_only=True)["model"]
    initial = {k: v for k, v in start.items() if "lora_" in k}
    if len(initial) != 2 * 7 * 2 or any(v.abs().max() != 0 for k, v in initial.items() if k.endswith("lora_B")):
        problems.append(f"{len(initial)} adapter tensors, or a lora_B that does not start at zero")
    if set(base) - set(start) or any(not torch.equal(start[k], v) for k, v in base.items()):
        problems.append("the base weights are not the folder's after a step at lr 0")
    x, y = windows(train)
    with torch.no_grad():
        base_loss = torch.nn.functional.cross_entropy(LlamaForCausalLM.from_pretrained(hf)(x).logits.reshape(-1, VOCAB),
                                                      y.reshape(-1)).item()
    if abs(first_loss(d("start")) - base_loss) > 1e-5 * base_loss:
        problems.append(f"first loss {first_loss(d('start'))}, the base model's {base_loss}")

    # 2. Three steps against PyTorch.
    run([gputrain, "train"] + flags + ["--lr", str(LR), "--max_steps", str(STEPS), "--epochs", str(STEPS),
                                       "--output_dir", d("run")])
    got = torch.load(d("run/checkpoints/last.pt"), weights_only=True)["model"]
    model = with_adapters(hf, initial)
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=LR, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=WD)
    for _ in range(STEPS):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x).logits.reshape(-1, VOCAB), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], CLIP)
        opt.step()
    want = adapters(model)
    update = sum(((want[k] - initial[k]) ** 2).sum() for k in want).sqrt().item()
    diff = sum(((got[k] - want[k]) ** 2).sum() for k in want).sqrt().item()
    if update == 0 or diff > 1e-4 * update:
        problems.append(f"adapters differ from PyTorch's by {diff:.3g}, the update being {update:.3g}")
    if any(not torch.equal(got[k], v) for k, v in base.items() if k in got):
        problems.append("a base weight moved")

    # 3. The merged export.
    merged = export_and_load(gputrain, d("run"), d("merged"), problems, "lora").eval()
    model.eval()
    with torch.no_grad():
        gap = (merged(x).logits - model(x).logits).abs().max().item()
    if gap > 1e-5:
        problems.append(f"the merged export's logits differ from the adapted model's by {gap:.3g}")

    if problems:
        print("FAIL: " + "; ".join(problems))
        return 1
    print(f"ok: 3 LoRA steps equal PyTorch's to {diff / update:.2g} of the update; merged export within {gap:.2g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
