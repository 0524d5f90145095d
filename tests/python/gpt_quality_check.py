#!/usr/bin/env python3
"""The CPU GPT against the nanoGPT-style PyTorch loop of tools/gpt_pytorch.py: from the same initial
weights (written by the PyTorch side), on the same data in the same order, dropout 0.

    gpt_quality_check.py GPUTRAIN_BIN WORKDIR

The corpus is real text no one here wrote: the `json` package of this Python's standard library,
as byte shards (tools/prepare_text.py). The gpt_cpu preset at 64 tokens of context trains 60
steps on each side, in fp32 and in bf16 autocast:
  - fp32: every step's training loss within 1e-3 (relative) of PyTorch's, the first within 1e-5,
    and the val loss after the 60 steps within 1e-3;
  - bf16: the val loss within 1% (the issue's quality bar; bf16 rounding is the only difference).
The bf16 run starts from the same weights saved as nanoGPT's train.py checkpoints them (ckpt.pt:
'_orig_mod.' names, the tied lm_head, model_args, the optimizer). The fp32 run also samples text
every 30 steps (--sample_every): the record's text is what the
shards' tokenizer.json decodes its ids to (with `tokenizers`, when installed).
A nanoGPT checkpoint with bias=False, or with an untied head, is refused (exit 2, nothing written).
Prints one line per check; 0 = pass, 1 = a check failed, 2 = a command failed.
"""
import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from commands import run  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, ".pydeps-text"))
STEPS = 60
COMMON = ["--seq_len", "64", "--max_steps", str(STEPS), "--warmup_steps", "10", "--eval_every", "0",
          "--eval_tokens", "8192"]


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def main():
    gputrain, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    d = lambda name: os.path.join(work, name)  # noqa: E731
    corpus = os.path.dirname(json.__file__)
    run([sys.executable, os.path.join(ROOT, "tools", "prepare_text.py"), corpus, "--glob", "*.py", "--val-docs", "1",
         "--out", d("bytes")])
    data = ["--train_file", d("bytes/train_*.bin"), "--test_file", d("bytes/val_*.bin")]
    pytorch = [sys.executable, os.path.join(ROOT, "tools", "gpt_pytorch.py"), *data, *COMMON]
    # The same weights twice: a state dict, and a checkpoint as nanoGPT's train.py writes it.
    run(pytorch + ["--save_init", d("init.pth"), "--save_nanogpt", d("ckpt.pt")])
    problems = []
    for precision, amp in (("fp32", ["--no-use_amp"]), ("bf16", ["--use_amp", "--amp_dtype", "bf16"])):
        run(pytorch + ["--init_from", d("init.pth"), "--precision", precision, "--json", d(f"py_{precision}.json")])
        ref = json.load(open(d(f"py_{precision}.json")))
        out = d(f"run_{precision}")
        flags = ["--sample_every", "30", "--sample_tokens", "24"] if precision == "fp32" else []
        start = d("init.pth") if precision == "fp32" else d("ckpt.pt")
        # The json package is under 40 steps of windows: the second epoch's order is the one the
        # PyTorch side draws too.
        printed = run([gputrain, "train", "--preset", "gpt_cpu", *data, *COMMON, *amp, "--epochs", "3", "--init_from", start,
                       "--log_every", "1", "--output_dir", out, *flags])
        if start.endswith("ckpt.pt") and "nanoGPT checkpoint" not in printed:
            problems.append("the run from ckpt.pt does not say it read a nanoGPT checkpoint")
        records = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
        losses = [r["loss"] for r in records if r.get("event") == "step"]
        val = [r["test_loss"] for r in records if r.get("event") == "eval"][-1]
        ref_val = ref["evals"][-1]["val_loss"]
        print(f"{precision}: val loss after {STEPS} steps: gputrain {val:.5f}, PyTorch {ref_val:.5f} "
              f"({100 * rel(val, ref_val):.3f}%); first loss {losses[0]:.6f} vs {ref['train_losses'][0]:.6f}")
        if len(losses) != STEPS:
            problems.append(f"{precision}: {len(losses)} step records, not {STEPS}")
            continue
        if precision == "fp32":
            worst = max(rel(a, b) for a, b in zip(losses, ref["train_losses"]))
            print(f"fp32: largest step-loss difference {worst:.2e} (relative)")
            if rel(losses[0], ref["train_losses"][0]) > 1e-5 or worst > 1e-3 or rel(val, ref_val) > 1e-3:
                problems.append(f"fp32: gputrain's losses are not PyTorch's (worst step {worst:.2e}, val "
                                f"{val} vs {ref_val})")
            samples = [r for r in records if r.get("event") == "sample"]
            if [s["step"] for s in samples] != [30, 60] or any(len(s["ids"]) != 24 for s in samples):
                problems.append(f"samples at steps {[s['step'] for s in samples]} (expected 30 and 60, 24 ids each)")
            try:
                from tokenizers import Tokenizer
                tok = Tokenizer.from_file(d("bytes/tokenizer.json"))
                for s in samples:
                    if tok.decode(s["ids"], skip_special_tokens=False) != s["text"]:
                        problems.append(f"sample at step {s['step']}: {s['text']!r} is not what tokenizers decodes "
                                        f"its ids to: {tok.decode(s['ids'], skip_special_tokens=False)!r}")
            except ImportError:
                print("tokenizers is not installed (.pydeps-text): the samples' text not checked against it")
        elif rel(val, ref_val) > 0.01:
            problems.append(f"bf16: val loss {val} is not within 1% of PyTorch's {ref_val}")
    # nanoGPT checkpoints gpt cannot hold: exit 2 naming the file, no run folder.
    import torch
    ckpt = torch.load(d("ckpt.pt"), weights_only=True)
    no_bias = dict(ckpt, model_args=dict(ckpt["model_args"], bias=False))
    untied = dict(ckpt, model=dict(ckpt["model"]))
    untied["model"]["_orig_mod.lm_head.weight"] = untied["model"]["_orig_mod.lm_head.weight"] + 1
    for name, bad, expected in (("nobias.pt", no_bias, "a nanoGPT model with bias=False"),
                                ("untied.pt", untied, "lm_head.weight is not transformer.wte.weight")):
        torch.save(bad, d(name))
        said = run([gputrain, "train", "--preset", "gpt_cpu", *data, *COMMON, "--init_from", d(name), "--output_dir",
                    d("refused")], expect=2)
        if expected not in said or os.path.exists(d("refused")):
            problems.append(f"{name}: not refused with '{expected}' before writing anything: {said.strip()}")
    for p in problems:
        print("FAIL:", p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
