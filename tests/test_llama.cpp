// llama: its layout and refusals, and against Hugging Face's LlamaForCausalLM
// (tests/python/llama_check.py).
#include <catch2/catch.hpp>

#include <map>

#include <torch/torch.h>

#include "data/schema.h"
#include "models/registry.h"
#include "test_errors.h"
#include "test_python.h"
#include "test_util.h"

using namespace gputrain;

namespace {

ModelSpec llama_spec(int64_t kv_heads, bool tied) {
  ModelSpec s;
  s.num_classes = 300;
  s.width = 32;
  s.depth = 2;
  s.heads = 4;
  s.kv_heads = kv_heads;
  s.tie_embeddings = tied;
  auto schema = std::make_shared<SampleSchema>();
  schema->fields = {{"input_ids", DType::kI64, {12}}, {"labels", DType::kI64, {12}}};
  schema->target = "labels";
  s.fields = schema;
  return s;
}

}  // namespace

TEST_CASE("models: llama is causal, shares key/value heads and ties its head only when asked", "[models]") {
  torch::manual_seed(0);
  auto net = make_model("llama", llama_spec(2, false));
  std::map<std::string, torch::Tensor> params;
  for (const auto& p : net->named_parameters()) params[p.key()] = p.value();
  CHECK(params.at("model.layers.0.self_attn.q_proj.weight").sizes() == torch::IntArrayRef({32, 32}));
  CHECK(params.at("model.layers.0.self_attn.k_proj.weight").sizes() == torch::IntArrayRef({16, 32}));  // 2 of 4 heads
  CHECK(params.at("model.layers.1.mlp.gate_proj.weight").sizes() == torch::IntArrayRef({256, 32}));   // 8/3 x 32, up to 256
  CHECK(params.at("lm_head.weight").sizes() == torch::IntArrayRef({300, 32}));
  CHECK(params.count("model.layers.0.self_attn.q_proj.bias") == 0);
  net->eval();
  torch::NoGradGuard no_grad;
  const auto ids = torch::randint(0, 300, {2, 12}, torch::kLong);
  const auto logits = net->forward(ids);
  CHECK(logits.sizes() == torch::IntArrayRef({2, 12, 300}));
  auto other = ids.clone();
  other.index_put_({torch::indexing::Slice(), 11}, (ids.index({torch::indexing::Slice(), 11}) + 1) % 300);
  const auto changed = net->forward(other);
  CHECK(torch::allclose(changed.narrow(1, 0, 11), logits.narrow(1, 0, 11)));
  CHECK_FALSE(torch::allclose(changed.narrow(1, 11, 1), logits.narrow(1, 11, 1)));
  // Tied: no lm_head; the embedding's row 5 is the head's.
  auto tied = make_model("llama", llama_spec(1, true));
  std::map<std::string, torch::Tensor> tied_params;
  for (const auto& p : tied->named_parameters()) tied_params[p.key()] = p.value();
  CHECK(tied_params.count("lm_head.weight") == 0);
  tied_params.at("model.embed_tokens.weight")[5].zero_();
  CHECK(tied->forward(torch::full({1, 12}, 7, torch::kLong)).select(2, 5).abs().max().item<double>() == 0);
  // Refused: key/value heads that do not divide the query heads.
  CHECK_THAT(test::error_of([] { make_model("llama", llama_spec(3, false)); }),
             Catch::Contains("--kv_heads 3 does not divide --heads 4"));
}

TEST_CASE("llama: logits, 3 AdamW steps, export and greedy text equal Hugging Face's LlamaForCausalLM",
          "[models][python][cli]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  std::string log;
  const int code = test::python("llama_check.py " + std::string(test::gputrain_exe()) + " " + dir.path.string(), log);
  INFO(log);
  if (code == 77) {
    WARN("transformers is not installed (.pydeps-text): llama not compared with Hugging Face's Llama");
    return;
  }
  CHECK(code == 0);
}

TEST_CASE("llama: LoRA adapters train as the same adapters in PyTorch, and export merges them (tests/python/lora_check.py)",
          "[models][python][cli]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  std::string log;
  const int code = test::python("lora_check.py " + std::string(test::gputrain_exe()) + " " + dir.path.string(), log);
  INFO(log);
  if (code == 77) {
    WARN("transformers is not installed (.pydeps-text): LoRA not compared with PyTorch");
    return;
  }
  CHECK(code == 0);
}
