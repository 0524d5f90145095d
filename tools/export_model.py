#!/usr/bin/env python3
"""Export a PyTorch module for `gputrain train --model net.pt2`.

    python tools/export_model.py MODULE:CLASS --input-shape 3x32x32 [--args JSON] [--kwargs JSON]
                                 [--out net.pt2] [--no-eval] [--weights state_dict.pth]
                                 [--input-dtype float32] [--input-range LOW,HIGH]
    python tools/export_model.py MODULE:CLASS --data train.jsonl [--target FIELD] [--output-name KEY] ...
    python tools/export_model.py --hf DIR --task classification --num-labels 3 ...   (tools/hf_export.py)

MODULE:CLASS names what builds the model:
  - an importable module and a name in it: `mypkg.models:ConvNeXtTiny` (the current directory is
    searched first, as `python -m` would);
  - a Python file and a name in it: `path/to/net.py:Net` (its folder is put on the path, so
    the file may import its neighbours);
  - the name may be a class or a function that returns a module: `torchvision.models:resnet18`.
It is called with --args (a JSON list) and --kwargs (a JSON object), e.g.
--kwargs '{"num_classes": 10}'. --weights FILE loads a state_dict saved with torch.save (also
one under a "state_dict" or "model" key) into the model first, so that the exported program
carries those weights.

--input-shape is one sample's shape without the batch: "3x32x32" for images, "64" for a vector.
The example input is a batch of 2 random samples of --input-dtype (float32 by default), which is
what gputrain feeds: normal values, or with --input-range LOW,HIGH whole numbers in [LOW, HIGH).
A model that takes integer ids (embeddings) gets them as floats too and must cast in forward,
e.g. `self.emb(x[:, 0].long())`, exported with --input-range 0,VOCAB (normal values would be
negative indices).

--data FILE.jsonl (gputrain's --dataset jsonl) takes the example inputs from the data instead:
each argument of forward is the field of its name in the file's first 8 lines, int64 or float32
as the data holds it, lists padded to the longest as gputrain pads them (the target with -100,
others with 0). Every input's batch dimension is dynamic, and the sequence dimension of the
lists that vary, one size shared by all (gputrain pads every varying field of a batch alike). The
forward may return a tensor, a tuple or a dict; --output-name names the one gputrain trains
(default the first), and it must give [batch, classes] for a class target or [batch, positions,
classes] for a per-token one.

Written, after the checks below pass (nothing is written when one fails):
  - --out (default: <CLASS lowercased>.pt2): the program of model.train(), with a dynamic batch
    dimension, as torch.export.export gives it (the training form, which gputrain reads);
  - <stem>.eval.pt2 beside it, unless --no-eval: the program of model.eval(). gputrain evaluates
    with it; without it gputrain derives evaluation from the training graph (batch_norm on
    running statistics, dropout off), which is wrong for a forward that tests self.training.

Checks, each failure one line on stderr and exit code 2:
  - the module's forward runs on the example input (an embedding given normal values fails:
    the line says to pass --input-range);
  - the batch dimension stays dynamic (a forward that writes the batch size as a number fails);
  - every operator in the graph is an aten operator (no torch.cond / higher-order operators, no
    custom operators, no Python functions): gputrain runs the graph op by op without Python;
  - the forward takes one tensor and returns one tensor of shape [batch, outputs] (with --data:
    an argument the data has no field for, or of another kind than the field, is named);
  - the saved file, loaded back with torch.export.load, gives the module's outputs on the
    example input (in the same mode, with the same random seed for dropout).

Needs torch 2.5 or later. Run it with the torch version gputrain was built on where you can: an
operator that a newer torch writes may be missing from an older LibTorch.
"""
import argparse
import importlib
import importlib.util
import json
import math
import os
import shlex
import shutil
import sys
import tempfile

import torch

sys.dont_write_bytecode = True  # no __pycache__ beside the tools
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_export  # noqa: E402

PROG = "export_model"

# Python functions a graph may call besides aten operators: the serializer folds getitem (which
# picks one result of a multi-result operator) into its producer, and gputrain computes these
# integer operations on sizes (batch * 2, ...) itself.
SIZE_FUNCTIONS = {"getitem", "add", "sub", "mul", "floordiv", "mod"}

# The graph inputs and outputs gputrain can feed and take back.
INPUT_KINDS = {"PARAMETER", "BUFFER", "CONSTANT_TENSOR", "USER_INPUT"}
OUTPUT_KINDS = {"USER_OUTPUT", "BUFFER_MUTATION"}

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16}


class ExportFailure(Exception):
    """A reason to stop: its message is the one line printed."""


def fail(message):
    raise ExportFailure(message)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="export_model.py",
                                description="Export a PyTorch module for gputrain train --model net.pt2.")
    p.add_argument("target", metavar="MODULE:CLASS", nargs="?",
                   help="module path or .py file, a colon, and a class or a function returning a module")
    p.add_argument("--hf", metavar="DIR", help="a Hugging Face model folder or config.json instead (tools/hf_export.py)")
    p.add_argument("--task", help="--hf: " + ", ".join(hf_export.TASKS))
    p.add_argument("--num-labels", type=int, help="--hf: the classes of a classification head")
    p.add_argument("--inputs", help="--hf: the forward's inputs (default input_ids,attention_mask)")
    p.add_argument("--max-length", type=int, help="--hf: the longest sequence (default the config's positions)")
    p.add_argument("--input-shape", help='one sample\'s shape without the batch, e.g. "3x32x32"')
    p.add_argument("--data", metavar="FILE.jsonl", help="example inputs from gputrain's --dataset jsonl file, by name")
    p.add_argument("--target", dest="target_field", help="--data: the target field (default labels, label or y)")
    p.add_argument("--output-name", help="--data: the output gputrain trains (a dict key or a position; default the first)")
    p.add_argument("--input-dtype", default="float32", choices=sorted(DTYPES))
    p.add_argument("--input-range", metavar="LOW,HIGH",
                   help="example inputs are whole numbers in [LOW, HIGH) (ids an embedding casts), not normal values")
    p.add_argument("--args", default="[]", help="JSON list of constructor arguments")
    p.add_argument("--kwargs", default="{}", help="JSON object of constructor keyword arguments")
    p.add_argument("--out", help="the training program's file (default: <CLASS lowercased>.pt2)")
    p.add_argument("--no-eval", action="store_true", help="write no <stem>.eval.pt2")
    p.add_argument("--weights", help="a state_dict file to load into the model before exporting")
    opts = p.parse_args(argv)
    hf_only = ("task", "num_labels", "inputs", "max_length")
    if opts.hf:
        module_flags = [f for f, given in (("MODULE:CLASS", opts.target), ("--input-shape", opts.input_shape),
                                           ("--data", opts.data), ("--target", opts.target_field),
                                           ("--output-name", opts.output_name), ("--input-range", opts.input_range),
                                           ("--weights", opts.weights), ("--no-eval", opts.no_eval),
                                           ("--args", opts.args != "[]"), ("--kwargs", opts.kwargs != "{}"),
                                           ("--input-dtype", opts.input_dtype != "float32")) if given]
        if module_flags:
            fail(f"--hf exports a Hugging Face model with its own inputs, weights and eval program: "
                 f"{', '.join(module_flags)} go with a MODULE:CLASS instead")
        if not opts.task:
            fail("--hf needs --task: " + ", ".join(hf_export.TASKS))
        return opts
    if any(getattr(opts, n) is not None for n in hf_only):
        fail("--task, --num-labels, --inputs and --max-length go with --hf")
    if not opts.target:
        fail("give MODULE:CLASS (a module to export) or --hf DIR (a Hugging Face model)")
    if bool(opts.input_shape) == bool(opts.data):
        fail("give --input-shape (one float tensor) or --data FILE.jsonl (named fields), one of them")
    if not opts.data and (opts.target_field or opts.output_name):
        fail("--target and --output-name go with --data")
    return opts


def read_fields(path, target):
    """The first 8 samples of a jsonl file as {field: (values, is_int, varies)} (varies: a list
    whose length differs between lines, over the whole file; None for a number), and the target."""
    rows, lengths = [], {}
    try:
        with open(path) as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    fail(f"--data {path} line {number}: not JSON ({e})")
                if not isinstance(row, dict) or (rows and row.keys() != rows[0].keys()):
                    fail(f"--data {path} line {number}: not an object with the first line's fields")
                for name, value in row.items():  # every line: sorted data may vary only later
                    if isinstance(value, list):
                        lengths.setdefault(name, set()).add(len(value))
                if len(rows) < 8:
                    rows.append(row)
    except OSError as e:
        fail(f"--data {path}: {e.strerror}")
    if not rows:
        fail(f"--data {path}: holds no samples")
    if target is None:
        target = next((n for n in ("labels", "label", "y") if n in rows[0]), None)
    if target not in rows[0]:
        fail(f"--data {path}: no target field ({target or 'labels, label or y'}) among {', '.join(rows[0])}")
    fields = {}
    for name in rows[0]:
        values = [r[name] for r in rows]
        is_list = isinstance(values[0], list)
        flat = [v for x in values for v in (x if is_list else [x])]
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in flat):
            fail(f"--data {path}: field '{name}' holds something other than numbers")
        fields[name] = (values, all(isinstance(v, int) for v in flat), len(lengths[name]) > 1 if is_list else None)
    if "length" not in fields and any(v for _, _, v in fields.values()):
        # gputrain's collate adds each sample's unpadded length when a field varies.
        longest = [max(len(r[n]) for n, (_, _, v) in fields.items() if v) for r in rows]
        fields["length"] = (longest, True, None)
    return fields, target


def data_example(model, fields, target, path):
    """The forward's arguments from the fields, padded as gputrain pads them, and their dynamic
    dimensions; or one line naming the argument the data lacks."""
    import inspect
    params = list(inspect.signature(model.forward).parameters.values())
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        fail("the forward takes *args or **kwargs; gputrain binds named arguments to the data's fields")
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq")
    inputs, dynamic, names = [], [], []
    for p in params:
        if p.name not in fields:
            fail(f"the forward takes '{p.name}', which {path} lacks: its fields are {', '.join(fields)}")
        values, is_int, varies = fields[p.name]
        dtype = torch.int64 if is_int else torch.float32
        if varies is not None:
            length = max(len(v) for v in values)
            if varies:
                length = max(length, 2)  # torch.export takes a size of 0 or 1 as fixed
            pad = -100 if p.name == target else 0
            rows = [v + [pad] * (length - len(v)) for v in values]
            inputs.append(torch.tensor(rows, dtype=dtype))
            dynamic.append({0: batch, 1: seq} if varies else {0: batch})
        else:
            inputs.append(torch.tensor(values, dtype=dtype))
            dynamic.append({0: batch})
        names.append(p.name)
    return tuple(inputs), tuple(dynamic), names


def parse_shape(text):
    try:
        dims = [int(d) for d in text.lower().replace(",", "x").split("x")]
    except ValueError:
        dims = []
    if not dims or any(d <= 0 for d in dims):
        fail(f"--input-shape {text!r}: expected sizes joined by 'x', e.g. 3x32x32 or 64")
    return dims


def parse_range(text):
    """--input-range LOW,HIGH as two integers, LOW < HIGH."""
    try:
        low, high = (int(v) for v in text.split(","))
    except ValueError:
        low = high = 0
    if low >= high:
        fail(f"--input-range {text!r}: expected two whole numbers LOW,HIGH with LOW < HIGH, e.g. 0,1000")
    return low, high


def example_input(shape, dtype, value_range):
    """A batch of 2 seeded samples: normal values, or whole numbers in [LOW, HIGH)."""
    torch.manual_seed(0)
    if value_range is None:
        return torch.randn(2, *shape, dtype=dtype)
    return torch.randint(value_range[0], value_range[1], (2, *shape)).to(dtype)


def check_forward(model, example, value_range):
    """The module runs on the example inputs, in eval mode (no statistics move), or one line says why."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            model(*example)
    except Exception as e:
        hint = ("; for ids an embedding casts, pass --input-range 0,VOCAB" if value_range is None
                else f"; are the ids in [{value_range[0]}, {value_range[1]})?")
        fail(f"the module's forward fails on the example input ({type(e).__name__}: {first_line(e)}){hint}")
    finally:
        model.train(was_training)


def parse_json(flag, text, kind):
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        fail(f"{flag}: not valid JSON ({e})")
    if not isinstance(value, kind):
        fail(f"{flag}: expected a JSON {'list' if kind is list else 'object'}, got {text}")
    return value


def looks_like_file(where):
    return where.endswith(".py") or "/" in where or os.sep in where


def load_target(target):
    """The object MODULE:CLASS names (a class, or a function that returns a module)."""
    # rpartition: a Windows path keeps the colon of its drive letter.
    where, _, name = target.rpartition(":")
    if not where or not name:
        fail(f"{target!r}: expected MODULE:CLASS, e.g. mypkg.models:Net or path/to/net.py:Net")
    if looks_like_file(where):
        path = os.path.abspath(where)
        if not os.path.isfile(path):
            fail(f"{where}: no such file")
        module_name = os.path.splitext(os.path.basename(path))[0]
        sys.path.insert(0, os.path.dirname(path))
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        # Registered before it runs, as import does: dataclasses and pickling look modules up here.
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    else:
        # The script's own folder (tools/) is on sys.path, not the user's current directory.
        sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(where)
        except ModuleNotFoundError as e:
            # Only the named module missing is this tool's one-line error; a missing import
            # inside the user's module keeps its traceback.
            if e.name and (where == e.name or where.startswith(e.name + ".")):
                fail(f"no module named {where!r} (run from the folder that holds it, or name the .py file)")
            raise
    obj = module
    for part in name.split("."):
        if not hasattr(obj, part):
            fail(f"{where} has no {name!r}")
        obj = getattr(obj, part)
    return obj, name.split(".")[-1]


def build_model(obj, name, args, kwargs):
    if not callable(obj):
        fail(f"{name} is not a class or a function")
    model = obj(*args, **kwargs)
    if not isinstance(model, torch.nn.Module):
        fail(f"{name}(...) gave a {type(model).__name__}, not a torch.nn.Module")
    return model


def load_weights(model, path):
    """Loads a state_dict file into the model, every tensor required to fit (strict)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        fail(f"--weights {path}: no such file")
    except Exception as e:
        fail(f"--weights {path}: not a state_dict torch.load reads with weights_only=True ({first_line(e)})")
    # The usual wrappers around a state_dict: training scripts save {"state_dict": ..., "epoch": ...}.
    for key in ("state_dict", "model"):
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
            break
    if not isinstance(state, dict):
        fail(f"--weights {path}: holds a {type(state).__name__}, not a state_dict")
    # A model saved from DataParallel or torch.compile names everything under one prefix.
    own = model.state_dict()
    for prefix in ("module.", "_orig_mod."):
        if state and all(k.startswith(prefix) for k in state) and not any(k.startswith(prefix) for k in own):
            state = {k[len(prefix):]: v for k, v in state.items()}
    try:
        result = model.load_state_dict(state, strict=False)
    except RuntimeError as e:  # a shape mismatch
        fail(f"--weights {path}: does not fit the model: {' '.join(str(e).split())[:400]}")
    if result.missing_keys or result.unexpected_keys:
        def some(keys):
            return ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
        parts = []
        if result.missing_keys:
            parts.append(f"missing {some(result.missing_keys)}")
        if result.unexpected_keys:
            parts.append(f"unexpected {some(result.unexpected_keys)}")
        fail(f"--weights {path}: does not fit the model: {'; '.join(parts)}")


def first_line(error):
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def export(model, example, dynamic, mode):
    """torch.export of the model in its current mode, the batch dimension dynamic, in the
    training form (the TRAINING verifier: conv2d, linear, batch_norm kept whole)."""
    try:
        ep = torch.export.export(model, example, dynamic_shapes=dynamic)
        # torch 2.5 exports the decomposed inference form here; its export_for_training gives
        # the training form (later versions give it from export itself).
        if getattr(ep, "dialect", None) != "TRAINING" and hasattr(torch.export, "export_for_training"):
            ep = torch.export.export_for_training(model, example, dynamic_shapes=dynamic)
    except Exception as e:
        if batch_is_fixed(model, example, e):
            fail(f"the model fixes the batch size ({mode} mode): its forward only works for a batch of "
                 f"{example[0].shape[0]}, and gputrain trains any batch; write sizes from x.shape[0] or -1 "
                 f"(x.flatten(1), x.view(x.shape[0], -1)), not a number")
        fail(f"torch.export.export failed ({mode} mode): {first_line(e)}")
    if getattr(ep, "dialect", None) != "TRAINING":
        fail(f"torch {torch.__version__} exported the {getattr(ep, 'dialect', 'unnamed')} form, not TRAINING, "
             f"which gputrain needs; use torch 2.5 or later")
    return ep


def batch_is_fixed(model, example, error):
    """Whether the export failed because the forward makes the batch size a constant."""
    message = str(error)
    if "Constraints violated (batch)" in message or ("batch" in message and "specialized" in message):
        return True
    # Other wordings across versions: the batch was the problem if a fixed-size export works.
    try:
        torch.export.export(model, example)
        return True
    except Exception:
        return False


def operator_problem(node):
    """Why gputrain cannot run this call_function node, or None."""
    target = node.target
    if isinstance(target, torch._ops.HigherOrderOperator):
        return (f"the higher-order operator torch.ops.higher_order.{target.name()} (torch.cond, "
                f"torch.map, a wrapped function or checkpoint) needs Python to run")
    if isinstance(target, torch._ops.OpOverload):
        if target.namespace == "aten":
            return None
        return (f"the custom operator {target.name()} is not an aten operator ('{target.namespace}' "
                f"namespace); gputrain runs only aten operators")
    module = getattr(target, "__module__", None)
    name = getattr(target, "__name__", repr(target))
    if module in ("_operator", "operator") and name in SIZE_FUNCTIONS:
        return None
    return f"the Python function {module}.{name} is not an aten operator; gputrain runs only aten operators"


def where_from(node):
    """The first line of the node's stack trace (the user's file and line) and the code there."""
    lines = [line.strip() for line in (node.meta.get("stack_trace") or "").strip().splitlines()]
    if not lines:
        return ""
    return "; from " + lines[0] + (f": {lines[1]}" if len(lines) > 1 else "")


def check_operators(ep, mode):
    """Every call in the graph is one gputrain runs (operator_problem), or one line names it."""
    for node in ep.graph.nodes:
        if node.op == "call_function":
            problem = operator_problem(node)
            if problem:
                fail(f"{mode} graph node '{node.name}' ({node.target}): {problem}{where_from(node)}")


def check_named_program(ep, mode, model, example, fields, target, output_name):
    """--data: the operators as check_program checks them, then the trained output's shape
    against the target: [batch, classes] for a class, [batch, positions, classes] per token."""
    check_operators(ep, mode)
    with torch.no_grad():
        out = model(*example)
    if isinstance(out, dict):
        names, values = [str(k) for k in out], list(out.values())
    elif isinstance(out, (tuple, list)):
        names, values = [str(i) for i in range(len(out))], list(out)
    else:
        names, values = ["0"], [out]
    chosen = output_name or names[0]
    if chosen not in names:
        fail(f"--output-name {chosen!r}: the forward returns {', '.join(names)}")
    got = values[names.index(chosen)]
    if not isinstance(got, torch.Tensor):
        fail(f"{mode}: output {chosen!r} is a {type(got).__name__}, not a tensor")
    labels, is_int, varies = fields[target]
    is_list = varies is not None
    if is_int:
        top = max(v for x in labels for v in (x if is_list else [x]))
        want = 3 if is_list else 2
        if got.dim() != want or got.shape[-1] <= top:
            fail(f"{mode}: output {chosen!r} has shape {list(got.shape)}; the target '{target}' needs "
                 f"[batch{', positions' if is_list else ''}, classes] with more than {top} classes")
    return chosen, list(got.shape)


def check_program(ep, mode, input_shape):
    """The checks gputrain's reader would fail later, here with the module still at hand."""
    check_operators(ep, mode)
    sig = ep.graph_signature
    for spec in sig.input_specs:
        if spec.kind.name not in INPUT_KINDS:
            fail(f"{mode} graph: an input of kind {spec.kind.name} ({spec.arg}); gputrain feeds one tensor "
                 f"and the module's own parameters, buffers and constants")
    for spec in sig.output_specs:
        if spec.kind.name not in OUTPUT_KINDS:
            what = "the forward changes its input in place" if spec.kind.name == "USER_INPUT_MUTATION" else ""
            fail(f"{mode} graph: an output of kind {spec.kind.name} ({spec.arg}){'; ' + what if what else ''}; "
                 f"gputrain takes back one tensor and buffer updates")
    if len(sig.user_inputs) != 1:
        fail(f"{mode} graph: the forward takes {len(sig.user_inputs)} inputs; gputrain feeds one tensor "
             f"(wrap the model in a module whose forward takes one tensor)")
    if len(sig.user_outputs) != 1:
        fail(f"{mode} graph: the forward returns {len(sig.user_outputs)} values; gputrain trains one output "
             f"tensor (return the logits or the prediction alone)")
    nodes = {n.name: n for n in ep.graph.nodes}
    inp, out = nodes.get(sig.user_inputs[0]), nodes.get(sig.user_outputs[0])
    if out is None or not isinstance(out.meta.get("val"), torch.Tensor):
        fail(f"{mode} graph: the forward returns a {type(out.meta.get('val')).__name__ if out else 'constant'}, "
             f"not a tensor")
    batch = inp.meta["val"].shape[0]
    shape = out.meta["val"].shape
    # The same symbol as the input's batch (compared by name: == on sizes would add a guard).
    if len(shape) != 2 or str(shape[0]) != str(batch) or not isinstance(shape[1], int):
        words = "[" + ", ".join("batch" if str(s) == str(batch) else str(s) for s in shape) + "]"
        fail(f"{mode} graph: the forward returns a tensor of shape {words} for input "
             f"[batch, {', '.join(map(str, input_shape))}]; gputrain needs [batch, outputs]")
    return shape[1]


def same_outputs(model, path, example, mode):
    """How the saved program, loaded back, differs from the module on the example, or None. The
    module runs in the mode the program was exported in; a shared seed makes dropout the same."""
    loaded = torch.export.load(path).module()
    with torch.no_grad():
        torch.manual_seed(1234)
        want = model(*example)
        torch.manual_seed(1234)
        got = loaded(*example)
    flat = lambda o: list(o.values()) if isinstance(o, dict) else list(o) if isinstance(o, (tuple, list)) else [o]  # noqa: E731
    for g, w in zip(flat(got), flat(want)):
        if g.shape != w.shape:
            return f"shape {list(g.shape)} against the module's {list(w.shape)}"
        if not torch.allclose(g, w, rtol=1e-4, atol=1e-5, equal_nan=True):
            diff = (g.float() - w.float()).abs().nan_to_num(math.inf).max().item()
            return f"max abs difference {diff:.3g}"
    return None


def values_text(n):
    if n >= 1e9:
        return f"{n / 1e9:.1f} G values"
    if n >= 1e6:
        return f"{n / 1e6:.1f} M values"
    if n >= 1e4:
        return f"{n / 1e3:.1f} k values"
    return f"{n} values"


def run(argv):
    opts = parse_args(argv)
    if opts.hf:
        for line in hf_export.run_hf(opts, check_operators, fail):
            print(f"{PROG}: {line}")
        print(f"train it: gputrain train --model {shlex.quote(opts.out)} --dataset text --train_file train.npz ... "
              f"(texts from tools/prepare_text.py --text-column), or --dataset jsonl --train_file DATA.jsonl")
        return
    shape = parse_shape(opts.input_shape) if opts.input_shape else None
    value_range = parse_range(opts.input_range) if opts.input_range else None
    fields = read_fields(opts.data, opts.target_field) if opts.data else None
    args = parse_json("--args", opts.args, list)
    kwargs = parse_json("--kwargs", opts.kwargs, dict)
    obj, name = load_target(opts.target)
    out = opts.out or name.lower() + ".pt2"
    if not out.endswith(".pt2"):
        # gputrain finds the eval program by replacing ".pt2" with ".eval.pt2".
        fail(f"--out {out}: the file name must end in .pt2")
    eval_out = out[:-len(".pt2")] + ".eval.pt2"

    model = build_model(obj, name, args, kwargs)
    if opts.weights:
        load_weights(model, opts.weights)
    if fields:
        example, dynamic, names = data_example(model, fields[0], fields[1], opts.data)
        check = lambda ep, mode: check_named_program(ep, mode, model, example, fields[0], fields[1],  # noqa: E731
                                                     opts.output_name)
    else:
        example = (example_input(shape, DTYPES[opts.input_dtype], value_range),)
        dynamic = ({0: torch.export.Dim("batch")},)
        check = lambda ep, mode: check_program(ep, mode, shape)  # noqa: E731
    check_forward(model, example, value_range)

    programs = []  # (file, mode, ExportedProgram)
    model.train()
    train_ep = export(model, example, dynamic, "train")
    outputs = check(train_ep, "train")
    programs.append((out, "train", train_ep))
    if not opts.no_eval:
        model.eval()
        eval_ep = export(model, example, dynamic, "eval")
        check(eval_ep, "eval")
        programs.append((eval_out, "eval", eval_ep))
        model.train()

    # Saved to a scratch folder and loaded back there first, so that a failing check leaves
    # nothing behind; moved into place only when every file passed.
    with tempfile.TemporaryDirectory(prefix="export_model.") as scratch:
        saved = []
        for path, mode, ep in programs:
            # The same file name as the final one: the archive's root folder is named after it.
            tmp = os.path.join(scratch, os.path.basename(path))
            torch.export.save(ep, tmp)
            saved.append(tmp)
        # A train-mode forward updates BatchNorm's running statistics; they are put back after
        # each comparison, so that the module stays as it was exported.
        buffers = {n: b.detach().clone() for n, b in model.named_buffers()}
        for (path, mode, _), tmp in zip(programs, saved):
            model.train(mode == "train")
            problem = same_outputs(model, tmp, example, mode)
            with torch.no_grad():
                for n, b in model.named_buffers():
                    b.copy_(buffers[n])
            if problem:
                fail(f"{path}: the saved program, loaded back, does not give the module's {mode}-mode "
                     f"outputs ({problem}); torch.export.save/load lost something")
        model.train()
        folder = os.path.dirname(os.path.abspath(out))
        os.makedirs(folder, exist_ok=True)
        for (path, _, _), tmp in zip(programs, saved):
            shutil.move(tmp, path)

    params = [train_ep.state_dict[n] for n in train_ep.graph_signature.parameters]
    if fields:
        print(f"{PROG}: {out} (train, {len(params)} parameter tensors, {values_text(sum(p.numel() for p in params))}; "
              f"inputs {', '.join(names)} from {opts.data}; output {outputs[0]!r} of shape {outputs[1]} on the example)")
    else:
        print(f"{PROG}: {out} (train, {len(params)} parameter tensors, {values_text(sum(p.numel() for p in params))}; "
              f"samples {'x'.join(map(str, shape))}, {outputs} outputs)")
    if opts.no_eval:
        # gputrain would evaluate with an eval program left from an earlier export, with old weights.
        if os.path.exists(eval_out):
            os.remove(eval_out)
            print(f"{PROG}: removed {eval_out}, an earlier export's eval program (--no-eval: gputrain evaluates "
                  f"with the training graph, batch_norm on running statistics and dropout off)")
    else:
        print(f"{PROG}: {eval_out} (eval)")
    if fields:
        named = f" --output_name {shlex.quote(outputs[0])}" if opts.output_name else ""
        print(f"train it: gputrain train --dataset jsonl --train_file {shlex.quote(opts.data)} --model "
              f"{shlex.quote(out)}{named} ...")
    else:
        print(f"train it: gputrain train --model {shlex.quote(out)} ...")


def main():
    try:
        run(sys.argv[1:])
    except ExportFailure as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
