// LoRA adapters (models/lora.h): added to gpt and llama, they start as the base model, only they
// are left to train, and merging them into the weights gives the adapted model's logits.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "data/schema.h"
#include "models/lora.h"
#include "models/registry.h"

using namespace gputrain;

TEST_CASE("lora: adapters start as the base model, and merged weights compute the adapted one", "[models]") {
  const std::string family = GENERATE("gpt", "llama");
  INFO(family);
  torch::manual_seed(2);
  ModelSpec s;
  s.num_classes = 100;
  s.width = 32;
  s.depth = 2;
  s.heads = 4;
  auto schema = std::make_shared<SampleSchema>();
  schema->fields = {{"input_ids", DType::kI64, {8}}, {"labels", DType::kI64, {8}}};
  schema->target = "labels";
  s.fields = schema;
  auto net = make_model(family, s);
  net->eval();
  torch::NoGradGuard no_grad;
  const auto ids = torch::randint(0, 100, {2, 8}, torch::kLong);
  const auto before = net->forward(ids);
  const int64_t base_count = static_cast<int64_t>(net->named_parameters().size());

  const auto frozen = add_lora(*net, 4, 8);
  CHECK(static_cast<int64_t>(frozen.size()) == base_count);  // every base parameter, no adapter
  const int64_t projections = family == "gpt" ? 4 : 7;
  CHECK(static_cast<int64_t>(net->named_parameters().size()) == base_count + 2 * projections * 2);
  CHECK((net->forward(ids) - before).abs().max().item<double>() == 0);  // B starts at zero

  // Trained adapters (B no longer zero): the merged weights in a fresh copy give the same logits.
  for (auto& p : net->named_parameters())
    if (is_lora_parameter(p.key())) p.value().normal_(0, 0.1);
  const auto adapted = net->forward(ids);
  CHECK((adapted - before).abs().max().item<double>() > 1e-3);
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& p : net->named_parameters()) tensors.emplace_back(p.key(), p.value().clone());
  CHECK(merge_lora(tensors, 8.0 / 4) == 2 * projections);
  CHECK(tensors.size() == static_cast<size_t>(base_count));
  torch::manual_seed(9);
  auto plain = make_model(family, s);
  plain->eval();
  auto params = plain->named_parameters();
  for (const auto& [name, t] : tensors) params[name].copy_(t);
  CHECK((plain->forward(ids) - adapted).abs().max().item<double>() < 1e-5);
}
