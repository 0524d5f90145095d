// The command table and the dispatcher: unknown commands get a "did you mean".
#include "cli/commands.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>

#include <filesystem>
#include <fmt/format.h>

#include "cli/args.h"
#include "config/fields.h"
#include "core/error.h"
#include "core/info.h"
#include "core/text.h"
#include "core/torch_errors.h"
#include "models/family.h"
#include "monitor/command_profile.h"

namespace gputrain {

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"train", "train a model with the speed recipe on (the default: quickstart preset)", cmd_train},
      {"benchmark", "time each optimization on and off on this device, and say what it bought", cmd_benchmark},
      {"eval", "metrics of a checkpoint on a dataset", cmd_eval},
      {"infer", "batched predictions to CSV, with samples/s and latency (and a batch-size sweep)", cmd_infer},
      {"generate", "text from a trained language model, streamed as it comes (key-value cache)", cmd_generate},
      {"export", "write a checkpoint's weights as model.safetensors (loads in Python)", cmd_export},
      {"consolidate", "write a sharded checkpoint (--shard) as one file with its whole optimizer state", cmd_consolidate},
      {"report", "rebuild a run folder's report.html", cmd_report},
      {"launch", "start the ranks of a data-parallel job on this node (like torchrun)", cmd_launch},
      {"info", "show the device, LibTorch, CUDA, cuDNN and NCCL versions", cmd_info},
      {"models", "list the models with their parameter counts for an input shape", cmd_models},
      {"presets", "list presets, or `presets show NAME` to print one", cmd_presets},
  };
  return table;
}

namespace {

std::vector<std::string> command_names() {
  std::vector<std::string> names;
  for (const auto& c : commands()) names.push_back(c.name);
  return names;
}

void print_usage() {
  fmt::print("gputrain {}: train PyTorch-style models on GPUs as fast as the hardware allows\n\n", GPUTRAIN_VERSION);
  fmt::print("usage: gputrain <command> [flags]\n\ncommands:\n");
  for (const auto& c : commands()) fmt::print("  {:<11} {}\n", c.name, c.summary);
  fmt::print(
      "\n`gputrain <command> --help` shows a command's flags. `gputrain --version` shows versions.\n"
      "With no command, `gputrain` prints this help; `gputrain train` runs the quickstart.\n");
}

}  // namespace

void print_error(const std::vector<std::string>& problems, const std::string& hint) noexcept {
  std::fflush(stdout);  // a combined log (> log 2>&1) gets the error after the lines before it, never inside one
  // fwrite, not fmt::print: fmt throws when stderr is closed or full, and a throw from inside the
  // last catch ends the process with abort(); an error nobody can read still leaves its exit code.
  // A NUL quoted from a bad file (a CSV cell) would end the line there: written as \0.
  auto line = [](const std::string& text) {
    std::string out;
    for (char ch : text) out += ch == '\0' ? std::string("\\0") : std::string(1, ch);
    out += '\n';
    std::fwrite(out.data(), 1, out.size(), stderr);
  };
  for (const auto& p : problems) line("gputrain: error: " + p);
  if (!hint.empty()) line("hint: " + hint);
}

void reject_leftover_flags(const Args& args, const std::vector<std::string>& known) {
  std::vector<std::string> problems;
  for (const auto& f : args.flags) problems.push_back("unknown flag '" + f.raw + "'" + did_you_mean(f.name, known));
  if (!problems.empty()) throw Error(problems, "the command's --help lists its flags", kExitUsage);
}

namespace {

int run_command(int argc, char** argv) {
  // Whole lines: LibTorch's warnings and our own errors go to stderr between two lines of the
  // report, never inside a table row, whatever stdout is (a file or pipe is fully buffered).
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  set_model_choices(model_names());
  std::vector<std::string> words(argv + 1, argv + argc);
  try {
    if (words.empty() || words[0] == "--help" || words[0] == "-h" || words[0] == "help") {
      print_usage();
      return 0;
    }
    if (words[0] == "--version" || words[0] == "-V" || words[0] == "version") {
      fmt::print("{}\n", version_line());
      return 0;
    }
    for (const auto& c : commands()) {
      if (words[0] == c.name) return run_with_torch_errors(
            [&] { return run_profiled_if_asked([&] { return c.run({words.begin() + 1, words.end()}); }); });
    }
    throw usage_error("unknown command '" + words[0] + "'" + did_you_mean(words[0], command_names()),
                      "commands: " + join(command_names(), ", ") + " (gputrain --help)");
  } catch (const Error& e) {
    print_error(e.problems, e.hint);
    return e.exit_code;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the file system refuses: one line, the path cut short (it may be megabytes long).
    std::string path = e.path1().string();
    if (path.size() > 100) path = fmt::format("{}... ({} characters)", path.substr(0, 60), path.size());
    if (e.code() == std::errc::filename_too_long) {
      print_error({"path too long for the file system: '" + path + "'"},
                  "a path holds at most 4096 bytes, and each folder or file name in it 255");
      return kExitUsage;
    }
    print_error({"'" + path + "': " + e.code().message()}, "");
    return kExitRuntime;
  } catch (const std::bad_alloc&) {
    print_error({"out of host memory (an allocation failed)"},
                "a smaller --batch_size, --num_workers or --prefetch_factor, or a machine (or ulimit -v) with more memory");
    return kExitRuntime;
  } catch (const std::exception& e) {
    print_error({e.what()}, "");
    return kExitRuntime;
  }
}

// A standard descriptor closed by the caller (`>&-`) is the lowest free number, so the next file
// opened (the run folder's lock, a checkpoint) would get it and the log would be written into
// that file. Each closed one is held by /dev/null, opened read-only: a write there still fails
// (EBADF), so output that was lost is reported as it would have been, and none that was not.
// Returns whether standard output was closed.
bool hold_closed_standard_descriptors() {
  bool stdout_closed = false;
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    // open() returns the lowest free number: this one, as the lower ones are open by now.
    const int held = ::open("/dev/null", O_RDONLY);
    if (held >= 0 && held != fd) ::close(held);
    stdout_closed = stdout_closed || (fd == 1 && held == fd);
  }
  return stdout_closed;
}

}  // namespace

int run_cli(int argc, char** argv) {
  const bool stdout_closed = hold_closed_standard_descriptors();
  int code = run_command(argc, argv);
  // Standard output may be a full disk or closed (`> /dev/full`, `>&-`): the listing, the
  // generated text or the report would be lost while the exit code said success.
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    // The failed write may lie in the past (a line flushed mid-run): its reason is found again.
    std::string why = errno ? std::strerror(errno) : stdout_closed ? "it is closed" : "";
    if (why.empty()) why = ::write(1, "\n", 1) < 0 ? std::strerror(errno) : "a write failed";
    print_error({fmt::format("could not write to standard output: {}", why)},
                "the output was cut short; check the file or pipe that standard output goes to");
    if (code == 0) code = kExitRuntime;
  }
  return code;
}

}  // namespace gputrain
