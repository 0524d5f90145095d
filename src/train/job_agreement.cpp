// What the ranks of one job must share, and what each may have of its own.
#include "train/job_agreement.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "config/fields.h"
#include "core/error.h"
#include "core/text.h"
#include "parallel/comm.h"

namespace gputrain {
namespace {

// Fields each rank may set for itself. Everything else must be equal on every rank.
const std::map<std::string, const char*>& per_rank_fields() {
  static const std::map<std::string, const char*> fields = {
      // Its machine: which GPU, how many cores and loader threads, how host memory is copied.
      {"device", "each rank has its own GPU"},
      {"threads", "each machine has its own cores"},
      {"num_workers", "loader threads are measured on each machine"},
      {"prefetch_factor", "measured with the loader threads"},
      {"persistent_workers", "a loader setting of this machine"},
      {"pin_memory", "how this machine copies batches"},
      {"non_blocking", "how this machine copies batches"},
      // Speed switches that change rounding, not the job; they are resolved for each GPU.
      {"cudnn_benchmark", "autotuning is per device"},
      {"tf32", "resolved for each GPU"},
      {"channels_last", "resolved for each device"},
      {"fused_optimizer", "resolved for each device"},
      {"cuda_graphs", "resolved for each device"},
      {"attention_precision", "timed on each machine's CPU"},
      // Paths: each node may mount the data and weights elsewhere (their sizes are compared).
      {"data_dir", "a node's own mount"},
      {"train_file", "a node's own mount"},
      {"test_file", "a node's own mount"},
      {"train_targets", "a node's own mount"},
      {"test_targets", "a node's own mount"},
      {"init_from", "a node's own mount"},
      // Where the settings came from: their values are what is compared.
      {"preset", "its values are compared"},
      {"config", "its values are compared"},
      {"device_preset", "a preset of each machine"},
      // Rank 0's alone: it owns the run folder and decides where the run starts.
      {"output_dir", "rank 0 owns the run folder"},
      {"resume", "rank 0 decides where the run starts"},
      {"tensorboard", "rank 0 writes the run folder"},
      {"export", "rank 0 writes the export"},
      {"keep_checkpoints", "rank 0 writes the checkpoints"},
      {"monitor_interval", "rank 0 monitors the node"},
      {"dist_timeout", "each rank's own patience"},
  };
  return fields;
}

std::string shown(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

}  // namespace

nlohmann::json job_card(const Config& resolved, int64_t train_samples, int64_t test_samples) {
  nlohmann::json all = to_json(resolved), card = nlohmann::json::object();
  // A rank's batch is its own under --rank_batch_sizes (the list is compared), and so is the
  // number of micro-batches its pipeline cuts it into. (--balance auto splits the job-wide
  // --batch_size x ranks after this meeting: that batch is compared.)
  const bool own_batch = !resolved.rank_batch_sizes.empty();
  for (auto& [name, value] : all.items())
    if (!per_rank_fields().count(name) && !(own_batch && (name == "batch_size" || name == "micro_batches")))
      card[name] = value;
  card["training samples"] = train_samples;
  card["test samples"] = test_samples;
  return card;
}

std::string job_differences(const std::vector<nlohmann::json>& cards) {
  if (cards.empty()) return "";
  std::set<std::string> names;
  for (const auto& card : cards)
    for (const auto& [name, value] : card.items()) names.insert(name);
  std::vector<std::string> found;
  for (const auto& name : names) {
    // Each value, with the ranks that have it, in rank order of first appearance.
    std::vector<std::pair<std::string, std::vector<int>>> values;
    for (size_t r = 0; r < cards.size(); ++r) {
      const std::string v = cards[r].contains(name) ? shown(cards[r][name]) : "(not set)";
      auto it = std::find_if(values.begin(), values.end(), [&](const auto& p) { return p.first == v; });
      if (it == values.end()) values.push_back({v, {static_cast<int>(r)}});
      else it->second.push_back(static_cast<int>(r));
    }
    if (values.size() < 2) continue;
    std::vector<std::string> parts;
    for (const auto& [v, ranks] : values) {
      std::vector<std::string> rs;
      for (int r : ranks) rs.push_back(std::to_string(r));
      parts.push_back(fmt::format("{} on rank{} {}", v.empty() ? "''" : v, ranks.size() == 1 ? "" : "s", join(rs, ", ")));
    }
    const bool flag = find_field(name) != nullptr;
    found.push_back(fmt::format("{}{} is {}", flag ? "--" : "", name, join(parts, ", ")));
  }
  if (found.empty()) return "";
  const size_t shown_max = 3;  // one line: the first few, and how many more
  std::string line = "the ranks run different jobs: " +
                     join(std::vector<std::string>(found.begin(), found.begin() + std::min(found.size(), shown_max)), "; ");
  if (found.size() > shown_max) line += fmt::format(" (and {} more)", found.size() - shown_max);
  return line;
}

void agree_on_job(Comm& comm, const Config& resolved, int64_t train_samples, int64_t test_samples) {
  const auto sent = comm.gather("compare jobs", job_card(resolved, train_samples, test_samples).dump());
  if (comm.rank() == 0) {
    std::vector<nlohmann::json> cards;
    for (const auto& s : sent) cards.push_back(nlohmann::json::parse(s));
    const std::string differences = job_differences(cards);
    if (!differences.empty())
      comm.refuse(usage_error(differences, "start every rank with the same flags and data (each rank may have its own "
                                           "device, threads, loader settings, speed switches and paths)"));
  }
  comm.share("jobs agree", "");  // the others wait here for the verdict, or hear the refusal
}

}  // namespace gputrain
