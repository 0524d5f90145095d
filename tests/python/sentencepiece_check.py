#!/usr/bin/env python3
"""SentencePiece .model tokenizers in gputrain, against the sentencepiece package.

    sentencepiece_check.py GPUTRAIN_BIN WORKDIR

  1. tools/prepare_text.py trains a SentencePiece BPE (byte fallback) on the `json` package of
     this Python's standard library and writes shards with tokenizer.model beside them;
  2. gputrain trains a small GPT on them for a few steps, its vocabulary read from
     tokenizer.model (no --vocab_size);
  3. `generate --prompts` (a batch: ASCII, accents, CJK that falls back to byte pieces, spaces
     and a newline escape) at temperature 1.5, so that the new ids are close to random: every
     prompt's ids equal SentencePieceProcessor.encode's, and every text equals its decode of the
     new ids.
Prints one line; 0 = pass, 1 = a check failed, 2 = a command failed, 77 = sentencepiece missing.
"""
import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from commands import run  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.append(os.path.join(ROOT, ".pydeps-text"))
PROMPTS = ["def encode(obj):", "  naïve café ", "数据 and 🙂", "x\\ny", "return  self"]


def main():
    try:
        import sentencepiece as spm
    except ImportError:
        print("skip: sentencepiece is not installed")
        return 77
    gputrain, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    d = lambda name: os.path.join(work, name)  # noqa: E731
    corpus = os.path.dirname(json.__file__)
    run([sys.executable, os.path.join(ROOT, "tools", "prepare_text.py"), corpus, "--glob", "*.py", "--out", d("sp"),
         "--train-tokenizer", "sentencepiece", "--vocab-size", "400", "--val-docs", "1"])
    sp = spm.SentencePieceProcessor(model_file=d("sp/tokenizer.model"))
    said = run([gputrain, "train", "--model", "gpt", "--dataset", "tokens", "--train_file", d("sp/train_*.bin"),
                "--test_file", d("sp/val_*.bin"), "--seq_len", "32", "--width", "32", "--depth", "1", "--heads", "2",
                "--batch_size", "4", "--max_steps", "3", "--epochs", "1", "--no-use_amp", "--num_workers", "0",
                "--output_dir", d("run")])
    problems = []
    if "tokenizer.model" not in said or f"vocabulary {sp.get_piece_size()}" not in said:
        problems.append("the data line does not take the vocabulary from tokenizer.model")
    with open(d("prompts.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(PROMPTS) + "\n")
    out = run([gputrain, "generate", "--checkpoint", d("run/checkpoints/last.pt"), "--prompts", d("prompts.txt"),
               "--temperature", "1.5", "--max_new_tokens", "40", "--seed", "3"])
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if len(rows) != len(PROMPTS):
        problems.append(f"{len(rows)} rows for {len(PROMPTS)} prompts")
    checked = 0
    for prompt, row in zip(PROMPTS, rows):
        if row["prompt_ids"] != sp.encode(prompt):
            problems.append(f"{prompt!r}: ids {row['prompt_ids']}, sentencepiece's {sp.encode(prompt)}")
        if row["text"] != sp.decode(row["ids"]):
            problems.append(f"{row['ids']}: text {row['text']!r}, sentencepiece's {sp.decode(row['ids'])!r}")
        checked += len(row["ids"])
    if problems:
        print("FAIL: " + "; ".join(problems))
        return 1
    print(f"ok: {len(PROMPTS)} prompts encode and {checked} sampled ids decode as sentencepiece's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
