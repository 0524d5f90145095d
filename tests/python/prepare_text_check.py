#!/usr/bin/env python3
"""The README's language-model walk, small: text -> shards -> the CPU GPT -> a Hugging Face folder.

    prepare_text_check.py GPUTRAIN_BIN WORKDIR

The corpus is real text no one here wrote: the `json` package of this Python's standard library.
  1. tools/prepare_text.py writes byte-level shards (vocabulary 257) and a BPE-tokenized set
     (a tokenizer trained on the text, saved beside the shards; needs `tokenizers`);
  2. the shards decode back to the corpus's files, each behind one end-of-text token;
  3. gputrain trains the gpt_cpu preset on them for 40 steps with an evaluation every 20, and
     the evaluation's loss falls;
  4. export --format hf writes a folder whose tokenizer.json decodes the val shard's tokens to the
     same text as the shard's own bytes (with transformers, when installed).
Prints one line; 0 = pass, 1 = a check failed, 2 = a command failed.
"""
import glob
import json
import os
import sys

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from commands import run  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, ".pydeps-text"))


def tokens_of(path):
    header = np.fromfile(path, dtype="<i4", count=256)
    assert header[0] == 20240520 and header[1] == 1, header[:3]
    return np.fromfile(path, dtype="<u2", offset=1024)


def main():
    gputrain, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    d = lambda name: os.path.join(work, name)  # noqa: E731
    corpus = os.path.dirname(json.__file__)
    tool = [sys.executable, os.path.join(ROOT, "tools", "prepare_text.py"), corpus, "--glob", "*.py", "--val-docs", "1"]
    run(tool + ["--out", d("bytes")])
    problems = []

    # 2. Every document comes back, each behind one end-of-text token (256).
    texts = sorted(open(f, "rb").read() for f in glob.glob(os.path.join(corpus, "*.py")) if os.path.getsize(f) > 0)
    stream = np.concatenate([tokens_of(f) for f in sorted(glob.glob(d("bytes/*.bin")))])
    starts = list(np.flatnonzero(stream == 256)) + [len(stream)]
    got = sorted(bytes(stream[a + 1:b].astype(np.uint8)) for a, b in zip(starts, starts[1:]))
    if got != texts:
        problems.append(f"the shards hold {len(got)} documents, not the corpus's {len(texts)} files as they are")

    # 3. The CPU preset, briefly: its loss on the val windows falls between two evaluations.
    run([gputrain, "train", "--preset", "gpt_cpu", "--train_file", d("bytes/train_*.bin"), "--test_file",
         d("bytes/val_*.bin"), "--seq_len", "64", "--max_steps", "40", "--warmup_steps", "5", "--eval_every", "20",
         "--eval_tokens", "4096", "--output_dir", d("run")])
    evals = [json.loads(line) for line in open(d("run/metrics.jsonl")) if '"eval"' in line]
    losses = [e["test_loss"] for e in evals if e.get("event") == "eval"]
    if len(losses) < 2 or not losses[-1] < losses[0] or "test_perplexity" not in evals[-1]:
        problems.append(f"val losses {losses} (expected a fall over 40 steps, and a perplexity)")

    # 4. The exported folder's tokenizer reads the shards as prepare_text.py wrote them.
    out = run([gputrain, "export", "--checkpoint", d("run/checkpoints/last.pt"), "--format", "hf", "--out", d("hf")])
    if not os.path.exists(d("hf/tokenizer.json")):
        problems.append(f"export --format hf wrote no tokenizer.json: {out.strip()}")
    try:
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(d("hf/tokenizer.json"))
        val = tokens_of(glob.glob(d("bytes/val_*.bin"))[0])
        text = tok.decode(val[1:].tolist())
        if text.encode() != bytes(val[1:].astype(np.uint8)):
            problems.append("the exported tokenizer.json decodes the val shard to other text")
        run(tool + ["--out", d("bpe"), "--train-tokenizer", "bpe", "--vocab-size", "600"])
        run([gputrain, "train", "--preset", "gpt_cpu", "--train_file", d("bpe/train_*.bin"), "--seq_len", "32",
             "--max_steps", "2", "--eval_every", "0", "--eval_tokens", "0", "--output_dir", d("bperun")])
        resolved = json.load(open(d("bperun/config.json")))["resolved"]
        if resolved.get("num_classes") != 600:
            problems.append(f"the BPE run's vocabulary is {resolved.get('num_classes')}, not the trained tokenizer's 600")
        tokenizers_note = "bytes and BPE"
    except ImportError:
        tokenizers_note = "bytes (tokenizers absent: BPE not tried)"

    if problems:
        print("FAIL: " + "; ".join(problems))
        sys.exit(1)
    print(f"ok: {len(texts)} files of {corpus} as {tokenizers_note} shards; val loss {losses[0]:.3f} -> {losses[-1]:.3f}")


if __name__ == "__main__":
    main()
