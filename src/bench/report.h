// Benchmark output: the aligned table, and the same results as JSON, CSV and Markdown.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "bench/data_parallel.h"
#include "bench/runner.h"
#include "core/recipe.h"

namespace gputrain {

struct BenchReport {
  Recipe context;            // of the baseline variant: the device report
  nlohmann::json* workload;  // the resolved configuration (borrowed)
  BenchSettings settings;
  std::vector<VariantResult> results;
  std::string memory_kind;  // "GPU (caching allocator)" or "host (peak RSS)"
  std::string verdict;      // bottleneck attribution; empty when not measured
  std::string explain;      // --explain: where the fastest variant's step goes; empty without it
  std::optional<DataParallelResult> data_parallel;  // with several ranks
};

std::string format_table(const BenchReport& r);
std::string format_markdown(const BenchReport& r);
std::string format_csv(const BenchReport& r);
nlohmann::json to_json(const BenchReport& r);

}  // namespace gputrain
