// status.json: a small JSON object rewritten whole (temporary file, fsync, rename).
#include "train/status_file.h"

#include <chrono>
#include <ctime>

#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/text.h"

namespace gputrain {
StatusFile::StatusFile(std::string path, const nlohmann::json& fields) : path_(std::move(path)) {
  status_ = fields;
  status_["state"] = "running";
  status_["started_at"] = utc_now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    write();
  }
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_) {
      wake_.wait_for(lock, std::chrono::duration<double>(kEverySeconds));
      if (!done_) write();
    }
  });
}

StatusFile::~StatusFile() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    const std::string state = status_.value("state", "");
    if (state == "running" || state == "stopping") {
      status_["state"] = "failed";
      if (status_.value("reason", "").empty()) status_["reason"] = "the process ended while " + state;
      write();
    }
  }
  wake_.notify_all();
  thread_.join();
}

void StatusFile::update(const nlohmann::json& fields) {
  std::lock_guard<std::mutex> lock(mu_);
  status_.update(fields);
}

void StatusFile::set_state(const std::string& state, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  status_["state"] = state;
  if (reason.empty())
    status_.erase("reason");
  else
    status_["reason"] = reason;
  write();
}

void StatusFile::write() {
  status_["updated_at"] = utc_now();
  try {
    write_file_atomically(path_, status_.dump(2) + "\n");
  } catch (const std::exception& e) {
    // A full disk must not end the run for a status file; the next rewrite tries again.
    if (!warned_) fmt::print(stderr, "gputrain: warning: {} (tried again every {:g} s)\n", e.what(), kEverySeconds);
    warned_ = true;
  }
}

}  // namespace gputrain
