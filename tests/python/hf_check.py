#!/usr/bin/env python3
"""Hugging Face text models through the .pt2 path, against transformers in PyTorch eager.

    hf_check.py GPUTRAIN_BIN WORKDIR

Tiny models of random weights, made here and saved as local folders (nothing is downloaded):
BertForSequenceClassification, DistilBertForSequenceClassification,
DebertaV2ForSequenceClassification (relative attention, as DeBERTa-v3) and GPT2LMHeadModel (its
head tied to the token embedding), dropout 0. Each is exported by tools/export_model.py --hf and
trained by gputrain for 3 AdamW steps of 8 tokenized texts of 4 to 12 tokens (a batch padded
to its longest, as gputrain pads it). Checks:
  1. the weights equal transformers' after the same 3 steps in eager PyTorch (the same padded
     batches; the model's own loss for GPT-2, which shifts its labels = input_ids) to 1e-4 of
     the update; GPT-2's head is still its embedding, exported under both names;
  2. `gputrain eval` gives the eval loss transformers gives on the test texts (the eval
     program);
  3. DistilBERT, DeBERTa and GPT-2 start from --init_from (the folder, the index of its shards,
     model.safetensors, which holds GPT-2's tied weight once) instead of the program's own
     weights; GPT-2 on 2 ranks ends on the weights of 1 process; under bf16 autocast BERT's
     first loss is transformers' under autocast;
  4. a text longer than the program's --max-length is refused, naming both.
Prints one line; exit code 0 = pass, 1 = a check failed, 2 = a command failed, 77 = transformers
is absent.
"""
import json
import os
import random
import sys

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

VOCAB, CLASSES, STEPS, BATCH, LONGEST = 96, 3, 3, 8, 64
LR, WD = 2e-3, 0.01


def configs():
    small = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                 max_position_embeddings=LONGEST, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return {
        "bert": (transformers.BertConfig(**small, num_labels=CLASSES), "classification"),
        "distilbert": (transformers.DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                                                     max_position_embeddings=LONGEST, dropout=0.0, attention_dropout=0.0,
                                                     seq_classif_dropout=0.0, num_labels=CLASSES), "classification"),
        "deberta": (transformers.DebertaV2Config(**small, num_labels=CLASSES, relative_attention=True,
                                                 pos_att_type=["p2c", "c2p"], position_buckets=16,
                                                 max_relative_positions=LONGEST, pooler_dropout=0.0), "classification"),
        "gpt2": (transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=LONGEST,
                                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0,
                                         eos_token_id=0), "causal-lm"),
    }


# The bias of each attention's key projection: softmax ignores a shift shared by all of a row's
# scores, so its gradient is zero but for rounding, which Adam scales up to the learning rate in
# transformers and gputrain alike (differently): left out of the comparison.
KEY_BIASES = ("attention.self.key.bias", "attention.k_lin.bias", "attention.self.key_proj.bias")


def without_key_bias(name, t):
    if name.endswith(KEY_BIASES):
        return t[:0]
    if name.endswith("attn.c_attn.bias"):  # GPT-2's fused query, key, value
        third = t.shape[0] // 3
        return torch.cat([t[:third], t[2 * third:]])
    return t


def texts(n, rng, causal):
    rows = []
    for i in range(n):
        ids = [rng.randrange(1, VOCAB) for _ in range(rng.randint(4, 12))]
        labels = [v if rng.random() > 0.2 else -100 for v in ids] if causal else i % CLASSES
        rows.append({"input_ids": ids, "attention_mask": [1] * len(ids), "labels": labels})
    return rows


def padded(rows):
    """A batch as gputrain collates it: padded to its longest, ids and mask with 0, labels -100."""
    t = max(len(r["input_ids"]) for r in rows)
    pad = lambda v, x: v + [x] * (t - len(v))  # noqa: E731
    batch = {"input_ids": torch.tensor([pad(r["input_ids"], 0) for r in rows]),
             "attention_mask": torch.tensor([pad(r["attention_mask"], 0) for r in rows])}
    labels = [pad(r["labels"], -100) if isinstance(r["labels"], list) else r["labels"] for r in rows]
    return batch, torch.tensor(labels)


def loss_of(model, rows, causal):
    batch, labels = padded(rows)
    if causal:
        return model(**batch, labels=labels).loss  # shifts the labels, the mean over counted tokens
    return torch.nn.functional.cross_entropy(model(**batch).logits, labels)


def reference(folder, auto, train, causal, bf16=False):
    """transformers in eager PyTorch: STEPS AdamW steps of BATCH texts, decay on matrices only."""
    model = auto.from_pretrained(folder).train()
    params = list(model.parameters())  # a tied weight once
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": WD},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}], lr=LR)
    losses = []
    for s in range(STEPS):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = loss_of(model, train[s * BATCH:(s + 1) * BATCH], causal)
        loss.backward()
        losses.append(loss.item())
        opt.step()
    return model, losses


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: hf_check.py GPUTRAIN_BIN WORKDIR")
    gputrain, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    d = lambda *name: os.path.join(work, *name)  # noqa: E731
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, ".pydeps-text"))
    tool = [sys.executable, os.path.join(ROOT, "tools", "export_model.py")]
    recipe = ["--optimizer", "adamw", "--lr", str(LR), "--weight_decay", str(WD), "--lr_schedule", "constant",
              "--label_smoothing", "0", "--no-shuffle", "--max_steps", str(STEPS), "--num_workers", "0",
              "--batch_size", str(BATCH)]
    problems, figures = [], []

    def compare(name, got, model, start_update, tolerance=1e-4):
        want = {k: without_key_bias(k, v.detach()) for k, v in model.state_dict().items()}
        diff = max([(without_key_bias(k, got[k].float()) - w).abs().max().item() for k, w in want.items()
                    if k in got and w.numel()])
        missing = [k for k in want if k not in got and "position_ids" not in k]
        if missing:
            problems.append(f"{name}: the export lacks {', '.join(missing[:3])}")
        if diff > tolerance * start_update:
            problems.append(f"{name}: weights differ from transformers' by {diff:.3g} (update {start_update:.3g})")
        return diff

    for name, (config, task) in configs().items():
        causal = task == "causal-lm"
        auto = transformers.AutoModelForCausalLM if causal else transformers.AutoModelForSequenceClassification
        rng = random.Random(len(name))
        train, test = texts(STEPS * BATCH, rng, causal), texts(8, rng, causal)
        for split, rows in (("train", train), ("test", test)):
            with open(d(f"{name}_{split}.jsonl"), "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in rows)
        torch.manual_seed(1)
        # The weights every run starts from: BERT's program holds them; the others are exported
        # from the config alone (other random weights) and start from the folder through
        # --init_from: DistilBERT the folder, DeBERTa the index of its shards, GPT-2 its
        # model.safetensors (which holds the tied weight once).
        sharded = {"max_shard_size": "40KB"} if name == "deberta" else {}
        auto.from_config(config).save_pretrained(d(name), **sharded)
        program = d(name + ".pt2")
        labels = [] if causal else ["--num-labels", str(CLASSES)]
        config.save_pretrained(d(name + "_config"))
        run(tool + ["--hf", d(name if name == "bert" else name + "_config"), "--task", task, "--out", program] + labels,
            env=env)
        data = ["--dataset", "jsonl", "--train_file", d(f"{name}_train.jsonl"), "--test_file", d(f"{name}_test.jsonl")]
        init = {"bert": [], "distilbert": ["--init_from", d(name)],
                "deberta": ["--init_from", d(name, "model.safetensors.index.json")],
                "gpt2": ["--init_from", d(name, "model.safetensors")]}[name]
        run([gputrain, "train", "--model", program] + data + init + recipe +
            ["--no-use_amp", "--output_dir", d(name + "_run"), "--export", d(name + ".st")])
        model, _ = reference(d(name), auto, train, causal)
        start = auto.from_pretrained(d(name)).state_dict()
        update = max((v.detach() - start[k]).abs().max().item() for k, v in model.state_dict().items())
        got, _, _ = load_weights(d(name + ".st"))
        figures.append(f"{name} {compare(name, got, model, update):.2g}")

        # The eval program against transformers' eval mode, on the test texts.
        run([gputrain, "eval", "--checkpoint", d(name + "_run", "checkpoints", "last.pt"), "--json", d(name + "_eval.json")])
        ours = json.load(open(d(name + "_eval.json")))["test_loss"]
        with torch.no_grad():
            theirs = loss_of(model.eval(), test, causal).item()
        if abs(ours - theirs) > 1e-4 * max(1.0, abs(theirs)):
            problems.append(f"{name}: eval loss {ours:.6f}, transformers' {theirs:.6f}")

        if causal:
            if not torch.equal(got["lm_head.weight"], got["transformer.wte.weight"]):
                problems.append("gpt2: the exported head is not the embedding it is tied to")
            run([gputrain, "launch", "--nproc_per_node", "2", "--", "train", "--model", program] + data + init +
                recipe + ["--no-use_amp", "--batch_size", str(BATCH // 2), "--output_dir", d(name + "_two"),
                          "--export", d(name + "_two.st")])
            # Adam divides by the root of the squared gradients' mean: where a weight's gradient
            # changes sign between steps, its first moment is a difference of near-equal terms and
            # carries the all-reduce's rounding (1e-7 of the gradient) to ~1e-3 of the update, in
            # a few weights of thousands. A wrong sum or mean moves every weight by ~the update.
            two, _, _ = load_weights(d(name + "_two.st"))
            figures.append(f"{name} 2 ranks {compare(name + ' on 2 ranks', two, model, update, 1e-2):.2g}")
        if name == "bert":
            run([gputrain, "train", "--model", program] + data + recipe +
                ["--max_steps", "1", "--use_amp", "--amp_dtype", "bf16", "--no-amp_check", "--output_dir", d(name + "_bf16")])
            _, bf16 = reference(d(name), auto, train, causal, bf16=True)
            _, fp32 = reference(d(name), auto, train, causal)
            with open(d(name + "_bf16", "metrics.jsonl")) as f:
                ours = next(r["loss"] for r in map(json.loads, f) if r.get("event") == "step")
            figures.append(f"bert's first loss under bf16 autocast {ours:.7f}, transformers' {bf16[0]:.7f} "
                           f"(fp32 {fp32[0]:.7f})")
            if not abs(ours - bf16[0]) <= 1e-3 * abs(bf16[0]):
                problems.append(f"bert under bf16 autocast: first loss {ours}, transformers' {bf16[0]}")

    # A text longer than the program takes: refused before training, naming the limit.
    rng = random.Random(0)
    with open(d("long.jsonl"), "w") as f:
        for i in range(8):
            n = LONGEST + 6 if i == 3 else 8
            f.write(json.dumps({"input_ids": [rng.randrange(1, VOCAB) for _ in range(n)], "attention_mask": [1] * n,
                                "labels": i % CLASSES}) + "\n")
    said = run([gputrain, "train", "--model", d("bert.pt2"), "--dataset", "jsonl", "--train_file", d("long.jsonl"),
                "--output_dir", d("long")], expect=2)
    if f"at most {LONGEST}" not in said or f"up to {LONGEST + 6} long" not in said:
        problems.append("a text longer than the program takes was not refused naming both: " + said.strip())

    line = f"weights vs transformers after {STEPS} AdamW steps: {', '.join(figures)}; eval losses equal"
    print(("pass: " if not problems else "FAIL: " + "; ".join(problems) + ": ") + line)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
