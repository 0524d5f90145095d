// Helpers shared by the tests: temporary folders, files, and running the built binary.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <ftw.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace gputrain::test {

// Removes a folder and all it holds, links not followed. Not std::filesystem::remove_all: the
// torch 2.11 wheel's libtorch.so exports its own copy, which calls a weak symbol that is null
// unless libstdc++.so is loaded, and on a GPU machine (Ubuntu 24.04, pip torch 2.11) the
// binaries bound to it and crashed in every test that ran gputrain.
inline void remove_tree(const std::filesystem::path& path) {
  auto remove_one = [](const char* p, const struct stat*, int, struct FTW*) {
    std::remove(p);  // best effort, as remove_all(path, ec) was: a test's leftovers are not its result
    return 0;
  };
  ::nftw(path.c_str(), remove_one, 64, FTW_DEPTH | FTW_PHYS);
}

// A fresh folder under the system temp dir, removed when the object dies.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::random_device rd;
    path = std::filesystem::temp_directory_path() / ("gputrain-test-" + std::to_string(rd()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { remove_tree(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// An llm.c token shard (a 256 x int32 header: magic 20240520, version 1, the count; then uint16
// tokens) of `tokens`, for --dataset tokens.
inline void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens) {
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = 1;
  header[2] = static_cast<int32_t>(tokens.size());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), 1024);
  out.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(2 * tokens.size()));
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The records of a metrics.jsonl file, in order.
inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_file(path));
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// What this process writes to stderr while the object lives (for messages printed, not thrown).
struct CaptureStderr {
  std::FILE* file = std::tmpfile();
  int saved = ::dup(STDERR_FILENO);
  CaptureStderr() {
    std::fflush(stderr);
    ::dup2(::fileno(file), STDERR_FILENO);
  }
  ~CaptureStderr() {
    restore();
    std::fclose(file);
  }
  std::string text() {
    restore();
    std::string out;
    std::rewind(file);
    for (int ch; (ch = std::fgetc(file)) != EOF;) out += static_cast<char>(ch);
    return out;
  }

 private:
  void restore() {
    if (saved < 0) return;
    std::fflush(stderr);
    ::dup2(saved, STDERR_FILENO);
    ::close(saved);
    saved = -1;
  }
};

// Starts `command` with /bin/sh in a child process, for tests that signal it; its pid.
inline pid_t start_shell(const std::string& command) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// Sends SIGTERM to a child of start_shell and waits for it: its exit code, or -N when signal N
// killed it.
inline int sigterm_and_wait(pid_t pid) {
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// Waits up to 60 s until the run folder's metrics.jsonl holds a step record: training began.
inline bool wait_for_step(const std::string& run) {
  for (int i = 0; i < 600; ++i) {
    std::ifstream in(run + "/metrics.jsonl");
    for (std::string line; std::getline(in, line);)
      if (line.find("\"event\":\"step\"") != std::string::npos) return true;
    ::usleep(100000);
  }
  return false;
}

// The child of `parent` whose environment holds `variable` ("RANK=1"), or -1.
inline pid_t child_with_env(pid_t parent, const std::string& variable) {
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream env(e.path() / "environ");
    const std::string all((std::istreambuf_iterator<char>(env)), std::istreambuf_iterator<char>());
    std::ifstream stat(e.path() / "stat");
    const std::string s((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const auto close = s.rfind(')');
    int ppid = -1;
    if (close != std::string::npos) sscanf(s.c_str() + close + 2, "%*c %d", &ppid);
    if (ppid == parent && (std::string(1, '\0') + all).find('\0' + variable + '\0') != std::string::npos)
      return std::stoi(name);
  }
  return -1;
}

// Path of the built gputrain binary (defined in test_main.cpp).
const char* gputrain_exe();

struct RunResult {
  int exit_code;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs the gputrain binary with `args` (a shell-quoted string) and captures its outputs.
// `env` prefixes the command ("GPUTRAIN_FAULT_OOM_STEP=5"). A death by signal N reads as
// exit code 128 + N, as a shell reports it.
inline RunResult run_gputrain(const std::string& args, const std::string& env = "") {
  TempDir tmp;
  std::string cmd = env + " " + gputrain_exe() + " " + args + " >" + (tmp / "out") + " 2>" + (tmp / "err");
  int status = std::system(cmd.c_str());
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
  return {code, read_file(tmp / "out"), read_file(tmp / "err")};
}

// Runs the gputrain binary with `args` in the background, sends it SIGINT `delay_s` seconds after
// `file` appears (or after 180 s), and waits for it: Ctrl-C at a known point of a run. The
// output is stdout and stderr together.
inline RunResult interrupt_gputrain_when(const std::string& args, const std::string& file, double delay_s = 0) {
  TempDir tmp;
  const std::string cmd = "sh -c '" + std::string(gputrain_exe()) + " " + args + " >" + (tmp / "out") +
                          " 2>&1 & pid=$!; for i in $(seq 1800); do [ -e " + file +
                          " ] && break; sleep 0.1; done; sleep " + std::to_string(delay_s) +
                          "; kill -INT $pid; wait $pid'";
  const int status = std::system(cmd.c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
  return {code, read_file(tmp / "out"), ""};
}

}  // namespace gputrain::test
