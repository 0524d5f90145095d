// Splits a command line into flags and positional words.
#include "cli/args.h"

#include <algorithm>

#include "config/fields.h"

namespace gputrain {

bool Args::take_switch(const std::string& name) {
  auto it = std::find_if(flags.begin(), flags.end(), [&](const FlagArg& f) { return f.name == name; });
  if (it == flags.end()) return false;
  bool on = !it->negated && (!it->value || *it->value == "true" || *it->value == "1");
  flags.erase(it);
  return on;
}

std::optional<std::string> Args::take_value(const std::string& name) {
  auto it = std::find_if(flags.begin(), flags.end(), [&](const FlagArg& f) { return f.name == name; });
  if (it == flags.end()) return std::nullopt;
  std::string v = it->value.value_or("");
  flags.erase(it);
  return v;
}

Args parse_args(const std::vector<std::string>& words, const std::function<bool(const std::string&)>& is_bool) {
  Args args;
  bool flags_done = false;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (flags_done || w.size() < 2 || w[0] != '-') {
      args.positionals.push_back(w);
      continue;
    }
    if (w == "--") {
      flags_done = true;
      continue;
    }
    if (w == "-h") {
      args.flags.push_back({"help", std::nullopt, false, w});
      continue;
    }
    std::string body = w.substr(w[1] == '-' ? 2 : 1);
    FlagArg flag;
    flag.raw = w;
    auto eq = body.find('=');
    if (eq != std::string::npos) {
      flag.value = body.substr(eq + 1);
      body = body.substr(0, eq);
    }
    flag.name = normalize_flag_name(body);
    // "--no-x" negates x; for a non-boolean x the config reports that it cannot be negated.
    if (flag.name.rfind("no_", 0) == 0 && flag.name.size() > 3 && !is_bool(flag.name)) {
      flag.name = flag.name.substr(3);
      flag.negated = true;
    }
    // "--lr 0.1": a non-boolean flag without "=" takes the next word as its value, unless that
    // word is itself a flag ("--lr -1" still works: one dash).
    if (!flag.value && !flag.negated && !is_bool(flag.name) && i + 1 < words.size() &&
        words[i + 1].rfind("--", 0) != 0) {
      flag.value = words[++i];
    }
    args.flags.push_back(std::move(flag));
  }
  return args;
}

}  // namespace gputrain
