// Packed instruction data: the shards' loss mask and positions (data/token_dataset.h), and the
// language models giving each packed example the logits it gives alone (models/documents.h).
#include <catch2/catch.hpp>

#include <fstream>

#include <torch/torch.h>

#include "core/error.h"
#include "data/batch.h"
#include "data/schema.h"
#include "data/token_dataset.h"
#include "models/registry.h"
#include "test_python.h"
#include "test_util.h"

using namespace gputrain;

namespace {

constexpr int64_t kEot = 256;

// A 1-D uint8 .npy, as np.save writes one.
void write_mask(const std::string& path, const std::vector<int64_t>& mask) {
  std::string header = "{'descr': '|u1', 'fortran_order': False, 'shape': (" + std::to_string(mask.size()) + ",), }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const auto length = static_cast<uint16_t>(header.size());
  out.write(reinterpret_cast<const char*>(&length), 2);
  out << header;
  for (int64_t m : mask) out.put(static_cast<char>(m));
}

struct Fields : FieldWriter {
  std::vector<int64_t> ids, labels, positions;
  explicit Fields(int64_t n) : ids(n), labels(n), positions(n) {}
  void* field(size_t f, int64_t) override { return f == 0 ? ids.data() : f == 1 ? labels.data() : positions.data(); }
};

NetPtr small_lm(const std::string& family, int64_t T) {
  torch::manual_seed(5);
  ModelSpec s;
  s.num_classes = 300;
  s.width = 32;
  s.depth = 2;
  s.heads = 4;
  if (family == "llama") s.kv_heads = 2;
  auto schema = std::make_shared<SampleSchema>();
  schema->fields = {{"input_ids", DType::kI64, {T}}, {"labels", DType::kI64, {T}}, {"positions", DType::kI64, {T}}};
  schema->target = "labels";
  s.fields = schema;
  auto net = make_model(family, s);
  net->eval();
  return net;
}

}  // namespace

TEST_CASE("tokens: packed shards train on the masked tokens only, positions restart at each example", "[data]") {
  test::TempDir dir;
  // Two windows of 6 (+1): [E p p r r E] [E p r E E E] E; the mask marks responses and the
  // end-of-text after each.
  const std::vector<uint16_t> tokens{kEot, 10, 11, 20, 21, kEot, kEot, 12, 22, kEot, kEot, kEot, kEot};
  const std::vector<int64_t> mask{0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0};
  test::write_token_shard(dir / "train_000000.bin", tokens);
  write_mask(dir / "train_000000.mask.npy", mask);
  TokenDataset d({dir / "train_000000.bin"}, 6, 257, 0, kEot);
  REQUIRE(d.size() == 2);
  REQUIRE(d.named_fields()->fields.size() == 3);
  CHECK(d.named_fields()->fields[2].name == "positions");
  Fields w(6);
  d.get_fields(0, w, 0);
  CHECK(w.ids == std::vector<int64_t>{kEot, 10, 11, 20, 21, kEot});
  CHECK(w.labels == std::vector<int64_t>{-100, -100, 20, 21, kEot, -100});
  CHECK(w.positions == std::vector<int64_t>{0, 1, 2, 3, 4, 0});
  d.get_fields(1, w, 0);
  CHECK(w.ids == std::vector<int64_t>{kEot, 12, 22, kEot, kEot, kEot});
  CHECK(w.labels == std::vector<int64_t>{-100, 22, kEot, -100, -100, -100});
  CHECK(w.positions == std::vector<int64_t>{0, 1, 2, 0, 0, 0});

  // A mask of another length, or none: refused, naming the file.
  write_mask(dir / "train_000000.mask.npy", std::vector<int64_t>(12, 1));
  CHECK_THROWS_WITH(TokenDataset({dir / "train_000000.bin"}, 6, 257, 0, kEot),
                    Catch::Contains("train_000000.mask.npy: 12 mask values for 13 tokens"));
  std::filesystem::remove(dir / "train_000000.mask.npy");
  CHECK_THROWS_WITH(TokenDataset({dir / "train_000000.bin"}, 6, 257, 0, kEot),
                    Catch::Contains("packed instruction data without its loss mask"));
}

TEST_CASE("packed examples: each example's logits in a window equal the example's alone", "[models][text]") {
  const std::string family = GENERATE("gpt", "llama");
  INFO(family);
  constexpr int64_t T = 12;
  auto net = small_lm(family, T);
  torch::NoGradGuard no_grad;
  // Examples of 5, 4 and 1 token(s), then two fillers: each starts at an end-of-text token.
  const auto ids = torch::tensor({kEot, 3L, 4L, 5L, 6L, kEot, 7L, 8L, 9L, kEot, kEot, kEot}, torch::kLong).unsqueeze(0);
  const auto positions = torch::tensor({0L, 1L, 2L, 3L, 4L, 0L, 1L, 2L, 3L, 0L, 0L, 0L}, torch::kLong).unsqueeze(0);
  Batch b;
  b.names = {"input_ids", "labels", "positions"};
  b.tensors = {ids, ids, positions};
  b.target = "labels";
  const auto packed = net->forward_batch(b);
  REQUIRE(packed.sizes() == torch::IntArrayRef({1, T, 300}));
  for (auto [start, length] : {std::pair<int64_t, int64_t>{0, 5}, {5, 4}, {9, 1}, {10, 1}}) {
    INFO("example at " << start);
    const auto alone = net->forward(ids.narrow(1, start, length));
    CHECK((packed.narrow(1, start, length) - alone).abs().max().item<double>() < 1e-5);
  }
  // The head's input (the fused loss's path) is the same computation.
  const auto head = net->forward_head(b);
  CHECK((torch::nn::functional::linear(head.hidden, head.weight) - packed).abs().max().item<double>() < 1e-6);
  // Without the field the window is one causal sequence, as before.
  Batch plain;
  plain.names = {"input_ids", "labels"};
  plain.tensors = {ids, ids};
  plain.target = "labels";
  CHECK((net->forward_batch(plain) - net->forward(ids)).abs().max().item<double>() == 0);
}

TEST_CASE("instructions: JSONL -> packed shards -> a fine-tuned llama that answers (tests/python/instructions_check.py)",
          "[models][python][cli][text]") {
  if (!test::have_python()) return;
  test::TempDir dir;
  std::string log;
  const int code = test::python("instructions_check.py " + std::string(test::gputrain_exe()) + " " + dir.path.string(), log);
  INFO(log);
  CHECK(code == 0);
}
