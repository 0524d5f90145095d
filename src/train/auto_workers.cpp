// --num_workers auto, --prefetch_factor auto: each setting timed for a few probe steps, warm-up
// batches left out.
#include "train/auto_workers.h"

#include <algorithm>
#include <chrono>

#include "config/config.h"
#include "train/keep_state.h"

namespace gputrain {

WorkersChoice choose_workers(Trainer& trainer, DatasetPtr train, LoaderOptions options, int cores, int64_t steps) {
  using Clock = std::chrono::steady_clock;
  constexpr int64_t kWarmup = 2;  // thread start and the first allocations are not the steady state
  KeepRng keep_rng(options.device);
  TensorSnapshot buffers(trainer.model(), /*with_parameters=*/false);

  WorkersChoice choice;
  choice.steps = steps;
  std::vector<int64_t> workers = {options.num_workers};
  if (options.num_workers == kAuto) {
    workers = {0};
    for (int64_t w = 1; w <= std::max(cores, 1); w *= 2) workers.push_back(w);
  }
  std::vector<std::pair<int64_t, int64_t>> settings;  // (threads, prefetch)
  for (int64_t w : workers) {
    if (w == 0) settings.push_back({0, options.prefetch_factor == kAuto ? 2 : options.prefetch_factor});
    else if (options.prefetch_factor != kAuto) settings.push_back({w, options.prefetch_factor});
    else for (int64_t p : {1, 2, 4}) settings.push_back({w, p});
  }
  for (const auto& [w, p] : settings) {
    options.num_workers = w;
    options.prefetch_factor = p;
    Loader loader(train, options);
    loader.start_epoch(0);
    double wait = 0, total = 0;
    for (int64_t i = 0; i < kWarmup + steps; ++i) {
      const auto t0 = Clock::now();
      auto batch = loader.next();
      if (!batch) break;  // a small dataset: what was measured stands
      const auto t1 = Clock::now();
      trainer.probe(*batch);  // syncs with a GPU; out of memory returns false, the timing stands
      if (i < kWarmup) continue;
      wait += std::chrono::duration<double>(t1 - t0).count();
      total += std::chrono::duration<double>(Clock::now() - t0).count();
    }
    choice.trials.push_back({w, p, total > 0 ? wait / total : 1.0});
    if (choice.trials.back().wait_fraction < 0.05) break;
  }
  // The search stopped at the first setting under 5%; failing that, the least waiting wins.
  const auto best = std::min_element(choice.trials.begin(), choice.trials.end(),
                                     [](const auto& a, const auto& b) { return a.wait_fraction < b.wait_fraction; });
  choice.workers = best->workers;
  choice.prefetch = best->prefetch;

  buffers.restore();
  return choice;
}

}  // namespace gputrain
