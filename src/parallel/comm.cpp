// Comm over c10d. ProcessGroupGloo.hpp (which needs gloo's headers) is included here alone;
// NCCL lives in comm_nccl.cpp.
#include "parallel/comm.h"

#include <chrono>
#include <map>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <fmt/format.h>

#include "core/error.h"
#include "parallel/comm_nccl.h"

namespace gputrain {
namespace {

class C10dWork : public CommWork {
 public:
  explicit C10dWork(c10::intrusive_ptr<c10d::Work> w) : w_(std::move(w)) {}
  void wait() override { w_->wait(); }

 private:
  c10::intrusive_ptr<c10d::Work> w_;
};

}  // namespace

struct Comm::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;
  int groups = 0;  // backends made so far: each gets its own key prefix in the store
};

namespace {

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

}  // namespace

Comm::Comm(const RankEnv& env, double timeout_seconds)
    : env_(env), timeout_seconds_(timeout_seconds), impl_(std::make_unique<Impl>()) {
  const auto timeout = millis(timeout_seconds);
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(env.master_port);
  // Under torchrun the agent already serves the store: every rank is a client then.
  so.isServer = env.rank == 0 && !env.agent_store;
  so.numWorkers = env.world_size;
  so.waitWorkers = !env.agent_store;
  so.timeout = timeout;
  try {
    auto tcp = c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
    impl_->store = c10::make_intrusive<c10d::PrefixStore>("gputrain", tcp);
  } catch (const std::exception& e) {
    std::string what = e.what();
    throw runtime_error(fmt::format("rank {} of {} could not join the job at {}:{}: {}", env.rank, env.world_size,
                                    env.master_addr, env.master_port, what.substr(0, what.find('\n'))),
                        "check that every rank started and can reach MASTER_ADDR:MASTER_PORT (--dist_timeout)");
  }
}

void Comm::connect(int device_index) {
  const RankEnv& env = env_;
  const auto timeout = millis(timeout_seconds_);
  // Every Session connects (a benchmark makes one per variant). A new backend rendezvouses
  // through the store: under the old one's keys, a rank could read the previous backend's
  // address and wait on it forever. Every rank connects in the same order, so "pgN" matches.
  auto store = c10::make_intrusive<c10d::PrefixStore>(fmt::format("pg{}", impl_->groups++), impl_->store);
  try {
    if (device_index >= 0) {
      impl_->backend = make_nccl_backend(store, env.rank, env.world_size, device_index, timeout);
    } else {
      auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
      // The address the other ranks reach this one by: loopback on one machine, else this host.
      const bool local = env.master_addr == "127.0.0.1" || env.master_addr == "localhost";
      opts->devices.push_back(local ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                    : c10d::ProcessGroupGloo::createDefaultDevice());
      impl_->backend = c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, opts);
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
  const std::string k = "share/" + key;
  if (env_.rank == 0) {
    impl_->store->set(k, std::vector<uint8_t>(value.begin(), value.end()));
    if (env_.world_size > 1) impl_->store->wait({k + "/all read"});
    return value;
  }
  const auto bytes = impl_->store->get(k);  // waits for rank 0, up to the store's timeout
  if (impl_->store->add(k + "/read", 1) == env_.world_size - 1) impl_->store->set(k + "/all read", std::vector<uint8_t>{});
  return std::string(bytes.begin(), bytes.end());
}

std::unique_ptr<CommWork> Comm::all_reduce_sum(at::Tensor& t) {
  std::vector<at::Tensor> one = {t};
  return std::make_unique<C10dWork>(impl_->backend->allreduce(one));
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
  impl_->backend->allgather(out, in)->wait();
  return out[0];
}

void Comm::broadcast(const std::vector<at::Tensor>& tensors, int root) {
  for (const auto& t : tensors) {
    std::vector<at::Tensor> one = {t.is_contiguous() ? t : t.contiguous()};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    impl_->backend->broadcast(one, o)->wait();
    if (!t.is_contiguous()) t.copy_(one[0]);
  }
}

void Comm::barrier() { impl_->backend->barrier()->wait(); }

}  // namespace gputrain
