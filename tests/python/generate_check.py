#!/usr/bin/env python3
"""`gputrain generate` against Hugging Face: the prompt's ids, greedy decoding, batches, stops.

    generate_check.py GPUTRAIN_BIN WORKDIR

A BPE tokenizer (vocabulary 600, trained by tools/prepare_text.py on this Python's `json`
package) and the CPU GPT after 2 steps on those shards (a longer run's greedy text collapses to
one repeated token, which would check less). Then:
  1. the ids of prompts with letters, digits, accents, CJK, emoji, runs of spaces, a newline and
     an <|endoftext|> written in them equal tokenizers' encode(prompt).ids;
  2. greedy decoding (--temperature 0) equals GPT2LMHeadModel.generate(do_sample=False) of the
     exported folder, token for token, the end-of-text token included;
  3. prompts of different lengths in one batch (left-padded) each give the ids they give alone;
  4. a seeded draw repeats; --top_k 1 is greedy; the streamed text is the JSON line's text;
  5. a --stop string ends the text before it;
  6. a prompt longer than the context, an id outside the vocabulary, --top_p 0, a --tokenizer
     of another vocabulary and a model without a key-value cache exit 2 with one line.
Prints one line; 0 = pass, 1 = a check failed, 2 = a command failed, 77 = transformers or
tokenizers missing (.pydeps-text).
"""
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from commands import run  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, ".pydeps-text"))

PROMPTS = ["def main():", "import json", "  x = 12345 + 0.5", "caf\u00e9 na\u00efve \u00fcber", "\u4e2d\u6587\u5b57",
           "emoji \U0001f600!", "tabs\tand   spaces", "end<|endoftext|>start", "'s 've 're don't", "    "]


def main():
    gputrain, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    try:
        import torch
        from tokenizers import Tokenizer
        from transformers import GPT2LMHeadModel
    except ImportError as e:
        print(f"SKIP: {e}")
        return 77
    d = lambda name: os.path.join(work, name)  # noqa: E731
    corpus = os.path.dirname(json.__file__)
    run([sys.executable, os.path.join(ROOT, "tools", "prepare_text.py"), corpus, "--glob", "*.py", "--val-docs", "1",
         "--out", d("bpe"), "--train-tokenizer", "bpe", "--vocab-size", "600"])
    run([gputrain, "train", "--preset", "gpt_cpu", "--train_file", d("bpe/train_*.bin"), "--test_file", d("bpe/val_*.bin"),
         "--seq_len", "64", "--max_steps", "2", "--eval_every", "0", "--eval_tokens", "0",
         "--output_dir", d("run")])
    ckpt = d("run/checkpoints/last.pt")
    # float32, as transformers' side (the run trained in bf16 autocast, in which generate decodes by default)
    gen = [gputrain, "generate", "--checkpoint", ckpt, "--no-use_amp"]
    problems = []

    def lines(out):
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")]

    def generate(*args):
        done = subprocess.run(gen + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            print(f"FAIL (command): generate {' '.join(args)} exited {done.returncode}\n{done.stdout}{done.stderr}")
            sys.exit(2)
        return done.stdout

    # 1. The prompts' ids, as tokenizers encodes them.
    tok = Tokenizer.from_file(d("bpe/tokenizer.json"))
    with open(d("prompts.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(PROMPTS) + "\n")
    got = lines(generate("--prompts", d("prompts.txt"), "--max_new_tokens", "1"))
    for p, g in zip(PROMPTS, got):
        want = tok.encode(p).ids
        if g["prompt_ids"] != want:
            problems.append(f"prompt {p!r}: ids {g['prompt_ids']}, tokenizers {want}")
    newline = "x = 1\n\ny = 2"
    one = lines(generate("--prompt", newline, "--max_new_tokens", "1", "--json"))[0]
    if one["prompt_ids"] != tok.encode(newline).ids:
        problems.append(f"prompt {newline!r}: ids {one['prompt_ids']}, tokenizers {tok.encode(newline).ids}")

    # 2. Greedy decoding against the exported folder in transformers.
    run([gputrain, "export", "--checkpoint", ckpt, "--format", "hf", "--out", d("hf")])
    hf = GPT2LMHeadModel.from_pretrained(d("hf")).eval()
    greedy = {}
    for p in PROMPTS[:3]:
        ids = tok.encode(p).ids
        ours = lines(generate("--prompt_ids", ",".join(map(str, ids)), "--temperature", "0", "--max_new_tokens", "24",
                              "--json"))[0]
        with torch.no_grad():
            theirs = hf.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=24,
                                 pad_token_id=hf.config.eos_token_id)[0, len(ids):].tolist()
        greedy[p] = ours["ids"]
        if ours["ids"] != theirs:
            problems.append(f"greedy from {p!r}: {ours['ids']}, transformers {theirs}")

    # 3. One batch, left-padded: each row as it is alone.
    with open(d("batch.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(PROMPTS[:3]) + "\n")
    for p, g in zip(PROMPTS[:3], lines(generate("--prompts", d("batch.txt"), "--temperature", "0", "--max_new_tokens", "24"))):
        if g["ids"] != greedy[p]:
            problems.append(f"batched greedy from {p!r}: {g['ids']}, alone {greedy[p]}")

    # 4. Seeds, top-k 1, and the streamed text.
    drawn = [lines(generate("--prompt", "def ", "--seed", "7", "--max_new_tokens", "40", "--json"))[0] for _ in range(2)]
    if drawn[0]["ids"] != drawn[1]["ids"]:
        problems.append(f"seed 7 drew {drawn[0]['ids']} and then {drawn[1]['ids']}")
    top1 = lines(generate("--prompt", PROMPTS[0], "--top_k", "1", "--temperature", "5", "--max_new_tokens", "24", "--json"))[0]
    if top1["ids"] != greedy[PROMPTS[0]]:
        problems.append(f"--top_k 1 gave {top1['ids']}, greedy {greedy[PROMPTS[0]]}")
    streamed = generate("--prompt", "def ", "--seed", "7", "--max_new_tokens", "40")
    if streamed != drawn[0]["text"] + "\n":
        problems.append(f"streamed {streamed!r}, JSON text {drawn[0]['text']!r}")

    # 5. A stop string from the greedy text: the text ends before it.
    full = lines(generate("--prompt", PROMPTS[0], "--temperature", "0", "--max_new_tokens", "24", "--json"))[0]
    text = full["text"]
    stop = text[len(text) // 2:len(text) // 2 + 2]
    if len(stop) == 2:
        cut = lines(generate("--prompt", PROMPTS[0], "--temperature", "0", "--max_new_tokens", "24", "--json",
                             "--stop", stop))[0]
        if cut["text"] != text[:text.find(stop)] or cut["stop"] != "stop_string":
            problems.append(f"--stop {stop!r}: {cut['text']!r} ({cut['stop']}), expected {text[:text.find(stop)]!r}")

    # 6. Bad input: one line, exit 2. A tokenizer of another vocabulary (prepare_text's bytes).
    run([sys.executable, os.path.join(ROOT, "tools", "prepare_text.py"), corpus, "--glob", "*.py", "--val-docs", "1",
         "--out", d("b")])
    os.replace(d("b/tokenizer.json"), d("bytes.json"))
    with open(d("long.txt"), "w") as f:
        f.write("def f():\n" + " ".join(str(i) for i in range(300)) + "\n")
    for args, says in [(["--prompt_ids", ",".join(["1"] * 65)], "above the model's context of 64"),
                       (["--prompts", d("long.txt")], f"--prompts {d('long.txt')} line 2: the prompt is"),
                       (["--prompt_ids", "5,600"], "outside the model's vocabulary of 600"),
                       (["--prompt", "x", "--top_p", "0"], "--top_p '0'"),
                       (["--prompt", "x", "--tokenizer", d("bytes.json")], "has a vocabulary of 257 ids; the checkpoint's model has 600")]:
        out = run(gen + args, expect=2)
        if says not in out:
            problems.append(f"generate {' '.join(args)}: {out.strip()!r} does not say {says!r}")
    run([gputrain, "train", "--dataset", "synthetic", "--model", "mlp", "--max_steps", "2", "--output_dir", d("mlp")])
    out = run([gputrain, "generate", "--checkpoint", d("mlp/checkpoints/last.pt"), "--prompt_ids", "1"], expect=2)
    if "keeps no key-value cache" not in out:
        problems.append(f"generate from an mlp: {out.strip()!r}")

    if problems:
        print("FAIL: " + "; ".join(problems))
        return 1
    print(f"PASS: {len(PROMPTS) + 1} prompts encoded as tokenizers does, greedy equal to transformers' generate "
          f"(3 prompts, 24 tokens), batched rows as alone, seeds, top-k 1, streaming, stop strings, bad input")
    return 0


if __name__ == "__main__":
    sys.exit(main())
