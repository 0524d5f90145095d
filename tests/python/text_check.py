#!/usr/bin/env python3
"""--dataset text end to end: a CSV of labelled reviews, a BERT folder, export, train, eval, infer.

    text_check.py GPUTRAIN_BIN WORKDIR

tools/make_text_example.py makes the CSV (300 reviews, 3 classes), 20 unlabelled ones and a
BERT folder (1 layer, width 32, a WordPiece tokenizer); tools/prepare_text.py --text-column
tokenizes them with the folder's tokenizer; tools/export_model.py --hf exports the model. Then:
  1. gputrain trains 3 AdamW steps of 16 reviews (--no-shuffle); the weights equal transformers'
     after the same steps on the same reviews, each batch padded to its own longest review with
     attention_mask 0 on the padding, to 1e-4 of the update;
  2. `gputrain eval` gives transformers' eval-mode loss on the test split; `gputrain infer` on
     the unlabelled reviews writes one row each;
  3. hostile input, each one line and exit 2 with nothing written: a CSV that is not UTF-8
     (its line named), a test label outside the classes, a tokenizer whose ids pass the model's
     embedding, a program input the data lacks; a review longer than --max-length is cut and
     counted, and an empty one kept and counted.
Prints one line; exit 0 = pass, 1 = a check failed, 2 = a command failed, 77 = transformers absent.
"""
import json
import os
import sys

import numpy as np
import torch

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from commands import run  # noqa: E402
from test_export import load_weights  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, ".pydeps-text"))
try:
    import transformers
except ImportError:
    print("transformers absent")
    sys.exit(77)

STEPS, BATCH, LR, WD = 3, 16, 1e-3, 0.01


def batches(npz, count):
    """The first `count` batches as gputrain collates them: each text cut to its length, padded
    to the batch's longest with id 0 and attention_mask 0."""
    out = []
    for b in range(count):
        ids, lengths = npz["input_ids"][b * BATCH:(b + 1) * BATCH], npz["lengths"][b * BATCH:(b + 1) * BATCH]
        t = int(lengths.max())
        mask = (np.arange(t)[None, :] < lengths[:, None]).astype(np.int64)
        out.append((torch.from_numpy(ids[:, :t].astype(np.int64) * mask), torch.from_numpy(mask),
                    torch.from_numpy(npz["labels"][b * BATCH:(b + 1) * BATCH])))
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: text_check.py GPUTRAIN_BIN WORKDIR")
    gputrain, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    d = lambda *name: os.path.join(work, *name)  # noqa: E731
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, ".pydeps-text"))
    tool = lambda name: [sys.executable, os.path.join(ROOT, "tools", name)]  # noqa: E731
    problems = []

    run(tool("make_text_example.py") + ["--out", work, "--texts", "300", "--layers", "1", "--width", "32"], env=env)
    with open(d("bert", "config.json")) as f:  # no dropout: the comparison is exact
        config = json.load(f)
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    with open(d("bert", "config.json"), "w") as f:
        json.dump(config, f)
    prepared = run(tool("prepare_text.py") + [d("reviews.csv"), "--text-column", "text", "--label-column", "label",
                                              "--tokenizer", d("bert"), "--out", d("data"), "--max-length", "64"])
    run(tool("prepare_text.py") + [d("new_reviews.csv"), "--text-column", "text", "--tokenizer", d("bert"),
                                   "--out", d("new")])
    run(tool("export_model.py") + ["--hf", d("bert"), "--task", "classification", "--out", d("bert.pt2")], env=env)

    data = ["--dataset", "text", "--train_file", d("data", "train.npz"), "--test_file", d("data", "test.npz")]
    recipe = ["--optimizer", "adamw", "--lr", str(LR), "--weight_decay", str(WD), "--lr_schedule", "constant",
              "--label_smoothing", "0", "--no-shuffle", "--max_steps", str(STEPS), "--num_workers", "0",
              "--batch_size", str(BATCH), "--no-use_amp"]
    out = run([gputrain, "train", "--model", d("bert.pt2")] + data + recipe + ["--output_dir", d("run"), "--export",
                                                                               d("run.st")])
    if "3 classes (negative, neutral, positive)" not in out:
        problems.append("train did not name the classes")

    # 1. transformers in eager PyTorch, the same batches.
    model = transformers.BertForSequenceClassification.from_pretrained(d("bert")).train()
    start = {k: v.clone() for k, v in model.state_dict().items()}
    params = list(model.parameters())
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": WD},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}], lr=LR)
    train = np.load(d("data", "train.npz"))
    for ids, mask, labels in batches(train, STEPS):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(input_ids=ids, attention_mask=mask).logits, labels).backward()
        opt.step()
    got, _, _ = load_weights(d("run.st"))
    want = model.state_dict()
    update = max((want[k] - start[k]).abs().max().item() for k in want)
    # The key projection's bias: its gradient is rounding alone (softmax ignores a shift shared by
    # a row's scores), which Adam scales up in either implementation.
    diff = max((got[k].float() - want[k]).abs().max().item() for k in want
               if k in got and not k.endswith("attention.self.key.bias"))
    if diff > 1e-4 * update:
        problems.append(f"weights differ from transformers' by {diff:.3g} (update {update:.3g})")

    # 2. eval and infer.
    checkpoint = d("run", "checkpoints", "last.pt")
    run([gputrain, "eval", "--checkpoint", checkpoint, "--json", d("eval.json")])
    ours = json.load(open(d("eval.json")))["test_loss"]
    test = np.load(d("data", "test.npz"))
    model.eval()
    with torch.no_grad():
        n = len(test["labels"])
        total = sum(torch.nn.functional.cross_entropy(model(input_ids=i, attention_mask=m).logits, y, reduction="sum")
                    for i, m, y in batches(test, (n + BATCH - 1) // BATCH)).item() / n
    if abs(ours - total) > 1e-4 * max(1.0, total):
        problems.append(f"eval loss {ours:.6f}, transformers' {total:.6f}")
    run([gputrain, "infer", "--checkpoint", checkpoint, "--dataset", "text", "--test_file", d("new", "texts.npz"),
         "--out", d("preds.csv")])
    rows = open(d("preds.csv")).read().splitlines()
    if len(rows) != 21:
        problems.append(f"infer wrote {len(rows)} lines for 20 new reviews")

    # 3. Hostile input.
    def refused(cmd, *words, out_dir=None):
        said = run(cmd, expect=2, env=env)
        lines = [line for line in said.strip().splitlines() if "Warning" not in line]
        if not all(w in said for w in words) or len(lines) > 2:
            problems.append(f"`{' '.join(os.path.basename(c) for c in cmd[:3])}` said: {said.strip()[:300]}")
        if out_dir and os.path.exists(out_dir) and os.listdir(out_dir):
            problems.append(f"a refused command wrote into {out_dir}")

    with open(d("latin1.csv"), "wb") as f:
        f.write(b"text,label\ngood one,positive\ncaf\xe9 was bad,negative\n")
    refused(tool("prepare_text.py") + [d("latin1.csv"), "--text-column", "text", "--label-column", "label",
                                       "--tokenizer", d("bert"), "--out", d("bad1")],
            "latin1.csv:3: not UTF-8", out_dir=d("bad1"))
    with open(d("no_label.csv"), "w") as f:
        f.write("text,label\nIt is fine,neutral\nNo idea,\n")
    refused(tool("prepare_text.py") + [d("no_label.csv"), "--text-column", "text", "--label-column", "label",
                                       "--tokenizer", d("bert"), "--test", d("no_label.csv"), "--out", d("bad5")],
            "no_label.csv:3: label '' is empty", out_dir=d("bad5"))
    with open(d("odd_test.csv"), "w") as f:
        f.write("text,label\nIt is fine,neutral\nI am furious,angry\n")
    refused(tool("prepare_text.py") + [d("reviews.csv"), "--text-column", "text", "--label-column", "label",
                                       "--tokenizer", d("bert"), "--test", d("odd_test.csv"), "--out", d("bad2")],
            "odd_test.csv:3: label 'angry' is not one of the classes", out_dir=d("bad2"))
    small = dict(config, vocab_size=50)
    os.makedirs(d("small"), exist_ok=True)
    with open(d("small", "config.json"), "w") as f:
        json.dump(small, f)
    run(tool("export_model.py") + ["--hf", d("small"), "--task", "classification", "--out", d("small.pt2")], env=env)
    refused([gputrain, "train", "--model", d("small.pt2")] + data + ["--output_dir", d("bad3")],
            "input 'input_ids' holds token id", "embedding has 50 rows", out_dir=d("bad3"))
    run(tool("export_model.py") + ["--hf", d("bert"), "--task", "classification", "--inputs",
                                   "input_ids,attention_mask,token_type_ids", "--out", d("types.pt2")], env=env)
    refused([gputrain, "train", "--model", d("types.pt2")] + data + ["--output_dir", d("bad4")],
            "takes input 'token_type_ids', which the data lacks", "input_ids, attention_mask, labels", out_dir=d("bad4"))
    with open(d("odd.csv"), "w") as f:
        f.write("text,label\n" + ",positive\n" + "great " * 200 + ",positive\n" + "It broke,negative\n" * 20)
    said = run(tool("prepare_text.py") + [d("odd.csv"), "--text-column", "text", "--label-column", "label",
                                          "--tokenizer", d("bert"), "--out", d("odd"), "--max-length", "16",
                                          "--val-fraction", "0.2"])
    meta = json.load(open(d("odd", "meta.json")))
    counts = [meta["counts"][s] for s in ("train", "test")]
    if sum(c["truncated"] for c in counts) != 1 or sum(c["empty"] for c in counts) != 1 or \
            max(c["longest"] for c in counts) != 16:
        problems.append(f"a long text was not cut to 16 and counted, or the empty one not counted: {counts}")

    line = (f"weights vs transformers after {STEPS} AdamW steps {diff:.2g} (update {update:.2g}), eval loss "
            f"{ours:.5f} vs {total:.5f}, {len(rows) - 1} predictions, hostile input refused")
    print(("pass: " if not problems else "FAIL: " + "; ".join(problems) + ": ") + line)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
