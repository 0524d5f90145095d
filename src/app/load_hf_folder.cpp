// A Session for a Hugging Face folder's language model (load_hf_folder.h).
#include "app/load_hf_folder.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "config/merge.h"
#include "core/error.h"
#include "data/dataset.h"
#include "data/make_dataset.h"
#include "data/schema.h"
#include "weights/hf_gpt2.h"
#include "weights/hf_llama.h"

namespace gputrain {

namespace {

namespace fs = std::filesystem;

// Windows of token ids with nothing in them: the Session's model reads its input's shape and
// vocabulary from a dataset, and generating needs no other.
class TokenShape : public Dataset {
 public:
  TokenShape(int64_t seq_len, int64_t vocab) : vocab_(vocab), schema_(std::make_shared<SampleSchema>()) {
    schema_->fields = {{"input_ids", DType::kI64, {seq_len}}, {"labels", DType::kI64, {seq_len}}};
    schema_->target = "labels";
  }
  int64_t size() const override { return 1; }
  std::vector<int64_t> sample_shape() const override { return {}; }
  int64_t num_classes() const override { return vocab_; }
  int64_t get(int64_t, float*, float*, uint64_t) const override {
    throw std::logic_error("TokenShape::get: it holds no tokens");
  }
  std::shared_ptr<const SampleSchema> named_fields() const override { return schema_; }
  void get_fields(int64_t, FieldWriter& out, uint64_t) const override {
    const auto& f = schema_->fields.front();
    std::fill_n(static_cast<int64_t*>(out.field(0)), f.shape[0], 0);
    std::fill_n(static_cast<int64_t*>(out.field(1)), f.shape[0], 0);
  }

 private:
  int64_t vocab_;
  std::shared_ptr<SampleSchema> schema_;
};

// The window the Session builds its model for. Its positions come from config.json whatever
// this is; a short one keeps the model's FLOPs probe cheap for a model of 128k positions.
constexpr int64_t kShapeWindow = 16;

}  // namespace

Trained load_hf_folder(const std::string& dir, const std::vector<FlagArg>& flags) {
  const std::string type = hf_model_type(dir);
  if (type.empty() && fs::exists(fs::path(dir) / "checkpoints"))
    throw usage_error(dir + " is a run folder, not a Hugging Face model folder",
                      "give its checkpoint: --checkpoint " + (fs::path(dir) / "checkpoints" / "last.pt").string());
  if (type != "gpt2" && type != "llama")
    throw usage_error(fmt::format("{}: a Hugging Face model of type '{}', which gputrain does not generate with", dir, type),
                      "a GPT-2 or Llama folder (config.json model_type gpt2 or llama), or a gputrain checkpoint");
  const GptShape shape = type == "llama" ? read_hf_llama_config(dir).base : read_hf_gpt2_config(dir);
  std::vector<FlagArg> all = {{"model", type == "llama" ? "llama" : "gpt"},
                              {"init_from", dir},
                              {"dataset", "tokens"},
                              // Token data's flags, which the configuration asks for; the data
                              // itself is TokenShape below, so no file is read as shards.
                              {"train_file", dir},
                              {"seq_len", std::to_string(std::min(shape.positions, kShapeWindow))},
                              {"vocab_size", std::to_string(shape.vocab)}};
  // The folder's own tokenizer: a SentencePiece model first where there is one (Llama 2 and
  // Mistral ship both, and their tokenizer.json's normalizer is not byte-level BPE's).
  for (const char* name : {"tokenizer.model", "tokenizer.json"})
    if (fs::exists(fs::path(dir) / name)) {
      all.push_back({"tokenizer", (fs::path(dir) / name).string()});
      break;
    }
  // Decoded in the folder's own dtype, as from_pretrained loads it, so that the text is the
  // model's own (float32 weights in bf16 drift from its greedy text within tens of tokens);
  // --use_amp and --amp_dtype given now win.
  if (const std::string dtype = hf_dtype(dir); dtype == "bfloat16" || dtype == "float16")
    all.push_back({"amp_dtype", dtype == "bfloat16" ? "bf16" : "fp16"});
  else if (!has_flag(flags, "amp_dtype"))  // --amp_dtype alone asks for autocast
    all.push_back({"use_amp", std::nullopt, true, "--no-use_amp"});
  all.insert(all.end(), flags.begin(), flags.end());
  const Config c = resolve_config(all);
  SessionOptions o;
  o.search_batch_size = o.check_amp = false;  // nothing trains
  o.init_weights = true;
  const auto data = std::make_shared<TokenShape>(std::min(shape.positions, kShapeWindow), shape.vocab);
  o.data = std::make_shared<const DataSplits>(DataSplits{data, data, "token ids for " + dir});
  Trained t;
  t.session = std::make_unique<Session>(c, o);
  return t;
}

}  // namespace gputrain
