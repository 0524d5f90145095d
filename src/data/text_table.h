// --dataset text straight from a table of texts: a CSV, TSV or JSONL file read and tokenized in
// gputrain by a SentencePiece .model (DeBERTa-v2/v3, T5), into the same arrays
// tools/prepare_text.py --text-column writes to an .npz. Other tokenizers (BERT's WordPiece,
// GPT-2's and RoBERTa's byte-level BPE in a tokenizer.json; ALBERT's and XLM-R's SentencePiece,
// which lowercase or shift ids) go through prepare_text.py, where transformers applies them.
//
// Each text is encoded as the model's Hugging Face tokenizer encodes it for the model:
//   - the folder's tokenizer_config.json (else its config.json's model_type) names the
//     tokenizer: DeBERTa-v2/v3 gives [CLS] A [SEP] (pairs: [CLS] A [SEP] B [SEP], token types 1
//     from B on), T5 gives A </s> (A </s> B </s>); any other is refused, pointing at
//     prepare_text.py, and so are the options that change the text first (do_lower_case);
//   - a .model alone, with neither file beside it: its own bos and eos around A (and eos after B).
// A text holding a special token's text ("[MASK]") is refused: Hugging Face reads it as that
// token, SentencePiece as characters. A text longer than --max_length is cut (pairs: the longer
// text first, as the tokenizers library's longest_first) and counted, never an error.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/npy.h"

namespace gputrain {

struct TextTableOptions {
  std::vector<std::string> text_columns;   // one, or two for text pairs
  std::vector<std::string> label_columns;  // none (new texts), one (classes or a regression
                                           // target), or several of 0/1 (multi-label)
  std::string tokenizer;                   // the SentencePiece .model
  int64_t max_length = 512;                // tokens per text, special tokens included
};

// What a table's labels are. A test split is read as its training split's kind and classes.
struct TableLabels {
  std::string kind = "none";  // "ids" (whole numbers), "names", "regression", "multilabel", "none"
  std::vector<std::string> classes;  // class names in id order; multi-label: the label columns
};

struct TokenizedTable {
  // input_ids int32 [N, L] (padding 0), lengths int32 [N], token_type_ids uint8 [N, L] (pairs),
  // labels: int64 [N] (classes), float32 [N] (regression) or float32 [N, K] (multi-label).
  std::map<std::string, NpyArray> arrays;
  TableLabels labels;
  int64_t truncated = 0, empty = 0;  // texts cut to --max_length; texts with no characters
};

// Reads and tokenizes `path` (.csv, .tsv or .jsonl). `train`: the training split's labels, for
// a test split, which may lack every label column (new texts for `infer`: no labels). Anything malformed is a usage error naming the file and line: a text that is
// not UTF-8, a missing column, an empty label, a label outside the training classes, a
// multi-label value other than 0 or 1, a text that encodes to no tokens.
TokenizedTable tokenize_table(const std::string& path, const TextTableOptions& options, const TableLabels* train);

// Whether `path` names a table of texts (by its extension).
bool is_text_table(const std::string& path);

}  // namespace gputrain
