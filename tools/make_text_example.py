#!/usr/bin/env python3
"""A labelled-text example for the README's text-classifier walk: made here, nothing downloaded.

    python tools/make_text_example.py --out DIR [--texts 1000] [--layers 4 --width 256]

Writes
  DIR/reviews.csv      --texts short product reviews (columns text,label; labels negative,
                       neutral, positive), built from phrase lists with a seeded generator;
  DIR/new_reviews.csv  20 more, without labels (for `gputrain infer`);
  DIR/bert/            a BERT-style Hugging Face model folder: config.json (--layers layers,
                       --width wide, 4 heads per 256), model.safetensors (random weights, as
                       from_config makes them) and a WordPiece tokenizer trained on the reviews
                       (tokenizer.json, tokenizer_config.json), which AutoTokenizer reads.
A real fine-tune starts from a pretrained folder instead (save_pretrained's files); this one
stands in for it so the walk runs offline. Needs transformers and tokenizers (.pydeps-text).
"""
import argparse
import csv
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".pydeps-text"))

THINGS = ["blender", "kettle", "backpack", "lamp", "keyboard", "jacket", "phone case", "coffee grinder", "tent",
          "desk chair", "water bottle", "headphones", "toaster", "umbrella", "monitor stand"]
OPENERS = ["I bought this {thing} last month.", "Got the {thing} as a gift.", "We use the {thing} every day.",
           "The {thing} arrived on Tuesday.", "Ordered a {thing} for my brother.", ""]
SAYS = {
    "positive": ["It works perfectly", "Absolutely love it", "Great value for the price", "Best purchase this year",
                 "Sturdy and well made", "Exceeded my expectations", "Would happily buy it again"],
    "negative": ["It broke after two days", "Total waste of money", "Stopped working within a week",
                 "Cheap and flimsy", "Very disappointed with it", "Returned it immediately", "Would not recommend it"],
    "neutral": ["It does the job", "Nothing special but fine", "About what I expected", "It is okay for the price",
                "Average quality overall", "Neither good nor bad", "It works, more or less"],
}
ENDINGS = [".", "!", ", honestly.", " so far.", ".", " to be fair."]


def review(rng, label):
    opener = rng.choice(OPENERS).format(thing=rng.choice(THINGS))
    text = f"{rng.choice(SAYS[label])}{rng.choice(ENDINGS)}"
    return f"{opener} {text}".strip()


def write_csv(path, rows, header):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def make_bert(folder, texts, layers, width):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast
    import torch

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=1000, special_tokens=specials))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", model_max_length=512)
    fast.save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=width, num_hidden_layers=layers,
                        num_attention_heads=max(1, width // 64), intermediate_size=4 * width,
                        max_position_embeddings=512, num_labels=3)
    BertForSequenceClassification(config).save_pretrained(folder)
    return tok.get_vocab_size()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--texts", type=int, default=1000)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)
    labels = sorted(SAYS)
    rows = [(review(rng, label), label) for label in (rng.choice(labels) for _ in range(args.texts))]
    write_csv(os.path.join(args.out, "reviews.csv"), rows, ["text", "label"])
    new = [(review(rng, rng.choice(labels)),) for _ in range(20)]
    write_csv(os.path.join(args.out, "new_reviews.csv"), new, ["text"])
    vocab = make_bert(os.path.join(args.out, "bert"), [t for t, _ in rows], args.layers, args.width)
    print(f"wrote {args.out}/reviews.csv ({len(rows)} labelled reviews), new_reviews.csv ({len(new)} without labels), "
          f"bert/ ({args.layers} layers, width {args.width}, WordPiece vocabulary {vocab}, random weights)")


if __name__ == "__main__":
    main()
