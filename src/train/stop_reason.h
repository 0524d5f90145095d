// Why a fit stopped before its steps were done: a signal or the time limit (none: it ran to its
// end, or stopped early or at a target, which FitResult says on its own).
#pragma once
#include <string>

namespace gputrain {

struct StopReason {
  enum class Kind { kNone, kSigterm, kSigint, kTimeLimit };
  Kind kind = Kind::kNone;
  std::string time_limit;  // kTimeLimit: the limit as given ("10m")

  explicit operator bool() const { return kind != Kind::kNone; }
  bool signal() const { return kind == Kind::kSigterm || kind == Kind::kSigint; }
  // "SIGTERM", "SIGINT", "time limit 10m", or "" (none): what metrics.jsonl and the status say.
  std::string text() const {
    switch (kind) {
      case Kind::kSigterm: return "SIGTERM";
      case Kind::kSigint: return "SIGINT";
      case Kind::kTimeLimit: return "time limit " + time_limit;
      case Kind::kNone: break;
    }
    return "";
  }
};

}  // namespace gputrain
