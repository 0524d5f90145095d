#!/usr/bin/env python3
"""Decoding speed: `gputrain generate` against transformers' generate with its static cache.

One random Llama (the shape below, made here with transformers; bf16: both sides hold it in bf16), the same
weights on both sides: `gputrain generate --checkpoint` reads the saved folder. Both decode greedily from prompts
of --prompt tokens to --new tokens, for each batch size, in alternating rounds; the figure is
the decode rate after the first token (batch x (new - 1) tokens over the time after the first),
the median of the rounds. gputrain prints it on stderr; transformers' is the time of a
generation of --new tokens less that of a generation of 1 (the prompt's pass and the first
token), both timed whole. The intra-op threads are gputrain's (torch.set_num_threads).

Usage: <venv>/bin/python tools/generate_bench.py [--batches 1,8] [--new 64] [--prompt 32]
       [--rounds 3] [--precision fp32|bf16] [--width 512 --depth 8 --heads 8 --kv_heads 4
       --mlp_width 1536 --vocab 32000]
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".pydeps-text"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gputrain", default=os.path.join(ROOT, "build", "gputrain"))
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads (0: torch's default, as gputrain's)")
    for name, default in (("width", 512), ("depth", 8), ("heads", 8), ("kv_heads", 4), ("mlp_width", 1536),
                          ("vocab", 32000)):
        ap.add_argument("--" + name, type=int, default=default)
    a = ap.parse_args()
    from transformers import LlamaConfig, LlamaForCausalLM
    if a.threads:
        torch.set_num_threads(a.threads)
    work = tempfile.mkdtemp(prefix="generate_bench_")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=a.vocab, hidden_size=a.width, intermediate_size=a.mlp_width,
                         num_hidden_layers=a.depth, num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
                         max_position_embeddings=a.prompt + a.new, rms_norm_eps=1e-5, bos_token_id=None,
                         eos_token_id=None, pad_token_id=None, tie_word_embeddings=False)
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(os.path.join(work, "hf"))
    rng = np.random.default_rng(0)
    amp = ["--no-use_amp"] if a.precision == "fp32" else ["--use_amp", "--amp_dtype", "bf16"]
    checkpoint = os.path.join(work, "hf")
    # bf16: the model in bf16, as transformers loads one with dtype=torch.bfloat16 (and as
    # gputrain decodes a run trained in bf16 autocast).
    model = model.to(torch.bfloat16 if a.precision == "bf16" else torch.float32)
    print(f"Llama: width {a.width}, {a.depth} layers, {a.heads} heads over {a.kv_heads} key/value heads, MLP "
          f"{a.mlp_width}, vocabulary {a.vocab}; {a.precision}; prompts of {a.prompt} tokens, {a.new} new; "
          f"{torch.get_num_threads()} threads; torch {torch.__version__}")

    for batch in [int(b) for b in a.batches.split(",")]:
        prompts = rng.integers(0, a.vocab, (batch, a.prompt))
        ids = ";".join(",".join(map(str, p)) for p in prompts)
        ours, theirs = [], []
        for _ in range(a.rounds):
            done = subprocess.run([a.gputrain, "generate", "--checkpoint", checkpoint, "--prompt_ids", ids,
                                   "--temperature", "0", "--max_new_tokens", str(a.new), "--json"] + amp,
                                  check=True, capture_output=True, text=True)
            ours.append(float(re.search(r"([0-9.]+) tokens/s after the first", done.stderr).group(1)))
            x = torch.tensor(prompts)

            def timed(new):
                start = time.perf_counter()
                with torch.no_grad():
                    model.generate(x, do_sample=False, max_new_tokens=new, min_new_tokens=new,
                                   cache_implementation="static", attention_mask=torch.ones_like(x))
                return time.perf_counter() - start
            timed(2)  # the static cache's first allocation, outside the timing
            first, whole = timed(1), timed(a.new)
            theirs.append(batch * (a.new - 1) / (whole - first))
        g, t = statistics.median(ours), statistics.median(theirs)
        print(f"batch {batch}: gputrain {g:.1f} tokens/s, transformers (static cache) {t:.1f} tokens/s: {g / t:.2f}x "
              f"(rounds: gputrain {', '.join(f'{v:.1f}' for v in ours)}; transformers "
              f"{', '.join(f'{v:.1f}' for v in theirs)})")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
