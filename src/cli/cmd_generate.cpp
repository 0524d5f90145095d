// `gputrain generate --checkpoint C --prompt TEXT`: text from a trained language model.
#include <cmath>
#include <fstream>
#include <iterator>
#include <string_view>

#include <fmt/format.h>

#include "app/generate_run.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"

namespace gputrain {
namespace {

// A flag's number, or a usage error naming the flag and what it takes.
double number(const std::string& flag, const std::string& text, double lo, double hi, const std::string& takes) {
  size_t used = 0;
  double v = NAN;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
  }
  if (used != text.size() || !(v >= lo && v <= hi)) throw usage_error(fmt::format("--{} '{}': {}", flag, text, takes));
  return v;
}

int64_t whole(const std::string& flag, const std::string& text, double lo, double hi, const std::string& takes) {
  const double v = number(flag, text, lo, hi, takes);
  if (v != std::floor(v)) throw usage_error(fmt::format("--{} '{}': {}", flag, text, takes));
  return static_cast<int64_t>(v);
}

std::vector<int64_t> parse_ids(const std::string& text) {
  std::vector<int64_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    ids.push_back(whole("prompt_ids", text.substr(start, comma - start), 0, 1 << 30, "token ids are whole numbers from 0, as 1,2,3"));
    start = comma + 1;
  }
  return ids;
}

// --stop '\n\n': the escapes \n, \t and \\ read as the characters, since a shell passes them as typed.
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == 'n' || s[i + 1] == 't' || s[i + 1] == '\\')) {
      out += s[i + 1] == 'n' ? '\n' : s[i + 1] == 't' ? '\t' : '\\';
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

constexpr std::string_view kPromptSlot = "{prompt}";

// A --prompt_template file: text with {prompt} once, where each prompt goes.
std::string read_template(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw usage_error("--prompt_template file '" + path + "' cannot be read", "give the prompt_template.txt beside the instruction shards");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find(kPromptSlot);
  if (at == std::string::npos || text.find(kPromptSlot, at + 1) != std::string::npos)
    throw usage_error("--prompt_template file '" + path + "' must hold {prompt} once",
                      "e.g. a file with '### Instruction:\\n{prompt}\\n\\n### Response:\\n'");
  return text;
}

}  // namespace

int cmd_generate(const std::vector<std::string>& words) {
  Args args = parse_command_line(words,
                                 {{"checkpoint", true}, {"prompt", true}, {"prompt_ids", true}, {"prompts", true},
                                  {"max_new_tokens", true}, {"temperature", true}, {"top_k", true}, {"top_p", true},
                                  {"seed", true}, {"stop", true}, {"json", false}, {"prompt_template", true}},
                                 true);
  if (args.take_switch("help")) {
    fmt::print(
        "usage: gputrain generate --checkpoint FILE|DIR (--prompt TEXT | --prompt_ids 1,2,3 | --prompts FILE)\n"
        "                         [--max_new_tokens 256] [--temperature 1] [--top_k 0] [--top_p 1] [--seed 0]\n"
        "                         [--stop STRING]... [--json] [--prompt_template FILE] [--device cpu|cuda]\n\n"
        "Writes what a trained language model (--model gpt or llama) continues a prompt with, token by\n"
        "token, to stdout as it comes; the times (to the first token, tokens/s) go to stderr. A key-value\n"
        "cache holds the prompt's keys and values, so each new token is one pass over that token.\n"
        "--checkpoint: a run's checkpoint, or a Hugging Face GPT-2 or Llama folder (config.json,\n"
        "safetensors, and its tokenizer.json or tokenizer.model).\n"
        "--prompt is encoded with the run's tokenizer (a byte-level BPE tokenizer.json, or a\n"
        "SentencePiece .model); --prompt_ids takes ids\n"
        "(1,2,3;4,5 for two prompts in one batch).\n"
        "--prompts FILE: one prompt per line, generated together in one batch (shorter prompts\n"
        "padded on the left), written as JSON lines. --temperature 0 takes the likeliest token\n"
        "(greedy); otherwise a draw from the model's distribution divided by the temperature, kept\n"
        "to the --top_k likeliest tokens and to the likeliest whose probability reaches --top_p.\n"
        "A text ends at the end-of-text token, at a --stop string (left out of the text; \\n and \\t\n"
        "in it are a newline and a tab; give it several times for several), at --max_new_tokens\n"
        "or at the model's context.\n"
        "--json: one JSON line per prompt (prompt_ids, ids, text, stop) instead of the text.\n"
        "--prompt_template FILE: each prompt goes where the file's text says {{prompt}}, as in the\n"
        "instruction data the model was fine-tuned on (prompt_template.txt beside the shards that\n"
        "tools/prepare_text.py --instructions writes), after an end-of-text token as there.\n");
    return 0;
  }
  GenerateRequest q;
  q.checkpoint = args.take_value("checkpoint").value_or("");
  if (q.checkpoint.empty())
    throw usage_error("generate needs --checkpoint FILE", "e.g. gputrain generate --checkpoint runs/<name>/checkpoints/last.pt --prompt 'def '");
  const auto prompt = args.take_value("prompt"), ids = args.take_value("prompt_ids"), file = args.take_value("prompts");
  if ((prompt ? 1 : 0) + (ids ? 1 : 0) + (file ? 1 : 0) != 1)
    throw usage_error("generate needs one of --prompt TEXT, --prompt_ids 1,2,3 or --prompts FILE",
                      "e.g. --prompt 'def main():'");
  if (prompt) q.prompts.push_back(*prompt), q.origins.push_back("--prompt");
  if (ids)  // "1,2,3;4,5": several prompts, one batch
    for (size_t start = 0; start <= ids->size();) {
      const size_t end = std::min(ids->find(';', start), ids->size());
      q.prompt_ids.push_back(parse_ids(ids->substr(start, end - start)));
      q.origins.push_back(fmt::format("--prompt_ids prompt {}", q.prompt_ids.size()));
      start = end + 1;
    }
  if (file) {
    std::ifstream in(*file);
    if (!in) throw usage_error("--prompts file '" + *file + "' cannot be read", "give a text file with one prompt per line");
    int number = 0;
    for (std::string line; std::getline(in, line);) {
      ++number;
      if (!line.empty() && line.back() == '\r') line.pop_back();  // a file written on Windows
      if (!line.empty()) q.prompts.push_back(line), q.origins.push_back(fmt::format("--prompts {} line {}", *file, number));
    }
    if (q.prompts.empty()) throw usage_error("--prompts file '" + *file + "' has no prompt", "write one prompt per line");
  }
  for (const auto& p : q.prompts)
    if (p.empty()) throw usage_error("--prompt is empty", "give the text the model continues");
  if (const auto path = args.take_value("prompt_template")) {
    if (!q.prompt_ids.empty())
      throw usage_error("--prompt_template wraps text prompts, and --prompt_ids gives ids", "give --prompt TEXT");
    const std::string text = read_template(*path);
    const size_t at = text.find(kPromptSlot);
    for (auto& p : q.prompts) p = text.substr(0, at) + p + text.substr(at + kPromptSlot.size());
    q.lead_with_end_of_text = true;
  }
  if (const auto v = args.take_value("max_new_tokens"))
    q.max_new_tokens = whole("max_new_tokens", *v, 1, 1 << 24, "a whole number of tokens from 1");
  if (const auto v = args.take_value("temperature"))
    q.temperature = number("temperature", *v, 0, 1e6, "a number from 0 (0: greedy)");
  if (const auto v = args.take_value("top_k")) q.top_k = whole("top_k", *v, 0, 1 << 30, "a whole number from 0 (0: all tokens)");
  if (const auto v = args.take_value("top_p"))
    q.top_p = number("top_p", *v, 1e-9, 1, "a probability above 0, at most 1 (1: all tokens)");
  if (const auto v = args.take_value("seed")) q.seed = static_cast<uint64_t>(whole("seed", *v, 0, 9e15, "a whole number from 0"));
  for (const auto& s : args.take_values("stop")) q.stops.push_back(unescape(s));
  for (const auto& s : q.stops)
    if (s.empty()) throw usage_error("--stop is empty", "give the text that ends a generation, e.g. --stop '\\n\\n'");
  q.json = args.take_switch("json") || q.prompts.size() + q.prompt_ids.size() > 1;
  if (!args.positionals.empty()) throw usage_error("unexpected argument '" + args.positionals[0] + "' to generate");
  if (auto problems = run_folder_flags_given(args.flags, "generate"); !problems.empty())
    throw Error(problems, "gputrain generate --help lists its flags", kExitUsage);
  q.flags = args.flags;
  return run_generate(q);
}

}  // namespace gputrain
