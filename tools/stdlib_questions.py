#!/usr/bin/env python3
"""Writes instruction examples made from this Python's standard library to stdout, one JSON line
each: {"prompt": "What does json.dumps do?", "response": <the first paragraph of its docstring>}.

    stdlib_questions.py > data/stdlib_qa.jsonl

Text every machine has and no one here wrote, for the README's fine-tuning walk; a real
instruction set (Alpaca's JSON lines, your own) goes through tools/prepare_text.py the same way.
"""
import importlib
import inspect
import json

# Modules whose functions are documented in plain prose, a few hundred functions in all.
MODULES = ("json", "os.path", "re", "shutil", "string", "textwrap", "random", "statistics", "itertools",
           "functools", "collections", "pathlib", "base64", "heapq", "bisect", "glob", "fnmatch", "difflib",
           "html", "urllib.parse", "tempfile", "copy", "calendar", "colorsys", "zlib", "gzip", "csv", "math")


def main():
    for name in MODULES:
        module = importlib.import_module(name)
        for fn, f in inspect.getmembers(module, lambda o: inspect.isfunction(o) or inspect.isbuiltin(o)):
            doc = inspect.getdoc(f)
            if fn.startswith("_") or not doc:
                continue
            answer = doc.split("\n\n")[0].strip()
            if answer:
                print(json.dumps({"prompt": f"What does {name}.{fn} do?", "response": answer}))


if __name__ == "__main__":
    main()
