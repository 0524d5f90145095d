#!/usr/bin/env python3
"""gputrain's gpt against Hugging Face's GPT-2, from the same random weights.

    gpt_check.py GPUTRAIN_BIN WORKDIR

In WORKDIR: a tiny random GPT2LMHeadModel saved with save_pretrained (hf/), llm.c token shards
(train: exactly one step of windows; val: a few more), made here. Then:
  1. gputrain trains --model gpt --init_from hf/ for 3 steps of AdamW (betas 0.9, 0.95, weight
     decay on 2-D weights only, clip 1.0) in fp32: one process, and 2 ranks (launch) with half
     the batch each. Each run's first loss equals GPT2LMHeadModel's on the same batch (1e-5),
     and its weights after 3 steps equal PyTorch's (the same steps on the Hugging Face model) to
     1e-4 of the update (2 ranks: 1e-3 element-wise and 1e-5 of the update's norm);
  2. export --format hf writes a folder that GPT2LMHeadModel.from_pretrained loads with no
     missing or unexpected key, holding those weights;
  3. infer's per-token predictions and probabilities equal that model's softmax (1e-5): the
     logits of gputrain's forward against transformers';
  4. bad input: a config.json whose n_embd disagrees with its weights exits 2 naming the file, and
     an export into a folder that holds files exits 2 and leaves it as it was.
Needs transformers (tools/setup.sh puts it in .pydeps-text): without it, prints
"transformers absent" and exits 77. Otherwise one line; 0 = pass, 1 = a check failed, 2 = a
command failed.
"""
import json
import os
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, ".pydeps-text"))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from commands import run  # noqa: E402

try:
    from transformers import GPT2Config, GPT2LMHeadModel
except ImportError:
    print("transformers absent")
    sys.exit(77)

# A vocabulary that is not a multiple of 128, so gputrain pads its embedding (300 -> 384).
VOCAB, DIM, T, BATCH, STEPS = 300, 32, 16, 4, 3
LR, WD, CLIP = 3e-3, 0.1, 1.0


def write_shard(path, tokens):
    """llm.c's format: 256 int32 of header (magic, version 1 = uint16, count), then the tokens."""
    header = np.zeros(256, dtype=np.int32)
    header[:3] = (20240520, 1, len(tokens))
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype=np.uint16).tobytes())


def windows(tokens):
    n = (len(tokens) - 1) // T
    x = torch.tensor([tokens[i * T:i * T + T] for i in range(n)])
    y = torch.tensor([tokens[i * T + 1:i * T + T + 1] for i in range(n)])
    return x, y


def reference(hf_dir, x, y, model_class=GPT2LMHeadModel):
    """The same steps in PyTorch: the Hugging Face model, its mean token loss, torch's AdamW."""
    model = model_class.from_pretrained(hf_dir, attn_implementation="eager")
    model.train()
    params = dict(model.named_parameters())  # tied: wte appears once
    decay = [p for p in params.values() if p.dim() >= 2]
    rest = [p for p in params.values() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": rest, "weight_decay": 0.0}],
                            lr=LR, betas=(0.9, 0.95), eps=1e-8)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        logits = model(x).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        losses.append(loss.item())
    return model, losses


def compared(t, name):
    """The tensor as compared with PyTorch's. The key projection's bias adds one number to every
    score of a query, which the softmax cancels: its gradient is 0 in exact arithmetic, and Adam
    turns either side's rounding noise into steps of about the learning rate. It is left out
    here and checked apart, against the learning rate."""
    if name.endswith("attn.c_attn.bias"):
        return torch.cat([t[:DIM], t[2 * DIM:]])
    return t


def first_loss(run_dir):
    for line in open(os.path.join(run_dir, "metrics.jsonl")):
        r = json.loads(line)
        if r.get("event") == "step" and r.get("step") == 1:
            return r["loss"]
    return None


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: gpt_check.py GPUTRAIN_BIN WORKDIR")
    gputrain, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    d = lambda name: os.path.join(work, name)  # noqa: E731
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=DIM, n_head=4, vocab_size=VOCAB, n_positions=32, bos_token_id=0, eos_token_id=0,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    GPT2LMHeadModel(config).save_pretrained(d("hf"))
    hf_files = os.listdir(d("hf"))
    start = {k: v.clone() for k, v in GPT2LMHeadModel.from_pretrained(d("hf")).state_dict().items()}
    rng = np.random.default_rng(3)
    train = rng.integers(0, VOCAB, BATCH * T + 1).tolist()  # one step's windows: every step sees them all
    val = rng.integers(0, VOCAB, 6 * T + 1).tolist()
    write_shard(d("train.bin"), train)
    write_shard(d("val.bin"), val)

    data = ["--dataset", "tokens", "--train_file", d("train.bin"), "--test_file", d("val.bin"), "--vocab_size",
            str(VOCAB), "--seq_len", str(T)]
    recipe = ["--model", "gpt", "--init_from", d("hf"), "--optimizer", "adamw", "--lr", str(LR), "--beta2", "0.95",
              "--weight_decay", str(WD), "--clip_max_norm", str(CLIP), "--lr_schedule", "constant", "--warmup_steps",
              "0", "--label_smoothing", "0", "--no-use_amp", "--max_steps", str(STEPS), "--epochs", str(STEPS),
              "--log_every", "1", "--num_workers", "0"]
    run([gputrain, "train"] + data + recipe + ["--batch_size", str(BATCH), "--output_dir", d("one")])
    run([gputrain, "launch", "--nproc_per_node", "2", "--", "train"] + data + recipe +
        ["--batch_size", str(BATCH // 2), "--output_dir", d("two")])

    x, y = windows(train)
    want, losses = reference(d("hf"), x, y)
    want_sd = want.state_dict()
    update = max((want_sd[k] - start[k]).abs().max().item() for k in start if k in want_sd)
    problems, figures = [], []
    for name in ("one", "two"):
        got_loss = first_loss(d(name))
        if got_loss is None or abs(got_loss - losses[0]) > 1e-5 * abs(losses[0]):
            problems.append(f"{name}: first loss {got_loss} vs transformers' {losses[0]:.7f}")
        out = d(name + "-hf")
        run([gputrain, "export", "--checkpoint", os.path.join(d(name), "checkpoints", "last.pt"), "--format", "hf",
             "--out", out])
        model, info = GPT2LMHeadModel.from_pretrained(out, output_loading_info=True)
        if any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")):
            problems.append(f"{name}: from_pretrained reports {info}")
        got = model.state_dict()
        diff = max((compared(got[k], k) - compared(want_sd[k], k)).abs().max().item() for k in want_sd)
        noise = max((got[k] - want_sd[k])[DIM:2 * DIM].abs().max().item() for k in want_sd if k.endswith("attn.c_attn.bias"))
        # Two ranks sum their gradients in another order: an element whose gradient is rounding
        # noise (one of 6e-9 where the median is 2.5e-5) takes an Adam step of another size. The
        # whole update must still agree to 1e-5 (a wrong normalisation is off by 1e-1 and more).
        relative = (sum(((compared(got[k], k) - compared(want_sd[k], k)) ** 2).sum() for k in want_sd) /
                    sum(((compared(want_sd[k], k) - compared(start[k], k)) ** 2).sum() for k in want_sd)).sqrt().item()
        figures.append(f"{name} {diff:.2g} ({relative:.2g} of the update's norm)")
        if diff > (1e-4 if name == "one" else 1e-3) * update or relative > 1e-5:
            problems.append(f"{name}: weights differ from PyTorch's by {diff:.3g} (update {update:.3g}), "
                            f"{relative:.3g} of the update's norm")
        if noise > 0.01 * LR:
            problems.append(f"{name}: the key biases differ from PyTorch's by {noise:.3g}")

    # infer: gputrain's forward (argmax and its probability at every position) against
    # transformers' on the exported weights.
    run([gputrain, "infer", "--checkpoint", os.path.join(d("one"), "checkpoints", "last.pt"), "--out", d("preds.csv")])
    rows = [r.split(",") for r in open(d("preds.csv")).read().splitlines()[1:]]
    model = GPT2LMHeadModel.from_pretrained(d("one-hf"))
    vx, _ = windows(val)
    with torch.no_grad():
        probs = torch.softmax(model(vx).logits, dim=-1)
    worst, wrong = 0.0, 0
    for index, position, _, prediction, probability in rows:
        p = probs[int(index), int(position)]
        wrong += int(prediction) != int(p.argmax())
        worst = max(worst, abs(float(probability) - p.max().item()))
    if len(rows) != vx.numel() or wrong or worst > 1e-5:
        problems.append(f"infer: {len(rows)} rows for {vx.numel()} tokens, {wrong} other predictions, "
                        f"probabilities off by {worst:.3g}")

    # export into a folder that holds files: refused, the folder as it was.
    said = run([gputrain, "export", "--checkpoint", os.path.join(d("one"), "checkpoints", "last.pt"), "--format", "hf",
                "--out", d("hf")], expect=2)
    if "exists and is not empty" not in said or sorted(os.listdir(d("hf"))) != sorted(hf_files):
        problems.append(f"export into a full folder: {said.strip()!r}, the folder now {sorted(os.listdir(d('hf')))}")

    # A config.json that disagrees with its weights: one line naming it, exit 2, no run folder.
    os.makedirs(d("bad"), exist_ok=True)
    bad = json.load(open(os.path.join(d("hf"), "config.json")))
    bad["n_embd"] = 64
    json.dump(bad, open(os.path.join(d("bad"), "config.json"), "w"))
    os.link(os.path.join(d("hf"), "model.safetensors"), os.path.join(d("bad"), "model.safetensors"))
    said = run([gputrain, "train"] + data + ["--model", "gpt", "--init_from", d("bad"), "--output_dir", d("badrun")],
               expect=2)
    if "config.json implies" not in said or os.path.exists(d("badrun")):
        problems.append(f"a config.json that disagrees with its weights: {said.strip()!r}")

    if problems:
        print("FAIL: " + "; ".join(problems))
        sys.exit(1)
    print(f"ok: first loss {losses[0]:.6f}; weights vs PyTorch after {STEPS} AdamW steps: {', '.join(figures)} "
          f"(update {update:.3g}); infer probabilities within {worst:.2g}")


if __name__ == "__main__":
    main()
