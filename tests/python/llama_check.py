#!/usr/bin/env python3
"""gputrain's llama against Hugging Face's LlamaForCausalLM, from the same random weights.

    llama_check.py GPUTRAIN_BIN WORKDIR

Two tiny random models, made here with save_pretrained:
  gqa:  4 query heads over 2 key/value heads, an untied head, saved in shards (an index);
  tied: 1 key/value head, the head tied to the embedding, Llama 3's rope_scaling.
For each, with llm.c token shards made here:
  1. gputrain trains --model llama --init_from DIR for 3 steps of AdamW in fp32: its first loss
     equals LlamaForCausalLM's on the same batch (1e-5), its weights after 3 steps equal
     PyTorch's (the same steps on the Hugging Face model) to 1e-4 of the update's norm, and
     every element to 1e-2 of the largest update (an element whose gradient is at rounding level,
     such as a query or key weight while attention is near uniform, takes an Adam step of
     another size on either side: 1.4e-3 of the largest update for one element of gqa on an
     Intel Xeon with AVX-512, whose BLAS kernels round otherwise, 1.2e-5 of the norm there);
  2. export --format hf writes a folder that LlamaForCausalLM.from_pretrained loads with no
     missing or unexpected key;
  3. greedy `generate` from a checkpoint of the same shape initialised at 0.2 (so that the text
     is not one repeated token) equals its exported folder's arg-max at every step whose top-2
     logit gap exceeds 1e-3;
     generate --checkpoint on the exported folder writes the same ids;
  4. bad input: a config.json whose intermediate_size disagrees with its weights, and an index naming
     a shard that is not there, exit 2 naming the file, with no run folder.
Needs transformers (.pydeps-text): without it, prints "transformers absent" and exits 77.
Otherwise one line; 0 = pass, 1 = a check failed, 2 = a command failed.
"""
import json
import os
import shutil
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, ".pydeps-text"))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from commands import run  # noqa: E402
# The data, the recipe and PyTorch's side of the 3 steps are gpt_check's.
from gpt_check import BATCH, CLIP, DIM, LR, STEPS, T, VOCAB, WD, first_loss, reference, windows, write_shard  # noqa: E402

try:
    from transformers import LlamaConfig, LlamaForCausalLM
except ImportError:
    print("transformers absent")
    sys.exit(77)

MODELS = {
    "gqa": dict(num_key_value_heads=2, tie_word_embeddings=False),
    "tied": dict(num_key_value_heads=1, tie_word_embeddings=True,
                 rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 16}),
}


def make_model(folder, init, extra, sharded):
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=DIM, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=32, rms_norm_eps=1e-5, rope_theta=10000.0,
                         initializer_range=init, bos_token_id=0, eos_token_id=0, **extra)
    LlamaForCausalLM(config).save_pretrained(folder, max_shard_size="40KB" if sharded else "1GB")


def export_and_load(gputrain, run_dir, out, problems, name):
    """export --format hf of the run's last checkpoint, loaded by from_pretrained (which must
    report no missing, unexpected or misshapen key)."""
    run([gputrain, "export", "--checkpoint", os.path.join(run_dir, "checkpoints", "last.pt"), "--format", "hf", "--out", out])
    model, info = LlamaForCausalLM.from_pretrained(out, output_loading_info=True)
    if any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")):
        problems.append(f"{name}: from_pretrained reports {info}")
    return model


def greedy_agrees(ours, model, prompt):
    """Whether `ours` (new ids) is the model's greedy text, step by step, where the choice is clear."""
    ids = list(prompt)
    with torch.no_grad():
        for k, got in enumerate(ours):
            logits = model(torch.tensor([ids])).logits[0, -1]
            top = torch.topk(logits, 2).values
            if top[0] - top[1] > 1e-3 and got != int(logits.argmax()):
                return f"step {k}: {got}, transformers {int(logits.argmax())}"
            ids.append(got)
    return ""


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: llama_check.py GPUTRAIN_BIN WORKDIR")
    gputrain, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    d = lambda name: os.path.join(work, name)  # noqa: E731
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(3)
    train = rng.integers(0, VOCAB, BATCH * T + 1).tolist()  # one step's windows: every step sees them all
    val = rng.integers(0, VOCAB, 6 * T + 1).tolist()
    write_shard(d("train.bin"), train)
    write_shard(d("val.bin"), val)
    data = ["--dataset", "tokens", "--train_file", d("train.bin"), "--test_file", d("val.bin"), "--vocab_size",
            str(VOCAB), "--seq_len", str(T)]
    recipe = ["--model", "llama", "--optimizer", "adamw", "--lr", str(LR), "--beta2", "0.95", "--weight_decay", str(WD),
              "--clip_max_norm", str(CLIP), "--lr_schedule", "constant", "--warmup_steps", "0", "--label_smoothing", "0",
              "--no-use_amp", "--max_steps", str(STEPS), "--epochs", str(STEPS), "--log_every", "1", "--num_workers", "0",
              "--batch_size", str(BATCH)]
    x, y = windows(train)
    problems, figures = [], []
    for name, extra in MODELS.items():
        # The weights: from Hugging Face's default initialisation (0.02).
        hf = d(name)
        make_model(hf, 0.02, extra, sharded=name == "gqa")
        if (name == "gqa") != os.path.exists(os.path.join(hf, "model.safetensors.index.json")):
            problems.append(f"{name}: save_pretrained did not write the {'sharded' if name == 'gqa' else 'single'} layout")
        start = {k: v.clone() for k, v in LlamaForCausalLM.from_pretrained(hf).state_dict().items()}
        out = d(name + "-run")
        run([gputrain, "train"] + data + recipe + ["--init_from", hf, "--output_dir", out])
        want, losses = reference(hf, x, y, LlamaForCausalLM)
        want_sd = want.state_dict()
        got_loss = first_loss(out)
        if got_loss is None or abs(got_loss - losses[0]) > 1e-5 * abs(losses[0]):
            problems.append(f"{name}: first loss {got_loss} vs transformers' {losses[0]:.7f}")
        model = export_and_load(gputrain, out, d(name + "-hf"), problems, name)
        got = model.state_dict()
        update = max((want_sd[k] - start[k]).abs().max().item() for k in start)
        diff = max((got[k] - want_sd[k]).abs().max().item() for k in want_sd)
        relative = (sum(((got[k] - want_sd[k]) ** 2).sum() for k in want_sd) /
                    sum(((want_sd[k] - start[k]) ** 2).sum() for k in want_sd)).sqrt().item()
        figures.append(f"{name} {relative:.2g} of the update's norm (an element at most {diff:.2g} of {update:.2g})")
        if relative > 1e-4 or diff > 1e-2 * update:
            problems.append(f"{name}: weights differ from PyTorch's by {relative:.3g} of the update's norm, an element "
                            f"by {diff:.3g} (update {update:.3g})")

        # Greedy text, from a wider initialisation (0.2: a text of more than one repeated token),
        # one step trained, against its exported folder in transformers.
        wide = d(name + "-wide")
        make_model(wide, 0.2, extra, sharded=False)
        run([gputrain, "train"] + data + recipe + ["--max_steps", "1", "--epochs", "1", "--init_from", wide,
                                                        "--output_dir", wide + "-run"])
        model = export_and_load(gputrain, wide + "-run", wide + "-hf", problems, name).eval()
        prompt = val[:5]
        said = run([gputrain, "generate", "--checkpoint", os.path.join(wide + "-run", "checkpoints", "last.pt"),
                    "--prompt_ids", ",".join(map(str, prompt)), "--temperature", "0", "--max_new_tokens", "20", "--json"])
        ours = [json.loads(line) for line in said.splitlines() if line.startswith("{")][0]["ids"]
        with torch.no_grad():
            theirs = model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=20,
                                    pad_token_id=0)[0, len(prompt):].tolist()
        disagree = greedy_agrees(ours, model, prompt)
        if disagree or len(set(ours)) < 3:
            problems.append(f"{name}: greedy {ours} against transformers' {theirs}: {disagree or 'one repeated token'}")
        # The exported folder itself: the same text; with end-of-text ids in its config.json, it
        # ends after the first of them that it writes.
        ends = [ours[5], ours[3]]
        shutil.copytree(wide + "-hf", wide + "-eos")
        config = json.load(open(os.path.join(wide + "-eos", "config.json")))
        json.dump({**config, "eos_token_id": ends}, open(os.path.join(wide + "-eos", "config.json"), "w"))
        first = min(i for i, t in enumerate(ours) if t in ends)
        for folder, want in ((wide + "-hf", ours), (wide + "-eos", ours[:first + 1])):
            # No --no-use_amp: a folder decodes in its own dtype (float32 here), as from_pretrained.
            said = run([gputrain, "generate", "--checkpoint", folder, "--prompt_ids", ",".join(map(str, prompt)),
                        "--temperature", "0", "--max_new_tokens", "20", "--json"])
            from_folder = [json.loads(line) for line in said.splitlines() if line.startswith("{")][0]["ids"]
            if from_folder != want:
                problems.append(f"{name}: generate from {folder} wrote {from_folder}, not {want}")

    # A config.json that disagrees with its weights; an index naming a shard that is not there.
    shutil.copytree(d("tied"), d("bad"))
    bad = json.load(open(os.path.join(d("bad"), "config.json")))
    bad["intermediate_size"] = 128
    json.dump(bad, open(os.path.join(d("bad"), "config.json"), "w"))
    shutil.copytree(d("gqa"), d("lost"))
    shard = sorted(f for f in os.listdir(d("lost")) if f.endswith(".safetensors"))[0]
    os.remove(os.path.join(d("lost"), shard))
    for folder, says in (("bad", "config.json implies"), ("lost", shard)):
        said = run([gputrain, "train"] + data + ["--model", "llama", "--init_from", d(folder), "--output_dir",
                                                 d(folder + "-run")], expect=2)
        if says not in said or os.path.exists(d(folder + "-run")):
            problems.append(f"--init_from {folder}: {said.strip()!r} does not say {says!r}, or left a run folder")

    if problems:
        print("FAIL: " + "; ".join(problems))
        sys.exit(1)
    print(f"ok: weights vs PyTorch after {STEPS} AdamW steps: {', '.join(figures)}; greedy text as transformers'")


if __name__ == "__main__":
    main()
