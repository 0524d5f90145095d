#!/usr/bin/env python3
"""PT2 archives (torch.export.save) for testing `gputrain train --model FILE.pt2`, good and bad.

    python tests/python/make_pt2_fixtures.py OUTDIR

Every archive comes from one small seeded module, Mlp: fc1 = Linear(8, 16), relu, fc2 = Linear(16, 3),
exported in train mode (torch.export.export keeps the "TRAINING" dialect) with a dynamic batch.

Written to OUTDIR:
    good.pt2          the export, as torch.export.save writes it
    x.npy, y.npy      float32 [32, 8] samples and [32, 3] regression targets (numpy seed 0)

Archives gputrain must refuse, each with exactly one defect. All but the last three are good.pt2
rewritten member by member with zipfile: the same member names in the same order, ZIP_STORED, data
64-byte aligned as PyTorch's writer does, and only the named member changed:
    truncated.pt2     good.pt2's bytes cut to half
    not_zip.pt2       200 bytes of text
    bad_json.pt2      models/model.json is `{"schema_version": ` (not JSON)
    schema9.pt2       schema_version.major 9 (gputrain reads 8)
    inference.pt2     verifiers ["ATEN"], what a run_decompositions() program carries
    unknown_op.pt2    node "linear" (fc1) targets torch.ops.aten.no_such_operator.default
    custom_op.pt2     node "linear" (fc1) targets torch.ops.mylib.fancy_linear.default
    hop.pt2           node "relu" targets torch.ops.higher_order.cond
    shape.pt2         fc1.weight stored as [8, 16] (strides [16, 1]): the same 512 bytes, but the
                      graph's p_fc1_weight is [16, 8]
    too_big.pt2       fc1.weight stored as [16, 800] (strides [800, 1]): 51200 bytes over 512 stored
    deflated.pt2      good.pt2 with every member ZIP_DEFLATED (torch.export.save never compresses)
Separate exports, valid archives whose program gputrain cannot train:
    static_batch.pt2  Mlp exported without dynamic_shapes: the batch is fixed at 4
    two_outputs.pt2   a module whose forward returns (fc2(h), h): two user outputs
    int_input.pt2     a module whose forward takes int64 ids (an embedding's), while gputrain
                      feeds one float32 tensor

Graphs whose operators reach outside their tensors, which gputrain must refuse before any node
runs (the red team's payloads; each would work if run):
    from_file.pt2     good.pt2 with one more node before relu, "from_file":
                      aten.from_file(OUTDIR/from_file_marker, shared=True, size=64), what
                      torch.export cannot trace (no fake kernel) but a JSON edit writes; run, it
                      creates the marker file and maps it on every forward
    print.pt2         a real export of Mlp whose forward calls torch.ops.aten._print(PRINTED)
    record_function.pt2  good.pt2 with relu's target torch.ops.profiler._record_function_enter
                      (an operator LibTorch registers, of another namespace than aten)
    eval_from_file.pt2, eval_from_file.eval.pt2  good.pt2, and beside it from_file.pt2's program
                      as its eval program

A valid export with good.pt2's names and another forward, as a re-export of a changed module:
    tanh.pt2          Mlp with tanh in place of relu

And a TorchScript module, which gputrain loads only with --trust_program (its code runs on load):
    script.pt         torch.jit.save(torch.jit.script(Mlp())), the same seeded weights

The node names ("linear", "relu") are the ones torch.export gives; the script checks them (and
that the edited node keeps its metadata.stack_trace), so a torch that names them otherwise fails
here rather than in the C++ test that expects them in gputrain's error.

Prints one line per file written; exit 0.
"""
import json
import os
import struct
import sys
import zipfile

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

IN_FEATURES, HIDDEN, OUTPUTS, BATCH, SAMPLES = 8, 16, 3, 4, 32
ALIGNMENT = 64  # PyTorch's zip writer starts every member's data on a 64-byte boundary

# The nodes whose target the op fixtures change (torch.export's names for fc1's linear and the relu).
LINEAR_NODE, RELU_NODE = "linear", "relu"


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(IN_FEATURES, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, OUTPUTS)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class Tanh(Mlp):
    """Mlp with tanh in place of relu: the same parameter names, another program."""

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


class Ids(nn.Module):
    """A module whose forward takes int64 ids: an embedding, averaged, then a linear head."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(16, 4)
        self.fc = nn.Linear(4, OUTPUTS)

    def forward(self, ids):
        return self.fc(self.emb(ids).mean(1))


class Tied(Mlp):
    """Mlp whose fc1 and two more layers share one weight tensor (tied weights, three names)."""

    def __init__(self):
        super().__init__()
        self.fc3 = nn.Linear(IN_FEATURES, HIDDEN)
        self.fc3.weight = self.fc1.weight
        self.fc4 = nn.Linear(IN_FEATURES, HIDDEN)
        self.fc4.weight = self.fc1.weight

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x) + self.fc3(x) - self.fc4(x).tanh()))


# What print.pt2 would print on every forward if gputrain ran its _print node.
PRINTED = "print.pt2 ran aten::_print"


class Printing(Mlp):
    """Mlp whose forward prints: torch.export keeps the _print node (it has an effect)."""

    def forward(self, x):
        torch.ops.aten._print(PRINTED)
        return super().forward(x)


class TwoOutputs(Mlp):
    """Mlp that also returns its hidden activations: a program with two user outputs."""

    def forward(self, x):
        h = F.relu(self.fc1(x))
        return self.fc2(h), h


def export(model_class, path, dynamic):
    """Seeded module, exported in train mode; with dynamic=True the batch dimension is symbolic."""
    torch.manual_seed(0)
    model = model_class().train()
    example = (torch.randn(BATCH, IN_FEATURES),)
    dynamic_shapes = ({0: torch.export.Dim("batch")},) if dynamic else None
    torch.export.save(torch.export.export(model, example, dynamic_shapes=dynamic_shapes), path)


def read_members(path):
    """[(name, bytes)] in the archive's order."""
    with zipfile.ZipFile(path) as z:
        return [(info.filename, z.read(info)) for info in z.infolist()]


def write_members(path, members, compression=zipfile.ZIP_STORED):
    """A zip of these members in this order. Each local header gets an extra field of padding
    (id "FB", as PyTorch's writer uses) so the data starts on a 64-byte boundary, as in the
    archives torch writes: the rewrite should differ from good.pt2 only where a fixture says."""
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = compression
            header_end = z.fp.tell() + 30 + len(name.encode()) + 4  # local header + 4-byte extra header
            pad = -header_end % ALIGNMENT
            info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
            z.writestr(info, data)


def member_name(members, suffix):
    """The one member whose name ends with suffix (the archive's root folder varies)."""
    found = [name for name, _ in members if name.endswith(suffix)]
    assert len(found) == 1, (suffix, found)
    return found[0]


def with_member(members, name, data):
    """members with name's bytes replaced; names and order unchanged."""
    assert name in dict(members), name
    return [(n, data if n == name else d) for n, d in members]


def with_json(members, suffix, edit):
    """members with the JSON member ending in suffix passed through edit(obj) (in place).
    json.dumps with its defaults reproduces torch's bytes exactly, so only the edit differs."""
    name = member_name(members, suffix)
    obj = json.loads(dict(members)[name])
    edit(obj)
    return with_member(members, name, json.dumps(obj).encode())


def graph_node(program, name):
    nodes = [n for n in program["graph_module"]["graph"]["nodes"] if n["name"] == name]
    assert len(nodes) == 1, name
    return nodes[0]


def set_target(node_name, expected, target):
    """An edit of model.json: node node_name (which must target expected) targets target instead."""
    def edit(program):
        node = graph_node(program, node_name)
        assert node["target"] == expected, node["target"]
        node["target"] = target
    return edit


def set_weight_meta(state_name, sizes, strides):
    """An edit of model_weights_config.json: state_name's recorded sizes and strides."""
    def edit(config):
        meta = config["config"][state_name]["tensor_meta"]
        meta["sizes"] = [{"as_int": n} for n in sizes]
        meta["strides"] = [{"as_int": n} for n in strides]
    return edit


def set_key(key, value):
    def edit(obj):
        assert key in obj, key
        obj[key] = value
    return edit


def share_storage(state_name, with_name):
    """`state_name` stored at `with_name`'s path: a view of another tensor's storage, not a tie."""
    def edit(config):
        config["config"][state_name]["path_name"] = config["config"][with_name]["path_name"]
    return edit


def nest_verifiers(depth):
    """An edit of model.json: the verifier list nested `depth` lists deep."""
    def edit(program):
        value = ["TRAINING"]
        for _ in range(depth):
            value = [value]
        program["verifiers"] = value
    return edit


def empty_first_input_spec(program):
    program["graph_module"]["signature"]["input_specs"][0] = {}


def bogus_relu_argument(program):
    graph_node(program, RELU_NODE)["inputs"].append({"name": "bogus", "arg": {"as_int": 1}, "kind": 2})


def insert_from_file(marker):
    """An edit of model.json: before relu, a node mapping `marker` in shared mode (it creates the
    file), its output unused, with relu's metadata (so its Python line is fc1's)."""
    def edit(program):
        nodes = program["graph_module"]["graph"]["nodes"]
        relu = graph_node(program, RELU_NODE)
        node = {"target": "torch.ops.aten.from_file.default",
                "inputs": [{"name": "filename", "arg": {"as_string": marker}, "kind": 1},
                           {"name": "shared", "arg": {"as_bool": True}, "kind": 1},
                           {"name": "size", "arg": {"as_int": 64}, "kind": 1}],
                "outputs": [{"as_tensor": {"name": "from_file"}}],
                "metadata": relu["metadata"], "is_hop_single_tensor_return": None, "name": "from_file"}
        nodes.insert(nodes.index(relu), node)
        # Its output's metadata, as torch.export would write it (torch.export.load needs it).
        program["graph_module"]["graph"]["tensor_values"]["from_file"] = {
            "dtype": 7, "sizes": [{"as_int": 64}], "requires_grad": False, "device": {"type": "cpu", "index": None},
            "strides": [{"as_int": 1}], "storage_offset": {"as_int": 0}, "layout": 7}
    return edit


def set_schema_major(major):
    def edit(program):
        program["schema_version"]["major"] = major
    return edit


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    path = lambda name: os.path.join(out, name)  # noqa: E731
    written = []

    def done(name):
        written.append(name)
        print(path(name))

    export(Mlp, path("good.pt2"), dynamic=True)
    done("good.pt2")
    good = read_members(path("good.pt2"))
    export(Tanh, path("tanh.pt2"), dynamic=True)
    done("tanh.pt2")
    with open(path("good.pt2"), "rb") as f:
        good_bytes = f.read()

    with open(path("truncated.pt2"), "wb") as f:
        f.write(good_bytes[:len(good_bytes) // 2])
    done("truncated.pt2")

    text = b"This is not a zip archive: gputrain must say so rather than read it as a PT2 program.\n"
    with open(path("not_zip.pt2"), "wb") as f:
        f.write((text * 3)[:200])
    done("not_zip.pt2")

    # One defect each, applied to good.pt2's members.
    program, weights = "/models/model.json", "/data/weights/model_weights_config.json"
    aten_linear = "torch.ops.aten.linear.default"
    variants = {
        "bad_json.pt2": with_member(good, member_name(good, program), b'{"schema_version": '),
        "schema9.pt2": with_json(good, program, set_schema_major(9)),
        "inference.pt2": with_json(good, program, set_key("verifiers", ["ATEN"])),
        "unknown_op.pt2": with_json(good, program, set_target(
            LINEAR_NODE, aten_linear, "torch.ops.aten.no_such_operator.default")),
        "custom_op.pt2": with_json(good, program, set_target(
            LINEAR_NODE, aten_linear, "torch.ops.mylib.fancy_linear.default")),
        "hop.pt2": with_json(good, program, set_target(
            RELU_NODE, "torch.ops.aten.relu.default", "torch.ops.higher_order.cond")),
        "shape.pt2": with_json(good, weights, set_weight_meta("fc1.weight", [8, 16], [16, 1])),
        "too_big.pt2": with_json(good, weights, set_weight_meta("fc1.weight", [16, 800], [800, 1])),
        # 512 bytes viewed as 2^30 values through zero strides: refused before any is made.
        "zero_stride.pt2": with_json(good, weights, set_weight_meta("fc1.weight", [32768, 32768], [0, 0])),
        "deep.pt2": with_json(good, program, nest_verifiers(100)),
        "overlap.pt2": with_json(good, weights, share_storage("fc2.weight", "fc1.weight")),
        "empty_spec.pt2": with_json(good, program, empty_first_input_spec),
        "unknown_arg.pt2": with_json(good, program, bogus_relu_argument),
        "from_file.pt2": with_json(good, program, insert_from_file(path("from_file_marker"))),
        "record_function.pt2": with_json(good, program, set_target(
            RELU_NODE, "torch.ops.aten.relu.default", "torch.ops.profiler._record_function_enter.default")),
        "eval_from_file.pt2": good,
        "eval_from_file.eval.pt2": with_json(good, program, insert_from_file(path("from_file_marker"))),
    }
    for name, members in variants.items():
        write_members(path(name), members)
        done(name)
    write_members(path("deflated.pt2"), good, compression=zipfile.ZIP_DEFLATED)
    done("deflated.pt2")

    export(Mlp, path("static_batch.pt2"), dynamic=False)
    done("static_batch.pt2")
    export(TwoOutputs, path("two_outputs.pt2"), dynamic=True)
    done("two_outputs.pt2")
    torch.manual_seed(0)
    ids = (torch.randint(0, 16, (BATCH, IN_FEATURES)),)
    torch.export.save(torch.export.export(Ids().train(), ids, dynamic_shapes=({0: torch.export.Dim("batch")},)),
                      path("int_input.pt2"))
    done("int_input.pt2")
    export(Tied, path("tied.pt2"), dynamic=True)
    done("tied.pt2")
    export(Printing, path("print.pt2"), dynamic=True)
    done("print.pt2")
    torch.manual_seed(0)
    torch.jit.save(torch.jit.script(Mlp().train()), path("script.pt"))
    done("script.pt")

    # Regression data for a training run of good.pt2 (--dataset npy --task regression).
    rng = np.random.default_rng(0)
    np.save(path("x.npy"), rng.standard_normal((SAMPLES, IN_FEATURES)).astype(np.float32))
    done("x.npy")
    np.save(path("y.npy"), rng.standard_normal((SAMPLES, OUTPUTS)).astype(np.float32))
    done("y.npy")

    check(out, good)


def check(out, good):
    """Each fixture has its defect and no other: the rewrites keep every other member's bytes."""
    path = lambda name: os.path.join(out, name)  # noqa: E731
    torch.export.load(path("good.pt2"))  # the source is a program torch itself reads back
    good_data = dict(good)
    program_name = member_name(good, "/models/model.json")
    weights_name = member_name(good, "/data/weights/model_weights_config.json")

    def changed(name):
        """The names of the members that differ from good.pt2's (after checking names and order)."""
        members = read_members(path(name))
        assert [n for n, _ in members] == [n for n, _ in good], name
        return [n for n, d in members if d != good_data[n]], dict(members)

    diff, members = changed("deflated.pt2")
    assert diff == [], diff
    with zipfile.ZipFile(path("deflated.pt2")) as z:
        assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in z.infolist())

    for name in ("bad_json.pt2", "schema9.pt2", "inference.pt2", "unknown_op.pt2", "custom_op.pt2", "hop.pt2"):
        diff, members = changed(name)
        assert diff == [program_name], (name, diff)
        with zipfile.ZipFile(path(name)) as z:
            assert all(i.compress_type == zipfile.ZIP_STORED for i in z.infolist())
    for name in ("shape.pt2", "too_big.pt2"):
        diff, members = changed(name)
        assert diff == [weights_name], (name, diff)

    # The rewrite itself breaks nothing: the unchanged deflated copy loads in torch, and the
    # aligned stored copies keep torch's data offsets (a reader that maps weights sees the same layout).
    torch.export.load(path("deflated.pt2"))
    with zipfile.ZipFile(path("schema9.pt2")) as z:
        for info in z.infolist():
            start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
            assert start % ALIGNMENT == 0, info.filename

    def program(name):
        return json.loads(dict(read_members(path(name)))[program_name])

    good_program = program("good.pt2")
    assert good_program["schema_version"]["major"] == 8 and good_program["verifiers"] == ["TRAINING"]
    assert program("schema9.pt2")["schema_version"]["major"] == 9
    assert program("inference.pt2")["verifiers"] == ["ATEN"]
    for name, node_name, target in (("unknown_op.pt2", LINEAR_NODE, "torch.ops.aten.no_such_operator.default"),
                                    ("custom_op.pt2", LINEAR_NODE, "torch.ops.mylib.fancy_linear.default"),
                                    ("hop.pt2", RELU_NODE, "torch.ops.higher_order.cond")):
        edited, original = program(name), json.loads(json.dumps(good_program))
        node = graph_node(edited, node_name)
        assert node["target"] == target and node["metadata"].get("stack_trace"), name
        graph_node(original, node_name)["target"] = target
        assert edited == original, name  # the target is the only difference
    # The effect fixtures: the node is there, with a Python line for gputrain's error to name.
    for name, node_name, target in (("from_file.pt2", "from_file", "torch.ops.aten.from_file.default"),
                                    ("eval_from_file.eval.pt2", "from_file", "torch.ops.aten.from_file.default"),
                                    ("record_function.pt2", RELU_NODE,
                                     "torch.ops.profiler._record_function_enter.default"),
                                    ("print.pt2", "_print", "torch.ops.aten._print.default")):
        members = read_members(path(name))
        node = graph_node(json.loads(dict(members)[member_name(members, "/models/model.json")]), node_name)
        assert node["target"] == target and node["metadata"].get("stack_trace"), name
    assert not os.path.exists(path("from_file_marker"))  # nothing here ran it
    try:
        json.loads(dict(read_members(path("bad_json.pt2")))[program_name])
        raise AssertionError("bad_json.pt2 parses")
    except json.JSONDecodeError:
        pass

    for name, sizes in (("shape.pt2", [8, 16]), ("too_big.pt2", [16, 800])):
        config = json.loads(dict(read_members(path(name)))[weights_name])["config"]
        meta = config["fc1.weight"]["tensor_meta"]
        assert [s["as_int"] for s in meta["sizes"]] == sizes, name
        graph_meta = good_program["graph_module"]["graph"]["tensor_values"]["p_fc1_weight"]
        assert [s["as_int"] for s in graph_meta["sizes"]] == [HIDDEN, IN_FEATURES]
    assert len(good_data[member_name(good, "/data/weights/weight_0")]) == HIDDEN * IN_FEATURES * 4

    with open(path("good.pt2"), "rb") as f, open(path("truncated.pt2"), "rb") as t:
        assert len(t.read()) == len(f.read()) // 2
    assert not zipfile.is_zipfile(path("not_zip.pt2")) and os.path.getsize(path("not_zip.pt2")) == 200

    # The separate exports: a fixed batch, and two outputs.
    static = torch.export.load(path("static_batch.pt2"))
    assert list(static.graph_signature.user_inputs) == ["x"]
    x_meta = [n for n in static.graph.nodes if n.name == "x"][0].meta["val"]
    assert all(isinstance(d, int) for d in x_meta.shape) and x_meta.shape[0] == BATCH
    two = torch.export.load(path("two_outputs.pt2"))
    assert len(two.graph_signature.user_outputs) == 2


if __name__ == "__main__":
    main()
