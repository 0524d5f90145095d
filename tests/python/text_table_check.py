#!/usr/bin/env python3
"""--dataset text from a CSV tokenized by gputrain itself (a SentencePiece .model), multi-label,
class weights, macro-F1 and length buckets.

    text_table_check.py GPUTRAIN_BIN WORKDIR

A DeBERTa-v3-style SentencePiece model ([PAD] 0, [CLS] 1, [SEP] 2, [UNK] 3) is trained on
random review words and saved as a Hugging Face folder (spm.model, tokenizer.json,
tokenizer_config.json). A tiny program (embeddings of ids and token types, masked mean, a linear
head) is exported with tools/export_model.py. Then:
  1. text pairs from a CSV, tokenized by gputrain (--tokenizer FOLDER --max_length 20), train 3
     AdamW steps to the same weights, and evaluate to the same loss, as the same CSV tokenized
     by transformers' DebertaV2Tokenizer in tools/prepare_text.py (the .npz path): the ids,
     token types and longest_first truncation are the tokenizer's;
  2. the evaluation's macro-F1 equals scikit-learn's definition computed from `infer`'s
     predictions, and `infer` names each predicted class, also for new texts without a label
     column;
  3. three 0/1 label columns train a multi-label model (bce): the evaluation's loss, exact-match
     accuracy and macro-F1 equal those computed from `infer`'s probabilities;
  4. --class_weights balanced: one SGD step equals PyTorch's cross_entropy(weight=n / (classes x
     count)) step from the same weights;
  5. the padding share is reported, lower with length buckets than without;
  6. hostile input, each one line, exit 2, no run folder: a text that is not UTF-8, a test label
     outside the classes, a tokenizer.json, tokenizers that shift ids (XLM-R) or change the text
     first (ALBERT), a text holding a special token's text, a missing column, a multi-label value
     of 2, --max_length on tokenized texts.
Prints one line; exit 0 = pass, 1 = a check failed, 2 = a command failed, 77 = transformers,
sentencepiece or protobuf absent.
"""
import csv
import json
import os
import random
import shutil
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
    import google.protobuf  # noqa: F401  (transformers reads a .model with it)
    import sentencepiece
    import transformers
except ImportError as e:
    print(f"{e.name} absent")
    sys.exit(77)

WORDS = ("the movie was great terrible plot acting fine bad good really not very a an of to and it is story film "
         "ending boring loved hated music scenes cast slow fast funny sad").split()
CLASSES = ["contradiction", "entailment", "neutral"]
MAX_LENGTH, BATCH, STEPS = 20, 8, 3

NET = '''
import torch


class Net(torch.nn.Module):
    """Embeddings of ids and token types, averaged over the attention mask, and a linear head."""

    def __init__(self, vocab, classes):
        super().__init__()
        self.ids = torch.nn.Embedding(vocab, 16)
        self.types = torch.nn.Embedding(2, 16)
        self.head = torch.nn.Linear(16, classes)

    def forward(self, input_ids, attention_mask, token_type_ids):
        mask = attention_mask.unsqueeze(-1).to(torch.float32)
        h = (self.ids(input_ids) + self.types(token_type_ids)) * mask
        return self.head(h.sum(1) / mask.sum(1))


class Single(Net):
    """The same for one text: no token types."""

    def forward(self, input_ids, attention_mask):
        return super().forward(input_ids, attention_mask, torch.zeros_like(input_ids))
'''


def sentence(rng, low, high):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def recipe(model, **flags):
    """Flags of a short exact run: no shuffle, no autocast, no label smoothing; `flags` replace them."""
    args = {"model": model, "optimizer": "adamw", "lr": "0.01", "lr_schedule": "constant", "label_smoothing": "0",
            "max_steps": str(STEPS), "num_workers": "0", "batch_size": str(BATCH), "weight_decay": "0",
            "clip_max_norm": "0"}
    args.update(flags)
    return [a for k, v in args.items() for a in (f"--{k}", v)] + ["--no-shuffle", "--no-use_amp"]


def macro_f1(targets, predicted, labels):
    """scikit-learn's f1_score(average="macro") over `labels`: 0 for a label with no positive."""
    scores = []
    for c in labels:
        tp = np.sum((predicted == c) & (targets == c))
        seen = np.sum(predicted == c) + np.sum(targets == c)
        scores.append(2 * tp / seen if seen else 0.0)
    return float(np.mean(scores))


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: text_table_check.py GPUTRAIN_BIN WORKDIR")
    gputrain, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    d = lambda *name: os.path.join(work, *name)  # noqa: E731
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, ".pydeps-text"))
    tool = lambda name: [sys.executable, os.path.join(ROOT, "tools", name)]  # noqa: E731
    problems = []
    rng = random.Random(7)

    # The tokenizer: a SentencePiece model with DeBERTa-v3's special pieces, as a model folder.
    with open(d("corpus.txt"), "w") as f:
        f.write("\n".join(sentence(rng, 3, 15) for _ in range(400)))
    sentencepiece.SentencePieceTrainer.train(
        input=d("corpus.txt"), model_prefix=d("spm"), vocab_size=60, model_type="unigram", pad_id=0, bos_id=1,
        eos_id=2, unk_id=3, pad_piece="[PAD]", bos_piece="[CLS]", eos_piece="[SEP]", unk_piece="[UNK]",
        user_defined_symbols=["[MASK]"], minloglevel=2)
    os.makedirs(d("model"))
    shutil.copy(d("spm.model"), d("model", "spm.model"))
    with open(d("model", "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "DebertaV2Tokenizer"}, f)
    tokenizer = transformers.AutoTokenizer.from_pretrained(d("model"))
    tokenizer.save_pretrained(d("model"))  # tokenizer.json beside spm.model, as a model's folder has them

    # Text pairs with class names; some longer than MAX_LENGTH (cut), one with a comma and quotes.
    pairs = [[sentence(rng, 1, 14), sentence(rng, 1, 8), rng.choice(CLASSES)] for _ in range(64)]
    pairs[5][0] = 'it is "great", really ' + pairs[5][0]
    write_csv(d("pairs.csv"), ["premise", "hypothesis", "label"], pairs)
    write_csv(d("pairs_test.csv"), ["premise", "hypothesis", "label"],
              [[sentence(rng, 1, 14), sentence(rng, 1, 8), CLASSES[i % 3]] for i in range(24)])
    run(tool("prepare_text.py") + [d("pairs.csv"), "--text-column", "premise,hypothesis", "--label-column", "label",
                                   "--tokenizer", d("model"), "--test", d("pairs_test.csv"), "--max-length",
                                   str(MAX_LENGTH), "--out", d("npz")], env=env)
    first = np.load(d("npz", "train.npz"))
    with open(d("examples.jsonl"), "w") as f:
        for i in range(8):
            n = int(first["lengths"][i])
            f.write(json.dumps({"input_ids": first["input_ids"][i, :n].tolist(), "attention_mask": [1] * n,
                                "token_type_ids": first["token_type_ids"][i, :n].tolist(), "labels": i % 3}) + "\n")
    with open(d("net.py"), "w") as f:
        f.write(NET)
    run(tool("export_model.py") + [d("net.py") + ":Net", "--kwargs", json.dumps({"vocab": 64, "classes": 3}),
                                   "--data", d("examples.jsonl"), "--out", d("net.pt2")], env=env)

    table = ["--dataset", "text", "--train_file", d("pairs.csv"), "--test_file", d("pairs_test.csv"), "--text_column",
             "premise,hypothesis", "--label_column", "label", "--tokenizer", d("model"), "--max_length", str(MAX_LENGTH)]
    said = run([gputrain, "train"] + table + recipe(d("net.pt2")) + ["--output_dir", d("run_csv"), "--export", d("csv.st")])
    run([gputrain, "train", "--dataset", "text", "--train_file", d("npz", "train.npz"), "--test_file",
         d("npz", "test.npz")] + recipe(d("net.pt2")) + ["--output_dir", d("run_npz"), "--export", d("npz.st")])

    # 1. The same weights and evaluation from either tokenization.
    ours, _, _ = load_weights(d("csv.st"))
    theirs, _, _ = load_weights(d("npz.st"))
    diff = max((ours[k] - theirs[k]).abs().max().item() for k in theirs)
    if diff > 1e-6:
        problems.append(f"weights from the CSV tokenized by gputrain differ from the .npz's by {diff:.3g}")
    meta = json.load(open(d("npz", "meta.json")))
    cut = meta["counts"]["train"]["truncated"] + meta["counts"]["test"]["truncated"]
    if cut == 0 or f"{cut} text(s) cut to --max_length {MAX_LENGTH}" not in said:
        problems.append(f"the {cut} texts prepare_text cut were not counted alike: {said[:600]}")
    if "3 classes (contradiction, entailment, neutral)" not in said:
        problems.append("train did not name the classes")
    evals = {}
    for name in ("csv", "npz"):
        run([gputrain, "eval", "--checkpoint", d(f"run_{name}", "checkpoints", "last.pt"), "--json", d(f"{name}.json")])
        evals[name] = json.load(open(d(f"{name}.json")))
    if abs(evals["csv"]["test_loss"] - evals["npz"]["test_loss"]) > 1e-6:
        problems.append(f"eval loss {evals['csv']['test_loss']} from the CSV, {evals['npz']['test_loss']} from the .npz")

    # 2. Macro-F1 against the predictions; infer names the classes.
    run([gputrain, "infer", "--checkpoint", d("run_csv", "checkpoints", "last.pt"), "--out", d("preds.csv")])
    rows = list(csv.DictReader(open(d("preds.csv"))))
    targets = np.array([int(r["target"]) for r in rows])
    predicted = np.array([int(r["prediction"]) for r in rows])
    want_f1 = macro_f1(targets, predicted, sorted(set(targets) | set(predicted)))
    if len(rows) != 24 or abs(evals["csv"]["test_f1"] - want_f1) > 1e-9:
        problems.append(f"macro-F1 {evals['csv'].get('test_f1')}, from the {len(rows)} predictions {want_f1}")
    if any(r["class"] != CLASSES[int(r["prediction"])] for r in rows):
        problems.append("infer's class column does not name the predicted classes")
    write_csv(d("new.csv"), ["premise", "hypothesis"], [[sentence(rng, 2, 9), sentence(rng, 1, 5)] for _ in range(5)])
    run([gputrain, "infer", "--checkpoint", d("run_csv", "checkpoints", "last.pt"), "--dataset", "text", "--test_file",
         d("new.csv"), "--out", d("new_preds.csv")])
    rows = list(csv.DictReader(open(d("new_preds.csv"))))
    if len(rows) != 5 or any(r["target"] != "-100" or r["class"] not in CLASSES for r in rows):
        problems.append(f"infer on new texts without labels wrote {rows}")

    # 3. Multi-label: three 0/1 columns.
    labels = ["toxic", "insult", "spam"]
    multi = [[sentence(rng, 2, 12)] + [int(rng.random() < p) for p in (0.3, 0.5, 0.2)] for _ in range(64)]
    write_csv(d("multi.csv"), ["text"] + labels, multi[:48])
    write_csv(d("multi_test.csv"), ["text"] + labels, multi[48:])
    mtable = ["--dataset", "text", "--train_file", d("multi.csv"), "--test_file", d("multi_test.csv"), "--text_column",
              "text", "--label_column", ",".join(labels), "--tokenizer", d("model", "spm.model")]
    with open(d("single.jsonl"), "w") as f:
        for row in multi[:8]:
            ids = tokenizer(row[0])["input_ids"]
            f.write(json.dumps({"input_ids": ids, "attention_mask": [1] * len(ids), "labels": row[1]}) + "\n")
    run(tool("export_model.py") + [d("net.py") + ":Single", "--kwargs", json.dumps({"vocab": 64, "classes": 3}),
                                   "--data", d("single.jsonl"), "--out", d("multi.pt2")], env=env)
    said = run([gputrain, "train"] + mtable + recipe(d("multi.pt2"), max_steps="60", lr="0.05") +
               ["--output_dir", d("run_multi")])
    if "loss" not in said or "bce" not in said or "multi-label, 3 labels (toxic, insult, spam)" not in said:
        problems.append(f"a multi-label run did not say bce and its labels: {said[:800]}")
    run([gputrain, "eval", "--checkpoint", d("run_multi", "checkpoints", "last.pt"), "--json", d("multi.json")])
    got = json.load(open(d("multi.json")))
    run([gputrain, "infer", "--checkpoint", d("run_multi", "checkpoints", "last.pt"), "--out", d("multi_preds.csv")])
    rows = list(csv.DictReader(open(d("multi_preds.csv"))))
    y = np.array([[float(r[f"{n}_target"]) for n in labels] for r in rows])
    p = np.array([[float(r[f"{n}_probability"]) for n in labels] for r in rows])
    loss = float(np.mean(-(y * np.log(p) + (1 - y) * np.log(1 - p))))
    on = p > 0.5
    exact = float(np.mean(np.all(on == (y > 0.5), axis=1)))
    f1 = float(np.mean([macro_f1(y[:, k], on[:, k].astype(float), [1.0]) for k in range(3)]))
    names = [r["prediction"] for r in rows]
    if abs(got["test_loss"] - loss) > 1e-5 or abs(got["test_accuracy"] - exact) > 1e-9 or abs(got["test_f1"] - f1) > 1e-9:
        problems.append(f"multi-label eval {got}, from infer's probabilities loss {loss:.6f} accuracy {exact} f1 {f1}")
    if names != ["|".join(n for n, o in zip(labels, row) if o) for row in on]:
        problems.append("infer's prediction column does not name the labels on")

    # 4. Balanced class weights: one SGD step against PyTorch's weighted cross-entropy.
    run([gputrain, "train"] + table + recipe(d("net.pt2"), optimizer="sgd", momentum="0", lr="0.5", max_steps="1",
                                             class_weights="balanced") + ["--output_dir", d("run_w"), "--export", d("w.st")])
    net = torch.export.load(d("net.pt2")).module()
    start = {k: v.detach().clone() for k, v in net.state_dict().items()}
    train = np.load(d("npz", "train.npz"))
    counts = np.bincount(train["labels"], minlength=3)
    weight = torch.tensor(len(train["labels"]) / (3 * counts), dtype=torch.float32)
    n = int(train["lengths"][:BATCH].max())
    mask = torch.from_numpy((np.arange(n)[None, :] < train["lengths"][:BATCH, None]).astype(np.int64))
    ids = torch.from_numpy(train["input_ids"][:BATCH, :n].astype(np.int64)) * mask
    types = torch.from_numpy(train["token_type_ids"][:BATCH, :n].astype(np.int64)) * mask
    params = dict(net.named_parameters())
    out = net(ids, mask, types)
    grads = torch.autograd.grad(torch.nn.functional.cross_entropy(out, torch.from_numpy(train["labels"][:BATCH]),
                                                                  weight=weight), list(params.values()))
    got, _, _ = load_weights(d("w.st"))
    wdiff = max((got[k] - (start[k] - 0.5 * g)).abs().max().item() for k, g in zip(params, grads))
    if wdiff > 1e-6:
        problems.append(f"a balanced-weights SGD step differs from PyTorch's by {wdiff:.3g}")

    # 5. Padding share, with and without length buckets.
    said = run([gputrain, "train"] + table + ["--model", d("net.pt2"), "--max_steps", "1", "--batch_size", "4",
                                              "--output_dir", d("run_pad")])
    line = next((x for x in said.splitlines() if x.strip().startswith("padding")), "")
    shares = [float(w.rstrip("%")) for w in line.replace("(", " ").split() if w.endswith("%")]
    if len(shares) != 2 or not shares[0] < shares[1]:
        problems.append(f"padding share not reported lower with buckets: '{line}'")

    # 6. Hostile input.
    def refused(cmd, *words, out_dir):
        said = run(cmd, expect=2, env=env)
        lines = [x for x in said.strip().splitlines() if "Warning" not in x]
        if not all(w in said for w in words) or len(lines) > 2:
            problems.append(f"refused with: {said.strip()[:300]}")
        if os.path.exists(out_dir):
            problems.append(f"a refused command wrote {out_dir}")

    def train_on(train_file, test_file=None, **flags):
        cmd = [gputrain, "train", "--model", d("net.pt2"), "--dataset", "text", "--train_file", train_file]
        if test_file:
            cmd += ["--test_file", test_file]
        args = {"text_column": "premise,hypothesis", "label_column": "label", "tokenizer": d("model")}
        args.update(flags)
        for k, v in args.items():
            cmd += [f"--{k}", v]
        return cmd + ["--output_dir", d("bad")]

    with open(d("latin1.csv"), "wb") as f:
        f.write(b"premise,hypothesis,label\ngood one,fine,neutral\ncaf\xe9 was bad,bad,contradiction\n")
    refused(train_on(d("latin1.csv")), "latin1.csv:3: 'premise' is not UTF-8", out_dir=d("bad"))
    write_csv(d("odd_test.csv"), ["premise", "hypothesis", "label"], [["it is fine", "fine", "angry"]])
    refused(train_on(d("pairs.csv"), d("odd_test.csv")), "odd_test.csv:2: label 'angry' is not one of the training",
            out_dir=d("bad"))
    refused(train_on(d("pairs.csv"), tokenizer=d("model", "tokenizer.json")), "SentencePiece .model", "prepare_text.py",
            out_dir=d("bad"))
    os.makedirs(d("xlmr"))
    shutil.copy(d("spm.model"), d("xlmr", "sentencepiece.bpe.model"))
    with open(d("xlmr", "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "XLMRobertaTokenizerFast"}, f)
    refused(train_on(d("pairs.csv"), tokenizer=d("xlmr")), "no spm.model, spiece.model or tokenizer.model", "prepare_text.py",
            out_dir=d("bad"))
    os.makedirs(d("albert"))
    shutil.copy(d("spm.model"), d("albert", "spiece.model"))
    with open(d("albert", "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "AlbertTokenizerFast", "do_lower_case": True}, f)
    refused(train_on(d("pairs.csv"), tokenizer=d("albert")), "AlbertTokenizerFast", "prepare_text.py", out_dir=d("bad"))
    write_csv(d("mask.csv"), ["premise", "hypothesis", "label"], [["a [MASK] film", "fine", "neutral"]])
    refused(train_on(d("mask.csv")), "mask.csv:2: 'premise' holds '[MASK]'", out_dir=d("bad"))
    refused([gputrain, "train", "--model", d("net.pt2"), "--dataset", "text", "--train_file", d("npz", "train.npz"),
             "--max_length", "8", "--output_dir", d("bad")], "--max_length", "tokenized already", out_dir=d("bad"))
    refused(train_on(d("pairs.csv"), text_column="premis,hypothesis"), "no column 'premis'", "did you mean 'premise'",
            out_dir=d("bad"))
    write_csv(d("two.csv"), ["text"] + labels, [["a fine film", 0, 2, 1]])
    refused(train_on(d("two.csv"), text_column="text", label_column=",".join(labels)), "two.csv:2: 'insult' is '2'",
            out_dir=d("bad"))

    summary = (f"CSV vs .npz weights {diff:.2g}, eval loss {evals['csv']['test_loss']:.5f}, macro-F1 "
               f"{evals['csv']['test_f1']:.4f}, multi-label f1 {f1:.3f}, balanced step {wdiff:.2g}, padding "
               f"{shares[0] if shares else '?'}% vs {shares[1] if len(shares) > 1 else '?'}%, hostile input refused")
    print(("pass: " if not problems else "FAIL: " + "; ".join(problems) + ": ") + summary)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
