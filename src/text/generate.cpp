// Generating text with a key-value cache (generate.h).
#include "text/generate.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include "core/autocast.h"
#include "core/error.h"
#include "models/lora.h"

namespace gputrain {

const char* generation_end_name(GenerationEnd r) {
  switch (r) {
    case GenerationEnd::kEndOfText: return "end_of_text";
    case GenerationEnd::kStopString: return "stop_string";
    case GenerationEnd::kMaxTokens: return "max_new_tokens";
    case GenerationEnd::kContext: return "context";
  }
  return "?";
}

torch::Tensor next_ids(torch::Tensor logits, const GenerateOptions& o, at::Generator& gen) {
  if (o.temperature <= 0) return logits.argmax(-1);
  logits = logits / o.temperature;
  const float minus_inf = -std::numeric_limits<float>::infinity();
  if (o.top_k > 0 && o.top_k < logits.size(-1)) {
    const auto kth = std::get<0>(logits.topk(o.top_k, -1)).narrow(-1, o.top_k - 1, 1);
    logits = logits.masked_fill(logits < kth, minus_inf);
  }
  if (o.top_p < 1.0) {
    // An id goes when the likelier ids before it already reach p; the likeliest always stays.
    const auto [sorted, order] = logits.sort(-1, /*descending=*/true);
    const auto probs = sorted.softmax(-1);
    const auto before = probs.cumsum(-1) - probs;
    const auto drop_sorted = before >= o.top_p;
    logits = logits.masked_fill(torch::zeros_like(drop_sorted).scatter(-1, order, drop_sorted), minus_inf);
  }
  return at::multinomial(logits.softmax(-1), 1, false, gen).squeeze(-1);
}

std::vector<Generation> generate(Net& model, torch::Device device, const std::vector<std::vector<int64_t>>& prompts,
                                 const GenerateOptions& o, const std::function<bool(size_t, int64_t)>& on_token,
                                 GenerateTimes* times) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const size_t rows = prompts.size();
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  if (rows == 0 || longest == 0) throw std::invalid_argument("generate: an empty prompt");
  const int64_t prompt_length = static_cast<int64_t>(longest);
  // The last new id is drawn, never fed back: the prompt and the new ids but the last fill at
  // most the context (the last position predicts one more id, as a training window's last label).
  const int64_t room = std::max<int64_t>(0, o.context - prompt_length + 1);
  const int64_t new_tokens = std::min(o.max_new_tokens, room);

  c10::InferenceMode inference;
  model.eval();
  // Weights laid out for products of `rows` rows, while this runs (models/lora.h).
  pack_for_decoding(model, static_cast<int64_t>(rows));
  struct Unpack {
    Net& m;
    ~Unpack() { unpack_after_decoding(m); }
  } unpack{model};
  auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  std::vector<int64_t> padded(rows * longest, 0), pad(rows);
  for (size_t r = 0; r < rows; ++r) {
    pad[r] = prompt_length - static_cast<int64_t>(prompts[r].size());
    std::copy(prompts[r].begin(), prompts[r].end(), padded.begin() + static_cast<std::ptrdiff_t>(r * longest + pad[r]));
  }
  KvCache cache;
  cache.capacity = prompt_length + std::max<int64_t>(new_tokens - 1, 0);
  if (*std::max_element(pad.begin(), pad.end()) > 0) cache.pad = torch::tensor(pad).to(device);
  auto input = torch::tensor(padded).view({static_cast<int64_t>(rows), prompt_length}).to(device);

  std::vector<Generation> out(rows);
  std::vector<bool> running(rows, true);
  size_t still = rows;
  for (int64_t step = 0; step < new_tokens && still > 0; ++step) {
    torch::Tensor logits;
    {
      AutocastGuard autocast(o.precision.amp, device.type(), o.precision.dtype);
      logits = model.forward_cached(input, cache).select(1, -1);
    }
    const auto next = next_ids(logits.to(torch::kFloat).cpu(), o, gen);
    const auto ids = next.accessor<int64_t, 1>();
    for (size_t r = 0; r < rows; ++r) {
      if (!running[r]) continue;
      const int64_t id = ids[static_cast<int64_t>(r)];
      out[r].ids.push_back(id);
      if (times && step > 0) ++times->decoded;
      const bool eot = std::find(o.end_of_text.begin(), o.end_of_text.end(), id) != o.end_of_text.end();
      if (eot || !on_token(r, id)) {
        out[r].stop = eot ? GenerationEnd::kEndOfText : GenerationEnd::kStopString;
        running[r] = false;
        --still;
      }
    }
    if (times && step == 0) times->first_token_s = std::chrono::duration<double>(Clock::now() - start).count();
    input = next.view({static_cast<int64_t>(rows), 1}).to(device);
  }
  // Rows still running stopped at --max_new_tokens, or at the context when that came first.
  for (size_t r = 0; r < rows; ++r)
    if (running[r] && new_tokens < o.max_new_tokens) out[r].stop = GenerationEnd::kContext;
  if (times) times->decode_s = std::chrono::duration<double>(Clock::now() - start).count() - times->first_token_s;
  return out;
}

}  // namespace gputrain
