"""export_model.py --hf: a Hugging Face `transformers` model exported for `gputrain train --model`.

    python tools/export_model.py --hf DIR --task classification --num-labels 3 [--out bert.pt2]
                                 [--inputs input_ids,attention_mask] [--max-length 512]

DIR is a local model folder (config.json, and model.safetensors or pytorch_model.bin when it
has weights) or a config.json alone (random weights, as from_config makes them). Nothing is
downloaded. --task picks the head:
  - classification: AutoModelForSequenceClassification, logits [batch, num_labels] (one label
    per text; --num-labels 1 is a regression target);
  - token-classification: AutoModelForTokenClassification, logits [batch, T, num_labels];
  - masked-lm: AutoModelForMaskedLM, logits [batch, T, vocabulary] (labels -100 where no token
    is masked);
  - causal-lm: AutoModelForCausalLM, logits [batch, T, vocabulary]. The archive says so
    (extra/gputrain.json {"causal_lm": true}): gputrain shifts each sample's labels one position
    on, so the data keeps them as transformers does (labels = input_ids).
A head tied to the embeddings (GPT-2's lm_head) stays tied: gputrain trains it as one parameter.

The forward takes --inputs by name (default input_ids,attention_mask; add token_type_ids for
text pairs), int64 [batch, T], the batch and T dynamic, T up to --max-length (default the
config's max_position_embeddings). The key/value cache is off (use_cache=False): training
needs none. The eval program (<stem>.eval.pt2) is written beside the training one, and both
are loaded back and compared with the model before anything is written.
"""
import json
import os
import sys

import torch

# transformers lives in .pydeps-text beside the venv (tools/setup.sh), not in the venv itself.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".pydeps-text"))

TASKS = {
    "classification": "AutoModelForSequenceClassification",
    "token-classification": "AutoModelForTokenClassification",
    "masked-lm": "AutoModelForMaskedLM",
    "causal-lm": "AutoModelForCausalLM",
}
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


def load_model(source, task, num_labels, fail):
    """The model of `source` (a folder or a config.json) with `task`'s head, in train mode."""
    try:
        import transformers
    except ImportError:
        fail("--hf needs the transformers package (tools/setup.sh installs it into .pydeps-text; "
             "PYTHONPATH=.pydeps-text python tools/export_model.py ...)")
    if not os.path.exists(source):
        fail(f"--hf {source}: no such folder or file")
    folder = source if os.path.isdir(source) else os.path.dirname(os.path.abspath(source))
    config_file = os.path.join(source, "config.json") if os.path.isdir(source) else source
    if not os.path.isfile(config_file):
        fail(f"--hf {source}: no config.json (a Hugging Face model folder holds one)")
    extra = {"num_labels": num_labels} if num_labels else {}
    try:
        config = transformers.AutoConfig.from_pretrained(config_file, local_files_only=True, **extra)
    except Exception as e:  # transformers raises several kinds for a bad config
        fail(f"--hf {config_file}: not a config transformers reads ({' '.join(str(e).split())[:200]})")
    if task == "causal-lm":
        config.use_cache = False  # training keeps no key/value cache
    auto = getattr(transformers, TASKS[task])
    has_weights = os.path.isdir(source) and any(os.path.exists(os.path.join(folder, f)) for f in WEIGHT_FILES)
    try:
        if has_weights:
            model = auto.from_pretrained(folder, config=config, local_files_only=True)
        else:
            torch.manual_seed(0)
            model = auto.from_config(config)
    except ValueError as e:
        fail(f"--hf {source}: {config.model_type} has no {task} model in transformers ({first_line(e)})")
    except (OSError, RuntimeError) as e:  # unreadable weights, or a head of another shape
        fail(f"--hf {source}: transformers cannot load its weights as {TASKS[task]} ({' '.join(str(e).split())[:200]}); "
             f"a pretrained head of another size needs --num-labels to match, or a folder without it")
    return model.train(), config, has_weights


def count_text(n):
    return f"{n / 1e6:.1f} M" if n >= 1e6 else f"{n:,}"


def first_line(error):
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def example_inputs(model, config, names, max_length, fail):
    """The example batch (2 x 16 random ids, a mask of ones, zero token types) and its dynamic
    dimensions: batch and sequence, shared by every input."""
    import inspect
    takes = inspect.signature(model.forward).parameters
    for name in names:
        if name not in INPUTS:
            fail(f"--inputs: '{name}' is not one of {', '.join(INPUTS)}")
        if name not in takes:
            fail(f"--inputs: {type(model).__name__}'s forward takes no '{name}'")
    longest = max_length or getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if not longest or longest < 16:
        fail("--max-length: the config gives no max_position_embeddings of 16 or more; pass the longest sequence")
    torch.manual_seed(0)
    length = 16
    values = {"input_ids": torch.randint(0, config.vocab_size, (2, length)),
              "attention_mask": torch.ones(2, length, dtype=torch.long),
              "token_type_ids": torch.zeros(2, length, dtype=torch.long)}
    batch, seq = torch.export.Dim("batch", min=1), torch.export.Dim("seq", min=2, max=longest)
    example = {n: values[n] for n in names}
    return example, {n: {0: batch, 1: seq} for n in names}, longest


def logits_shape(model, example, task, config):
    """The logits' shape on the example, and the shape the task needs."""
    with torch.no_grad():
        out = model(**example)
    got = list(out["logits"].shape)
    b, t = example["input_ids"].shape
    want = {"classification": [b, config.num_labels], "token-classification": [b, t, config.num_labels]}
    return got, want.get(task, [b, t, config.vocab_size])


def export(model, example, dynamic, mode, fail):
    try:
        return torch.export.export(model, (), example, dynamic_shapes=dynamic, strict=False)
    except Exception as e:
        fail(f"torch.export.export failed ({mode} mode): {first_line(e)}")


def same_outputs(model, path, example):
    """How the saved program, loaded back, differs from the model on the example, or None."""
    loaded = torch.export.load(path).module()
    with torch.no_grad():
        torch.manual_seed(1234)
        want = model(**example)["logits"]
        torch.manual_seed(1234)
        got = loaded(**example)["logits"]
    if got.shape != want.shape:
        return f"shape {list(got.shape)} against the model's {list(want.shape)}"
    if not torch.allclose(got, want, rtol=1e-4, atol=1e-5):
        return f"max abs difference {(got - want).abs().max().item():.3g}"
    return None


def run_hf(opts, check_operators, fail):
    """Exports, checks and writes the pair; returns the lines to print."""
    if opts.task not in TASKS:
        fail(f"--task {opts.task!r}: one of {', '.join(TASKS)}")
    if opts.num_labels is not None and opts.num_labels < 1:
        fail(f"--num-labels {opts.num_labels}: at least 1")
    if opts.num_labels and opts.task not in ("classification", "token-classification"):
        fail(f"--num-labels goes with --task classification or token-classification (a {opts.task} model "
             f"predicts its vocabulary)")
    model, config, has_weights = load_model(opts.hf, opts.task, opts.num_labels, fail)
    names = [n for n in opts.inputs.split(",") if n] if opts.inputs else ["input_ids", "attention_mask"]
    example, dynamic, longest = example_inputs(model, config, names, opts.max_length, fail)
    got, want = logits_shape(model, example, opts.task, config)
    if got != want:
        fail(f"{type(model).__name__} gives logits of shape {got}; --task {opts.task} needs {want}")
    out = opts.out = opts.out or f"{config.model_type.replace('-', '_')}_{opts.task.replace('-', '_')}.pt2"
    if not out.endswith(".pt2"):
        fail(f"--out {out}: the file name must end in .pt2")
    eval_out = out[:-len(".pt2")] + ".eval.pt2"
    extra = {"gputrain.json": json.dumps({"causal_lm": opts.task == "causal-lm"})}
    programs = []
    for mode, path in (("train", out), ("eval", eval_out)):
        model.train(mode == "train")
        ep = export(model, example, dynamic, mode, fail)
        check_operators(ep, mode)
        programs.append((path, mode, ep))
    model.train()

    import shutil
    import tempfile
    with tempfile.TemporaryDirectory(prefix="export_model.") as scratch:
        saved = []
        for path, mode, ep in programs:
            tmp = os.path.join(scratch, os.path.basename(path))
            torch.export.save(ep, tmp, extra_files=extra)
            model.train(mode == "train")
            problem = same_outputs(model, tmp, example)
            if problem:
                fail(f"{path}: the saved program, loaded back, does not give the model's {mode}-mode logits "
                     f"({problem})")
            saved.append(tmp)
        model.train()
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        for (path, _, _), tmp in zip(programs, saved):
            shutil.move(tmp, path)

    params = dict(model.named_parameters(remove_duplicate=False))
    unique = {id(p): p for p in params.values()}
    tied = len(params) - len(unique)
    head = (f"{config.num_labels} labels" if opts.task in ("classification", "token-classification")
            else f"vocabulary {config.vocab_size}")
    return [
        f"{out} (train; {type(model).__name__}, {count_text(sum(p.numel() for p in unique.values()))} parameters"
        f"{f', {tied} tied' if tied else ''}, {'weights from ' + opts.hf if has_weights else 'random weights'}; "
        f"{head}; inputs {', '.join(names)} of up to {longest} tokens"
        f"{'; labels shifted by gputrain (causal LM)' if opts.task == 'causal-lm' else ''})",
        f"{eval_out} (eval)",
    ]
