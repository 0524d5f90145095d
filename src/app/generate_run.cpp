// `gputrain generate`: prompts in, text out as it is drawn, times on stderr (generate_run.h).
#include "app/generate_run.h"

#include <cstdio>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/load_hf_folder.h"
#include "app/load_trained.h"
#include "core/error.h"
#include "data/token_dataset.h"
#include "text/generate.h"
#include "text/token_decoder.h"
#include "text/token_encoder.h"
#include "weights/hf_gpt2.h"

namespace gputrain {
namespace {

// What a row has written: the text of its ids so far, cut before the first --stop string.
class RowText {
 public:
  RowText(const TokenDecoder* decoder, const std::vector<std::string>& stops) : decoder_(decoder), stops_(stops) {
    for (const auto& s : stops) hold_ = std::max(hold_, s.size() - 1);
  }

  // Adds an id; false once the text holds a stop string.
  bool add(int64_t id) {
    ids_.push_back(id);
    if (!decoder_) return true;
    const std::string raw = decoder_->decode_bytes(ids_);
    return !cut_at_stop(valid_utf8(raw.substr(0, complete_utf8_length(raw))));
  }

  // The text that can be shown now and will not change: without a character still unfinished,
  // and without an end that may yet turn out to begin a stop string.
  std::string settled() const {
    if (!decoder_) return {};
    if (stopped_) return text_;
    size_t n = text_.size() > hold_ ? text_.size() - hold_ : 0;
    while (n > 0 && n < text_.size() && (static_cast<unsigned char>(text_[n]) & 0xC0) == 0x80) --n;
    return text_.substr(0, n);
  }

  // The whole text once the row has ended.
  std::string final_text() {
    if (decoder_ && !stopped_) cut_at_stop(decoder_->decode(ids_));
    return decoder_ ? text_ : std::string();
  }

 private:
  bool cut_at_stop(std::string text) {
    size_t first = std::string::npos;
    for (const auto& s : stops_) first = std::min(first, text.find(s));
    if (first != std::string::npos) text.resize(first), stopped_ = true;
    text_ = std::move(text);
    return stopped_;
  }

  const TokenDecoder* decoder_;
  const std::vector<std::string>& stops_;
  size_t hold_ = 0;
  std::vector<int64_t> ids_;
  std::string text_;
  bool stopped_ = false;
};

// A Hugging Face folder's end-of-text tokens: config.json's eos_token_id, one or a list (Llama 3
// Instruct ends a turn with one and a text with another), else `fallback` (the tokenizer's guess).
std::vector<int64_t> hf_end_of_text(const std::string& dir, std::vector<int64_t> fallback) {
  const auto config = read_hf_json((std::filesystem::path(dir) / "config.json").string(), "a Hugging Face folder");
  const auto eos = config.value("eos_token_id", nlohmann::json());
  std::vector<int64_t> ids;
  for (const auto& id : eos.is_array() ? eos : nlohmann::json::array({eos}))
    if (id.is_number_integer()) ids.push_back(id.get<int64_t>());
  return ids.empty() ? fallback : ids;
}

void write(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

int run_generate(const GenerateRequest& q) {
  // --tokenizer here is the text's alone: the run's data keeps the tokenizer it was trained with.
  std::vector<FlagArg> flags = q.flags;
  std::string given_tokenizer;
  for (const auto& f : flags)
    if (f.name == "tokenizer") given_tokenizer = f.value.value_or("");
  std::erase_if(flags, [](const FlagArg& f) { return f.name == "tokenizer"; });
  const bool hf = is_hf_folder(q.checkpoint);
  Trained t = hf ? load_hf_folder(q.checkpoint, flags) : load_trained(q.checkpoint, flags);
  Session& s = *t.session;
  const Config& c = s.config();
  std::string tokenizer = c.tokenizer;
  if (!given_tokenizer.empty()) {
    if (const int64_t vocab = tokenizer_vocab_size(given_tokenizer); vocab != c.num_classes)
      throw usage_error(fmt::format("--tokenizer '{}' has a vocabulary of {} ids; the checkpoint's model has {}",
                                    given_tokenizer, vocab, c.num_classes),
                        "give the tokenizer the run was trained with (the tokenizer.json beside its shards)");
    tokenizer = given_tokenizer;
  }
  const bool ema = s.trainer().ema() != nullptr;
  if (ema) s.trainer().ema()->swap(s.trainer().model());
  fmt::print(stderr, "checkpoint: {} ({} weights)\nsession: {}\n", q.checkpoint, ema ? "ema" : "raw", s.describe_line());

  // A language model has positions (gpt decides them at its start); nothing else keeps a cache.
  if (c.positions <= 0)
    throw usage_error(fmt::format("model '{}' keeps no key-value cache: it does not generate text", c.model),
                      "generate from a language model's checkpoint (--model gpt)");
  std::optional<TokenDecoder> decoder;
  if (!tokenizer.empty()) decoder = TokenDecoder::load(tokenizer);
  if (!decoder && (!q.prompts.empty() || !q.stops.empty()))
    throw usage_error(fmt::format("{} needs the run's tokenizer, and this run read its vocabulary from --vocab_size",
                                  q.prompts.empty() ? "--stop" : "a text prompt"),
                      "give the prompt as --prompt_ids 1,2,3 (the text then comes out as ids)");
  std::vector<std::vector<int64_t>> prompts = q.prompt_ids;
  if (!q.prompts.empty()) {
    const TokenEncoder encoder = TokenEncoder::load(tokenizer);
    for (const auto& p : q.prompts) prompts.push_back(encoder.encode(p));
    if (q.lead_with_end_of_text && decoder->end_of_text() >= 0)
      for (auto& p : prompts) p.insert(p.begin(), decoder->end_of_text());
  }
  const int64_t vocab = c.num_classes, context = c.positions;
  for (size_t r = 0; r < prompts.size(); ++r) {
    const std::string from = r < q.origins.size() ? q.origins[r] : fmt::format("prompt {}", r + 1);
    for (int64_t id : prompts[r])
      if (id >= vocab)
        throw usage_error(fmt::format("{}: id {} is outside the model's vocabulary of {} ids", from, id, vocab),
                          fmt::format("ids from 0 to {}", vocab - 1));
    if (static_cast<int64_t>(prompts[r].size()) > context)
      throw usage_error(fmt::format("{}: the prompt is {} tokens, above the model's context of {} positions", from,
                                    prompts[r].size(), context),
                        "shorten the prompt");
  }

  GenerateOptions o;
  o.max_new_tokens = q.max_new_tokens;
  o.temperature = q.temperature;
  o.top_k = q.top_k;
  o.top_p = q.top_p;
  o.seed = q.seed;
  if (decoder && decoder->end_of_text() >= 0) o.end_of_text = {decoder->end_of_text()};
  if (hf) o.end_of_text = hf_end_of_text(q.checkpoint, o.end_of_text);
  o.context = context;
  // Decoding a token reads every weight once: in the run's autocast dtype they are half the
  // bytes, which is the time (autocast would cast them again at every token). So the model
  // itself goes to that dtype, as a Hugging Face model loaded in it.
  const Precision& run = s.recipe().precision;
  if (run.amp) s.trainer().model().to(run.dtype);
  // A folder's dtype decides unless a flag did (load_hf_folder); a run's, its autocast.
  const bool asked = has_flag(flags, "use_amp") || has_flag(flags, "amp_dtype");
  const std::string folder = hf && !asked ? hf_dtype(q.checkpoint) : "";
  std::string why = hf ? (asked ? "as asked" : "the folder's dtype") : "the run's autocast dtype";
  if (!run.amp && folder != "float32") why = hf && !asked ? "autocast in the folder's " + folder + " is n/a here" : "";
  fmt::print(stderr, "precision: {}\n",
             run.amp ? fmt::format("weights in {} ({}; --no-use_amp decodes in float32)", c10::toString(run.dtype), why)
                     : why.empty() ? "float32" : fmt::format("float32 ({})", why));

  std::vector<RowText> rows;
  for (size_t r = 0; r < prompts.size(); ++r) rows.emplace_back(decoder ? &*decoder : nullptr, q.stops);
  size_t shown = 0;  // of the one streamed row
  const bool stream = !q.json;
  const auto on_token = [&](size_t r, int64_t id) {
    const bool more = rows[r].add(id);
    if (stream) {
      const std::string text = decoder ? rows[r].settled() : fmt::format("{} ", id);
      write(decoder ? text.substr(std::min(shown, text.size())) : text);
      shown = decoder ? std::max(shown, text.size()) : 0;
    }
    return more;
  };
  GenerateTimes times;
  const auto out = generate(s.trainer().model(), s.recipe().device, prompts, o, on_token, &times);

  for (size_t r = 0; r < out.size(); ++r) {
    const std::string text = rows[r].final_text();
    if (stream) {
      write((decoder ? text.substr(std::min(shown, text.size())) : std::string()) + "\n");
    } else {
      nlohmann::json line{{"prompt_ids", prompts[r]}, {"ids", out[r].ids}, {"stop", generation_end_name(out[r].stop)}};
      if (!q.prompts.empty()) line["prompt"] = q.prompts[r];
      line["text"] = decoder ? nlohmann::json(text) : nlohmann::json();
      write(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    }
  }
  size_t longest = 0, drawn = 0;
  for (size_t r = 0; r < out.size(); ++r) longest = std::max(longest, prompts[r].size()), drawn += out[r].ids.size();
  fmt::print(stderr, "generate: {} prompt{} ({} tokens, the longest) | first token {:.1f} ms | {} new tokens",
             prompts.size(), prompts.size() == 1 ? "" : "s", longest, 1e3 * times.first_token_s, drawn);
  if (times.decoded > 0)
    fmt::print(stderr, " | {:.1f} tokens/s after the first", static_cast<double>(times.decoded) / times.decode_s);
  fmt::print(stderr, "\n");
  for (const auto& g : out)
    if (g.stop == GenerationEnd::kContext) {
      fmt::print(stderr, "generate: stopped at the model's context of {} positions, before --max_new_tokens {}\n", context,
                 q.max_new_tokens);
      break;
    }
  return 0;
}

}  // namespace gputrain
