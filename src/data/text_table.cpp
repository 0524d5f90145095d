// A table of texts tokenized by a SentencePiece model (text_table.h).
#include "data/text_table.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/text.h"
#include "data/csv.h"
#include "text/sentencepiece.h"

namespace gputrain {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPrepareHint =
    "tokenize it with tools/prepare_text.py TEXTS.csv --text-column text --label-column label --tokenizer MODEL_DIR "
    "--out DIR, and train on DIR/train.npz (README: \"Fine-tune a text classifier\")";

bool ends_with(const std::string& s, const char* tail) {
  const size_t n = std::char_traits<char>::length(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

// The offset of the first byte of `s` that does not belong to UTF-8 (overlong forms, surrogates
// and code points past U+10FFFF included), or npos.
size_t utf8_error(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return i;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d >> 6) != 0x2) return i;
      cp = (cp << 6) | (d & 0x3F);
    }
    const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += n;
  }
  return std::string_view::npos;
}

// The cells of the named columns, row by row, and the file line each row starts on. The last
// `optional` names may all be missing (new texts without their labels): `columns` then stops
// before them.
struct Cells {
  std::vector<int64_t> lines;
  std::vector<std::vector<std::string>> columns;  // columns[c][row]
};

// The names a file lacks: none, or (where allowed) exactly the optional ones; else a usage error.
size_t kept_names(const std::string& where, const std::vector<std::string>& names, size_t optional,
                  const std::vector<bool>& present, const std::vector<std::string>& have) {
  size_t lacking_optional = 0;
  for (size_t c = 0; c < names.size(); ++c) {
    if (present[c]) continue;
    if (c >= names.size() - optional) {
      ++lacking_optional;
      continue;
    }
    throw usage_error(fmt::format("{}: no column '{}'{}; its columns are {}", where, names[c], did_you_mean(names[c], have),
                                  join(have, ", ")),
                      "name the columns with --text_column and --label_column");
  }
  if (lacking_optional == 0) return names.size();
  if (lacking_optional < optional) {
    for (size_t c = names.size() - optional; c < names.size(); ++c)
      if (!present[c])
        throw usage_error(fmt::format("{}: no label column '{}', though it has the others", where, names[c]),
                          "give every --label_column, or none (new texts)");
  }
  return names.size() - optional;
}

Cells read_csv_cells(const std::string& path, const std::vector<std::string>& names, size_t optional) {
  const CsvTable t = read_csv(path);
  std::vector<bool> present;
  for (const auto& name : names) present.push_back(t.column_index(name) >= 0);
  const size_t kept = kept_names(path, names, optional, present, t.columns);
  Cells out;
  out.columns.resize(kept);
  for (size_t c = 0; c < kept; ++c) {
    const int64_t at = t.column_index(names[c]);
    for (int64_t r = 0; r < t.rows(); ++r) out.columns[c].emplace_back(t.cell(r, at));
  }
  for (int64_t r = 0; r < t.rows(); ++r) out.lines.push_back(t.line(r));
  return out;
}

Cells read_jsonl_cells(const std::string& path, const std::vector<std::string>& names, size_t optional) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw usage_error(path + ": cannot be read", "check --train_file / --test_file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);  // a byte-order mark
  Cells out;
  size_t kept = names.size();
  int64_t line = 0;
  for (size_t begin = 0; begin <= text.size();) {
    // "\n" alone ends a line: U+2028 and its kin are legal inside a JSON string.
    const size_t end = std::min(text.find('\n', begin), text.size());
    const std::string_view row(text.data() + begin, end - begin);
    ++line;
    begin = end + 1;
    if (row.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = fmt::format("{}:{}", path, line);
    if (const size_t bad = utf8_error(row); bad != std::string_view::npos)
      throw usage_error(fmt::format("{}: not UTF-8 (byte 0x{:02x})", where, static_cast<unsigned char>(row[bad])),
                        "save the file as UTF-8");
    const auto object = nlohmann::json::parse(std::string(row), nullptr, false);
    if (!object.is_object()) throw usage_error(where + ": not a JSON object", "write one object per line");
    if (out.lines.empty()) {  // the first object decides whether the labels are there
      std::vector<bool> present;
      std::vector<std::string> have;
      for (const auto& name : names) present.push_back(object.contains(name));
      for (const auto& [key, value] : object.items()) have.push_back(key);
      kept = kept_names(where, names, optional, present, have);
      out.columns.resize(kept);
    }
    for (size_t c = 0; c < kept; ++c) {
      const auto it = object.find(names[c]);
      if (it == object.end())
        throw usage_error(fmt::format("{}: no key '{}'", where, names[c]), "name the keys with --text_column and --label_column");
      if (it->is_string())
        out.columns[c].push_back(it->get<std::string>());
      else if (it->is_number())
        out.columns[c].push_back(it->dump());
      else
        throw usage_error(fmt::format("{}: '{}' holds {}, not text or a number", where, names[c], it->type_name()),
                          "give texts as strings and labels as numbers or names");
    }
    out.lines.push_back(line);
  }
  if (out.lines.empty()) throw usage_error(path + ": holds no texts", "give one JSON object per line");
  return out;
}

// How a text (or a pair) becomes the model's input: its special tokens and token types.
struct Encoder {
  std::shared_ptr<const SentencePieceModel> model;
  int64_t before = -1, after = -1;  // before the first text; after each text (-1 = none)
  bool second_type_one = true;      // token type 1 for the second text and its end (T5 has none)
  std::string name;                 // the tokenizer class, for messages
  // The special tokens' texts: Hugging Face's tokenizer matches them inside a text as one token
  // each, which SentencePiece does not, so a text holding one is refused.
  std::vector<std::string> specials;
};

// A special token named in tokenizer_config.json ("[CLS]" or {"content": "[CLS]"}), or `fallback`.
std::string special_token(const nlohmann::json& config, const char* key, const char* fallback) {
  const auto it = config.find(key);
  if (it == config.end()) return fallback;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return fallback;
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return nullptr;
  auto json = nlohmann::json::parse(in, nullptr, false);
  if (!json.is_object()) throw usage_error(path.string() + ": not JSON", "use the model folder's own file");
  return json;
}

Encoder load_encoder(const std::string& tokenizer) {
  std::string model_path = tokenizer;
  std::error_code ec;
  const bool folder = fs::is_directory(tokenizer, ec);
  if (folder) {  // a Hugging Face folder: its SentencePiece model (XLM-R's sentencepiece.bpe.model is not one of them)
    model_path.clear();
    for (const char* name : {"spm.model", "spiece.model", "tokenizer.model"})
      if (fs::is_regular_file(fs::path(tokenizer) / name, ec)) {
        model_path = (fs::path(tokenizer) / name).string();
        break;
      }
    if (model_path.empty())
      throw usage_error("--tokenizer " + tokenizer + ": no spm.model, spiece.model or tokenizer.model in the folder; "
                        "gputrain tokenizes a table itself with DeBERTa-v2/v3's and T5's SentencePiece models alone",
                        kPrepareHint);
  } else if (!is_sentencepiece_file(tokenizer)) {
    throw usage_error("--tokenizer " + (tokenizer.empty() ? std::string("(none)") : tokenizer) +
                          ": --dataset text tokenizes a table of texts with a SentencePiece .model (DeBERTa-v2/v3, T5); "
                          "a tokenizer.json (BERT's WordPiece, GPT-2's BPE) goes through prepare_text.py",
                      kPrepareHint);
  }
  Encoder e;
  e.model = std::make_shared<SentencePieceModel>(model_path);
  const auto piece = [&](const std::string& name, const std::string& what) {
    const int64_t id = e.model->piece_id(name);
    if (id < 0)
      throw usage_error(fmt::format("{}: its {} '{}' is not a piece of the model", model_path, what, name),
                        "use the .model of the model's own folder");
    return id;
  };
  // The tokenizer's class: tokenizer_config.json's, else the model's type in config.json.
  const fs::path dir = fs::path(model_path).parent_path();
  auto config = read_json(dir / "tokenizer_config.json");
  const bool configured = !config.is_null();
  if (!configured) config = nlohmann::json::object();
  std::string given = config.value("tokenizer_class", std::string());
  if (given.empty()) {
    const auto model = read_json(dir / "config.json");
    const std::string type = model.is_null() ? "" : model.value("model_type", std::string());
    given = type == "deberta-v2" ? "DebertaV2Tokenizer" : type == "t5" || type == "mt5" ? "T5Tokenizer" : "";
    if (given.empty() && (folder || !model.is_null() || configured))
      throw usage_error(fmt::format("{}: neither its tokenizer_config.json nor its config.json says a DeBERTa-v2/v3 or T5 "
                                    "tokenizer{}; others add ids or templates of their own (XLM-R shifts the .model's ids)",
                                    dir.string(), type.empty() ? "" : " (model_type '" + type + "')"),
                        kPrepareHint);
  }
  if (given.empty()) {  // a .model alone: its own start and end
    e.before = e.model->start_of_text();
    e.after = e.model->end_of_text();
    e.name = "the .model alone";
    return e;
  }
  e.name = given;
  std::string name = given;
  if (ends_with(name, "Fast")) name.resize(name.size() - 4);
  const auto refuse_option = [&](const char* key) {
    if (config.value(key, false))
      throw usage_error(fmt::format("{}: {} is on, which the tokenizer applies before SentencePiece", (dir / "tokenizer_config.json").string(), key),
                        kPrepareHint);
  };
  if (name == "DebertaV2Tokenizer") {
    refuse_option("do_lower_case");
    refuse_option("split_by_punct");
    e.before = piece(special_token(config, "cls_token", "[CLS]"), "cls_token");
    e.after = piece(special_token(config, "sep_token", "[SEP]"), "sep_token");
    for (const char* key : {"cls_token", "sep_token", "pad_token", "unk_token", "mask_token"})
      e.specials.push_back(special_token(config, key, ""));
  } else if (name == "T5Tokenizer") {
    e.after = piece(special_token(config, "eos_token", "</s>"), "eos_token");
    e.second_type_one = false;
    for (const char* key : {"eos_token", "pad_token", "unk_token"}) e.specials.push_back(special_token(config, key, ""));
  } else {
    throw usage_error(fmt::format("{}: tokenizer_class '{}': gputrain encodes DeBERTa-v2/v3 and T5 SentencePiece tokenizers "
                                  "itself; others normalize the text or add ids of their own (XLM-R shifts the .model's ids)",
                                  (dir / "tokenizer_config.json").string(), given),
                      kPrepareHint);
  }
  e.specials.erase(std::remove(e.specials.begin(), e.specials.end(), std::string()), e.specials.end());
  return e;
}

// Lengths of the first and second text once their pair fits `budget` tokens, as the tokenizers
// library's longest_first cuts them: the shorter keeps its length when it fits in half the
// budget and the longer takes the rest; otherwise both get half (the second the odd token).
std::pair<size_t, size_t> longest_first(size_t n1, size_t n2, size_t budget) {
  if (n1 + n2 <= budget) return {n1, n2};
  const bool swap = n1 > n2;
  size_t shorter = std::min(n1, n2), longer;
  longer = shorter > budget ? shorter : std::max(shorter, budget - shorter);
  if (shorter + longer > budget) {
    shorter = budget / 2;
    longer = shorter + budget % 2;
  }
  return swap ? std::pair{longer, shorter} : std::pair{shorter, longer};
}

// The text as a number ("nan" and "inf" too), or nothing.
std::optional<double> parse_number(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

std::optional<double> finite_number(const std::string& text) {
  const auto v = parse_number(text);
  return v && std::isfinite(*v) ? v : std::nullopt;
}

bool whole(double v) { return v == std::floor(v); }

// The labels of a split as an array; for the training split (train null) their kind and classes too.
NpyArray encode_labels(const std::string& path, const Cells& cells, size_t first, size_t count, TableLabels& labels,
                       const TableLabels* train, const std::vector<std::string>& names) {
  const size_t n = cells.lines.size();
  const auto where = [&](size_t row) { return fmt::format("{}:{}", path, cells.lines[row]); };
  for (size_t c = first; c < first + count; ++c)
    for (size_t r = 0; r < n; ++r) {
      const std::string& v = cells.columns[c][r];
      if (const size_t bad = utf8_error(v); bad != std::string::npos)
        throw usage_error(fmt::format("{}: the label is not UTF-8", where(r)), "save the file as UTF-8");
      const auto x = parse_number(v);
      if (v.find_first_not_of(" \t") == std::string::npos || (x && !std::isfinite(*x)))
        throw usage_error(fmt::format("{}: label '{}' is empty or not a finite number", where(r), v), "give every text its label");
    }
  if (count > 1) {  // multi-label: a 0 or a 1 per label column
    labels = {"multilabel", std::vector<std::string>(names.begin() + static_cast<std::ptrdiff_t>(first),
                                                     names.begin() + static_cast<std::ptrdiff_t>(first + count))};
    if (train && train->classes != labels.classes)
      throw usage_error(fmt::format("{}: its labels ({}) are not the training data's ({})", path, join(labels.classes, ", "),
                                    join(train->classes, ", ")),
                        "give both splits the same --label_column");
    std::vector<float> out(n * count);
    for (size_t r = 0; r < n; ++r)
      for (size_t c = 0; c < count; ++c) {
        const auto v = finite_number(cells.columns[first + c][r]);
        if (!v || (*v != 0 && *v != 1))
          throw usage_error(fmt::format("{}: '{}' is '{}'; several label columns are multi-label, a 0 or a 1 each", where(r),
                                        names[first + c], cells.columns[first + c][r]),
                            "give each label column 0 or 1, or one --label_column for classes");
        out[r * count + c] = static_cast<float>(*v);
      }
    return NpyArray::of(path + ":labels", NpyDtype::f32, {static_cast<int64_t>(n), static_cast<int64_t>(count)}, std::move(out));
  }
  const auto& column = cells.columns[first];
  if (train) {
    labels = *train;
  } else {  // the training split decides: whole numbers are class ids, fractions regression, words names
    bool numbers = true, fractions = false;
    for (const auto& v : column) {
      const auto x = finite_number(v);
      numbers = numbers && x;
      fractions = fractions || (x && !whole(*x));
    }
    labels.kind = !numbers ? "names" : fractions ? "regression" : "ids";
    if (labels.kind == "names") {
      const std::set<std::string> sorted(column.begin(), column.end());
      labels.classes.assign(sorted.begin(), sorted.end());
    } else if (labels.kind == "ids") {
      // Class ids as they are: 0..N-1. A negative one, or one so large that the head would be
      // huge, is a label that names something else (a code, a score).
      constexpr double kMostClasses = 100000;
      double top = 0;
      for (size_t r = 0; r < n; ++r) {
        const double x = *finite_number(column[r]);
        if (x < 0 || x >= kMostClasses)
          throw usage_error(fmt::format("{}: label {}: class ids are whole numbers from 0 to {}", where(r), column[r],
                                        static_cast<int64_t>(kMostClasses) - 1),
                            "number the classes from 0, or give them names (neg, pos)");
        top = std::max(top, x);
      }
      for (int64_t c = 0; c <= static_cast<int64_t>(top); ++c) labels.classes.push_back(std::to_string(c));
    }
  }
  if (labels.kind == "regression") {
    std::vector<float> out;
    for (size_t r = 0; r < n; ++r) {
      const auto x = finite_number(column[r]);
      if (!x) throw usage_error(fmt::format("{}: label '{}' is not a number like the training labels", where(r), column[r]), "");
      out.push_back(static_cast<float>(*x));
    }
    return NpyArray::of(path + ":labels", NpyDtype::f32, {static_cast<int64_t>(n)}, std::move(out));
  }
  if (labels.kind == "multilabel")
    throw usage_error(fmt::format("{}: one --label_column, where the training data has {} (multi-label)", path,
                                  join(labels.classes, ", ")),
                      "give both splits the same --label_column");
  std::vector<int64_t> out;
  const int64_t classes = static_cast<int64_t>(labels.classes.size());
  for (size_t r = 0; r < n; ++r) {
    int64_t id = -1;
    if (labels.kind == "ids") {
      const auto x = finite_number(column[r]);
      if (!x || !whole(*x))
        throw usage_error(fmt::format("{}: label '{}' is not a class id (a whole number) like the training labels", where(r),
                                      column[r]),
                          "");
      id = static_cast<int64_t>(*x);
      if (id < 0 || id >= classes)
        throw usage_error(fmt::format("{}: label {} is outside the classes 0..{} of the training data", where(r), id, classes - 1),
                          "give the test texts the training data's classes");
    } else {
      const auto it = std::find(labels.classes.begin(), labels.classes.end(), column[r]);
      if (it == labels.classes.end())
        throw usage_error(fmt::format("{}: label '{}' is not one of the training data's classes ({})", where(r), column[r],
                                      join(labels.classes, ", ")),
                          "give the test texts the training data's classes");
      id = it - labels.classes.begin();
    }
    out.push_back(id);
  }
  return NpyArray::of(path + ":labels", NpyDtype::i64, {static_cast<int64_t>(n)}, std::move(out));
}

}  // namespace

bool is_text_table(const std::string& path) {
  return ends_with(path, ".csv") || ends_with(path, ".tsv") || ends_with(path, ".jsonl");
}

TokenizedTable tokenize_table(const std::string& path, const TextTableOptions& o, const TableLabels* train) {
  if (o.text_columns.empty() || o.text_columns.size() > 2)
    throw usage_error(fmt::format("--text_column '{}': one column, or two for text pairs", join(o.text_columns, ",")),
                      "e.g. --text_column text, or --text_column premise,hypothesis");
  if (o.max_length < 2) throw usage_error(fmt::format("--max_length {}: too short for a text", o.max_length), "e.g. --max_length 128");
  std::vector<std::string> names = o.text_columns;
  names.insert(names.end(), o.label_columns.begin(), o.label_columns.end());
  // A test split (new texts for `infer`) may lack every label column.
  const size_t optional = train ? o.label_columns.size() : 0;
  Cells cells = ends_with(path, ".jsonl") ? read_jsonl_cells(path, names, optional) : read_csv_cells(path, names, optional);
  for (size_t c = o.text_columns.size(); c < cells.columns.size(); ++c)  // labels: " pos" is "pos"
    for (auto& v : cells.columns[c]) {
      v.erase(v.find_last_not_of(" \t\r\n") + 1);
      v.erase(0, std::min(v.size(), v.find_first_not_of(" \t\r\n")));
    }
  const bool labelled = cells.columns.size() == names.size();
  const Encoder encoder = load_encoder(o.tokenizer);
  const size_t n = cells.lines.size();
  const bool pairs = o.text_columns.size() == 2;

  TokenizedTable out;
  for (size_t c = 0; c < o.text_columns.size(); ++c)
    for (size_t r = 0; r < n; ++r)
      if (const size_t bad = utf8_error(cells.columns[c][r]); bad != std::string::npos)
        throw usage_error(fmt::format("{}:{}: '{}' is not UTF-8 (byte 0x{:02x})", path, cells.lines[r], o.text_columns[c],
                                      static_cast<unsigned char>(cells.columns[c][r][bad])),
                          "save the file as UTF-8");

  for (size_t c = 0; c < o.text_columns.size(); ++c)
    for (size_t r = 0; r < n; ++r)
      for (const auto& special : encoder.specials)
        if (cells.columns[c][r].find(special) != std::string::npos)
          throw usage_error(fmt::format("{}:{}: '{}' holds '{}', which {} reads as its special token and SentencePiece "
                                        "as text",
                                        path, cells.lines[r], o.text_columns[c], special, encoder.name),
                            kPrepareHint);

  // The special tokens take their places first; the texts share the rest.
  const size_t specials = (encoder.before >= 0 ? 1 : 0) + (encoder.after >= 0 ? (pairs ? 2 : 1) : 0);
  if (static_cast<size_t>(o.max_length) <= specials)
    throw usage_error(fmt::format("--max_length {}: the {} special tokens leave no room for text", o.max_length, specials),
                      "e.g. --max_length 128");
  const size_t budget = static_cast<size_t>(o.max_length) - specials;
  std::vector<std::vector<int32_t>> ids(n), types(pairs ? n : 0);
  std::vector<uint8_t> cut(n, 0);
  // One thread: an encoder holds its regex match buffer (token_encoder.cpp), so two rows cannot
  // be encoded at once.
  for (size_t r = 0; r < n; ++r) {
    std::vector<int64_t> a = encoder.model->encode(cells.columns[0][r]), b;
    if (pairs) b = encoder.model->encode(cells.columns[1][r]);
    const auto [na, nb] = pairs ? longest_first(a.size(), b.size(), budget) : std::pair{std::min(a.size(), budget), size_t{0}};
    cut[r] = na < a.size() || nb < b.size();
    auto& row = ids[r];
    if (encoder.before >= 0) row.push_back(static_cast<int32_t>(encoder.before));
    row.insert(row.end(), a.begin(), a.begin() + static_cast<std::ptrdiff_t>(na));
    if (encoder.after >= 0) row.push_back(static_cast<int32_t>(encoder.after));
    if (!pairs) continue;
    types[r].assign(row.size(), 0);
    row.insert(row.end(), b.begin(), b.begin() + static_cast<std::ptrdiff_t>(nb));
    if (encoder.after >= 0) row.push_back(static_cast<int32_t>(encoder.after));
    types[r].resize(row.size(), encoder.second_type_one ? 1 : 0);
  }

  size_t longest = 0;
  for (size_t r = 0; r < n; ++r) {
    if (ids[r].empty())
      throw usage_error(fmt::format("{}:{}: the text encodes to no tokens (an empty text, and a tokenizer that adds none)", path,
                                    cells.lines[r]),
                        "drop it or give it words");
    longest = std::max(longest, ids[r].size());
    out.truncated += cut[r];
    for (size_t c = 0; c < o.text_columns.size(); ++c)
      if (cells.columns[c][r].find_first_not_of(" \t\r\n") == std::string::npos) {
        ++out.empty;
        break;
      }
  }
  std::vector<int32_t> flat(n * longest, 0), lengths;
  std::vector<uint8_t> flat_types(pairs ? n * longest : 0, 0);
  for (size_t r = 0; r < n; ++r) {
    std::copy(ids[r].begin(), ids[r].end(), flat.begin() + static_cast<std::ptrdiff_t>(r * longest));
    if (pairs) std::copy(types[r].begin(), types[r].end(), flat_types.begin() + static_cast<std::ptrdiff_t>(r * longest));
    lengths.push_back(static_cast<int32_t>(ids[r].size()));
  }
  const auto rows = static_cast<int64_t>(n), width = static_cast<int64_t>(longest);
  out.arrays["input_ids"] = NpyArray::of(path + ":input_ids", NpyDtype::i32, {rows, width}, std::move(flat));
  out.arrays["lengths"] = NpyArray::of(path + ":lengths", NpyDtype::i32, {rows}, std::move(lengths));
  if (pairs) out.arrays["token_type_ids"] = NpyArray::of(path + ":token_type_ids", NpyDtype::u8, {rows, width}, std::move(flat_types));
  if (!o.label_columns.empty() && labelled)
    out.arrays["labels"] = encode_labels(path, cells, o.text_columns.size(), o.label_columns.size(), out.labels, train, names);
  else if (train)
    out.labels = *train;  // new texts, read as the training data's kind
  return out;
}

}  // namespace gputrain
