// The run folder: one owner, where a run starts, and every file of a run.
#include "train/run_folder.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/faults.h"
#include "core/output_paths.h"
#include "monitor/report_html.h"
#include "train/shard_checkpoint.h"
#include "train/run_program.h"

namespace fs = std::filesystem;

namespace gputrain {
namespace {

std::string host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "unknown";
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// "pid 1234 on host node7": flock cannot say who holds a lock, so the holder writes it down.
std::string holder_text() { return fmt::format("pid {} on host {}", ::getpid(), host_name()); }

void write_note(int fd, const std::string& note) {
  const std::string text = note.empty() ? "" : note + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) < 0) {
    // The lock holds without the note; only the message a second run prints is poorer.
  }
}

// Whether the exclusive lock file `file`, holding `note`, was left by a crash: its note names a
// process of this host that is gone or runs no gputrain binary (its number taken again after a
// reboot, or in another container's start: the file the process runs, links followed, is not
// named gputrain*), or it holds no note 10 s after it was made (a crash between making it and
// writing the note, which takes microseconds).
bool holder_gone(const std::string& note, const std::string& file) {
  long pid = 0;
  char host[256] = {};
  if (std::sscanf(note.c_str(), "pid %ld on host %255s", &pid, host) != 2) {
    struct stat st {};
    return note.empty() && ::stat(file.c_str(), &st) == 0 && std::time(nullptr) - st.st_mtime > 10;
  }
  if (host != host_name()) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  std::error_code ec;
  const fs::path exe = fs::read_symlink(fmt::format("/proc/{}/exe", pid), ec);
  return !ec && exe.filename().string().rfind("gputrain", 0) != 0;  // unreadable: taken as alive
}

std::string now_stamp() {
  const std::time_t now = std::time(nullptr);
  return fmt::format("{:%Y%m%d-%H%M%S}", *std::localtime(&now));
}

// Whether `path` names a file inside `folder` (after resolving "..", links and relative paths).
bool inside(const std::string& path, const fs::path& folder) {
  std::error_code ep, ef;
  const fs::path p = fs::weakly_canonical(path, ep), f = fs::weakly_canonical(folder, ef);
  if (ep || ef || f.empty()) return false;
  auto [end, _] = std::mismatch(f.begin(), f.end(), p.begin(), p.end());
  return end == f.end();
}

// The checkpoint files in `checkpoints`, newest first: last.pt, then epoch-N.pt by N.
std::vector<fs::path> checkpoint_files(const fs::path& checkpoints) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(checkpoints, ec)) {
    const std::string name = e.path().filename().string();
    if (name == "last.pt")
      found.emplace_back(INT64_MAX, e.path());
    else if (name.rfind("epoch-", 0) == 0 && e.path().extension() == ".pt")
      found.emplace_back(std::atoll(name.c_str() + 6), e.path());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<fs::path> out;
  for (auto& [order, path] : found) out.push_back(std::move(path));
  return out;
}

// The checkpoint the folder can continue from: last.pt, else the newest epoch-N.pt, each read
// and verified (CRC, extents); damaged ones are named and passed over. When there are
// checkpoints and none is intact, the run is not started again from zero: that is an error
// naming each file.
std::string newest_intact(const fs::path& checkpoints) {
  std::vector<std::string> problems;
  for (const auto& path : checkpoint_files(checkpoints)) {
    try {
      read_checkpoint_file(path.string());  // every part: the CRCs of its tensors too
      return path.string();
    } catch (const NewerCheckpoint&) {
      throw;  // intact, and not for this gputrain: an older checkpoint would silently lose work
    } catch (const Error& e) {
      fmt::print("resume: passing over {}: {}\n", path.string(), e.problems.front());
      problems.push_back(e.problems.front());
    }
  }
  if (!problems.empty())
    throw Error(problems, "restore a checkpoint from a backup, or start the run again in a new --output_dir",
                kExitUsage);
  return "";
}

// The files a run writes at its start, before any checkpoint.
const char* const kRunFiles[] = {"config.json", "metrics.jsonl", "monitor.csv", "report.html", "tensorboard",
                                 "checkpoints", kProgramFiles[0], kProgramFiles[1], kProgramFiles[2]};

// The hint for a folder this user may not write: in a container that is most often a bind
// mount owned by the host's user, while the image runs as its own (uid 1000).
std::string write_hint(int err) {
  if (err != EACCES && err != EPERM && err != EROFS) return "";
  return fmt::format("gputrain runs as uid {}, which may not write there: make the folder writable, or in "
                     "Docker run the image as its owner (docker run --user $(id -u):$(id -g) ...)",
                     ::getuid());
}

}  // namespace

std::string default_run_dir(const Config& c) {
  return fmt::format("runs/{}-{}", now_stamp(), fs::path(c.preset).stem().string());
}

RunFolder::RunFolder(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  created_dir_ = !fs::exists(dir);
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw usage_error("cannot create output_dir '" + dir + "' (" + (ec ? ec.message() : "not a folder") + ")",
                      write_hint(ec.value()));
  lock();
}

RunFolder::~RunFolder() {
  // The run's writers close before the lock goes: the next owner must find them finished.
  status_.reset();
  monitor_.reset();
  metrics_.reset();
  tensorboard_.reset();
  const fs::path d(dir_);
  std::error_code ec;
  // Ended before it began: the folder goes back to how this run found it (folders are removed
  // only while empty). Removing .lock while holding it is safe: lock() checks that the file it
  // locked is still the one named .lock.
  if (!started_ && lock_fd_ >= 0) {
    if (created_lock_)
      fs::remove(d / ".lock", ec);
    else
      write_note(lock_fd_, old_note_);
  }
  if (!started_ && created_checkpoints_) fs::remove(d / "checkpoints", ec);
  if (!started_)
    for (const auto& name : program_files_) fs::remove(d / name, ec);
  if (!lock_file_.empty()) fs::remove(lock_file_, ec);
  if (!started_ && created_dir_) fs::remove(d, ec);
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

void RunFolder::lock() {
  const std::string path = (fs::path(dir_) / ".lock").string();
  int err = 0;
  for (int attempt = 0; attempt < 20 && lock_fd_ < 0; ++attempt) {
    created_lock_ = !fs::exists(path);
    // Never through a link (the note would overwrite the file it points to, anywhere) and never
    // blocking on a pipe: the lock is a regular file of the folder's own.
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    struct stat st {};
    if (fd < 0 && errno != ELOOP) {
      const int open_err = errno;
      throw usage_error("cannot lock output_dir '" + dir_ + "' (" + std::strerror(open_err) + ")", write_hint(open_err));
    }
    if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      if (fd >= 0) ::close(fd);
      throw usage_error(fmt::format("cannot lock output_dir '{}': {} is not a regular file (a link, a pipe or a device)",
                                    dir_, path),
                        "remove it: gputrain makes its own lock file there");
    }
    err = faults().no_flock > 0 ? ENOLCK : ::flock(fd, LOCK_EX | LOCK_NB) == 0 ? 0 : errno;
    if (err == 0) {
      // A run that gave the folder back may have removed .lock between our open and our flock:
      // then we hold a file nobody else will look at, and must lock the one named .lock.
      struct stat held {
      }, named{};
      if (::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
          held.st_dev == named.st_dev) {
        lock_fd_ = fd;
        old_note_ = read_text(path);
        write_note(fd, holder_text());
        return;
      }
      ::close(fd);
      continue;
    }
    ::close(fd);
    if (err == EWOULDBLOCK) {
      const std::string holder = read_text(path);
      throw usage_error("output_dir '" + dir_ + "' is in use by another gputrain run (" +
                            (holder.empty() ? "holder unknown" : holder) + ")",
                        "wait for that run to end, or pass another --output_dir");
    }
    break;  // flock refused by the file system
  }
  if (err == 0) throw usage_error("cannot lock output_dir '" + dir_ + "' (it keeps changing)");
  // Some network file systems refuse flock: an exclusive-create lock file instead, which a crash
  // leaves behind (a later run on this host sees that its process is gone and takes it over).
  if (created_lock_) ::unlink(path.c_str());
  const std::string file = (fs::path(dir_) / ".lock-exclusive").string();
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      write_note(fd, holder_text());
      ::close(fd);
      lock_file_ = file;
      fmt::print("run folder: {} refuses flock ({}); locked with {} instead\n", dir_, std::strerror(err), file);
      return;
    }
    if (errno != EEXIST) throw usage_error("cannot lock output_dir '" + dir_ + "' (" + std::strerror(errno) + ")");
    const std::string holder = read_text(file);
    // A crashed holder's file: renamed away first, so that of two runs taking it over only one can.
    const std::string stale = file + fmt::format(".stale-{}", ::getpid());
    if (attempt == 0 && holder_gone(holder, file) && ::rename(file.c_str(), stale.c_str()) == 0) {
      ::unlink(stale.c_str());
      continue;
    }
    throw usage_error(
        "output_dir '" + dir_ + "' is in use by another gputrain run (" + holder + ")",
        "wait for that run to end, or pass another --output_dir (remove " + file + " only if no run uses the folder)");
  }
}

bool RunFolder::holds_run() const {
  // A run's record alone counts too: a start killed between writing config.json and opening
  // metrics.jsonl is a start of that job, which --resume auto begins again (not the default).
  return fs::exists(fs::path(dir_) / "metrics.jsonl") || !checkpoint_files(fs::path(dir_) / "checkpoints").empty() ||
         is_run_record((fs::path(dir_) / "config.json").string());
}

StartPoint RunFolder::plan_start(const std::string& resume) {
  const fs::path checkpoints = fs::path(dir_) / "checkpoints";
  StartPoint start;
  if (resume.empty()) {
    if (holds_run())  // never mix or overwrite runs
      throw usage_error("output_dir '" + dir_ + "' already holds a run",
                        "pass a new --output_dir, remove that folder, or continue it with --resume auto");
  } else if (resume == "auto") {
    start.checkpoint = newest_intact(checkpoints);
    if (start.checkpoint.empty() && holds_run()) {
      // A start that never saved a checkpoint (killed, out of memory, a bad file): its files are
      // kept aside, not deleted, and the run begins again. Nothing else in the folder moves.
      const fs::path aside = fs::path(dir_) / fmt::format("aborted-{}-{}", now_stamp(), ::getpid());
      std::error_code ec;
      fs::create_directories(aside, ec);
      for (const char* name : kRunFiles)
        if (!ec && fs::exists(fs::path(dir_) / name)) fs::rename(fs::path(dir_) / name, aside / name, ec);
      if (ec)
        throw usage_error("cannot move the aborted start aside into '" + aside.string() + "' (" + ec.message() + ")");
      if (fs::exists(aside / "config.json")) start.recorded = (aside / "config.json").string();
      fmt::print("resume: no checkpoint in {}; moved the earlier start aside to {}; starting {} again\n", dir_,
                 aside.string(), start.recorded.empty() ? "a new run" : "its recorded job");
    } else if (start.checkpoint.empty()) {
      fmt::print("resume: no checkpoint in {} yet; starting a new run\n", dir_);
    }
  } else {
    const bool same_run = inside(resume, checkpoints);
    if (!same_run && holds_run())
      throw usage_error(
          "--resume '" + resume + "' is another run's checkpoint, and output_dir '" + dir_ + "' holds a run of its own",
          "to branch from that checkpoint, pass a new --output_dir; to continue this folder's run, "
          "--resume auto");
    start.checkpoint = resume;
    start.branch = !same_run;
  }
  std::error_code ec;
  created_checkpoints_ = !fs::exists(checkpoints);
  fs::create_directories(checkpoints, ec);
  if (ec) throw usage_error("cannot create '" + checkpoints.string() + "' (" + ec.message() + ")");
  for (const auto& entry : fs::directory_iterator(checkpoints))        // only the lock holder may
    if (entry.path().extension() == ".tmp") fs::remove(entry.path());  // torn writes of a crash
  return start;
}

std::string RunFolder::checkpoint_path(const std::string& name) const {
  return (fs::path(dir_) / "checkpoints" / name).string();
}

void RunFolder::start(const nlohmann::json& config_record, bool tensorboard, double monitor_interval,
                      const std::vector<int>& gpus) {
  // TensorBoard first: a folder it cannot create (a usage error) leaves no half-started run.
  if (tensorboard) tensorboard_ = std::make_unique<TensorBoardWriter>((fs::path(dir_) / "tensorboard").string());
  started_ = true;
  write_file_atomically((fs::path(dir_) / "config.json").string(), config_record.dump(2) + "\n");
  metrics_ = std::make_unique<MetricsWriter>((fs::path(dir_) / "metrics.jsonl").string());
  monitor_ = std::make_unique<Monitor>((fs::path(dir_) / "monitor.csv").string(), monitor_interval, gpus);
  status_ = std::make_unique<StatusFile>((fs::path(dir_) / "status.json").string(),
                                         nlohmann::json{{"pid", ::getpid()},
                                                        {"host", host_name()},
                                                        {"world_size", config_record.value("world_size", 1)}});
}

void RunFolder::write(const nlohmann::json& record) {
  metrics_->write(record);
  const std::string event = record.value("event", "");
  if (tensorboard_ && (event == "step" || event == "eval")) tensorboard_->write(record);
  if (monitor_)  // the sampler's thread cannot stop the run: its write failure is reported here
    if (std::string error = monitor_->write_error(); !error.empty()) throw runtime_error(error);
}

double RunFolder::save_checkpoint(const std::string& name, Trainer& trainer, const CheckpointMeta& meta,
                                  const std::string& shards) {
  const auto t0 = std::chrono::steady_clock::now();
  gputrain::save_checkpoint(checkpoint_path(name), trainer, meta, shards);
  // The shard files this checkpoint replaced (or a crashed save left) go once nothing names them.
  remove_unreferenced_shards((fs::path(dir_) / "checkpoints").string());
  if (status_) status_->update({{"last_checkpoint", {{"path", checkpoint_path(name)}, {"step", meta.step}}}});
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<std::string> RunFolder::complete_saves(const std::string& from, const CheckpointMeta& at,
                                                  bool save_checkpoints) {
  std::vector<std::string> copied;
  // Only a position right after an evaluation: an epoch's end, or an evaluated --max_steps end.
  if (!at.evaluated && (at.samples != 0 || at.epoch == 0)) return copied;
  // Whether `name` is missing, torn, or an older state than `at`: only then is it completed.
  auto older = [&](const std::string& name) {
    try {
      return read_checkpoint_meta(checkpoint_path(name)).step < at.step;
    } catch (const std::exception&) {
      return true;  // missing or torn
    }
  };
  std::vector<std::string> names = {"last.pt"};
  if (save_checkpoints && at.samples == 0) names.push_back(fmt::format("epoch-{}.pt", at.epoch));
  // evals_since_best 0: this evaluation is the best (a checkpoint from before any evaluation
  // has no last_eval).
  if (save_checkpoints && at.evals_since_best == 0 && !at.last_eval.empty()) names.push_back("best.pt");
  for (const auto& name : names) {
    const std::string path = checkpoint_path(name);
    if (fs::weakly_canonical(path) == fs::weakly_canonical(from) || !older(name)) continue;
    copy_shards(from, path);  // first: the copy must never name shard files that are not there
    copy_file_atomically(from, path);
    copied.push_back(name);
  }
  return copied;
}

nlohmann::json RunFolder::keep_program(const std::string& model) {
  return gputrain::keep_program(model, dir_, program_files_);
}

void RunFolder::prune_checkpoints(int64_t keep) {
  gputrain::prune_checkpoints((fs::path(dir_) / "checkpoints").string(), keep);
  remove_unreferenced_shards((fs::path(dir_) / "checkpoints").string());
}

void RunFolder::write_report() {
  try {
    write_html_report(dir_);
  } catch (const std::exception& e) {
    fmt::print(stderr, "gputrain: warning: report.html not written ({}); `gputrain report {}` retries\n", e.what(),
               dir_);
  }
}

}  // namespace gputrain
