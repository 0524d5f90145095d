// Comm over c10d. ProcessGroupGloo.hpp (which needs gloo's headers) is included here alone;
// NCCL lives in comm_nccl.cpp.
#include "parallel/comm.h"

#include <csignal>
#include <chrono>
#include <algorithm>
#include <map>
#include <thread>

#include <ATen/ops/sum.h>
#include <c10/util/Logging.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/signals.h"
#include "core/text.h"
#include "parallel/comm_nccl.h"

namespace gputrain {
namespace {

class C10dWork : public CommWork {
 public:
  C10dWork(c10::intrusive_ptr<c10d::Work> w, Comm& comm, const char* op) : w_(std::move(w)), comm_(comm), op_(op) {}
  void wait() override { comm_.finish(w_, op_); }

 private:
  c10::intrusive_ptr<c10d::Work> w_;
  Comm& comm_;
  const char* op_;
};

// A reduce-scatter made of an all-to-all: once the slices arrive, their sum into `out`.
class SummedWork : public CommWork {
 public:
  SummedWork(std::unique_ptr<CommWork> w, at::Tensor received, at::Tensor out, int ranks)
      : w_(std::move(w)), received_(std::move(received)), out_(std::move(out)), ranks_(ranks) {}
  void wait() override {
    if (!received_.defined()) return;  // summed already
    w_->wait();
    const int64_t over_ranks = 0;
    at::sum_out(out_, received_.view({ranks_, out_.numel()}), at::IntArrayRef(over_ranks));
    received_ = at::Tensor();
  }

 private:
  std::unique_ptr<CommWork> w_;
  at::Tensor received_, out_;
  int ranks_;
};

}  // namespace

struct Comm::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;
  bool gloo = false;  // the backend is ProcessGroupGloo (reduce_scatter_sum takes another road)
  int groups = 0;  // backends made so far: each gets its own key prefix in the store
  int meetings = 0;  // share() and gather() calls so far: each gets its own keys
};

namespace {

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

// "rank 2", "ranks 1, 3": who a meeting still waits for.
std::string name_ranks(const std::vector<int>& ranks) {
  std::vector<std::string> names;
  for (int r : ranks) names.push_back(std::to_string(r));
  return (ranks.size() == 1 ? "rank " : "ranks ") + join(names, ", ");
}

// What a meeting polls, between its checks of the store: often enough that a refusal or the
// last rank's arrival is heard at once, rarely enough to cost nothing beside a job's start.
constexpr auto kPoll = std::chrono::milliseconds(20);

// c10d logs each failed store operation with a stack trace; where a failure is expected and
// reported in one line (a connect retried, a roll call after a rank died), it stays quiet.
struct QuietC10d {
  int saved = FLAGS_caffe2_log_level;
  QuietC10d() { FLAGS_caffe2_log_level = 3; }  // c10's FATAL: nothing below it
  ~QuietC10d() { FLAGS_caffe2_log_level = saved; }
  QuietC10d(const QuietC10d&) = delete;
  QuietC10d& operator=(const QuietC10d&) = delete;
};

// The job's TCPStore: served here (rank 0 outside torchrun) or joined as a client, in attempts
// of a second each until the deadline. Between them a stop (SIGTERM from the launcher when
// another rank failed) ends the wait at once, where c10d's own retries would ignore it for the
// whole timeout. The signals wait while c10d connects: one arriving inside its retry sleep
// makes it log a stack trace.
c10::intrusive_ptr<c10d::TCPStore> join_store(const RankEnv& env, c10d::TCPStoreOptions so, double timeout_seconds) {
  const auto deadline = std::chrono::steady_clock::now() + millis(timeout_seconds);
  sigset_t stops, before;
  sigemptyset(&stops);
  sigaddset(&stops, SIGTERM);
  sigaddset(&stops, SIGINT);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    so.timeout = so.isServer ? millis(timeout_seconds) : std::clamp(left, std::chrono::milliseconds(100), millis(1.0));
    std::string failure;
    pthread_sigmask(SIG_BLOCK, &stops, &before);
    auto restore = [&] { pthread_sigmask(SIG_SETMASK, &before, nullptr); };
    try {
      QuietC10d quiet;  // the failure that counts is reported below
      auto tcp = c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
      restore();
      tcp->setTimeout(millis(timeout_seconds));  // for the collectives' own rendezvous through it
      return tcp;
    } catch (const std::exception& e) {
      restore();  // a pending stop is handled here
      failure = e.what();
      failure = failure.substr(0, failure.find('\n'));
    }
    if (stop_signal() != 0)
      throw Error({fmt::format("rank {} of {} stopped while joining the job at {}:{}", env.rank, env.world_size,
                               env.master_addr, env.master_port)},
                  "", exit_code_for_signal(stop_signal()));
    // The port is served already: by this job's rank 0 when two processes were started as rank 0.
    // Joined as a client, this one finds its rank taken and says so to both (Comm's join), at
    // once, where the first would wait for a rank that never comes.
    if (so.isServer && failure.find("EADDRINUSE") != std::string::npos) {
      so.isServer = false;
      so.timeout = millis(1.0);
      pthread_sigmask(SIG_BLOCK, &stops, &before);
      try {
        QuietC10d quiet;
        auto tcp = c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
        restore();
        tcp->setTimeout(millis(timeout_seconds));
        return tcp;
      } catch (const std::exception&) {
        restore();
        throw usage_error(fmt::format("rank {} of {}: port {} is in use by another program", env.rank, env.world_size,
                                      env.master_port),
                          "choose a free MASTER_PORT (--master_port) for this job");
      }
    }
    if (so.isServer || std::chrono::steady_clock::now() >= deadline)
      throw runtime_error(fmt::format("rank {} of {} could not join the job at {}:{}: {}", env.rank, env.world_size,
                                      env.master_addr, env.master_port, failure),
                          "check that every rank started and can reach MASTER_ADDR:MASTER_PORT (--dist_timeout)");
  }
}

}  // namespace

Comm::Comm(const RankEnv& env, double timeout_seconds)
    : env_(env), timeout_seconds_(timeout_seconds), impl_(std::make_unique<Impl>()) {
  // A peer that dies leaves sockets whose next write raises SIGPIPE, and its default action
  // ends this rank at once with code 141 and no word (seen: rank 0 of a pair whose rank 1 was
  // killed, one run in five on a loaded host). Ignored, the write fails with EPIPE, which gloo
  // and the store report as an error that collective_failed turns into the rank's name. (Python,
  // where PyTorch's ranks run, ignores SIGPIPE from its start for the same reason.)
  std::signal(SIGPIPE, SIG_IGN);
  const auto timeout = millis(timeout_seconds);
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(env.master_port);
  // Under torchrun the agent already serves the store: every rank is a client then.
  so.isServer = env.rank == 0 && !env.agent_store;
  so.numWorkers = env.world_size;
  // The join below waits instead: it names the ranks that never came, and hears refusals.
  so.waitWorkers = false;
  impl_->store = c10::make_intrusive<c10d::PrefixStore>(fmt::format("gputrain/attempt{}", env.restart_count),
                                                        join_store(env, so, timeout_seconds));
  impl_->store->add("arrived", 1);  // how many a refusal must reach (see refuse())
  // The first rank to arrive sets the world size; another value is a mistake in the job script
  // (nodes started with different --nproc_per_node, say), caught before anyone waits for ranks
  // that will never exist.
  const auto first = text(impl_->store->compareSet("world size", {}, bytes(fmt::format("{} {}", env.world_size, env.rank))));
  int first_size = 0, first_rank = 0;
  if (std::sscanf(first.c_str(), "%d %d", &first_size, &first_rank) == 2 && first_size != env.world_size)
    refuse(usage_error(fmt::format("the ranks disagree on the world size: rank {} was started with {}, rank {} with {}",
                                   first_rank, first_size, env.rank, env.world_size),
                       "every rank needs the same WORLD_SIZE: the same --nnodes and --nproc_per_node on every node"));
  if (impl_->store->add(fmt::format("rank {}", env.rank), 1) > 1)
    refuse(usage_error(fmt::format("two processes were started as rank {} of {}", env.rank, env.world_size),
                       "give each node its own --node_rank (0 to nnodes-1), or each process its own RANK"));
  gather("join", "");
  share("join", "");
}

void Comm::wait_until(const std::function<bool()>& ready, const std::function<std::string()>& missing,
                      const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + millis(timeout_seconds_);
  QuietC10d quiet;  // a lost store is reported below, in one line
  for (;;) {
    try {
      if (impl_->store->check({"refused"})) {
        const auto j = nlohmann::json::parse(text(impl_->store->get("refused")));
        impl_->store->add("refused/heard", 1);
        refused_ = true;
        linger();
        throw Error(j["problems"].get<std::vector<std::string>>(), j["hint"], j["exit_code"]);
      }
      if (ready()) return;
      if (stop_signal() != 0 && !saving_)  // the launcher stops the job: another rank failed
        throw Error({fmt::format("rank {} of {} stopped while waiting at '{}'", env_.rank, env_.world_size, what)}, "",
                    exit_code_for_signal(stop_signal()));
    } catch (const c10::Error& e) {  // the store is gone: rank 0 (or torchrun's agent) ended
      const std::string w = e.what();
      throw runtime_error(fmt::format("rank {} of {} lost the job's store at {}:{} while waiting at '{}': {}", env_.rank,
                                      env_.world_size, env_.master_addr, env_.master_port, what,
                                      w.substr(0, w.find('\n'))),
                          "rank 0 ended first: its own output says why");
    }
    if (std::chrono::steady_clock::now() > deadline)
      refuse(runtime_error(fmt::format("{} of {} did not reach '{}' within --dist_timeout {:g} s", missing(),
                                       env_.world_size, what, timeout_seconds_),
                           "a rank that failed prints why; one still starting needs a longer --dist_timeout"));
    std::this_thread::sleep_for(kPoll);
  }
}

void Comm::linger() {
  if (env_.rank != 0 || env_.agent_store) return;
  // This process serves the store: leaving at once would cut the others off mid-read. It waits
  // for the ranks that came to hear the refusal, 10 s at most: a rank that arrives later finds
  // no store and says so itself.
  const auto until = std::chrono::steady_clock::now() + millis(std::min(timeout_seconds_, 10.0));
  while (impl_->store->add("refused/heard", 0) < impl_->store->add("arrived", 0) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(kPoll);
}

void Comm::refuse(const Error& e) {
  if (refused_) throw e;  // heard from another rank (or said already): nothing more to tell
  refused_ = true;
  QuietC10d quiet;  // a store already gone is expected here
  const nlohmann::json j = {{"rank", env_.rank}, {"problems", e.problems}, {"hint", e.hint}, {"exit_code", e.exit_code}};
  try {
    impl_->store->compareSet("refused", {}, bytes(j.dump()));  // the first refusal is the job's
    impl_->store->add("refused/heard", 1);
    linger();
  } catch (const c10::Error&) {
    // No store to tell: the refusal is this rank's alone.
  }
  throw e;
}

void Comm::connect(int device_index) {
  const RankEnv& env = env_;
  const auto timeout = millis(timeout_seconds_);
  // Every Session connects (a benchmark makes one per variant). A new backend rendezvouses
  // through the store: under the old one's keys, a rank could read the previous backend's
  // address and wait on it forever. Every rank connects in the same order, so "pgN" matches.
  auto store = c10::make_intrusive<c10d::PrefixStore>(fmt::format("pg{}", impl_->groups++), impl_->store);
  // GLOO_SOCKET_IFNAME, as in PyTorch: the network interfaces Gloo uses (a node with several).
  // NCCL reads NCCL_SOCKET_IFNAME itself.
  std::vector<std::shared_ptr<::gloo::transport::Device>> gloo_devices;
  if (const char* names = std::getenv("GLOO_SOCKET_IFNAME"); device_index < 0 && names && *names) {
    for (const auto& name : split_list(names, ListItems::kTrimmed)) {
      try {
        gloo_devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
      } catch (const std::exception& e) {
        const std::string w = e.what();
        throw usage_error(fmt::format("GLOO_SOCKET_IFNAME={}: interface '{}' cannot be used: {}", names, name,
                                      w.substr(0, w.find('\n'))),
                          "name network interfaces of this machine (ip -br link), or unset it");
      }
    }
  }
  try {
    if (device_index >= 0) {
      impl_->backend = make_nccl_backend(store, env.rank, env.world_size, device_index, timeout);
    } else {
      auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
      // The address the other ranks reach this one by: loopback on one machine, else this host.
      const bool local = env.master_addr == "127.0.0.1" || env.master_addr == "localhost";
      if (!gloo_devices.empty())
        opts->devices = gloo_devices;
      else
        opts->devices.push_back(local ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                      : c10d::ProcessGroupGloo::createDefaultDevice());
      impl_->backend = c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, opts);
      impl_->gloo = true;
    }
  } catch (const std::exception& e) {
    std::string what = e.what();
    throw runtime_error(fmt::format("rank {} of {} could not connect its collectives ({}): {}", env.rank,
                                    env.world_size, device_index >= 0 ? "NCCL" : "Gloo",
                                    what.substr(0, what.find('\n'))),
                        "check that every rank started and that they reach each other (--dist_timeout)");
  }
}

Comm::~Comm() = default;

std::string Comm::share(const std::string& key, const std::string& value) {
  // Rank 0 returns only once every rank has read the value: rank 0 serves the store, and a run
  // that every rank then refuses alike (a bad flag) must not take it away from a rank still
  // reading ("connection reset" instead of the refusal).
  // Numbered: a Comm serves several Sessions (the benchmark makes one per variant), each with
  // the same meetings; every rank holds them in the same order.
  const std::string k = fmt::format("share/{}/{}", impl_->meetings++, key);
  std::vector<std::string> read;
  for (int r = 1; r < env_.world_size; ++r) read.push_back(fmt::format("{}/read by {}", k, r));
  if (env_.rank == 0) {
    impl_->store->set(k, bytes(value));
    wait_until([&] { return read.empty() || impl_->store->check(read); },
               [&] {
                 std::vector<int> absent;
                 for (int r = 1; r < env_.world_size; ++r)
                   if (!impl_->store->check({read[static_cast<size_t>(r - 1)]})) absent.push_back(r);
                 return name_ranks(absent);
               },
               key);
    return value;
  }
  wait_until([&] { return impl_->store->check({k}); }, [] { return std::string("rank 0"); }, key);
  const std::string got = text(impl_->store->get(k));
  impl_->store->set(read[static_cast<size_t>(env_.rank - 1)], std::vector<uint8_t>{});
  return got;
}

std::vector<std::string> Comm::gather(const std::string& key, const std::string& value) {
  const std::string k = fmt::format("gather/{}/{}/", impl_->meetings++, key);
  impl_->store->set(k + std::to_string(env_.rank), bytes(value));
  if (env_.rank != 0) return {value};
  std::vector<std::string> keys;
  for (int r = 0; r < env_.world_size; ++r) keys.push_back(k + std::to_string(r));
  wait_until([&] { return impl_->store->check(keys); },
             [&] {
               std::vector<int> absent;
               for (int r = 0; r < env_.world_size; ++r)
                 if (!impl_->store->check({keys[static_cast<size_t>(r)]})) absent.push_back(r);
               return name_ranks(absent);
             },
             key);
  std::vector<std::string> out;
  for (const auto& each : keys) out.push_back(text(impl_->store->get(each)));
  return out;
}

void Comm::finish(const c10::intrusive_ptr<c10d::Work>& work, const char* op) {
  try {
    work->wait();
  } catch (const std::exception& e) {
    collective_failed(op, e.what());
  }
}

void Comm::collective_failed(const std::string& op, const std::string& failure) {
  // A collective failed here: a rank stopped, hung, died or slower than the timeout. Every live
  // rank gets here too (its own wait times out, or its peer's socket closes) and answers a roll
  // call in the store; after a few seconds the ranks that did not answer are the ones to name.
  const std::string first = failure.substr(0, failure.find('\n'));
  std::vector<int> absent;
  QuietC10d quiet;
  try {
    // A rank that refused after the set-up's last meeting (a bad checkpoint on one node, say):
    // its refusal is the reason, with its exit code.
    if (impl_->store->check({"refused"})) {
      const auto j = nlohmann::json::parse(text(impl_->store->get("refused")));
      refused_ = true;
      throw Error(j["problems"].get<std::vector<std::string>>(), j["hint"], j["exit_code"]);
    }
    impl_->store->set(fmt::format("alive after a failure/{}", env_.rank), std::vector<uint8_t>{});
    const auto until = std::chrono::steady_clock::now() + millis(std::min(timeout_seconds_, 5.0));
    do {
      absent.clear();
      for (int r = 0; r < env_.world_size; ++r)
        if (!impl_->store->check({fmt::format("alive after a failure/{}", r)})) absent.push_back(r);
      if (absent.empty()) break;
      std::this_thread::sleep_for(kPoll);
    } while (std::chrono::steady_clock::now() < until);
  } catch (const c10::Error&) {
    throw runtime_error(fmt::format("rank {} of {}: the {} of step {} failed, and the job's store is gone (rank 0 "
                                    "ended): {}", env_.rank, env_.world_size, op, step_, first),
                        "rank 0's own output says why");
  }
  if (absent.empty())
    throw CollectiveFailed({fmt::format("rank {} of {}: the {} of step {} failed: {}", env_.rank, env_.world_size, op,
                                        step_, first)},
                           "every rank is alive: see the other ranks' errors", kExitRuntime);
  // A peer's socket closed before the timeout: it exited or was killed, now, not "slow".
  const bool closed = first.find("Timed out") == std::string::npos && first.find("timed out") == std::string::npos &&
                      (first.find("losed") != std::string::npos || first.find("reset") != std::string::npos ||
                       first.find("exited") != std::string::npos || first.find("Broken pipe") != std::string::npos ||
                       first.find("Connection refused") != std::string::npos);
  if (closed)
    throw CollectiveFailed({fmt::format("rank {} of {}: {} exited or was killed at step {}: the {} failed when its "
                                        "connection closed (noticed at {}: {})",
                                        env_.rank, env_.world_size, name_ranks(absent), step_, op, utc_now(), first)},
                           fmt::format("see what became of {} (its exit code, its node, its own output); resume with "
                                       "--resume auto from the last checkpoint",
                                       name_ranks(absent)),
                           kExitRuntime);
  throw CollectiveFailed({fmt::format("rank {} of {}: the {} of step {} failed: {} did not come within --dist_timeout "
                                      "{:g} s (stopped, hung, or gone)",
                                      env_.rank, env_.world_size, op, step_, name_ranks(absent), timeout_seconds_)},
                         fmt::format("see what became of {} (its node, its own output); resume with --resume auto from "
                                     "the last checkpoint",
                                     name_ranks(absent)),
                         kExitRuntime);
}

std::unique_ptr<CommWork> Comm::all_reduce_sum(at::Tensor& t) {
  std::vector<at::Tensor> one = {t};
  return std::make_unique<C10dWork>(impl_->backend->allreduce(one), *this, "all-reduce");
}

void Comm::all_reduce_sum(const std::vector<at::Tensor>& tensors) {
  // One buffer per dtype and device: one collective each instead of one per tensor.
  std::map<std::pair<int, int>, std::vector<at::Tensor>> groups;
  for (const auto& t : tensors)
    groups[{static_cast<int>(t.scalar_type()), static_cast<int>(t.device().index())}].push_back(t);
  for (auto& [key, ts] : groups) {
    std::vector<at::Tensor> flat_parts;
    for (const auto& t : ts) flat_parts.push_back(t.reshape(-1));
    at::Tensor flat = at::cat(flat_parts);
    all_reduce_sum(flat)->wait();
    int64_t off = 0;
    for (auto& t : ts) {
      t.copy_(flat.narrow(0, off, t.numel()).view_as(t));
      off += t.numel();
    }
  }
}

std::vector<at::Tensor> Comm::all_gather(const at::Tensor& t) {
  std::vector<at::Tensor> in = {t.contiguous()};
  std::vector<std::vector<at::Tensor>> out(1);
  for (int r = 0; r < size(); ++r) out[0].push_back(at::empty_like(in[0]));
  finish(impl_->backend->allgather(out, in), "all-gather");
  return out[0];
}

std::unique_ptr<CommWork> Comm::reduce_scatter_sum(at::Tensor& out, at::Tensor& in, at::Tensor* scratch) {
  if (in.numel() != out.numel() * size() || !in.is_contiguous() || !out.is_contiguous())
    throw std::logic_error("Comm::reduce_scatter_sum: `in` must be size() contiguous slices of `out`'s size");
  if (!impl_->gloo)
    return std::make_unique<C10dWork>(impl_->backend->reduce_scatter_single(out, in), *this, "reduce-scatter");
  // Gloo: every rank sends each other rank its slice of `in` (all-to-all) and sums the size()
  // slices it receives. Measured with torch.distributed on the 2-core CI machine (1.9 M floats,
  // 3 rounds): Gloo's reduce-scatter took 8-13 ms on 2 ranks (13-17 on 3), more than its
  // all-reduce (7-9; 10-13), while all-to-all plus the sum took 4-6.5 (6.4-7.5): the bytes of an
  // ideal reduce-scatter.
  const bool reuse = scratch && scratch->defined() && scratch->numel() == in.numel() &&
                     scratch->options().type_equal(in.options());
  auto received = reuse ? *scratch : at::empty_like(in);
  if (scratch) *scratch = received;
  std::vector<int64_t> even;  // empty split sizes: size() equal parts
  auto work = impl_->backend->all_to_all_single(received, in, even, even);
  return std::make_unique<SummedWork>(std::make_unique<C10dWork>(std::move(work), *this, "reduce-scatter"),
                                      std::move(received), out, size());
}

std::unique_ptr<CommWork> Comm::all_gather_into(at::Tensor& out, at::Tensor& in, at::Tensor* scratch) {
  if (out.numel() != in.numel() * size() || !in.is_contiguous() || !out.is_contiguous())
    throw std::logic_error("Comm::all_gather_into: `out` must hold size() contiguous copies of `in`'s size");
  if (!impl_->gloo || !scratch)
    return std::make_unique<C10dWork>(impl_->backend->all_gather_single(out, in), *this, "all-gather");
  // Gloo, with a buffer kept: `in` copied size() times and sent by all-to-all (each rank gets
  // one copy). Measured with torch.distributed on the 2-core CI machine (0.93 M floats a rank,
  // 2 ranks, 3 rounds): 3.8-4.1 ms with the copies, Gloo's all-gather 4.5-5.4.
  const bool reuse = scratch->defined() && scratch->numel() == out.numel() && scratch->options().type_equal(in.options());
  if (!reuse) *scratch = at::empty_like(out);
  scratch->view({size(), in.numel()}).copy_(in.view({1, in.numel()}).expand({size(), in.numel()}));
  std::vector<int64_t> even;  // empty split sizes: size() equal parts
  return std::make_unique<C10dWork>(impl_->backend->all_to_all_single(out, *scratch, even, even), *this, "all-gather");
}

void Comm::broadcast(const std::vector<at::Tensor>& tensors, int root) {
  for (const auto& t : tensors) {
    std::vector<at::Tensor> one = {t.is_contiguous() ? t : t.contiguous()};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    finish(impl_->backend->broadcast(one, o), "broadcast");
    if (!t.is_contiguous()) t.copy_(one[0]);
  }
}

void Comm::barrier() { finish(impl_->backend->barrier(), "barrier"); }

}  // namespace gputrain
