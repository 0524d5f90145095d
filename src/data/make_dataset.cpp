// Builds the train and test datasets a Config asks for: the format, the held-out split, caching,
// resizing and the transforms.
#include "data/make_dataset.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/install_dirs.h"
#include "core/text.h"
#include "data/augment.h"
#include "data/cache.h"
#include "data/cifar.h"
#include "data/csv_dataset.h"
#include "data/idx_dataset.h"
#include "data/image_folder.h"
#include "data/jsonl_dataset.h"
#include "data/text_dataset.h"
#include "data/npy_dataset.h"
#include "data/schema.h"
#include "data/shard_pattern.h"
#include "data/subset.h"
#include "data/synthetic.h"
#include "data/token_dataset.h"
#include "data/transforms.h"
#include "data/webdataset.h"

namespace fs = std::filesystem;

namespace gputrain {
namespace {

std::string numbers_text(const std::vector<float>& v) {
  std::string s;
  for (float x : v) {
    if (!s.empty()) s += ',';
    s += fmt::format("{:.9g}", static_cast<double>(x));  // round-trips a float exactly: a resume normalizes identically
  }
  return s;
}

std::vector<float> to_floats(const std::vector<double>& v) { return {v.begin(), v.end()}; }

struct Raw {
  DatasetPtr train, test;  // test may be null: then a part of train is held out
  std::string what;
  DatasetPtr train_eval;  // image files cropped or center-cropped: the view a held-out part is evaluated in
  // Image files: the sources and views behind train, test and train_eval, to view them again
  // with the normalization folded into the decode.
  std::shared_ptr<const ImageSource> train_source, test_source;
  ImageSampleOptions train_view, eval_view;
};

// The same files, normalized as they are decoded (see make_datasets).
Raw normalized_in_decode(Raw raw, const std::vector<float>& mean, const std::vector<float>& std) {
  for (auto* v : {&raw.train_view, &raw.eval_view}) {
    v->mean = mean;
    v->std = std;
  }
  raw.train = raw.train_source->view(raw.train_view);
  if (raw.train_eval) raw.train_eval = raw.train_source->view(raw.eval_view);
  if (raw.test_source) raw.test = raw.test_source->view(raw.eval_view);
  return raw;
}

RrcRange rrc_range(const Config& c) {
  const auto scale = parse_numbers(c.rrc_scale), ratio = parse_numbers(c.rrc_ratio);
  return {scale.at(0), scale.at(1), ratio.at(0), ratio.at(1)};
}

// How image files become samples: the training view (RandomResizedCrop inside the decode, so
// that only the box is decoded) and the evaluation view (no crop, or --crop_pct's center crop).
std::pair<ImageSampleOptions, ImageSampleOptions> image_views(const Config& c) {
  ImageSampleOptions o;
  auto size = parse_image_size(c.image_size.empty() ? "224" : c.image_size);
  o.height = size[0];
  o.width = size[1];
  o.channels = static_cast<int>(c.image_channels);
  o.max_pixels = c.max_image_pixels;
  if (c.random_resized_crop) o.random_resized_crop = rrc_range(c);
  o.reduced_decode = c.reduced_decode;
  ImageSampleOptions eval = o;
  eval.random_resized_crop.reset();
  eval.crop_pct = c.crop_pct;
  return {o, eval};
}

Raw load_image_folders(const Config& c) {
  const std::string dir = dataset_dir(c);
  const auto [train_view, eval_view] = image_views(c);
  ImageFolderOptions o;
  static_cast<ImageSampleOptions&>(o) = train_view;
  o.skip_bad = c.skip_bad_samples;
  o.num_classes = c.num_classes;
  ImageFolderOptions eval = o;
  static_cast<ImageSampleOptions&>(eval) = eval_view;
  // DIR/train + DIR/val (or DIR/test), as ImageNet-style folders are laid out; else DIR alone.
  Raw r;
  r.train_view = train_view;
  r.eval_view = eval_view;
  std::shared_ptr<ImageFolderDataset> train;
  if (fs::is_directory(fs::path(dir) / "train")) {
    train = load_image_folder((fs::path(dir) / "train").string(), o);
    for (const char* name : {"val", "test"})
      if (fs::is_directory(fs::path(dir) / name)) {
        eval.classes = train->class_names();
        eval.num_classes = train->num_classes();
        auto test = load_image_folder((fs::path(dir) / name).string(), eval);
        r.test = r.test_source = test;
        break;
      }
  } else {
    train = load_image_folder(dir, o);
  }
  r.train = r.train_source = train;
  // A part held out of the training folder is evaluated as a val/ folder would be.
  if (c.random_resized_crop || c.crop_pct > 0) r.train_eval = train->view(eval_view);
  r.what = fmt::format("image folder {} at {}x{}", dir, o.height, o.width);
  return r;
}

Raw load_webdataset(const Config& c) {
  const auto [train_view, eval_view] = image_views(c);
  WebDatasetOptions o;
  static_cast<ImageSampleOptions&>(o) = train_view;
  o.skip_bad = c.skip_bad_samples;
  o.num_classes = c.num_classes;
  o.shuffle_buffer = c.shuffle_buffer;
  Raw r;
  r.train_view = train_view;
  r.eval_view = eval_view;
  auto train = std::make_shared<WebDataset>(expand_shards(c.data_dir), o);
  r.train = r.train_source = train;
  r.what = fmt::format("webdataset {} ({} shards) at {}x{}", c.data_dir, train->shards().size(), o.height, o.width);
  if (!c.test_file.empty()) {
    WebDatasetOptions t = o;
    static_cast<ImageSampleOptions&>(t) = eval_view;
    t.num_classes = train->num_classes();  // the test labels index the training classes
    t.classes_from = "the training shards";
    r.test = r.test_source = std::make_shared<WebDataset>(expand_shards(c.test_file), t);
    r.what += " + " + c.test_file;
  }
  if (c.random_resized_crop || c.crop_pct > 0) r.train_eval = train->view(eval_view);
  return r;
}

Raw load_csv(const Config& c) {
  CsvOptions o;
  o.targets = split_list(c.target, ListItems::kExact);
  o.features = split_list(c.features, ListItems::kExact);
  o.task = c.task;
  o.window = c.window;
  o.stride = c.stride;
  o.horizon = c.horizon;
  o.num_classes = c.num_classes;
  auto train = load_csv_dataset(c.train_file, o);
  Raw r{train, nullptr, "csv " + c.train_file};
  if (!c.test_file.empty()) {
    o.task = train->task();  // the test split must read its targets the way the train split did
    o.num_classes = train->num_classes();
    r.test = load_csv_dataset(c.test_file, o, train->is_regression() ? nullptr : &train->class_names());
    r.what += " + " + c.test_file;
  }
  r.what += fmt::format(", {} features", train->feature_names().size());
  if (c.window > 0) r.what += fmt::format(" x window {}", c.window);
  return r;
}

Raw load_npy(const Config& c) {
  Raw r{load_npy_dataset(c.train_file, c.train_targets, "train", c.task, c.num_classes), nullptr,
        "npy " + c.train_file};
  // The test labels must index the classes the training labels gave the model.
  const std::string task = r.train->is_regression() ? "regression" : "classification";
  const int64_t classes = r.train->num_classes();
  if (!c.test_file.empty()) {
    r.test = load_npy_dataset(c.test_file, c.test_targets, "test", task, classes);
    r.what += " + " + c.test_file;
  } else if (fs::path(c.train_file).extension() == ".npz" && npz_has_split(c.train_file, "test")) {
    r.test = load_npy_dataset(c.train_file, "", "test", task, classes);  // keras-style x_test / y_test
  }
  return r;
}

Raw load_raw(const Config& c) {
  if (c.dataset == "synthetic") {
    auto shape = parse_shape(c.input_shape);
    const int64_t classes = c.num_classes > 0 ? c.num_classes : 10;
    // The test split shares the class patterns (same seed) but its samples come after the train's.
    return {
        std::make_shared<SyntheticDataset>(c.synthetic_train_size, shape, classes, c.seed),
        std::make_shared<SyntheticDataset>(c.synthetic_test_size, shape, classes, c.seed, c.synthetic_train_size),
        "synthetic " + c.input_shape};
  }
  if (c.dataset == "cifar10" || c.dataset == "cifar100") {
    const int classes = c.dataset == "cifar10" ? 10 : 100;
    const std::string dir = dataset_dir(c);
    return {load_cifar_split(dir, classes, true, c.num_classes), load_cifar_split(dir, classes, false, c.num_classes),
            c.dataset + " from " + dir};
  }
  if (c.dataset == "image_folder") return load_image_folders(c);
  if (c.dataset == "webdataset") return load_webdataset(c);
  if (c.dataset == "csv") return load_csv(c);
  if (c.dataset == "npy") return load_npy(c);
  const std::string dir = dataset_dir(c);
  const int64_t classes = c.num_classes > 0 ? c.num_classes : 10;  // the MNIST family's 10
  return {load_idx_split(dir, "train", c.dataset, classes), load_idx_split(dir, "t10k", c.dataset, classes),
          c.dataset + " from " + dir};
}

// Image-only transforms need C x H x W samples.
void require_images(const Config& c, const std::vector<int64_t>& shape) {
  std::vector<std::string> asked;
  if (c.random_crop > 0) asked.push_back("--random_crop");
  if (c.random_resized_crop) asked.push_back("--random_resized_crop");
  if (!c.aa.empty()) asked.push_back("--aa");
  if (c.reprob > 0) asked.push_back("--reprob");
  if (c.mixup > 0) asked.push_back("--mixup");
  if (c.cutmix > 0) asked.push_back("--cutmix");
  if (c.hflip) asked.push_back("--hflip");
  if (!c.color_jitter.empty()) asked.push_back("--color_jitter");
  if (!c.image_size.empty() && !encoded_images(c.dataset)) asked.push_back("--image_size");
  if (shape.size() == 3 || asked.empty()) return;
  throw usage_error(
      join(asked, ", ") + " need image samples (C x H x W), the data gives samples of shape " + shape_text(shape),
      "drop the image transforms for tables and sequences");
}

// The deterministic part of the pipelines: caching, the held-out split, resizing, log scaling.
struct Pipelines {
  DatasetPtr train, test;
  std::string eval_name = "test";
  bool held_out = false;  // the test split is a part of the training data
};

Pipelines assemble(const Config& c, const Raw& raw) {
  Pipelines p{raw.train, raw.test};
  if (c.cache) p.train = std::make_shared<CachedDataset>(p.train);  // below the split: both halves share it
  if (c.cache && p.test) p.test = std::make_shared<CachedDataset>(p.test);
  if (c.val_split > 0 || !p.test) {
    const double fraction = c.val_split > 0 ? c.val_split : 0.1;
    std::tie(p.train, p.test) = split_validation(p.train, fraction, static_cast<uint64_t>(c.seed), raw.train_eval);
    p.held_out = true;
    p.eval_name = fmt::format("validation ({}% held out{})", static_cast<int>(fraction * 100 + 0.5),
                              c.val_split > 0 ? "" : ": no test split, --val_split 0.1 by default");
  }
  const Dataset &train = *p.train, &test = *p.test;
  if (train.is_regression() != test.is_regression())
    throw usage_error("the train and test data disagree on the task (" +
                          std::string(train.is_regression() ? "regression" : "classification") + " vs " +
                          (test.is_regression() ? "regression" : "classification") + ")",
                      "pass --task, or targets of the same kind in both files");
  if (train.is_regression() && train.target_shape() != test.target_shape())
    throw usage_error("the train and test targets have different shapes", "check --train_targets and --test_targets");
  if (train.sample_shape() != test.sample_shape())
    throw usage_error("the train and test samples have different shapes", "check --train_file and --test_file");
  if (train.num_classes() != test.num_classes())  // every loader numbers the test split's classes as train's
    throw std::logic_error("make_datasets: the splits disagree on the class count");
  if (!c.image_size.empty() && !encoded_images(c.dataset)) {
    auto size = parse_image_size(c.image_size);
    p.train = std::make_shared<ResizedDataset>(p.train, size[0], size[1]);
    p.test = std::make_shared<ResizedDataset>(p.test, size[0], size[1]);
  }
  if (c.log1p) {
    auto log = std::make_shared<Log1p>();
    p.train = std::make_shared<TransformedDataset>(p.train, std::vector<std::shared_ptr<const Transform>>{log});
    p.test = std::make_shared<TransformedDataset>(p.test, std::vector<std::shared_ptr<const Transform>>{log});
  }
  return p;
}

// No test file: a part of the training data held out for evaluation (--val_split, else 0.1).
// Returns the evaluation's name for the data line: `what` and the share, or `missing` why.
std::string hold_out(const Config& c, DataSplits& s, const std::string& what, const std::string& missing) {
  const double fraction = c.val_split > 0 ? c.val_split : 0.1;
  std::tie(s.train, s.test) = split_validation(s.train, fraction, static_cast<uint64_t>(c.seed));
  s.test_held_out = true;
  return fmt::format("{} ({}% held out{})", what, static_cast<int>(fraction * 100 + 0.5),
                     c.val_split > 0 ? "" : ": " + missing + ", --val_split 0.1 by default");
}

// Named fields (ids, masks, labels) take no image transform, normalization, cache or resizing:
// those flags are refused, `why` saying what the samples are.
void refuse_sample_transforms(const Config& c, const std::string& why) {
  require_images(c, {});
  std::vector<std::string> refused;
  if (c.cache) refused.push_back("--cache");
  if (c.log1p) refused.push_back("--log1p");
  if (!c.image_size.empty()) refused.push_back("--image_size");
  if (!c.normalize_mean.empty()) refused.push_back("--normalize_mean");
  if (c.dataset == "tokens" && c.task == "regression") refused.push_back("--task regression");
  if (!refused.empty())
    throw usage_error(join(refused, ", ") + " would change no sample of --dataset " + c.dataset + " (" + why + ")",
                      "drop them");
}

// Named fields from JSON lines, held in memory.
DataSplits make_jsonl(const Config& c) {
  refuse_sample_transforms(c, "named fields, held in memory");
  DataSplits s;
  auto train = load_jsonl_dataset(c.train_file, c.target, c.num_classes);
  if (c.task != "auto" && (c.task == "regression") != train->is_regression())
    throw usage_error(fmt::format("--task {}: the target '{}' of {} holds {}", c.task, schema_of(*train).target,
                                  c.train_file, train->is_regression() ? "float values (regression)" : "integer classes"),
                      "drop --task: a jsonl target's numbers decide it (integers are classes)");
  s.train = train;
  std::string eval_name = "test";
  if (!c.test_file.empty()) {
    s.test = load_jsonl_dataset(c.test_file, c.target, 0, train.get());
  } else {
    eval_name = hold_out(c, s, "validation", "no test split");
  }
  const std::string task = train->is_regression() ? fmt::format("regression, {} target(s)", train->target_numel())
                                                  : fmt::format("{} classes", train->num_classes());
  s.description = fmt::format("jsonl {}{}: {}, {} train, {} {}", c.train_file, c.test_file.empty() ? "" : " + " + c.test_file,
                              task, s.train->size(), s.test->size(), eval_name);
  return s;
}

// Labelled texts: tokenized by tools/prepare_text.py --text-column (an .npz, mapped), or a
// table tokenized here by a SentencePiece model.
DataSplits make_text(const Config& c) {
  refuse_sample_transforms(c, "token ids");
  TextTableOptions table{split_list(c.text_column, ListItems::kTrimmed), split_list(c.label_column, ListItems::kTrimmed),
                         c.tokenizer, c.max_length};
  if (!is_text_table(c.train_file) && (!c.tokenizer.empty() || c.max_length != Config{}.max_length))
    throw usage_error(std::string(c.tokenizer.empty() ? "--max_length" : "--tokenizer") + ": " + c.train_file +
                          " is tokenized already (prepare_text.py --max-length cut it)",
                      "drop it (--tokenizer and --max_length tokenize a .csv, .tsv or .jsonl table)");
  DataSplits s;
  auto train = load_text_dataset(c.train_file, nullptr, &table);
  const std::string kind = train->is_regression() ? "regression" : train->multilabel() ? "multilabel" : "classification";
  if (c.task != "auto" && c.task != kind)
    throw usage_error(fmt::format("--task {}: the labels of {} are {}", c.task, c.train_file,
                                  kind == "regression"   ? "numbers with a fraction (regression)"
                                  : kind == "multilabel" ? "several 0/1 labels per text (multilabel)"
                                                         : "classes"),
                      "drop --task: the labels decide it");
  s.train = train;
  std::string eval_name = "test";
  if (!c.test_file.empty()) s.test = load_text_dataset(c.test_file, train.get(), &table);
  else eval_name = hold_out(c, s, "validation", "no test split");
  const auto& names = train->class_names();
  const std::string what = train->multilabel() ? "labels" : "classes";
  const std::string task = train->is_regression() ? "regression"
                           : names.empty()        ? fmt::format("{} {}", train->num_classes(), what)
                                                  : fmt::format("{} {} ({})", train->num_classes(), what, join(names, ", "));
  std::string cut;  // a table tokenized here: what --max_length cut, and the empty texts
  const auto* test = dynamic_cast<const TextDataset*>(s.test.get());
  const int64_t truncated = train->truncated() + (test ? test->truncated() : 0), empty = train->empty_texts() + (test ? test->empty_texts() : 0);
  if (truncated > 0) cut += fmt::format(", {} text(s) cut to --max_length {}", truncated, c.max_length);
  if (empty > 0) cut += fmt::format(", {} empty text(s)", empty);
  s.description = fmt::format("text {}{}: {}{}, {} train, {} {}", c.train_file, c.test_file.empty() ? "" : " + " + c.test_file,
                              train->multilabel() ? "multi-label, " + task : task, cut, s.train->size(), s.test->size(),
                              eval_name);
  return s;
}

// The end-of-text token of packed instruction shards (their meta.json names packed_seq_len), or
// -1 for plain text. Packed windows hold whole examples at one --seq_len only.
int64_t packed_eot(const std::vector<std::string>& files, int64_t seq_len) {
  const fs::path meta_path = fs::path(files.front()).parent_path() / "meta.json";
  std::ifstream in(meta_path);
  if (!in) return -1;  // shards from elsewhere (llm.c's, nanoGPT's) carry no meta.json
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw usage_error(fmt::format("{}: not JSON ({})", meta_path.string(), e.what()),
                      "write the shards again with tools/prepare_text.py");
  }
  const auto packed = meta.find("packed_seq_len");
  if (!meta.is_object() || packed == meta.end()) return -1;
  const auto eot = meta.find("eot");
  if (!packed->is_number_integer() || eot == meta.end() || !eot->is_number_integer() || eot->get<int64_t>() < 0)
    throw usage_error(meta_path.string() + ": packed_seq_len and eot must be integers",
                      "write the shards again with tools/prepare_text.py --instructions");
  if (packed->get<int64_t>() != seq_len)
    throw usage_error(fmt::format("--seq_len {}: {} holds examples packed into windows of {}", seq_len,
                                  files.front(), packed->get<int64_t>()),
                      fmt::format("train with --seq_len {}, or pack again with --pack {}", packed->get<int64_t>(), seq_len));
  return eot->get<int64_t>();
}

// Token shards: windows of --seq_len, the vocabulary from the tokenizer (never from the data, whose
// largest id may be below it), the val shards in order up to --eval_tokens.
DataSplits make_tokens(const Config& c) {
  refuse_sample_transforms(c, "ids, memory-mapped");
  const auto train_files = expand_shards(c.train_file);
  int64_t vocab = c.vocab_size;
  std::string vocab_from = "--vocab_size";
  if (vocab == 0) {
    const std::string tokenizer = tokenizer_of(c);
    if (c.tokenizer.empty() && !fs::exists(tokenizer))
      throw usage_error("--dataset tokens: no vocabulary size (no tokenizer.json beside " + train_files.front() + ")",
                        "give --tokenizer FILE (the shards' tokenizer.json) or --vocab_size N");
    vocab = tokenizer_vocab_size(tokenizer);
    vocab_from = tokenizer;
  }
  if (c.num_classes > 0 && c.num_classes != vocab)
    throw usage_error(fmt::format("--num_classes {} with --dataset tokens, whose vocabulary is {} ({})", c.num_classes,
                                  vocab, vocab_from),
                      "drop --num_classes: a language model's classes are its vocabulary");
  if (c.eval_tokens > 0 && c.test_file.empty())
    throw usage_error("--eval_tokens caps the val shards, and there are none (no --test_file)",
                      "give --test_file 'data/val_*.bin', or drop --eval_tokens");
  DataSplits s;
  auto train = std::make_shared<TokenDataset>(train_files, c.seq_len, vocab, 0, packed_eot(train_files, c.seq_len));
  s.train = train;
  std::string eval_name = "val";
  const int64_t eval_windows = c.eval_tokens > 0 ? (c.eval_tokens + c.seq_len - 1) / c.seq_len : 0;
  if (!c.test_file.empty()) {
    const auto test_files = expand_shards(c.test_file);
    s.test = std::make_shared<TokenDataset>(test_files, c.seq_len, vocab, eval_windows, packed_eot(test_files, c.seq_len));
  } else {
    eval_name = hold_out(c, s, "validation windows", "no --test_file");
  }
  s.description = fmt::format("tokens {} ({} file{}, {}, {} tokens{}){}: vocabulary {} ({}), windows of {}: {} train, {} {}",
                              c.train_file, train_files.size(), train_files.size() == 1 ? "" : "s",
                              train->shards().front().format, train->tokens(),
                              train->packed() ? ", packed examples, loss on responses" : "",
                              c.test_file.empty() ? "" : " + " + c.test_file, vocab, vocab_from, c.seq_len,
                              s.train->size(), s.test->size(), eval_name);
  return s;
}

}  // namespace

std::string tokenizer_of(const Config& c) {
  if (c.vocab_size > 0) return c.tokenizer;
  // Absolute: the run's record keeps it for export, which may run from another folder.
  if (!c.tokenizer.empty()) return fs::absolute(c.tokenizer).string();
  // tools/prepare_text.py writes tokenizer.json, or tokenizer.model for a SentencePiece one.
  const fs::path folder = fs::path(expand_shards(c.train_file).front()).parent_path();
  const bool sentencepiece = !fs::exists(folder / "tokenizer.json") && fs::exists(folder / "tokenizer.model");
  return fs::absolute(folder / (sentencepiece ? "tokenizer.model" : "tokenizer.json")).string();
}

std::string dataset_dir(const Config& c) {
  if (!c.data_dir.empty()) return c.data_dir;
  // Debian's dataset packages, else a copy an install carries (share/gputrain/datasets).
  const std::string system = "/usr/share/datasets/" + c.dataset;
  const std::string bundled = installed_share_dir() + "/datasets/" + c.dataset;
  return !std::filesystem::exists(system) && std::filesystem::exists(bundled) ? bundled : system;
}

DataSplits make_datasets(const Config& c) {
  if (!c.aa.empty() && !AutoAugment::valid(c.aa))  // before a long scan of the data
    throw usage_error("aa '" + c.aa + "' is not a policy",
                      "use rand-mM-nN (RandAugment, M 0..30, N 1..10, e.g. rand-m9-n2) or trivialaugmentwide");
  if (c.dataset == "jsonl") return make_jsonl(c);
  if (c.dataset == "text") return make_text(c);
  if (c.dataset == "tokens") return make_tokens(c);
  Raw raw = load_raw(c);
  require_images(c, raw.train->sample_shape());
  DataSplits s;
  if (c.cache && c.random_resized_crop && raw.train_eval)
    throw usage_error("--cache with --random_resized_crop on image files would keep each image's first crop",
                      "drop --cache: the crop is drawn anew every epoch, and only its region is decoded");
  Pipelines p = assemble(c, raw);
  s.test_held_out = p.held_out;
  std::vector<std::shared_ptr<const Transform>> train_t, test_t;
  // Random augmentation (training only), then normalization by statistics of the training data.
  if (c.random_crop > 0) train_t.push_back(std::make_shared<RandomCrop>(c.random_crop));
  if (c.random_resized_crop && !encoded_images(c.dataset))  // image files are cropped while decoding
    train_t.push_back(std::make_shared<RandomResizedCrop>(rrc_range(c)));
  if (c.hflip) train_t.push_back(std::make_shared<HorizontalFlip>());
  if (!c.color_jitter.empty()) {
    auto j = parse_numbers(c.color_jitter);
    j.resize(4, 0.0);
    train_t.push_back(std::make_shared<ColorJitter>(j[0], j[1], j[2], j[3]));
  }
  if (!c.aa.empty()) train_t.push_back(std::make_shared<AutoAugment>(c.aa));  // on [0, 1] pixels, before normalization
  if (c.normalize) {
    ChannelStats st;
    if (!c.normalize_mean.empty()) {
      st = {to_floats(normalize_numbers(c.normalize_mean, true)), to_floats(normalize_numbers(c.normalize_std, false))};
      const size_t channels = static_cast<size_t>(ChannelLayout(p.train->sample_shape()).channels);
      for (const auto* v : {&st.mean, &st.std})
        if (v->size() != 1 && v->size() != channels)
          throw usage_error(
              fmt::format("normalize_mean/normalize_std have {} values, the data has {} channels", v->size(), channels),
              "give one value per channel, or one for all");
    } else {
      st = compute_channel_stats(*p.train);
    }
    for (const auto* v : {&st.mean, &st.std})
      for (float f : *v)
        if (!std::isfinite(f) || (v == &st.std && f <= 0))
          throw usage_error(fmt::format("normalization statistics mean {} / std {} are not finite and positive",
                                        numbers_text(st.mean), numbers_text(st.std)),
                            "check the training data for NaN or infinite values, or pass --normalize_mean and "
                            "--normalize_std");
    s.normalize_mean = numbers_text(st.mean);
    s.normalize_std = numbers_text(st.std);
    // Image files whose training transforms before normalization are at most a flip (which
    // commutes with it) are normalized as they are resampled: one pass over the pixels less,
    // about 5% of the loader's time on 500x375 JPEGs.
    const bool fuse = raw.train_source && c.random_crop == 0 && c.color_jitter.empty() && c.aa.empty() && !c.log1p;
    if (fuse) {
      raw = normalized_in_decode(std::move(raw), st.mean, st.std);
      p = assemble(c, raw);
    } else {
      auto norm = std::make_shared<Normalize>(st.mean, st.std);
      train_t.push_back(norm);
      test_t.push_back(norm);
    }
  }
  // After normalization, as timm: the noise fill is normal in the normalized space.
  if (c.reprob > 0) train_t.push_back(std::make_shared<RandomErasing>(c.reprob, c.remode, c.recount));
  s.train = train_t.empty() ? p.train : std::make_shared<TransformedDataset>(p.train, train_t);
  s.test = test_t.empty() ? p.test : std::make_shared<TransformedDataset>(p.test, test_t);

  std::string task = p.train->is_regression() ? fmt::format("regression, {} target(s)", p.train->target_numel())
                                              : fmt::format("{} classes", p.train->num_classes());
  s.description =
      fmt::format("{}: {}, {} train, {} {}", raw.what, task, s.train->size(), s.test->size(), p.eval_name);
  return s;
}

}  // namespace gputrain
