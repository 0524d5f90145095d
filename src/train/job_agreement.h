// Ranks that must agree: before the ranks exchange weights, rank 0 compares every rank's job (the
// job-wide part of its resolved config, its world size and the size of its data) and refuses
// the job on every rank, naming the flag and the ranks, when they differ. A rank started with
// another --lr would otherwise train to exit 0 and another --width abort in the collectives.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"

namespace gputrain {

class Comm;

// This rank's job: the fields every rank must share, and the sizes of its data.
nlohmann::json job_card(const Config& resolved, int64_t train_samples, int64_t test_samples);

// "" when the cards (in rank order) agree; else one line naming what differs and on which ranks.
std::string job_differences(const std::vector<nlohmann::json>& cards);

// The meeting: every rank's card to rank 0, its verdict to all; a difference is a usage error
// (exit 2) on every rank.
void agree_on_job(Comm& comm, const Config& resolved, int64_t train_samples, int64_t test_samples);

}  // namespace gputrain
