// c10d collectives between real processes over Gloo on 127.0.0.1: each rank is a forked child
// that joins, all-reduces, broadcasts and exits 0 only when every number is right.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <torch/torch.h>

#include "core/error.h"
#include "parallel/comm.h"
#include "parallel/launcher.h"

using namespace gputrain;

namespace {

// Runs `body(rank)` in `world` forked processes joined over one port; returns their exit codes.
std::vector<int> run_ranks(int world, const std::function<bool(Comm&)>& body, double timeout = 20,
                           int skip_rank = -1) {
  const int port = free_port();
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      if (r == skip_rank) _exit(9);  // a rank that never joins
      int code = 1;
      try {
        RankEnv env;
        env.rank = r;
        env.world_size = env.local_world_size = world;
        env.local_rank = r;
        env.master_port = port;
        env.source = "test";
        Comm comm(env, timeout);
        comm.connect(-1);
        code = body(comm) ? 0 : 1;
      } catch (const Error& e) {
        code = 2;
        fprintf(stderr, "rank %d: %s\n", r, e.problems.at(0).c_str());
      } catch (const std::exception& e) {
        code = 3;
        fprintf(stderr, "rank %d: %s\n", r, e.what());
      }
      _exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  return codes;
}

}  // namespace

TEST_CASE("comm: all-reduce and broadcast over Gloo between real processes", "[dist]") {
  for (int world : {2, 3}) {
    INFO("world " << world);
    auto codes = run_ranks(world, [&](Comm& c) {
      const double r = c.rank();
      // Two dtypes and shapes: one flattened buffer per dtype, copied back in place.
      auto a = torch::full({1000}, r + 1), b = torch::full({3, 4}, r, torch::kDouble);
      auto i = torch::full({5}, static_cast<int64_t>(c.rank()) * 10, torch::kLong);
      c.all_reduce_sum({a, b, i});
      const double n = c.size();
      bool ok = a.eq(n * (n + 1) / 2).all().item<bool>() && b.eq(n * (n - 1) / 2).all().item<bool>() &&
                i.eq(static_cast<int64_t>(10 * n * (n - 1) / 2)).all().item<bool>();
      auto w = torch::full({7, 2}, r).t();  // not contiguous
      c.broadcast({w}, 0);
      ok = ok && w.eq(0).all().item<bool>();
      auto big = torch::ones({10'000'000});
      c.all_reduce_sum(big)->wait();
      ok = ok && big.eq(n).all().item<bool>();
      c.barrier();
      ok = ok && c.share("path", c.rank() == 0 ? "runs/a/last.pt" : "mine") == "runs/a/last.pt";
      return ok;
    });
    CHECK(codes == std::vector<int>(static_cast<size_t>(world), 0));
  }
}

TEST_CASE("comm: reduce-scatter and all-gather of flat buffers over Gloo between real processes", "[dist]") {
  for (int world : {2, 3}) {
    INFO("world " << world);
    auto codes = run_ranks(world, [&](Comm& c) {
      const int64_t n = 5, size = c.size(), rank = c.rank();
      // Rank r holds element i of the whole = r * 100 + i: slice k of the sum is known.
      auto whole = torch::arange(size * n, torch::kFloat) + 100.0 * static_cast<double>(rank);
      auto mine = torch::empty({n});
      c.reduce_scatter_sum(mine, whole)->wait();
      const double ranks_sum = 100.0 * static_cast<double>(size * (size - 1) / 2);
      bool ok = mine.equal(torch::arange(rank * n, (rank + 1) * n, torch::kFloat) * static_cast<double>(size) + ranks_sum);
      // Each rank's slice back end to end, in rank order.
      auto in = torch::full({n}, static_cast<double>(rank), torch::kDouble), out = torch::empty({size * n}, torch::kDouble);
      c.all_gather_into(out, in)->wait();
      for (int64_t r = 0; r < size; ++r) ok = ok && out.narrow(0, r * n, n).eq(static_cast<double>(r)).all().item<bool>();
      return ok;
    });
    CHECK(codes == std::vector<int>(static_cast<size_t>(world), 0));
  }
}

TEST_CASE("comm: a rank that never joins fails the others within the timeout, naming the rendezvous", "[dist]") {
  const auto t0 = std::chrono::steady_clock::now();
  auto codes = run_ranks(2, [](Comm& c) { c.barrier(); return true; }, 3, /*skip_rank=*/1);
  CHECK(codes[0] == 2);  // a runtime Error from the join
  CHECK(codes[1] == 9);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 30);
}
