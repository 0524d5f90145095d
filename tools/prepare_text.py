#!/usr/bin/env python3
"""Turns text files into llm.c token shards, for training a language model with gputrain.

  prepare_text.py INPUT... --out DIR [--tokenizer bytes|FILE.json|FILE.model]
                  [--train-tokenizer bpe|sentencepiece --vocab-size N]
                  [--val-fraction 0.05 | --val-docs N] [--shard-tokens 100000000]
                  [--glob '*.py'] [--seed 1337] [--eot-token TEXT]

INPUT is a text file or a folder; folders are walked recursively in sorted order, hidden files
and folders left out, and their files filtered by --glob (on the file name). A file named on
the command line is always taken. Each file is one document; files that are not UTF-8, and
empty ones, are skipped and counted.

Documents are shuffled with --seed; the first --val-docs of them (or --val-fraction of them)
go to the val split, the rest to train, so no document is in both. Every document is preceded
by the end-of-text token, as llm.c's fineweb.py does.

Tokenizers:
  bytes (default)   each UTF-8 byte is a token (0..255), end-of-text 256, vocabulary 257;
                    DIR/tokenizer.json is a Hugging Face tokenizer that encodes the same way.
  FILE.json         a Hugging Face tokenizer.json; end-of-text is --eot-token, else
                    <|endoftext|>, else </s>.
  FILE.model        a SentencePiece model; end-of-text is its eos id.
  --train-tokenizer bpe            a byte-level BPE trained on the train documents
                                   (special <|endoftext|>), saved as DIR/tokenizer.json;
  --train-tokenizer sentencepiece  a SentencePiece BPE model, saved as DIR/tokenizer.model.
The tokenizer always lands in DIR, so the shards carry their vocabulary. The bytes tokenizer
needs only numpy; the others import `tokenizers` or `sentencepiece` (tools/setup.sh installs
them into .pydeps-text, which this script adds to its path when they are not importable).

Output, llm.c's format: DIR/train_000000.bin, train_000001.bin, ... (cut every --shard-tokens
tokens) and DIR/val_000000.bin. Each file is a header of 256 little-endian int32 (magic
20240520, version 1, token count) and the tokens as uint16; a vocabulary over 65536 takes magic
20240801, version 7 and uint32 tokens. DIR/meta.json records the tokenizer, the counts and the
inputs. Every file is written under a temporary name and renamed into place.

Instruction data (--instructions --pack T), for fine-tuning: INPUT is JSONL, one example a line,
{"prompt": ..., "response": ...} or Alpaca's {"instruction": ..., "input": ..., "output": ...}.
Each example becomes end-of-text + the prompt in --template (default: "### Instruction:\n{prompt}
\n\n### Response:\n") + the response, and examples are packed whole into windows of T tokens
(the --seq_len to train with), the rest of a window filled with end-of-text tokens; an example
longer than T is left out and counted. Beside each shard, X.mask.npy (uint8, one per token)
marks the tokens the loss trains on: the response's and the end-of-text after it, never the
prompt's. meta.json records packed_seq_len, and DIR/prompt_template.txt is the template for
`gputrain generate --prompt_template`. Examples are split between train and val as documents are.

Labelled texts for a text classifier (--text-column, tools/labelled_text.py): a CSV, TSV or JSONL
file of texts and labels, tokenized by the model's own tokenizer into DIR/train.npz and
DIR/test.npz, for `gputrain train --dataset text`.

Errors (no input files, an output that is a file, a bad tokenizer, a bad example) print one line
and exit 2, before anything is written.
"""
import argparse
import fnmatch
import io
import json
import os
import random
import re
import sys
import tempfile
import time

import numpy as np

PROG = "prepare_text.py"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER_INTS = 256
# llm.c's two shard layouts (dev/data/data_common.py there): GPT-2's uint16 tokens, and the
# uint32 one it uses for Llama 3's 128k vocabulary.
FORMAT_U16 = {"magic": 20240520, "version": 1, "dtype": np.dtype("<u2")}
FORMAT_U32 = {"magic": 20240801, "version": 7, "dtype": np.dtype("<u4")}
EOT_NAMES = ("<|endoftext|>", "</s>")
BYTES_EOT = 256
# Documents handed to a tokenizer at once: enough for its batch call to use every core, few
# enough that memory stays small with large files.
BATCH_DOCS = 256


class Failure(Exception):
    """An error the user can fix: printed as one line, exit code 2."""


def fail(message):
    raise Failure(message)


# --- Inputs ------------------------------------------------------------------------------

def find_files(inputs, pattern):
    """Every file the inputs name, in a fixed order (inputs as given, each folder sorted)."""
    found, seen = [], set()
    for item in inputs:
        if os.path.isfile(item):
            paths = [item]
        elif os.path.isdir(item):
            paths = []
            for folder, dirs, files in os.walk(item):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                paths += [os.path.join(folder, f) for f in files
                          if not f.startswith(".") and (pattern is None or fnmatch.fnmatch(f, pattern))]
            paths.sort()
        else:
            fail(f"{item}: no such file or folder")
        for path in paths:
            key = os.path.realpath(path)
            if key not in seen:  # a file reached twice (two inputs, a link) is one document
                seen.add(key)
                found.append(path)
    return found


def read_document(path):
    """The file's text, or None when it is not UTF-8 (a binary file in the folder)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:  # unreadable: stopping says so, where skipping would hide it
        fail(f"{path}: {e.strerror}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def usable_documents(paths):
    """Reads every file once to keep those that decode; the text is not kept, so a corpus
    larger than memory works (each later pass reads the files again)."""
    kept, not_utf8, empty, size = [], 0, 0, 0
    for path in paths:
        text = read_document(path)
        if text is None:
            not_utf8 += 1
        elif not text:
            empty += 1  # it would add nothing but an end-of-text token
        else:
            kept.append(path)
            size += os.path.getsize(path)
    return kept, {"not_utf8": not_utf8, "empty": empty}, size


def split_documents(paths, seed, val_fraction, val_docs):
    """Shuffles the documents (seeded) and cuts off the val split from the front."""
    order = list(paths)
    random.Random(seed).shuffle(order)
    if val_docs is None:
        # At least one val document when a fraction was asked for: a tiny corpus still gets a
        # val split rather than silently none.
        val_docs = 0 if val_fraction == 0 else max(1, round(len(order) * val_fraction))
    if val_docs >= len(order):
        fail(f"{len(order)} document(s) leave none for train after {val_docs} for val "
             "(lower --val-fraction/--val-docs, or add inputs)")
    return order[val_docs:], order[:val_docs]


def texts(paths):
    for path in paths:
        yield read_document(path)


def batches(paths):
    for start in range(0, len(paths), BATCH_DOCS):
        yield list(texts(paths[start:start + BATCH_DOCS]))


# --- Tokenizers --------------------------------------------------------------------------
# Each is an object with: kind, vocab_size, eot, file_name (what lands in DIR),
# encode_batch(list of str) -> list of int arrays, and save(path).

def import_optional(name):
    """Imports tokenizers/sentencepiece, trying the repo's .pydeps-text when not installed."""
    try:
        return __import__(name)
    except ImportError:
        extra = os.path.join(ROOT, ".pydeps-text")
        if os.path.isdir(extra) and extra not in sys.path:
            sys.path.append(extra)  # appended: never shadows what the interpreter has
            try:
                return __import__(name)
            except ImportError:
                pass
    fail(f"this tokenizer needs the Python package '{name}' (tools/setup.sh installs it "
         "into .pydeps-text)")


def byte_symbols():
    """The printable character that Hugging Face's ByteLevel step stands in for each byte
    (GPT-2's table): bytes that are printable Latin-1 characters stand for themselves, the
    others (controls, space, soft hyphen...) take code points from 256 up, in byte order."""
    printable = set(range(ord("!"), ord("~") + 1)) | set(range(0xA1, 0xAC + 1)) | set(range(0xAE, 0xFF + 1))
    symbols, extra = [], 0
    for b in range(256):
        if b in printable:
            symbols.append(chr(b))
        else:
            symbols.append(chr(256 + extra))
            extra += 1
    return symbols


def bytes_tokenizer_json():
    """A tokenizer.json whose ids are the UTF-8 bytes: a BPE without merges over the 256
    ByteLevel symbols, each symbol's id being its byte's value (not the order of the
    symbols), and <|endoftext|> as special token 256."""
    vocab = {symbol: b for b, symbol in enumerate(byte_symbols())}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": BYTES_EOT, "content": EOT_NAMES[0], "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}],
        "normalizer": None,
        # No regex split: without merges, splitting the text first changes no token.
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }


class BytesTokenizer:
    kind, vocab_size, eot, file_name = "bytes", BYTES_EOT + 1, BYTES_EOT, "tokenizer.json"

    def encode_batch(self, docs):
        return [np.frombuffer(doc.encode("utf-8"), dtype=np.uint8) for doc in docs]

    def save(self, path):
        write_text(path, json.dumps(bytes_tokenizer_json(), ensure_ascii=False, indent=1) + "\n")


class HuggingFaceTokenizer:
    kind, file_name = "huggingface", "tokenizer.json"

    def __init__(self, tokenizer, eot_name):
        self.tok = tokenizer
        # Text that happens to contain "<|endoftext|>" stays text, as tiktoken's
        # encode_ordinary keeps it in fineweb.py: only our own separators are end-of-text.
        if hasattr(tokenizer, "encode_special_tokens"):
            tokenizer.encode_special_tokens = True
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        self.eot = tokenizer.token_to_id(eot_name)
        self.eot_name = eot_name

    @classmethod
    def load(cls, path, eot_token):
        tokenizers = import_optional("tokenizers")
        try:
            tok = tokenizers.Tokenizer.from_file(path)
        except Exception as e:  # the library's parse errors have no common type
            fail(f"{path}: not a Hugging Face tokenizer.json ({one_line(e)})")
        names = (eot_token,) if eot_token else EOT_NAMES
        for name in names:
            if tok.token_to_id(name) is not None:
                return cls(tok, name)
        fail(f"{path}: no end-of-text token ({' or '.join(names)}; name it with --eot-token)")

    def encode_batch(self, docs):
        # add_special_tokens=False: no BOS/EOS from the tokenizer's post-processor; the
        # end-of-text token we add is the only separator.
        encodings = self.tok.encode_batch(docs, add_special_tokens=False)
        return [np.asarray(e.ids, dtype=np.uint32) for e in encodings]

    def save(self, path):
        write_text(path, self.tok.to_str() + "\n")


class SentencePieceTokenizer:
    kind, file_name = "sentencepiece", "tokenizer.model"

    def __init__(self, processor, model_bytes, source):
        self.sp = processor
        self.model_bytes = model_bytes
        self.vocab_size = processor.get_piece_size()
        self.eot = processor.eos_id()
        if self.eot < 0:
            fail(f"{source}: the SentencePiece model has no eos token (end-of-text)")
        self.eot_name = processor.id_to_piece(self.eot)

    @classmethod
    def load(cls, path):
        spm = import_optional("sentencepiece")
        with open(path, "rb") as f:
            data = f.read()
        try:
            processor = spm.SentencePieceProcessor(model_proto=data)
        except Exception as e:  # RuntimeError or OSError, depending on the version
            fail(f"{path}: not a SentencePiece model ({one_line(e)})")
        return cls(processor, data, path)

    def encode_batch(self, docs):
        ids = self.sp.encode(docs, num_threads=os.cpu_count() or 1)
        return [np.asarray(x, dtype=np.uint32) for x in ids]

    def save(self, path):
        write_bytes(path, self.model_bytes)


def load_tokenizer(spec, eot_token):
    if spec == "bytes":
        return BytesTokenizer()
    if not os.path.isfile(spec):
        fail(f"{spec}: no such tokenizer file")
    if spec.endswith(".json"):
        return HuggingFaceTokenizer.load(spec, eot_token)
    if spec.endswith(".model"):
        return SentencePieceTokenizer.load(spec)
    fail(f"{spec}: a tokenizer is 'bytes', a Hugging Face .json or a SentencePiece .model")


def train_bpe(paths, vocab_size):
    tokenizers = import_optional("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, trainers
    tok = tokenizers.Tokenizer(models.BPE())
    # GPT-2's byte-level setup: every byte is in the alphabet, so any text encodes.
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOT_NAMES[0]],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts(paths), trainer=trainer, length=len(paths))
    return HuggingFaceTokenizer(tok, EOT_NAMES[0])


def train_sentencepiece(paths, vocab_size):
    spm = import_optional("sentencepiece")

    def lines():
        # SentencePiece learns from sentences: one line each (a whole file would pass its
        # maximum sentence length and be dropped).
        for text in texts(paths):
            for line in text.splitlines():
                if line.strip():
                    yield line

    model = io.BytesIO()
    try:
        train_spm(spm, lines(), model, vocab_size)
    except RuntimeError as e:  # e.g. a vocabulary larger than the corpus can fill
        fail(f"sentencepiece training failed: {one_line(e)}")
    data = model.getvalue()
    return SentencePieceTokenizer(spm.SentencePieceProcessor(model_proto=data), data, "trained")


def train_spm(spm, lines, model, vocab_size):
    spm.SentencePieceTrainer.train(
        sentence_iterator=lines, model_writer=model, vocab_size=vocab_size, model_type="bpe",
        # Text as it is (code included): no NFKC, no collapsing of spaces; bytes outside the
        # vocabulary become byte tokens rather than <unk>, so decoding gives the text back.
        normalization_rule_name="identity", remove_extra_whitespaces=False, byte_fallback=True,
        allow_whitespace_only_pieces=True, split_digits=True,
        # Newlines never reach the trainer (it is fed lines): a piece of their own keeps them
        # one token instead of a byte token.
        user_defined_symbols=["\n"],
        # The documented ids: unk 0, bos 1, eos 2 (end-of-text), no pad.
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        input_sentence_size=2_000_000, shuffle_input_sentence=True,
        num_threads=os.cpu_count() or 1, minloglevel=2)


def one_line(error):
    return " ".join(str(error).split()) or type(error).__name__


# --- Instructions ------------------------------------------------------------------------

DEFAULT_TEMPLATE = "### Instruction:\n{prompt}\n\n### Response:\n"


def read_examples(paths):
    """(prompt, response) pairs from JSONL files, in file and line order."""
    examples = []
    for path in paths:
        text = read_document(path)
        if text is None:
            fail(f"{path}: not UTF-8 text")
        # "\n" alone ends a line: JSON may hold U+2028 and the like unescaped, which splitlines splits on.
        for n, line in enumerate(text.split("\n"), 1):
            if not line.strip():
                continue
            where = f"{path}:{n}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                fail(f"{where}: not JSON ({e.msg})")
            if isinstance(obj, dict) and "prompt" in obj and "response" in obj:
                prompt, response = obj["prompt"], obj["response"]
            elif isinstance(obj, dict) and "instruction" in obj and "output" in obj:
                prompt, extra, response = obj["instruction"], obj.get("input") or "", obj["output"]
                if not isinstance(extra, str):
                    fail(f"{where}: the input must be a string")
                if isinstance(prompt, str) and extra:
                    prompt = prompt + "\n\n" + extra  # Alpaca's input is context for its instruction
            else:
                fail(f'{where}: an example is {{"prompt": ..., "response": ...}} '
                     '(or Alpaca\'s {"instruction": ..., "input": ..., "output": ...})')
            if not isinstance(prompt, str) or not isinstance(response, str):
                fail(f"{where}: the prompt and the response must be strings")
            if not response:
                fail(f"{where}: the response is empty (nothing to train on)")
            examples.append((prompt, response))
    return examples


def pack_examples(examples, tokenizer, template, window):
    """Tokens and loss mask of the examples packed whole into windows of `window` tokens.

    Window k is tokens [k*window, (k+1)*window] (window + 1 tokens: the last is the next
    window's first, as the trainer reads them). Each window starts with end-of-text, and each
    example is end-of-text + prompt + response; the token after an example's response (the next
    example's end-of-text, or filling) is an end-of-text the model learns to end its answer
    with. Returns (tokens uint32, mask uint8, windows, left out as too long)."""
    prompts = tokenizer.encode_batch([template.replace("{prompt}", p) for p, _ in examples])
    responses = tokenizer.encode_batch([r for _, r in examples])
    eot = tokenizer.eot
    tokens, response, windows, used, too_long = [], [], 0, 0, 0

    def fill(n):  # end-of-text tokens after a window's last example
        tokens.append(np.full(n, eot, dtype=np.uint32))
        response.append(np.zeros(n, dtype=np.uint8))

    for (_, text), p, r in zip(examples, prompts, responses):
        if len(r) == 0:
            fail(f"the response {text[:40]!r} encodes to no token (the tokenizer drops it): nothing to train on")
        n = 1 + len(p) + len(r)
        if n > window:
            too_long += 1
            continue
        if used + n > window:  # the example opens the next window
            fill(window - used)
            windows, used = windows + 1, 0
        tokens += [np.asarray([eot], dtype=np.uint32), p.astype(np.uint32, copy=False), r.astype(np.uint32, copy=False)]
        response += [np.zeros(1 + len(p), dtype=np.uint8), np.ones(len(r), dtype=np.uint8)]
        used += n
    if used == 0:  # no example fits
        return np.zeros(0, np.uint32), np.zeros(0, np.uint8), 0, too_long
    fill(window - used + 1)  # + 1: the last window's (window + 1)-th token
    tokens, response = np.concatenate(tokens), np.concatenate(response)
    mask = response.copy()
    mask[1:] |= response[:-1] & (response[1:] == 0)  # the end-of-text after a response
    return tokens, mask, windows + 1, too_long


def write_packed(out, split, tokens, mask, window, shard_tokens, fmt):
    """Shards of whole windows, each followed by its mask; returns the shard names."""
    per_shard = max(1, shard_tokens // window)
    windows = (len(tokens) - 1) // window
    names = []
    for first in range(0, windows, per_shard):
        last = min(windows, first + per_shard)
        part = slice(first * window, last * window + 1)  # + 1: the last window's last token
        name = f"{split}_{len(names):06d}.bin"
        write_shard(os.path.join(out, name), tokens[part], fmt)
        write_atomic(os.path.join(out, mask_name(name)), lambda f, m=mask[part]: np.save(f, m))
        names.append(name)
    return names


def mask_name(shard):
    return shard[:-len(".bin")] + ".mask.npy"


# --- Output ------------------------------------------------------------------------------

def write_atomic(path, write):
    """Writes through a temporary file in the same folder, renamed into place."""
    folder = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would keep other users from reading the data
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_bytes(path, data):
    write_atomic(path, lambda f: f.write(data))


def write_text(path, text):
    write_bytes(path, text.encode("utf-8"))


def write_shard(path, tokens, fmt):
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[0], header[1], header[2] = fmt["magic"], fmt["version"], len(tokens)

    def write(f):
        f.write(header.tobytes())
        f.write(tokens.astype(fmt["dtype"], copy=False).tobytes())

    write_atomic(path, write)


class ShardWriter:
    """Collects a split's tokens and writes a shard each time --shard-tokens are in."""

    def __init__(self, out, split, shard_tokens, fmt):
        self.out, self.split, self.shard_tokens, self.fmt = out, split, shard_tokens, fmt
        self.pending, self.pending_count = [], 0
        self.files, self.total = [], 0

    def add(self, tokens):
        self.pending.append(tokens)
        self.pending_count += len(tokens)
        self.total += len(tokens)
        while self.pending_count >= self.shard_tokens:
            joined = np.concatenate(self.pending)
            self._write(joined[:self.shard_tokens])
            rest = joined[self.shard_tokens:]
            self.pending, self.pending_count = ([rest] if len(rest) else []), len(rest)

    def close(self):
        if self.pending_count:
            self._write(np.concatenate(self.pending))
        self.pending, self.pending_count = [], 0

    def _write(self, tokens):
        name = f"{self.split}_{len(self.files):06d}.bin"
        write_shard(os.path.join(self.out, name), tokens, self.fmt)
        self.files.append(name)


def tokenize_split(paths, tokenizer, writer):
    eot = np.asarray([tokenizer.eot], dtype=np.uint32)
    for docs in batches(paths):
        for ids in tokenizer.encode_batch(docs):
            writer.add(eot)
            writer.add(ids.astype(np.uint32, copy=False))
    writer.close()


def remove_stale(out, keep):
    """Shards a previous, longer run left in DIR would be read as part of this one, and its
    tokenizer of the other kind would contradict meta.json."""
    for name in os.listdir(out):
        ours = (re.fullmatch(r"(train|val)_\d{6}\.(bin|mask\.npy)", name)
                or name in ("tokenizer.json", "tokenizer.model", "prompt_template.txt"))
        if ours and name not in keep:
            os.unlink(os.path.join(out, name))


# --- Main --------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", metavar="INPUT", help="text files or folders")
    ap.add_argument("--out", required=True, metavar="DIR", help="folder for the shards (created if missing)")
    ap.add_argument("--tokenizer", default=None, metavar="bytes|FILE.json|FILE.model",
                    help="tokenizer to use (default: bytes)")
    ap.add_argument("--train-tokenizer", choices=("bpe", "sentencepiece"), help="train a tokenizer on the train split")
    ap.add_argument("--vocab-size", type=int, metavar="N", help="vocabulary of the trained tokenizer")
    ap.add_argument("--eot-token", metavar="TEXT", help="end-of-text token of a tokenizer.json")
    val = ap.add_mutually_exclusive_group()
    val.add_argument("--val-fraction", type=float, default=0.05, metavar="F",
                     help="share of documents for val (default 0.05)")
    val.add_argument("--val-docs", type=int, metavar="N", help="number of documents for val")
    ap.add_argument("--shard-tokens", type=int, default=100_000_000, metavar="N",
                    help="tokens per shard (default 100000000, as llm.c's fineweb.py)")
    ap.add_argument("--glob", metavar="PATTERN", help="file names to take from folders (default: every file)")
    ap.add_argument("--seed", type=int, default=1337, help="document shuffle seed (default 1337)")
    ap.add_argument("--instructions", action="store_true", help="INPUT is JSONL prompt/response examples")
    ap.add_argument("--pack", type=int, metavar="T", help="--instructions: window length (the --seq_len to train with)")
    ap.add_argument("--template", metavar="TEXT", help="--instructions: the prompt's text around {prompt}")
    args = ap.parse_args(argv)

    if args.train_tokenizer and args.tokenizer:
        ap.error("--tokenizer and --train-tokenizer exclude each other")
    if args.train_tokenizer and args.vocab_size is None:
        ap.error("--train-tokenizer needs --vocab-size")
    if args.vocab_size is not None and not args.train_tokenizer:
        ap.error("--vocab-size is for --train-tokenizer")
    if args.train_tokenizer == "bpe" and args.vocab_size is not None and args.vocab_size < 257:
        ap.error("--vocab-size for bpe must be 257 or more (256 bytes and <|endoftext|>)")
    if args.train_tokenizer == "sentencepiece" and args.vocab_size is not None and args.vocab_size < 260:
        ap.error("--vocab-size for sentencepiece must be 260 or more (256 byte tokens, <unk>, <s>, </s>, \\n)")
    if args.vocab_size is not None and args.vocab_size > 2**32:
        ap.error("--vocab-size must fit uint32 tokens")
    if not 0 <= args.val_fraction < 1:
        ap.error("--val-fraction must be in [0, 1)")
    if args.val_docs is not None and args.val_docs < 0:
        ap.error("--val-docs must be 0 or more")
    if not 1 <= args.shard_tokens < 2**31:
        ap.error("--shard-tokens must be in [1, 2^31) (the header's count is an int32)")
    if args.instructions:
        if args.pack is None:
            ap.error("--instructions needs --pack T, the --seq_len the model will train with")
        if args.pack < 2:
            ap.error("--pack must be 2 or more")
        if args.train_tokenizer:
            ap.error("--instructions takes the model's own tokenizer (--tokenizer), not a trained one")
        if args.template is None:
            args.template = DEFAULT_TEMPLATE
        if args.template.count("{prompt}") != 1:
            ap.error("--template must hold {prompt} once (where the prompt goes)")
    elif args.pack is not None or args.template is not None:
        ap.error("--pack and --template are for --instructions")
    if args.tokenizer is None:
        args.tokenizer = "bytes"
    return args


def tokenizer_meta(tokenizer, source, fmt):
    """meta.json's tokenizer and shard-format fields, the same for text and instructions."""
    return {
        "tokenizer": tokenizer.kind,
        "tokenizer_file": tokenizer.file_name,
        "tokenizer_source": source,
        "vocab_size": tokenizer.vocab_size,
        "eot": tokenizer.eot,
        "format": {"magic": fmt["magic"], "version": fmt["version"], "token_bytes": fmt["dtype"].itemsize,
                   "header_bytes": HEADER_INTS * 4},
    }


def input_paths(args):
    """The input files, after checking that --out can be a folder."""
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        fail(f"{args.out}: exists and is not a folder")
    paths = find_files(args.inputs, args.glob)
    if not paths:
        fail("no input files" + (f" match --glob '{args.glob}'" if args.glob else ""))
    return paths


def run(args):
    started = time.monotonic()
    out = args.out
    # Everything that can fail is checked before the first file is written.
    paths = input_paths(args)
    docs, skipped, corpus_bytes = usable_documents(paths)
    if not docs:
        fail(f"none of the {len(paths)} input file(s) is non-empty UTF-8 text")
    train, val = split_documents(docs, args.seed, args.val_fraction, args.val_docs)
    tokenizer = None if args.train_tokenizer else load_tokenizer(args.tokenizer, args.eot_token)

    # Training keeps its model in memory, so a corpus it refuses also leaves nothing behind.
    if args.train_tokenizer == "bpe":
        tokenizer = train_bpe(train, args.vocab_size)
    elif args.train_tokenizer == "sentencepiece":
        tokenizer = train_sentencepiece(train, args.vocab_size)
    trained_at = time.monotonic()

    os.makedirs(out, exist_ok=True)
    tokenizer.save(os.path.join(out, tokenizer.file_name))

    fmt = FORMAT_U16 if tokenizer.vocab_size <= 2**16 else FORMAT_U32
    writers = {}
    for split, split_paths in (("train", train), ("val", val)):
        writers[split] = ShardWriter(out, split, args.shard_tokens, fmt)
        tokenize_split(split_paths, tokenizer, writers[split])
    remove_stale(out, writers["train"].files + writers["val"].files + [tokenizer.file_name])

    if args.train_tokenizer:
        source = f"trained {args.train_tokenizer}"
    else:
        source = args.tokenizer if args.tokenizer == "bytes" else os.path.abspath(args.tokenizer)
    meta = {
        **tokenizer_meta(tokenizer, source, fmt),
        "train_tokens": writers["train"].total,
        "val_tokens": writers["val"].total,
        "files": {"train": writers["train"].files, "val": writers["val"].files},
        "documents": {"train": len(train), "val": len(val), "skipped_not_utf8": skipped["not_utf8"],
                      "skipped_empty": skipped["empty"]},
        "corpus_bytes": corpus_bytes,
        "seed": args.seed,
        "shard_tokens": args.shard_tokens,
        "glob": args.glob,
        "python": sys.version,
        "inputs": [os.path.abspath(p) for p in args.inputs],
    }
    write_text(os.path.join(out, "meta.json"), json.dumps(meta, indent=1) + "\n")

    elapsed = time.monotonic() - started
    print(f"{PROG}: {len(docs):,} documents, {corpus_bytes:,} bytes "
          f"(skipped: {skipped['not_utf8']} not UTF-8, {skipped['empty']} empty)")
    if args.train_tokenizer:
        print(f"  trained {args.train_tokenizer} in {trained_at - started:.1f}s")
    print(f"  tokenizer: {source}, vocab {tokenizer.vocab_size:,}, end-of-text {tokenizer.eot} "
          f"-> {tokenizer.file_name} ({fmt['dtype'].itemsize * 8}-bit tokens)")
    for split, count in (("train", len(train)), ("val", len(val))):
        w = writers[split]
        files = ", ".join(w.files) if len(w.files) <= 3 else f"{w.files[0]} .. {w.files[-1]}"
        print(f"  {split}: {count:,} documents, {w.total:,} tokens in {len(w.files)} file(s)"
              + (f": {files}" if files else ""))
    print(f"  wrote {out} in {elapsed:.1f}s")


def run_instructions(args):
    started = time.monotonic()
    out = args.out
    # Everything is read, tokenized and packed in memory before the first file is written.
    paths = input_paths(args)
    examples = read_examples(paths)
    if not examples:
        fail(f"none of the {len(paths)} input file(s) holds an example")
    tokenizer = load_tokenizer(args.tokenizer, args.eot_token)
    splits = dict(zip(("train", "val"), split_documents(examples, args.seed, args.val_fraction, args.val_docs)))
    packed = {split: pack_examples(ex, tokenizer, args.template, args.pack) for split, ex in splits.items()}
    if packed["train"][2] == 0:
        fail(f"no train example fits in --pack {args.pack} tokens (a longer --pack, or shorter examples)")

    os.makedirs(out, exist_ok=True)
    tokenizer.save(os.path.join(out, tokenizer.file_name))
    write_text(os.path.join(out, "prompt_template.txt"), args.template)
    fmt = FORMAT_U16 if tokenizer.vocab_size <= 2**16 else FORMAT_U32
    files = {}
    for split, (tokens, mask, windows, _) in packed.items():
        files[split] = write_packed(out, split, tokens, mask, args.pack, args.shard_tokens, fmt) if windows else []
    kept = [name for names in files.values() for name in names]
    remove_stale(out, kept + [mask_name(n) for n in kept] + [tokenizer.file_name, "prompt_template.txt"])

    source = args.tokenizer if args.tokenizer == "bytes" else os.path.abspath(args.tokenizer)
    counts = {split: {"examples": len(splits[split]) - packed[split][3], "too_long": packed[split][3],
                      "windows": packed[split][2], "tokens": len(packed[split][0]),
                      "loss_tokens": int(packed[split][1].sum())} for split in packed}
    meta = {
        **tokenizer_meta(tokenizer, source, fmt),
        "packed_seq_len": args.pack,
        "prompt_template": args.template,
        "train_tokens": counts["train"]["tokens"],
        "val_tokens": counts["val"]["tokens"],
        "files": files,
        "examples": counts,
        "seed": args.seed,
        "shard_tokens": args.shard_tokens,
        "python": sys.version,
        "inputs": [os.path.abspath(p) for p in args.inputs],
    }
    write_text(os.path.join(out, "meta.json"), json.dumps(meta, indent=1) + "\n")

    print(f"{PROG}: {len(examples):,} examples packed into windows of {args.pack} tokens")
    print(f"  tokenizer: {source}, vocab {tokenizer.vocab_size:,}, end-of-text {tokenizer.eot} "
          f"-> {tokenizer.file_name}")
    for split, n in counts.items():
        print(f"  {split}: {n['examples']:,} examples ({n['too_long']} left out as longer than {args.pack}), "
              f"{n['windows']:,} windows, {n['loss_tokens']:,} of {n['tokens']:,} tokens trained on")
    print(f"  wrote {out} in {time.monotonic() - started:.1f}s; train with --seq_len {args.pack}")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if any(a == "--text-column" or a.startswith("--text-column=") for a in argv):
        # Labelled texts for a classifier: tools/labelled_text.py.
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import labelled_text
        return labelled_text.main(argv)
    args = parse_args(argv)
    try:
        run_instructions(args) if args.instructions else run(args)
    except Failure as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
