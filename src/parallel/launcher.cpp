// `gputrain launch`: fork/exec of the local ranks, output prefixed by rank, signals forwarded,
// fail-fast. The workers die with the launcher (PR_SET_PDEATHSIG), so none is left behind.
#include "parallel/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "core/text.h"

namespace gputrain {
namespace {

int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] auto n = write(g_signal_pipe[1], &b, 1);
}

struct Worker {
  int rank = 0;
  pid_t pid = -1;
  int out = -1, err = -1;           // read ends of its stdout and stderr pipes
  std::string out_buf, err_buf;     // a partial last line of each
  bool done = false;
  int code = 0;                     // exit code, 128 + N for signal N
};

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

// Moves complete lines of `buf` to `fd`, each behind the rank's prefix; with `flush`, the rest too.
void emit_lines(std::string& buf, int fd, int rank, bool flush) {
  std::string out;
  size_t start = 0;
  for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1)
    out += fmt::format("[rank{}] ", rank) + buf.substr(start, nl - start + 1);
  buf.erase(0, start);
  if (flush && !buf.empty()) {
    out += fmt::format("[rank{}] {}\n", rank, buf);
    buf.clear();
  }
  write_all(fd, out);
}

// Reads what is there; closes the pipe at its end.
void drain(int& fd, std::string& buf, int out_fd, int rank) {
  char chunk[65536];
  const ssize_t n = read(fd, chunk, sizeof chunk);
  if (n > 0) {
    buf.append(chunk, static_cast<size_t>(n));
    emit_lines(buf, out_fd, rank, false);
  } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
    emit_lines(buf, out_fd, rank, true);
    close(fd);
    fd = -1;
  }
}

int exit_code_of(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

pid_t spawn(const LaunchOptions& o, const std::vector<std::pair<std::string, std::string>>& env,
            int out_pipe[2], int err_pipe[2]) {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid != 0) return pid;
  // The child: its own process group (a terminal's Ctrl-C reaches the launcher, which forwards it
  // once), killed if the launcher dies, its output into the pipes.
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(137);  // the launcher died before prctl took effect
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  dup2(out_pipe[1], STDOUT_FILENO);
  dup2(err_pipe[1], STDERR_FILENO);
  for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1], g_signal_pipe[0], g_signal_pipe[1]}) close(fd);
  for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(o.exe.c_str()));
  for (const auto& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(o.exe.c_str(), argv.data());
  fmt::print(stderr, "gputrain launch: cannot run {}: {}\n", o.exe, std::strerror(errno));
  _exit(127);
}

// A process's state letter from /proc/PID/stat ('R', 'S', 'T' for stopped, ...), or 0.
char process_state(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() ? stat[close + 2] : 0;
}

}  // namespace

int free_port() {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) throw runtime_error(std::string("cannot open a socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(s);
    throw runtime_error(std::string("cannot find a free port: ") + std::strerror(errno), "pass --master_port");
  }
  close(s);
  return ntohs(addr.sin_port);
}

int visible_gpu_count() {
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
    int n = 0;
    for (const auto& item : split_list(v, ListItems::kTrimmed)) {
      if (item == "-1" || item == "none" || item == "NoDevFiles") break;  // CUDA stops at an invalid entry
      ++n;
    }
    return n;
  }
  std::error_code ec;
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec)) n += e.is_directory() ? 1 : 0;
  return n;
}

int launch(const LaunchOptions& o) {
  const int world = o.nnodes * o.nproc_per_node;
  const int port = o.master_port > 0 ? o.master_port : free_port();
  // Each rank's intra-op threads: this machine's cores shared by its ranks, unless the user set
  // OMP_NUM_THREADS (a rank's own --threads wins over both).
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const bool user_threads = std::getenv("OMP_NUM_THREADS") != nullptr;
  const int threads = std::max(1, static_cast<int>(cores) / o.nproc_per_node);
  fmt::print(stderr, "gputrain launch: {} rank{} on this node ({} in all), rendezvous {}:{}, {}\n", o.nproc_per_node,
             o.nproc_per_node == 1 ? "" : "s", world, o.master_addr, port,
             user_threads ? fmt::format("OMP_NUM_THREADS={} (yours)", std::getenv("OMP_NUM_THREADS"))
                          : fmt::format("{} intra-op threads each ({} cores / {} ranks)", threads, cores, o.nproc_per_node));

  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw runtime_error("cannot create a pipe");
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::vector<Worker> workers(static_cast<size_t>(o.nproc_per_node));
  for (int local = 0; local < o.nproc_per_node; ++local) {
    Worker& w = workers[static_cast<size_t>(local)];
    w.rank = o.node_rank * o.nproc_per_node + local;
    int out_pipe[2], err_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) throw runtime_error("cannot create a pipe");
    std::vector<std::pair<std::string, std::string>> env = {
        {"RANK", std::to_string(w.rank)},
        {"LOCAL_RANK", std::to_string(local)},
        {"WORLD_SIZE", std::to_string(world)},
        {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
        {"GROUP_RANK", std::to_string(o.node_rank)},
        {"MASTER_ADDR", o.master_addr},
        {"MASTER_PORT", std::to_string(port)}};
    if (!user_threads) env.push_back({"OMP_NUM_THREADS", std::to_string(threads)});
    w.pid = spawn(o, env, out_pipe, err_pipe);
    if (w.pid > 0) setpgid(w.pid, w.pid);  // also here: a signal may come before the child set it
    close(out_pipe[1]);
    close(err_pipe[1]);
    w.out = out_pipe[0];
    w.err = err_pipe[0];
    if (w.pid < 0) throw runtime_error(std::string("cannot start a rank: ") + std::strerror(errno));
  }

  using Clock = std::chrono::steady_clock;
  int stop_signal = 0;           // a signal the launcher got and forwarded
  int failed_code = 0;           // the first failing rank's code
  Clock::time_point stop_sent{};  // when the others were asked to stop
  bool killed = false;
  // Signals go to each rank's process group: its own children stop with it.
  auto stop_all = [&](int sig) {
    for (auto& w : workers) {
      if (w.done) continue;
      if (sig != SIGKILL && process_state(w.pid) == 'T')
        fmt::print(stderr, "gputrain launch: rank {} (pid {}) is stopped (SIGSTOP, or a debugger): continued to take the stop\n",
                   w.rank, w.pid);
      kill(-w.pid, sig);
      if (sig != SIGKILL) kill(-w.pid, SIGCONT);  // a stopped rank would only take it when continued
    }
    if (stop_sent == Clock::time_point{}) stop_sent = Clock::now();
  };

  while (true) {
    std::vector<pollfd> fds = {{g_signal_pipe[0], POLLIN, 0}};
    for (const auto& w : workers)
      for (int fd : {w.out, w.err})
        if (fd >= 0) fds.push_back({fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 100);
    auto ready = [&](int fd) {
      for (const auto& p : fds)
        if (p.fd == fd) return (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
      return false;
    };
    unsigned char sig = 0;
    while (read(g_signal_pipe[0], &sig, 1) == 1) {
      if (stop_signal) {  // a second signal: no more waiting
        stop_all(SIGKILL);
        killed = true;
      } else {
        stop_signal = sig;
        fmt::print(stderr, "gputrain launch: {} received, forwarded to every rank\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
        stop_all(sig);
      }
    }
    for (auto& w : workers) {
      if (w.out >= 0 && ready(w.out)) drain(w.out, w.out_buf, STDOUT_FILENO, w.rank);
      if (w.err >= 0 && ready(w.err)) drain(w.err, w.err_buf, STDERR_FILENO, w.rank);
    }
    for (auto& w : workers) {
      int status = 0;
      if (w.done || waitpid(w.pid, &status, WNOHANG) != w.pid) continue;
      w.done = true;
      w.code = exit_code_of(status);
      if (w.code != 0 && !failed_code && !stop_signal) {
        failed_code = w.code;
        fmt::print(stderr, "gputrain launch: rank {} (pid {}) exited with code {}; stopping the other ranks\n", w.rank,
                   w.pid, w.code);
        stop_all(SIGTERM);
      }
    }
    const bool all_done = std::all_of(workers.begin(), workers.end(), [](const Worker& w) { return w.done; });
    if (all_done) break;
    const bool stopping = stop_sent != Clock::time_point{};
    if (stopping && !killed &&
        std::chrono::duration<double>(Clock::now() - stop_sent).count() > o.grace_seconds) {
      fmt::print(stderr, "gputrain launch: ranks still running {:.0f} s after the stop; killing them\n", o.grace_seconds);
      stop_all(SIGKILL);
      killed = true;
    }
  }
  // Whatever a rank left running in its group goes too (it would hold the output pipes open),
  // then the ranks' last output, then the verdict.
  for (const auto& w : workers) kill(-w.pid, SIGKILL);
  for (auto& w : workers) {
    while (w.out >= 0) drain(w.out, w.out_buf, STDOUT_FILENO, w.rank);
    while (w.err >= 0) drain(w.err, w.err_buf, STDERR_FILENO, w.rank);
  }
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  close(g_signal_pipe[0]);
  close(g_signal_pipe[1]);
  if (failed_code) return failed_code;
  if (stop_signal) return 128 + stop_signal;
  return 0;
}

}  // namespace gputrain
