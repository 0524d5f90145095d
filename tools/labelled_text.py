"""prepare_text.py --text-column: labelled texts tokenized for `gputrain train --dataset text`.

    python tools/prepare_text.py reviews.csv --text-column text --label-column label \\
        --tokenizer models/bert --out data/reviews [--test test.csv | --val-fraction 0.1] [--max-length 128]

INPUT is a CSV (.csv), TSV (.tsv) or JSONL (.jsonl) file of texts. --text-column names the text
(two names joined by a comma, e.g. premise,hypothesis, for text pairs). --label-column names the
label: whole numbers are class ids as they are; other words are class names, numbered in sorted
order (or in the order of --classes a,b,c); numbers with a fraction are a regression target.
Several label columns joined by commas (toxic,obscene,insult) are multi-label: a 0 or a 1 each.
Without --label-column the texts have no label (new texts, for `gputrain infer`).

--tokenizer is a Hugging Face model folder (transformers' AutoTokenizer reads it: WordPiece
for BERT, byte-level BPE for GPT-2 and RoBERTa, SentencePiece for DeBERTa-v3, T5, XLM-R) or a
tokenizer.json (the `tokenizers` library). Each text is encoded as the model's tokenizer
encodes it for the model, its special tokens included ([CLS] text [SEP]), and cut to
--max-length tokens (default: the tokenizer's model_max_length, at most 512); what is cut is
counted, never an error.

Written (after every check passes, nothing before): DIR/train.npz and DIR/test.npz (DIR/texts.npz
without labels), each with
  input_ids      int32 [N, L]  padded with the tokenizer's pad id to the longest text, L
  lengths        int32 [N]     each text's tokens (gputrain cuts each sample to it, so that a
                               batch is padded only to its own longest)
  token_type_ids uint8 [N, L]  text pairs only
  labels         int64 [N] (class ids), float32 [N] (a regression target) or float32 [N, K]
                 (K label columns of 0/1: multi-label)
and DIR/meta.json: the tokenizer, the classes' names, the counts (texts, truncated, empty).

Errors print one line (the file and line where there is one) and exit 2: a text that is not
UTF-8, a missing column, a test label outside the training classes, a tokenizer that cannot be
read.
"""
import argparse
import csv
import io
import json
import math
import os
import random
import sys

import numpy as np

PROG = "prepare_text.py"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# BERT's positions: a tokenizer without a usable model_max_length (some say 10^30) gets this.
DEFAULT_MAX_LENGTH = 512


class Failure(Exception):
    """An error the user can fix: printed as one line, exit code 2."""


def fail(message):
    raise Failure(message)


def parse_args(argv):
    ap = argparse.ArgumentParser(prog=PROG + " --text-column", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input", metavar="INPUT", help="a .csv, .tsv or .jsonl file of texts")
    ap.add_argument("--text-column", required=True, help="the text's column (two, comma-separated, for pairs)")
    ap.add_argument("--label-column", help="the label's column, or several of 0/1 joined by commas (multi-label); "
                    "none: texts without labels, for infer")
    ap.add_argument("--classes", help="the class names in id order (default: sorted)")
    ap.add_argument("--tokenizer", required=True, metavar="DIR|tokenizer.json", help="the model's tokenizer")
    ap.add_argument("--max-length", type=int, help="tokens a text is cut to (default: the tokenizer's, at most 512)")
    ap.add_argument("--test", metavar="FILE", help="the test texts (default: --val-fraction of INPUT)")
    ap.add_argument("--val-fraction", type=float, default=0.1, help="share of INPUT held out as test (default 0.1)")
    ap.add_argument("--seed", type=int, default=1337, help="the held-out split's shuffle seed (default 1337)")
    ap.add_argument("--out", required=True, metavar="DIR", help="folder for the .npz files (created if missing)")
    args = ap.parse_args(argv)
    args.text_columns = [c for c in args.text_column.split(",") if c]
    if not 1 <= len(args.text_columns) <= 2:
        ap.error("--text-column takes one column, or two joined by a comma (a text pair)")
    if args.max_length is not None and args.max_length < 2:
        ap.error("--max-length must be 2 or more (a model's special tokens alone take two)")
    if not 0 < args.val_fraction < 1 and args.label_column and not args.test:
        ap.error("--val-fraction must be in (0, 1), or give --test FILE")
    if not args.label_column and (args.test or args.classes):
        ap.error("--test and --classes go with --label-column")
    args.label_columns = [c for c in (args.label_column or "").split(",") if c]
    if len(args.label_columns) > 1 and args.classes:
        ap.error("--classes names the classes of one label column; several are multi-label, named by their columns")
    return args


def encode_multilabel(path, rows, columns):
    """float32 [N, K]: each label column's 0 or 1."""
    out = np.zeros((len(rows), len(columns)), dtype=np.float32)
    for n, (line, row) in enumerate(rows):
        for k, c in enumerate(columns):
            x = number(row[c])
            if x not in (0.0, 1.0):
                fail(f"{path}:{line}: '{c}' is {str(row[c])!r}; several label columns are multi-label, a 0 or a 1 each")
            out[n, k] = x
    return out


def decode_utf8(path, data):
    """The file's text (a byte-order mark dropped); bytes that are not UTF-8 fail naming the line."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        fail(f"{path}:{line}: not UTF-8 (byte 0x{data[e.start]:02x}); save the file as UTF-8")


def read_rows(path, columns):
    """[(line, {column: text})] of a CSV, TSV or JSONL file, with every column in `columns`."""
    try:
        with open(path, "rb") as f:
            text = decode_utf8(path, f.read())
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    rows = []
    if path.endswith(".jsonl"):
        # "\n" alone ends a line: U+2028 and friends are legal inside a JSON string.
        for number, line in enumerate(text.split("\n"), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                fail(f"{path}:{number}: not JSON ({e.msg})")
            if not isinstance(row, dict):
                fail(f"{path}:{number}: not a JSON object")
            rows.append((number, row))
    elif path.endswith((".csv", ".tsv")):
        # TSV (GLUE's files) has no quoting: a text may begin with a quote mark.
        tsv = path.endswith(".tsv")
        reader = csv.DictReader(io.StringIO(text, newline=""), delimiter="\t" if tsv else ",",
                                quoting=csv.QUOTE_NONE if tsv else csv.QUOTE_MINIMAL)
        try:
            for row in reader:
                rows.append((reader.line_num, row))
        except csv.Error as e:
            fail(f"{path}:{reader.line_num}: {e}")
    else:
        fail(f"{path}: not .csv, .tsv or .jsonl")
    if not rows:
        fail(f"{path}: holds no texts")
    for number, row in rows:
        for c in columns:
            if c not in row or row[c] is None:
                fail(f"{path}:{number}: no column '{c}' (it has {', '.join(map(str, row))})")
            if not isinstance(row[c], (str, int, float)) or isinstance(row[c], bool):
                fail(f"{path}:{number}: '{c}' holds {type(row[c]).__name__}, not text or a number")
    return rows


def number(v):
    """A label as a finite number, or None."""
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def check_labels(path, rows, column):
    """An empty label, or NaN or infinity, fails naming its line."""
    for line, row in rows:
        v = row[column]
        if str(v).strip() == "" or (number(v) is None and str(v).strip().lower() in ("nan", "inf", "-inf", "infinity")):
            fail(f"{path}:{line}: label {str(v)!r} is empty or not a finite number; give every text its label")


def label_kind(values):
    """'ids' (whole numbers), 'regression' (numbers with a fraction) or 'names'."""
    parsed = [number(v) for v in values]
    if any(p is None for p in parsed):
        return "names"
    return "ids" if all(p == int(p) for p in parsed) else "regression"


def encode_labels(path, rows, column, kind, classes):
    out = []
    for line, row in rows:
        v = row[column]
        x = number(v)
        if kind == "regression":
            if x is None:
                fail(f"{path}:{line}: label {v!r} is not a number like the training labels")
            out.append(x)
        elif kind == "ids":
            if x is None or x != int(x):
                fail(f"{path}:{line}: label {v!r} is not a class id (a whole number) like the training labels")
            c = int(x)
            if c < 0 or (classes and c >= len(classes)):
                fail(f"{path}:{line}: label {c} is outside the classes 0..{len(classes) - 1 if classes else 'N'}")
            out.append(c)
        else:
            if str(v) not in classes:
                fail(f"{path}:{line}: label {str(v)!r} is not one of the classes ({', '.join(classes[:8])}"
                     f"{' ...' if len(classes) > 8 else ''})")
            out.append(classes.index(str(v)))
    return np.array(out, dtype=np.float32 if kind == "regression" else np.int64)


def load_tokenizer(spec):
    """A callable (texts, pairs, max_length) -> (ids, token types, truncated), its source, size and pad id."""
    sys.path.insert(0, os.path.join(ROOT, ".pydeps-text"))
    if os.path.isdir(spec):
        try:
            from transformers import AutoTokenizer
        except ImportError:
            fail("--tokenizer DIR needs transformers (tools/setup.sh installs it into .pydeps-text)")
        try:
            tok = AutoTokenizer.from_pretrained(spec, local_files_only=True)
        except Exception as e:  # transformers raises several kinds for a folder it cannot read
            fail(f"--tokenizer {spec}: transformers cannot read a tokenizer there ({' '.join(str(e).split())[:160]})")
        limit = tok.model_max_length if tok.model_max_length and tok.model_max_length < 100_000 else None

        def encode(texts, pairs, max_length):
            full = tok(texts, pairs, truncation=False, add_special_tokens=True, return_token_type_ids=True)
            cut = tok(texts, pairs, truncation=True, max_length=max_length, return_token_type_ids=True)
            truncated = sum(len(a) > max_length for a in full["input_ids"])
            return cut["input_ids"], cut.get("token_type_ids"), truncated
        pad = tok.pad_token_id if tok.pad_token_id is not None else 0
        return encode, os.path.abspath(spec), len(tok), pad, limit
    if spec.endswith(".json") and os.path.isfile(spec):
        try:
            from tokenizers import Tokenizer
        except ImportError:
            fail("--tokenizer FILE.json needs the tokenizers package (tools/setup.sh installs it into .pydeps-text)")
        try:
            tok = Tokenizer.from_file(spec)
        except Exception as e:
            fail(f"--tokenizer {spec}: not a tokenizer.json ({' '.join(str(e).split())[:160]})")

        padding = tok.padding
        tok.no_padding()  # each text its own length: gputrain pads per batch

        def encode(texts, pairs, max_length):
            tok.no_truncation()
            full = tok.encode_batch(list(zip(texts, pairs)) if pairs else texts)
            tok.enable_truncation(max_length)
            cut = tok.encode_batch(list(zip(texts, pairs)) if pairs else texts)
            return [e.ids for e in cut], [e.type_ids for e in cut], sum(len(e.ids) > max_length for e in full)
        return encode, os.path.abspath(spec), tok.get_vocab_size(), padding["pad_id"] if padding else 0, None
    fail(f"--tokenizer {spec}: neither a Hugging Face model folder nor a tokenizer.json")


def tokenize(path, rows, args, encode, pad):
    """The split's arrays and counts."""
    texts = [str(row[args.text_columns[0]]) for _, row in rows]
    pairs = [str(row[args.text_columns[1]]) for _, row in rows] if len(args.text_columns) == 2 else None
    empty = sum(1 for t in texts if not t.strip())
    ids, types, truncated = encode(texts, pairs, args.max_length)
    for (line, _), row in zip(rows, ids):
        if not row:
            fail(f"{path}:{line}: the text encodes to no tokens (an empty text, and a tokenizer that adds none); "
                 f"drop it or give it words")
    longest = max(len(i) for i in ids)
    arrays = {"input_ids": np.full((len(ids), longest), pad, dtype=np.int32),
              "lengths": np.array([len(i) for i in ids], dtype=np.int32)}
    for n, row in enumerate(ids):
        arrays["input_ids"][n, :len(row)] = row
    if pairs:
        arrays["token_type_ids"] = np.zeros((len(ids), longest), dtype=np.uint8)
        for n, row in enumerate(types):
            arrays["token_type_ids"][n, :len(row)] = row
    counts = {"texts": len(ids), "truncated": truncated, "empty": empty, "tokens": int(arrays["lengths"].sum()),
              "longest": longest}
    return arrays, counts


def replace_file(path, write):
    """Writes through `write(tmp)` and renames into place; a symlink's file is replaced where it
    lies, so the link stays a link."""
    target = os.path.realpath(path)
    tmp = target + ".tmp"
    write(tmp)
    os.replace(tmp, target)


def save_npz(path, arrays):
    def write(tmp):
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
    replace_file(path, write)


def run(args):
    columns = args.text_columns + args.label_columns
    rows = read_rows(args.input, columns)
    if not args.label_column and os.path.exists(os.path.join(args.out, "train.npz")):
        fail(f"--out {args.out} holds labelled texts (train.npz), whose meta.json this would replace; give another folder")
    encode, source, vocab, pad, limit = load_tokenizer(args.tokenizer)
    if args.max_length is None:
        args.max_length = min(limit or DEFAULT_MAX_LENGTH, DEFAULT_MAX_LENGTH)
    if args.label_column:
        if args.test:
            splits = {"train": rows, "test": read_rows(args.test, columns)}
        else:
            order = list(range(len(rows)))
            random.Random(args.seed).shuffle(order)
            held = round(args.val_fraction * len(rows))
            if held == 0 or held == len(rows):
                fail(f"{args.input}: {len(rows)} texts leave no test split at --val-fraction {args.val_fraction} "
                     f"(give --test FILE or another fraction)")
            splits = {"train": [rows[i] for i in sorted(order[held:])], "test": [rows[i] for i in sorted(order[:held])]}
        for split, split_rows in splits.items():
            for column in args.label_columns:
                check_labels(args.test if split == "test" and args.test else args.input, split_rows, column)
    if len(args.label_columns) > 1:
        paths = {"train": args.input, "test": args.test or args.input}
        kind, classes = "multilabel", args.label_columns
        labels = {s: encode_multilabel(paths[s], r, args.label_columns) for s, r in splits.items()}
    elif args.label_column:
        # The classes of the whole input: a rare one may fall in the held-out part alone.
        values = [row[args.label_column] for _, row in (splits["train"] if args.test else rows)]
        kind = label_kind(values)
        if args.classes:
            classes = [c for c in args.classes.split(",") if c]
            kind = "names" if kind == "regression" else kind
        elif kind == "names":
            classes = sorted({str(v) for v in values})
        elif kind == "ids":
            classes = [str(c) for c in range(max(int(float(v)) for v in values) + 1)]
        else:
            classes = []
        paths = {"train": args.input, "test": args.test or args.input}
        labels = {s: encode_labels(paths[s], r, args.label_column, kind, classes) for s, r in splits.items()}
    else:
        splits, labels, kind, classes = {"texts": rows}, {}, None, []

    encoded = {}
    for split, split_rows in splits.items():
        arrays, counts = tokenize(args.input if split != "test" or not args.test else args.test, split_rows, args,
                                  encode, pad)
        if split in labels:
            arrays["labels"] = labels[split]
        encoded[split] = (arrays, counts)
    top = max(int(a["input_ids"].max()) for a, _ in encoded.values())

    os.makedirs(args.out, exist_ok=True)
    for split, (arrays, _) in encoded.items():
        save_npz(os.path.join(args.out, split + ".npz"), arrays)
    meta = {"kind": "labelled_text", "tokenizer": source, "vocab_size": vocab, "largest_id": top, "pad_id": pad,
            "max_length": args.max_length, "text_columns": args.text_columns, "label_column": args.label_column,
            "labels": {"ids": "classes", "names": "classes", "regression": "regression",
                       "multilabel": "multilabel"}.get(kind, "none"),
            "classes": classes, "counts": {s: c for s, (_, c) in encoded.items()},
            "inputs": [os.path.abspath(p) for p in [args.input] + ([args.test] if args.test else [])]}
    def write_meta(tmp):
        with open(tmp, "w") as f:
            f.write(json.dumps(meta, indent=1) + "\n")
    replace_file(os.path.join(args.out, "meta.json"), write_meta)

    print(f"{PROG}: tokenizer {source} (vocabulary {vocab:,}), texts cut to {args.max_length} tokens")
    for split, (arrays, c) in encoded.items():
        padded = arrays["input_ids"].size
        print(f"  {split}: {c['texts']:,} texts, {c['tokens']:,} tokens (longest {c['longest']}, "
              f"{c['truncated']} truncated, {c['empty']} empty) -> {os.path.join(args.out, split + '.npz')}")
    if kind in ("ids", "names"):
        print(f"  labels: {len(classes)} classes ({', '.join(classes[:10])}{' ...' if len(classes) > 10 else ''})")
    elif kind == "regression":
        print("  labels: a regression target")
    elif kind == "multilabel":
        print(f"  labels: {len(classes)} labels per text, 0 or 1 each ({', '.join(classes[:10])})")
    if args.label_column:
        print(f"train it: gputrain train --dataset text --train_file {os.path.join(args.out, 'train.npz')} "
              f"--test_file {os.path.join(args.out, 'test.npz')} --model MODEL.pt2")
    else:
        print(f"infer on it: gputrain infer --checkpoint RUN/checkpoints/best.pt --dataset text "
              f"--test_file {os.path.join(args.out, 'texts.npz')} --out predictions.csv")


def main(argv):
    args = parse_args(argv)
    try:
        run(args)
    except Failure as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    return 0
