// Splits a command line into flags and positional words: cxxopts over the field table, plus the
// spellings cxxopts 3.1 lacks (kebab-case, --no-x) and error collection instead of the first throw.
#include "cli/args.h"

#include <cxxopts.hpp>

#include <algorithm>
#include <map>

#include "config/fields.h"

namespace gputrain {

namespace {

// The last of `name`'s occurrences (a flag given twice: the later one wins, as for the config
// flags), with every occurrence removed so none is left over as unknown.
std::optional<FlagArg> take_last(std::vector<FlagArg>& flags, const std::string& name) {
  std::optional<FlagArg> last;
  for (const auto& f : flags)
    if (f.name == name) last = f;
  flags.erase(std::remove_if(flags.begin(), flags.end(), [&](const FlagArg& f) { return f.name == name; }), flags.end());
  return last;
}

}  // namespace

bool Args::take_switch(const std::string& name) {
  const auto f = take_last(flags, name);
  return f && !f->negated && (!f->value || *f->value == "true" || *f->value == "1");
}

std::optional<std::string> Args::take_value(const std::string& name) {
  const auto f = take_last(flags, name);
  if (!f) return std::nullopt;
  return f->value.value_or("");
}

std::vector<std::string> Args::take_values(const std::string& name) {
  std::vector<std::string> values;
  for (const auto& f : flags)
    if (f.name == name) values.push_back(f.value.value_or(""));
  take_last(flags, name);
  return values;
}

namespace {

// The flags a command knows, declared to cxxopts, and (name -> takes a value) for the bridge's
// own decisions: cxxopts cannot say whether "--no-x" names a boolean before it parses it.
struct KnownFlags {
  cxxopts::Options options{"gputrain"};
  std::map<std::string, bool> takes_value;

  // Every value is a std::string, booleans included (implicit "true": no value word taken): the
  // field table's set_field_flag (and the commands, for their own flags) stay the one judge of a
  // value, with their messages, and of "yes"/"on"/"off", which cxxopts's bool does not accept.
  void add(const std::string& spec, const std::string& name, bool with_value, const std::string& help) {
    if (!takes_value.emplace(name, with_value).second) return;  // a local flag shadows a field
    auto value = cxxopts::value<std::string>();
    if (!with_value) value->implicit_value("true");
    options.add_options()(spec, help, value);
  }
};

KnownFlags declare(const std::vector<LocalFlag>& local, bool with_fields) {
  KnownFlags k;
  k.options.allow_unrecognised_options();  // unknown flags come back to us, to be reported with the rest
  k.add("h,help", "help", false, "show this command's flags");
  for (const auto& l : local) k.add(l.name, l.name, l.takes_value, "");
  if (with_fields)
    for (const auto& f : config_fields()) k.add(f.name, f.name, !f.is_bool(), f.help);
  return k;
}

// A flag word as the bridge reads it before cxxopts does.
struct Spelling {
  std::string name;                  // snake_case, "no_" removed when negated
  std::optional<std::string> value;  // after "=", as typed
  bool negated = false;
  std::string word;  // what cxxopts is given
};

Spelling spell(const std::string& w, const KnownFlags& known) {
  Spelling s;
  if (w == "-h") {  // cxxopts's short alias of --help
    s.name = "help";
    s.word = w;
    return s;
  }
  // "-x" is read as "--x" (as before cxxopts): only "-h" is a short flag.
  std::string body = w.substr(w[1] == '-' ? 2 : 1);
  auto eq = body.find('=');
  if (eq != std::string::npos) {
    s.value = body.substr(eq + 1);
    body.resize(eq);
  }
  s.name = normalize_flag_name(body);
  // "--no-x" negates x. For an unknown or non-boolean x the later stages say why it is wrong
  // ("unknown flag '--no-such'", "--no-lr is not valid"); cxxopts only sees "--x=false".
  if (s.name.rfind("no_", 0) == 0 && s.name.size() > 3 && !known.takes_value.count(s.name)) {
    s.name.erase(0, 3);
    s.negated = true;
    s.word = "--" + s.name + "=false";
  } else {
    s.word = "--" + s.name + (s.value ? "=" + *s.value : "");
  }
  return s;
}

}  // namespace

Args parse_command_line(const std::vector<std::string>& words, const std::vector<LocalFlag>& local,
                        bool config_fields) {
  KnownFlags known = declare(local, config_fields);
  Args args;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "--") {
      args.positionals.insert(args.positionals.end(), words.begin() + i + 1, words.end());
      break;
    }
    if (w.size() < 2 || w[0] != '-') {
      args.positionals.push_back(w);
      continue;
    }
    const Spelling s = spell(w, known);
    auto it = known.takes_value.find(s.name);
    const bool is_bool = it != known.takes_value.end() && !it->second;
    // "--lr 0.1": a flag that is not a known boolean takes the next word as its value, unless that
    // word is itself a flag ("--lr -1" still works: one dash). cxxopts would take "--epochs" as
    // the value of "--lr --epochs 2", so the bridge leaves such a word out of the flag's turn.
    const std::string* next = nullptr;
    if (!s.value && !s.negated && !is_bool && i + 1 < words.size() && words[i + 1].rfind("--", 0) != 0)
      next = &words[i + 1];
    // Only a known value flag hands cxxopts its value word: after an unknown flag cxxopts would
    // read a word like "-h" as an option of its own.
    const bool value_to_cxxopts = next && it != known.takes_value.end();

    // One flag per cxxopts parse: its exceptions stop only that flag, and the order is kept. The
    // bridge's own reading stands where cxxopts does not match the flag (an unknown flag takes the
    // next word, as a known one would) or throws (a value flag with no value word: "needs a value").
    FlagArg flag{s.name, next ? std::optional<std::string>(*next) : s.value, s.negated, w};
    std::vector<const char*> argv = {"gputrain", s.word.c_str()};
    if (value_to_cxxopts) argv.push_back(next->c_str());
    try {
      auto result = known.options.parse(static_cast<int>(argv.size()), argv.data());
      if (!result.arguments().empty()) {
        const auto& kv = result.arguments().front();
        flag.name = kv.key();  // "-h" -> "help"
        // A bare boolean keeps "no value" (not cxxopts's implicit "true"); a negated one keeps
        // what followed "=", for set_field_flag to judge ("--no-x=false").
        if (!s.negated && !(is_bool && !s.value)) flag.value = kv.value();
      }
    } catch (const cxxopts::exceptions::exception&) {
      // Reported later from the flag as typed, with every other problem of the command line.
    }
    if (next) ++i;
    args.flags.push_back(std::move(flag));
  }
  return args;
}

}  // namespace gputrain
