// Generating text: the key-value cache against the full forward, left padding, the sampling
// filters, and the CLI against Hugging Face (tests/python/generate_check.py).
#include <catch2/catch.hpp>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "data/schema.h"
#include "models/registry.h"
#include "test_python.h"
#include "test_util.h"
#include "text/generate.h"
#include "text/token_decoder.h"

using namespace gputrain;

namespace {

// A small language model of family `name` (llama: 2 key/value heads for the 4 query heads).
NetPtr small_lm(int64_t positions, const std::string& name = "gpt") {
  torch::manual_seed(3);
  ModelSpec s;
  s.num_classes = 300;
  s.width = 32;
  s.depth = 2;
  s.heads = 4;
  if (name == "llama") s.kv_heads = 2;
  auto schema = std::make_shared<SampleSchema>();
  schema->fields = {{"input_ids", DType::kI64, {positions}}, {"labels", DType::kI64, {positions}}};
  schema->target = "labels";
  s.fields = schema;
  auto net = make_model(name, s);
  net->eval();
  return net;
}

}  // namespace

TEST_CASE("generate: the cache's logits equal the full forward's at every position, in any pass lengths",
          "[models][text]") {
  const std::string family = GENERATE("gpt", "llama");
  INFO(family);
  auto net = small_lm(24, family);
  torch::NoGradGuard no_grad;
  const auto ids = torch::randint(0, 300, {2, 20}, torch::kLong);
  const auto full = net->forward(ids);
  KvCache cache;
  cache.capacity = 24;
  std::vector<torch::Tensor> parts;
  // A prompt pass of 7, single tokens, then a pass of 3 after the cache holds some (a mask).
  int64_t at = 0;
  for (int64_t n : {7, 1, 1, 3, 1, 7}) {
    parts.push_back(net->forward_cached(ids.narrow(1, at, n), cache));
    at += n;
  }
  CHECK(cache.length == 20);
  const auto cached = torch::cat(parts, 1);
  CHECK(cached.sizes() == full.sizes());
  CHECK((cached - full).abs().max().item<double>() < 1e-5);
  // Beyond the capacity: refused, nothing written.
  CHECK_THROWS(net->forward_cached(ids.narrow(1, 0, 5), cache));
  CHECK(cache.length == 20);
}

TEST_CASE("generate: a row padded on the left gives the logits it gives alone", "[models][text]") {
  const std::string family = GENERATE("gpt", "llama");
  INFO(family);
  auto net = small_lm(16, family);
  torch::NoGradGuard no_grad;
  const auto longer = torch::randint(0, 300, {1, 9}, torch::kLong), shorter = torch::randint(0, 300, {1, 5}, torch::kLong);
  // Row 1 is `shorter` behind 4 slots of padding (any id: no real token sees them).
  const auto batch = torch::cat({longer, torch::cat({torch::full({1, 4}, 299, torch::kLong), shorter}, 1)});
  KvCache cache;
  cache.capacity = 12;
  cache.pad = torch::tensor({int64_t{0}, int64_t{4}});
  const auto prompt = net->forward_cached(batch, cache);
  const auto next = torch::randint(0, 300, {2, 3}, torch::kLong);
  const auto after = net->forward_cached(next, cache);
  const auto alone = net->forward(torch::cat({shorter, next.narrow(0, 1, 1)}, 1));
  CHECK((prompt[1].narrow(0, 4, 5) - alone[0].narrow(0, 0, 5)).abs().max().item<double>() < 1e-5);
  CHECK((after[1] - alone[0].narrow(0, 5, 3)).abs().max().item<double>() < 1e-5);
  const auto first = net->forward(torch::cat({longer, next.narrow(0, 0, 1)}, 1));
  CHECK((after[0] - first[0].narrow(0, 9, 3)).abs().max().item<double>() < 1e-5);
  CHECK(torch::isfinite(prompt).all().item<bool>());
}

TEST_CASE("generate: greedy, top-k and top-p keep the ids they should, and a seed repeats a draw", "[text]") {
  const auto logits = torch::tensor({{0.0f, 3.0f, 1.0f, 2.9f, -1.0f}, {5.0f, 0.0f, 0.0f, 0.0f, 0.0f}});
  GenerateOptions o;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
  o.temperature = 0;
  CHECK(next_ids(logits, o, gen).equal(torch::tensor({int64_t{1}, int64_t{0}})));
  // Top-k 2: only ids 1 and 3 in row 0, over many draws; top-k 1 is the arg-max at any temperature.
  o.temperature = 1;
  o.top_k = 2;
  std::set<int64_t> seen;
  for (int i = 0; i < 200; ++i) seen.insert(next_ids(logits, o, gen)[0].item<int64_t>());
  CHECK(seen == std::set<int64_t>{1, 3});
  o.top_k = 1;
  o.temperature = 100;
  CHECK(next_ids(logits, o, gen).equal(torch::tensor({int64_t{1}, int64_t{0}})));
  // Top-p: row 1's id 0 holds 0.97 of the mass; p = 0.9 keeps it alone. Row 0 at p = 0.5: ids
  // 1 (0.45) and 3 (0.41) reach it, and nothing else is drawn.
  o.top_k = 0;
  o.temperature = 1;
  o.top_p = 0.5;
  std::set<int64_t> kept0, kept1;
  for (int i = 0; i < 200; ++i) {
    const auto ids = next_ids(logits, o, gen);
    kept0.insert(ids[0].item<int64_t>());
    kept1.insert(ids[1].item<int64_t>());
  }
  CHECK(kept0 == std::set<int64_t>{1, 3});
  CHECK(kept1 == std::set<int64_t>{0});
  // The same seed, the same draws.
  o.top_p = 1;
  auto a = at::make_generator<at::CPUGeneratorImpl>(9), b = at::make_generator<at::CPUGeneratorImpl>(9);
  for (int i = 0; i < 5; ++i) CHECK(next_ids(logits, o, a).equal(next_ids(logits, o, b)));
}

TEST_CASE("generate: stops at the end-of-text id, a stop request and the context", "[models][text]") {
  auto net = small_lm(10);
  GenerateOptions o;
  o.temperature = 0;
  o.context = 10;
  o.max_new_tokens = 100;
  // Greedy from one prompt, to learn which ids come; then that id as end-of-text stops there.
  std::vector<std::vector<int64_t>> prompts{{5, 6, 7}};
  const auto all = generate(*net, torch::kCPU, prompts, o, [](size_t, int64_t) { return true; });
  REQUIRE(all[0].ids.size() == 8);  // the prompt and 7 new ids fill the 10 positions; the last predicts the 8th
  CHECK(all[0].stop == GenerationEnd::kContext);
  o.end_of_text = {all[0].ids[2]};
  const auto eot = generate(*net, torch::kCPU, prompts, o, [](size_t, int64_t) { return true; });
  const auto first = std::find(all[0].ids.begin(), all[0].ids.end(), all[0].ids[2]) - all[0].ids.begin();
  CHECK(eot[0].ids == std::vector<int64_t>(all[0].ids.begin(), all[0].ids.begin() + first + 1));
  CHECK(eot[0].stop == GenerationEnd::kEndOfText);
  o.end_of_text.clear();
  int seen = 0;
  const auto stopped = generate(*net, torch::kCPU, prompts, o, [&](size_t, int64_t) { return ++seen < 2; });
  CHECK(stopped[0].ids.size() == 2);
  CHECK(stopped[0].stop == GenerationEnd::kStopString);
  o.max_new_tokens = 3;
  CHECK(generate(*net, torch::kCPU, prompts, o, [](size_t, int64_t) { return true; })[0].stop == GenerationEnd::kMaxTokens);
}

TEST_CASE("generate: a text still being written shows no half character", "[text]") {
  CHECK(complete_utf8_length("ab") == 2);
  CHECK(complete_utf8_length("a\xC3") == 1);              // the first byte of a two-byte character
  CHECK(complete_utf8_length("a\xC3\xA9") == 3);          // é, whole
  CHECK(complete_utf8_length("a\xF0\x9F\x98") == 1);      // three bytes of a four-byte emoji
  CHECK(complete_utf8_length("a\xF0\x9F\x98\x80") == 5);  // the emoji, whole
  CHECK(complete_utf8_length("\x80\x80") == 2);           // no lead byte: left as it is (decoded as U+FFFD)
}

TEST_CASE("generate: the CLI encodes as tokenizers and decodes greedily as transformers' generate", "[text][python][cli]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  std::string log;
  const int code = test::python("generate_check.py " + std::string(test::gputrain_exe()) + " " + dir.path.string(), log);
  INFO(log);
  if (code == 77) {
    WARN("transformers or tokenizers is not installed (.pydeps-text): generate not compared with Hugging Face");
    return;
  }
  CHECK(code == 0);
}
