// Comparing the weights two runs exported (--export FILE.safetensors), for the tests that prove
// one way of training equals another (data parallel, pipeline stages, resumes).
#pragma once
#include <catch2/catch.hpp>

#include <string>

#include <torch/torch.h>

#include "weights/safetensors.h"

namespace gputrain::test {

// Every tensor of `a` is in `b` with the same name, equal within rtol/atol.
inline void check_same_weights(const std::string& a, const std::string& b, double rtol = 1e-5, double atol = 1e-6) {
  auto wa = load_safetensors(a), wb = load_safetensors(b);
  REQUIRE(wa.size() == wb.size());
  REQUIRE_FALSE(wa.empty());
  for (const auto& [name, t] : wa) {
    INFO(name);
    REQUIRE(wb.count(name));
    REQUIRE(t.sizes() == wb.at(name).sizes());
    INFO("largest difference " << (t - wb.at(name)).abs().max().item<double>() << " of a largest value "
                               << t.abs().max().item<double>());
    CHECK(torch::allclose(t, wb.at(name), rtol, atol));
  }
}

}  // namespace gputrain::test
