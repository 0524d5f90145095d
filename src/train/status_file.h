// status.json in the run folder: where a run stands, for schedulers, notebooks and scripts that
// would rather not parse logs. A thread rewrites it atomically every few seconds, so its
// `updated_at` moves even through a long evaluation (an old one means the process is gone), and
// a change of state is written at once.
#pragma once
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace gputrain {

class StatusFile {
 public:
  // Starts in state "running" with `fields` (pid, host, world size...).
  StatusFile(std::string path, const nlohmann::json& fields);
  // A run that ends while "running" or "stopping" (an error on its way out) is "failed".
  ~StatusFile();
  StatusFile(const StatusFile&) = delete;
  StatusFile& operator=(const StatusFile&) = delete;

  // Merges `fields` (step, epoch, samples/s, ETA, last checkpoint); the thread writes them.
  void update(const nlohmann::json& fields);
  // "running", "stopping", "stopped" (a signal or the time limit: --resume auto continues),
  // "finished" or "failed", with why; written now.
  void set_state(const std::string& state, const std::string& reason = "");

  // Seconds between rewrites while nothing changes state.
  static constexpr double kEverySeconds = 2.0;

 private:
  void write();  // with mu_ held

  std::string path_;
  std::mutex mu_;
  std::condition_variable wake_;
  nlohmann::json status_;
  bool done_ = false;
  bool warned_ = false;  // a failed write is said once
  std::thread thread_;
};

}  // namespace gputrain
