#!/usr/bin/env python3
"""Named, typed batches end to end: int64 ids of ragged length, a mask and per-token labels.

    token_batches_check.py GPUTRAIN_BIN WORKDIR

In WORKDIR: train.jsonl / test.jsonl (fields input_ids, attention_mask, labels; 3 to 9 tokens,
labels -100 where nothing is trained), and a module TokNet whose forward takes
(attention_mask, input_ids), in another order than the data's, and returns a dict
{"hidden", "logits"}. It is exported (tok.pt2) and scripted (tok.pt). Then:
  1. gputrain trains tok.pt2 --output_name logits for 3 AdamW steps of 8 samples: 1 process with
     batch 4 x accumulation 2, 2 ranks with batch 2 x accumulation 2, and tok.pt (TorchScript,
     bound by argument name). Each run's weights must equal PyTorch eager's: the same 3 steps,
     each sample unpadded, the token losses summed and divided by the step's counted tokens, to
     1e-4 of the update. A per-micro-batch mean (the normalisation the step must not use) is
     checked to differ, so the comparison can fail;
  2. eval and infer of the 1-process run: token accuracy, one CSV row per counted token;
  3. a program of one int64 input returning a dict, exported by tools/export_model.py --data,
     trains; one reading 'token_type_ids', which the data lacks, exits 2 naming both sides, in
     gputrain and in export_model.py.
Prints one line; exit code 0 = pass, 1 = a check failed, 2 = a command failed.
"""
import json
import os
import random
import sys

import torch
from torch import nn

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from commands import run  # noqa: E402
from test_export import load_weights  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOCAB, DIM, STEPS, GLOBAL = 23, 8, 3, 8
LR, WD = 0.01, 0.05


class TokNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.mix = nn.Linear(DIM, DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, attention_mask, input_ids):
        h = self.emb(input_ids) * attention_mask.unsqueeze(-1).to(torch.float32)
        h = torch.tanh(self.mix(torch.cumsum(h, dim=1)))  # causal: right padding changes no earlier token
        return {"hidden": h, "logits": self.head(h)}


# Written to WORKDIR/nets.py for tools/export_model.py --data, which exports from a module file.
NETS = f"""
import torch
from torch import nn


class IdsOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding({VOCAB}, {DIM})
        self.head = nn.Linear({DIM}, {VOCAB})

    def forward(self, input_ids):
        return {{"logits": self.head(self.emb(input_ids))}}


class WrongName(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding({VOCAB}, {DIM})
        self.head = nn.Linear({DIM}, {VOCAB})

    def forward(self, input_ids, token_type_ids):
        return self.head(self.emb(input_ids + token_type_ids))
"""


def samples(n, rng):
    out = []
    for _ in range(n):
        t = rng.randint(3, 9)
        ids = [rng.randrange(1, VOCAB) for _ in range(t)]
        mask = [0 if rng.random() < 0.15 else 1 for _ in range(t)]
        labels = ids[1:] + [-100]
        labels = [-100 if rng.random() < 0.2 else v for v in labels]
        out.append({"input_ids": ids, "attention_mask": mask, "labels": labels})
    return out


def export(module, example, path, dynamic):
    program = torch.export.export(module.train(), example, dynamic_shapes=dynamic)
    torch.export.save(program, path)


def reference(start, data, per_micro_mean=False):
    """PyTorch eager: STEPS AdamW steps of GLOBAL samples, each sample unpadded."""
    model = TokNet()
    model.load_state_dict(start)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": rest, "weight_decay": 0.0}], lr=LR)
    for s in range(STEPS):
        step = data[s * GLOBAL:(s + 1) * GLOBAL]
        opt.zero_grad()
        groups = [step[i:i + 4] for i in range(0, GLOBAL, 4)] if per_micro_mean else [step]
        for group in groups:
            tokens = sum(sum(1 for v in d["labels"] if v != -100) for d in group)
            loss = 0
            for d in group:
                out = model(torch.tensor([d["attention_mask"]]), torch.tensor([d["input_ids"]]))["logits"][0]
                loss = loss + nn.functional.cross_entropy(out, torch.tensor(d["labels"]), ignore_index=-100,
                                                          reduction="sum")
            (loss / tokens / len(groups)).backward()
        opt.step()
    return {k: v.detach() for k, v in model.state_dict().items()}


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: token_batches_check.py GPUTRAIN_BIN WORKDIR")
    gputrain, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    rng = random.Random(7)
    train, test = samples(48, rng), samples(12, rng)
    for name, rows in (("train", train), ("test", test)):
        with open(os.path.join(work, name + ".jsonl"), "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    torch.manual_seed(0)
    net = TokNet()
    start = {k: v.clone() for k, v in net.state_dict().items()}
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq", min=2, max=64)
    ids = torch.randint(0, VOCAB, (4, 8))
    mask = torch.ones(4, 8, dtype=torch.long)
    export(net, (mask, ids), os.path.join(work, "tok.pt2"), ({0: batch, 1: seq}, {0: batch, 1: seq}))
    torch.jit.save(torch.jit.script(net), os.path.join(work, "tok.pt"))
    with open(os.path.join(work, "nets.py"), "w") as f:
        f.write(NETS)
    sys.path.insert(0, work)
    from nets import WrongName  # noqa: E402  (written just above)
    export(WrongName(), (ids, ids), os.path.join(work, "wrong.pt2"), ({0: batch, 1: seq}, {0: batch, 1: seq}))

    data = ["--dataset", "jsonl", "--train_file", os.path.join(work, "train.jsonl"), "--test_file",
            os.path.join(work, "test.jsonl")]
    recipe = ["--optimizer", "adamw", "--lr", str(LR), "--weight_decay", str(WD), "--lr_schedule", "constant",
              "--label_smoothing", "0", "--no-shuffle", "--no-use_amp", "--accumulation_steps", "2", "--max_steps", str(STEPS),
              "--num_workers", "0"]
    tok = ["--model", os.path.join(work, "tok.pt2"), "--output_name", "logits"]
    d = lambda name: os.path.join(work, name)  # noqa: E731
    out = run([gputrain, "train"] + data + tok + recipe + ["--batch_size", "4", "--output_dir", d("one"), "--export",
                                                          d("one.st")])
    run([gputrain, "launch", "--nproc_per_node", "2", "--", "train"] + data + tok + recipe +
        ["--batch_size", "2", "--output_dir", d("two"), "--export", d("two.st")])
    run([gputrain, "train"] + data + ["--model", d("tok.pt"), "--trust_program", "--output_name", "logits"] + recipe +
        ["--batch_size", "4", "--output_dir", d("script"), "--export", d("script.st")])

    want = reference(start, train)
    wrong = reference(start, train, per_micro_mean=True)
    update = max((want[k] - start[k]).abs().max().item() for k in start)
    problems, figures = [], []
    for name in ("one", "two", "script"):
        got, _, _ = load_weights(d(name + ".st"))
        diff = max((got[k].float() - want[k]).abs().max().item() for k in want)
        figures.append(f"{name} {diff:.2g}")
        if diff > 1e-4 * update:
            problems.append(f"{name}: weights differ from PyTorch's by {diff:.3g} (update {update:.3g})")
    misnormalised = max((wrong[k] - want[k]).abs().max().item() for k in want)
    if misnormalised <= 1e-4 * update:
        problems.append(f"a per-micro-batch mean gives the same weights ({misnormalised:.3g}): the check cannot fail")
    for field in ("input_ids: i64[-1]", "attention_mask: i64[-1]", "labels: i64[-1] pad -100 (target)", "length: i64[]"):
        if field not in out:
            problems.append(f"train did not print the schema field '{field}'")

    checkpoint = os.path.join(work, "one", "checkpoints", "last.pt")
    run([gputrain, "eval", "--checkpoint", checkpoint, "--json", d("eval.json")])
    accuracy = json.load(open(d("eval.json")))["test_accuracy"]
    run([gputrain, "infer", "--checkpoint", checkpoint, "--out", d("preds.csv")])
    rows = open(d("preds.csv")).read().splitlines()
    counted = sum(1 for r in test for v in r["labels"] if v != -100)
    if rows[0] != "index,position,target,prediction,probability" or len(rows) != 1 + counted:
        problems.append(f"infer wrote {len(rows)} lines headed '{rows[0]}', expected {counted} token rows")
    if not 0 <= accuracy <= 1:
        problems.append(f"token accuracy {accuracy}")

    # tools/export_model.py --data: the example inputs from the data, by name and dtype.
    tool = [sys.executable, os.path.join(ROOT, "tools", "export_model.py")]
    run(tool + [d("nets.py") + ":IdsOnly", "--data", d("train.jsonl"), "--out", d("ids.pt2")])
    run([gputrain, "train"] + data + ["--model", d("ids.pt2"), "--max_steps", "2", "--batch_size", "4",
                                      "--output_dir", d("ids")])
    said = run(tool + [d("nets.py") + ":WrongName", "--data", d("train.jsonl"), "--out", d("w.pt2")], expect=2)
    if "'token_type_ids'" not in said or "input_ids, attention_mask, labels" not in said or os.path.exists(d("w.pt2")):
        problems.append("export_model.py --data did not name the missing field in one line: " + said.strip())
    refused = run([gputrain, "train"] + data + ["--model", d("wrong.pt2"), "--output_dir", d("wrong")], expect=2)
    if "token_type_ids" not in refused or "input_ids, attention_mask, labels" not in refused:
        problems.append("a missing input was not named with the data's fields: " + refused.strip())
    if os.path.exists(d("wrong")) and os.listdir(d("wrong")):
        problems.append("the refused run left files in its folder")

    line = (f"weights vs PyTorch eager ({', '.join(figures)}; update {update:.3g}, per-micro-batch mean "
            f"{misnormalised:.3g}), token accuracy {accuracy:.3f}, {len(rows) - 1} token rows")
    print(("pass: " if not problems else "FAIL: " + "; ".join(problems) + ": ") + line)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
