// The head fused with its cross-entropy, in chunks (step/head_loss.h), against the plain head and
// ATen's cross_entropy: the same loss and gradients in fp32, within bf16 rounding under autocast.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include "core/autocast.h"
#include "step/head_loss.h"

using namespace gputrain;

namespace {

struct Grads {
  torch::Tensor loss, hidden, table;
};

// A tied head as the gpt model has it: the weight is the first `classes` rows of a padded table.
struct Case {
  torch::Tensor hidden, table, y;
  int64_t classes;
};

Case make_case(int64_t classes) {
  torch::manual_seed(7);
  Case c;
  c.classes = classes;
  c.hidden = torch::randn({3, 11, 16}).requires_grad_();
  c.table = (torch::randn({classes + 13, 16}) * 0.3).requires_grad_();
  c.y = torch::randint(0, classes, {3, 11});
  c.y.index_put_({0, torch::indexing::Slice(0, 4)}, kIgnoreIndex);  // a prompt, not trained on
  c.y.index_put_({2, 10}, kIgnoreIndex);
  return c;
}

// Forward (under bf16 autocast when asked) and a backward from 0.37 x the summed loss, as a step
// weighting its loss would.
Grads run(const Case& c, bool fused, double smoothing, bool bf16, int64_t chunk_elements) {
  c.hidden.mutable_grad() = torch::Tensor();
  c.table.mutable_grad() = torch::Tensor();
  Grads g;
  {
    AutocastGuard autocast(bf16, torch::kCPU, torch::kBFloat16);
    const HeadInput head{c.hidden, c.table.narrow(0, 0, c.classes)};
    if (fused) {
      g.loss = head_cross_entropy(head, c.y, smoothing, chunk_elements);
    } else {
      const auto logits = torch::nn::functional::linear(head.hidden, head.weight);
      g.loss = task_loss(logits, c.y, LossSpec{.label_smoothing = smoothing}, /*sum=*/true);
    }
  }
  (g.loss * 0.37).backward();
  g.hidden = c.hidden.grad().clone();
  g.table = c.table.grad().clone();
  return g;
}

// The plain head's gradient of the hidden states, the head frozen.
torch::Tensor run_plain_hidden_grad(const Case& c) {
  c.hidden.mutable_grad() = torch::Tensor();
  const auto logits = torch::nn::functional::linear(c.hidden, c.table.narrow(0, 0, c.classes));
  (task_loss(logits, c.y, LossSpec{}, /*sum=*/true) * 0.37).backward();
  return c.hidden.grad().clone();
}

void check_close(const Grads& a, const Grads& b, double tol) {
  CHECK(a.loss.item<double>() == Approx(b.loss.item<double>()).epsilon(tol));
  CHECK(torch::allclose(a.hidden, b.hidden, tol, tol));
  CHECK(torch::allclose(a.table, b.table, tol, tol));
}

}  // namespace

TEST_CASE("head loss: chunked and fused equals the plain head's cross-entropy, ignored tokens and smoothing", "[head_loss]") {
  const Case c = make_case(50);
  for (double smoothing : {0.0, 0.1}) {
    const auto plain = run(c, false, smoothing, false, 0);
    // 4 rows a chunk (9 chunks, the last short), and all 33 rows in one.
    for (int64_t elements : {int64_t{50 * 4}, kHeadChunkElements}) {
      INFO("smoothing " << smoothing << ", chunk elements " << elements);
      check_close(run(c, true, smoothing, false, elements), plain, 1e-5);
    }
  }
  // The padded rows past the head are no logit: their gradient is zero.
  const auto fused = run(c, true, 0.0, false, 200);
  CHECK(fused.table.narrow(0, 50, 13).abs().max().item<double>() == 0.0);

  // A frozen head: the hidden states' gradient alone, the same.
  c.table.requires_grad_(false);
  c.table.mutable_grad() = torch::Tensor();
  const auto plain_grad = run_plain_hidden_grad(c);
  const HeadInput head{c.hidden, c.table.narrow(0, 0, 50)};
  c.hidden.mutable_grad() = torch::Tensor();
  (head_cross_entropy(head, c.y, 0.0, 200) * 0.37).backward();
  CHECK(torch::allclose(c.hidden.grad(), plain_grad, 1e-5, 1e-5));
  CHECK_FALSE(c.table.grad().defined());
}

TEST_CASE("head loss: under bf16 autocast the fused head stays within bf16 rounding of the plain one", "[head_loss]") {
  const Case c = make_case(50);
  const auto plain = run(c, false, 0.0, true, 0);
  check_close(run(c, true, 0.0, true, 200), plain, 2e-2);
  // The loss is computed in float32 either way: the bf16 run stays near the fp32 one.
  CHECK(run(c, true, 0.0, true, 200).loss.item<double>() ==
        Approx(run(c, false, 0.0, false, 0).loss.item<double>()).epsilon(2e-2));
}

TEST_CASE("head loss: without autograd the chunks give the same sum, and the step's mean divides by counted tokens", "[head_loss]") {
  const Case c = make_case(50);
  const auto plain = run(c, false, 0.1, false, 0).loss.item<double>();
  torch::NoGradGuard no_grad;
  const HeadInput head{c.hidden, c.table.narrow(0, 0, 50)};
  CHECK(head_cross_entropy(head, c.y, 0.1, 200).item<double>() == Approx(plain).epsilon(1e-5));
  const ForwardOutput out{{}, head};
  const double counted = c.y.ne(kIgnoreIndex).sum().item<double>();  // 33 - 5
  CHECK(counted == 28);
  CHECK(output_loss(out, c.y, LossSpec{.label_smoothing = 0.1}).item<double>() == Approx(plain / counted).epsilon(1e-5));
  // Evaluation's chunks: one sample of those tokens each, their rows in order.
  int64_t rows = 0;
  for_each_logits_chunk(
      head, c.y,
      [&](const torch::Tensor& logits, const torch::Tensor& y) {
        CHECK(logits.dim() == 3);
        CHECK(logits.size(2) == 50);
        CHECK(y.sizes() == torch::IntArrayRef({1, logits.size(1)}));
        CHECK(torch::equal(y[0], c.y.reshape(-1).narrow(0, rows, y.size(1))));
        rows += y.size(1);
      },
      50 * 8);
  CHECK(rows == 33);
}
