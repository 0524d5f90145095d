#!/usr/bin/env python3
"""The operator allowlist of graphs from files (src/models/op_allowlist.cpp), checked in Python:
its size, and that the torchvision and timm architectures gputrain trains through .pt2 pass it.

    op_allowlist_check.py [--models]

The rule is the C++ one, restated here (keep the two alike): an operator registered with the c10
dispatcher is admitted when (a) its namespace is aten or prims, (b) no str argument's name says
file, path, dir, folder or url, and no argument is a Storage, (c) it is not on the denylist,
(d) it skips no checks (no "unsafe" or "sparse" in its name, no unsafe or check_invariants argument).

Without --models: counts the schemas the rule admits among the operators LibTorch itself
registers (those registered from Python, such as prims, exist in no C++ process and are left
out), and checks that from_file and _print are refused and conv2d admitted.

With --models: also exports each of the 17 architectures below with tools/export_model.py's own
export (model.train() and model.eval(), dynamic batch), and checks every operator of both graphs
against the rule. Needs torchvision and timm importable (PYTHONPATH); an architecture whose
package is missing is reported as skipped. Not part of the test suite, which has neither package.

Prints a line per architecture and a summary; exit code 0 = pass, 1 = an operator refused or a
check failed.
"""
import importlib.util
import os
import sys

import torch

sys.dont_write_bytecode = True

HERE = os.path.dirname(os.path.abspath(__file__))

DENIED = {
    "aten::from_file", "aten::_print", "aten::_test_warn_in_autograd",
    "aten::_cufft_set_plan_cache_max_size", "aten::_cufft_clear_plan_cache", "aten::record_stream",
    "aten::_backward", "aten::set_data", "aten::requires_grad_", "aten::retain_grad", "aten::detach_",
    "aten::save", "aten::warn", "aten::manual_seed", "aten::seed", "aten::set_grad_enabled",
    "aten::set_num_threads", "aten::set_num_interop_threads",
    "aten::_reshape_alias", "aten::_reshape_alias_copy", "aten::set_", "aten::_nested_view_from_buffer",
    "aten::_nested_view_from_buffer_copy", "aten::_nested_view_from_jagged", "aten::_nested_view_from_jagged_copy",
    "aten::_index_put_impl_",
}
FILE_WORDS = ("file", "path", "dir", "folder", "url")

# (package, constructor, input size): the architectures that train through .pt2 today.
ARCHITECTURES = [
    ("torchvision", "resnet50", 224), ("torchvision", "efficientnet_b0", 224),
    ("torchvision", "convnext_tiny", 224), ("torchvision", "regnet_y_400mf", 224),
    ("torchvision", "densenet121", 224), ("torchvision", "mobilenet_v3_small", 224),
    ("torchvision", "shufflenet_v2_x1_0", 224), ("torchvision", "squeezenet1_1", 224),
    ("torchvision", "swin_t", 224), ("torchvision", "vit_b_16", 224),
    ("timm", "resnet18d", 224), ("timm", "efficientnet_b0", 224), ("timm", "convnext_atto", 224),
    ("timm", "vit_tiny_patch16_224", 224), ("timm", "deit_tiny_patch16_224", 224),
    ("timm", "mobilevitv2_050", 256), ("timm", "regnetx_002", 224),
]


def holds(t, kind):
    """Whether type t or any type inside it (Optional, List) is of this kind."""
    return t.kind() == kind or any(holds(c, kind) for c in t.containedTypes())


def refusal(schema):
    """Why the rule refuses this schema, or None (op_refusal in op_allowlist.cpp)."""
    ns = schema.name.split("::")[0]
    if ns not in ("aten", "prims"):
        return f"the '{ns}' namespace"
    if schema.name in DENIED:
        return "on the denylist"
    if "unsafe" in schema.name or "sparse" in schema.name:
        return "skips its checks"
    for a in schema.arguments:
        if a.name in ("unsafe", "check_invariants"):
            return f"can skip its checks ('{a.name}')"
        if holds(a.type, "StringType") and any(w in a.name for w in FILE_WORDS):
            return f"takes a file name ('{a.name}')"
        if holds(a.type, "StorageType"):
            return f"takes a Storage ('{a.name}')"
    return None


def schema_of(name):
    base, _, overload = name.partition(".")
    return torch._C._get_schema(base, overload)


def registered_in_cpp(name):
    """An operator LibTorch registers (not one defined from Python, absent from a C++ process)."""
    debug = [line for line in torch._C._dispatch_dump(name).splitlines() if line.startswith("debug: registered at ")]
    return not (debug and debug[0].split(":")[1].strip().split(" ")[-1].endswith(".py"))


def allowlist():
    names = sorted(torch._C._dispatch_get_all_op_names())
    cpp = [n for n in names if registered_in_cpp(n)]
    admitted = [n for n in cpp if refusal(schema_of(n)) is None]
    return names, cpp, admitted


def export_model_module():
    spec = importlib.util.spec_from_file_location("export_model", os.path.join(HERE, "..", "..", "tools",
                                                                               "export_model.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def graph_operators(ep):
    """{overload name: (schema, first node)} of a program's call_function nodes."""
    ops = {}
    for node in ep.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
            ops.setdefault(node.target.name(), (node.target._schema, node))
    return ops


def check_models():
    tool = export_model_module()
    failed, used = False, {}
    for package, name, size in ARCHITECTURES:
        label = f"{package} {name}"
        try:
            if package == "torchvision":
                import torchvision.models
                model = getattr(torchvision.models, name)(num_classes=10)
            else:
                import timm
                model = timm.create_model(name, pretrained=False, num_classes=10)
        except ImportError as e:
            print(f"{label}: skipped ({e})")
            continue
        example = torch.randn(2, 3, size, size)
        ops = {}
        for mode in ("train", "eval"):
            getattr(model, mode)()
            ops.update(graph_operators(tool.export(model, example, mode)))
        refused = {op: refusal(schema) for op, (schema, _) in ops.items() if refusal(schema)}
        for op in ops:
            used.setdefault(op, []).append(label)
        failed |= bool(refused)
        print(f"{label}: {len(ops)} operators, " + (f"REFUSED {refused}" if refused else "all admitted"))
    print(f"operators used by the architectures: {len(used)}: {' '.join(sorted(used))}")
    return not failed


def main():
    if set(sys.argv[1:]) - {"--models"}:
        sys.exit(__doc__)
    names, cpp, admitted = allowlist()
    ok = True
    for name, want in (("aten::from_file", False), ("aten::_print", False), ("aten::conv2d", True),
                       ("aten::_assert_scalar", True), ("aten::_reshape_alias", False), ("aten::_unsafe_index.Tensor", False)):
        if (name in admitted) != want:
            print(f"FAIL: {name} is {'not ' if want else ''}admitted")
            ok = False
    refused = [n for n in cpp if n.split("::")[0] in ("aten", "prims") and n not in admitted]
    print(f"dispatcher operators: {len(names)} in this Python process, {len(cpp)} registered by LibTorch; "
          f"admitted: {len(admitted)}; aten operators refused: {len(refused)}: {' '.join(refused)}")
    if "--models" in sys.argv[1:]:
        ok &= check_models()
    print("op_allowlist_check: " + ("pass" if ok else "FAIL"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
