// The weights-only unpickler. A pickle is a small stack program; this runs only the opcodes
// that build data (numbers, strings, lists, tuples, dicts, memo), and for the calls a state_dict
// holds (an OrderedDict, a tensor rebuilt from a storage, a Parameter) builds the result itself.
// The allowlist is the subset of PyTorch's weights_only=True one that model weights use.
#include "weights/unpickler.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/signals.h"

namespace gputrain {
namespace {

using Kind = PickleValue::Kind;

// The storage classes torch.save names (torch.FloatStorage ...) and their element types.
const std::map<std::string, torch::ScalarType>& storage_types() {
  static const std::map<std::string, torch::ScalarType> types = {
      {"torch.DoubleStorage", torch::kDouble}, {"torch.FloatStorage", torch::kFloat},
      {"torch.HalfStorage", torch::kHalf},     {"torch.BFloat16Storage", torch::kBFloat16},
      {"torch.LongStorage", torch::kLong},     {"torch.IntStorage", torch::kInt},
      {"torch.ShortStorage", torch::kShort},   {"torch.CharStorage", torch::kChar},
      {"torch.ByteStorage", torch::kByte},     {"torch.BoolStorage", torch::kBool},
  };
  return types;
}

constexpr const char* kOrderedDict = "collections.OrderedDict";
// An inert record: timm's train.py saves its command line (`args`) as one beside the weights.
constexpr const char* kNamespace = "argparse.Namespace";
// What LibTorch's pickler wraps typed containers in (TorchScript archives): the value itself.
constexpr const char* kRestoreTypeTag = "torch.jit._pickle.restore_type_tag";
constexpr const char* kTorchScriptClass = "__torch__.";
constexpr const char* kRebuildTensor = "torch._utils._rebuild_tensor_v2";
constexpr const char* kRebuildParameter = "torch._utils._rebuild_parameter";

// Most dimensions a tensor may claim (PyTorch's own limit is 64).
constexpr size_t kMaxDims = 64;

// Most MARKs open at once: torch.save's pickles nest a few deep; a file of a million '(' is
// refused at once instead of growing a stack.
constexpr size_t kMaxMarks = 256;

// Most levels of containers built inside each other: a checkpoint nests about 10 deep (a
// module record per submodule), a chain of a million TUPLE1s is refused at once.
constexpr uint32_t kMaxNesting = 100;

// How often (in opcodes) the reader looks for a stop signal.
constexpr uint64_t kSignalCheckEvery = 1 << 16;

// Most elements a tensor may claim (its sizes' product must not overflow on the way).
constexpr int64_t kMaxElements = int64_t{1} << 50;

class Machine {
 public:
  Machine(std::string where, const uint8_t* data, size_t size, const StorageReader& storage, std::string hint,
          const PickleRules& rules)
      : where_(std::move(where)),
        p_(data),
        end_(data + size),
        begin_(data),
        storage_(storage),
        hint_(std::move(hint)),
        rules_(rules) {}

  Unpickled run() {
    for (uint64_t ops = 1;; ++ops) {
      if (ops % kSignalCheckEvery == 0 && stop_signal() != 0)
        throw Error({where_ + ": reading stopped by a signal"}, "", exit_code_for_signal(stop_signal()));
      const size_t at = offset();
      const uint8_t op = byte();
      switch (op) {
        case 0x80: byte(); break;                               // PROTO n
        case 0x95: take(8); break;                              // FRAME length: a read-ahead hint
        case '.': return finish(at);                            // STOP
        case '(': mark(); break;                                // MARK
        case '}': push(make(Kind::Dict)); break;                // EMPTY_DICT
        case ']': push(make(Kind::List)); break;                // EMPTY_LIST
        case ')': push(make(Kind::Tuple)); break;               // EMPTY_TUPLE
        case 't': push(sequence(Kind::Tuple, pop_mark())); break;  // TUPLE
        case 'l': push(sequence(Kind::List, pop_mark())); break;   // LIST
        case 'd': push(dict_from(pop_mark())); break;              // DICT
        case 0x85: push(sequence(Kind::Tuple, pop_n(1))); break;   // TUPLE1
        case 0x86: push(sequence(Kind::Tuple, pop_n(2))); break;   // TUPLE2
        case 0x87: push(sequence(Kind::Tuple, pop_n(3))); break;   // TUPLE3
        case 'q': use(32), memo_[byte()] = top(); break;           // BINPUT
        case 'r': use(32), memo_[u32()] = top(); break;            // LONG_BINPUT
        case 0x94: memoize(); break;                               // MEMOIZE
        case 'h': push(memo(byte())); break;                       // BINGET
        case 'j': push(memo(u32())); break;                        // LONG_BINGET
        case 'J': push(integer(static_cast<int32_t>(u32()))); break;  // BININT
        case 'K': push(integer(byte())); break;                    // BININT1
        case 'M': push(integer(u16())); break;                     // BININT2
        case 0x8a: push(integer(long1())); break;                  // LONG1
        case 'G': push(float64()); break;                          // BINFLOAT
        case 'N': push(make(Kind::None)); break;                   // NONE
        case 0x88: push(boolean(true)); break;                     // NEWTRUE
        case 0x89: push(boolean(false)); break;                    // NEWFALSE
        case 'X': push(string(u32())); break;                      // BINUNICODE
        case 0x8c: push(string(byte())); break;                    // SHORT_BINUNICODE
        case 0x8d: push(string(u64())); break;                     // BINUNICODE8
        case 'T': push(string(u32())); break;                      // BINSTRING (Python 2 str)
        case 'U': push(string(byte())); break;                     // SHORT_BINSTRING
        case 'c': {                                                // GLOBAL module\nname\n
          const std::string module = line();  // (two statements: argument order is unspecified)
          push(global(module, line()));
          break;
        }
        case 0x93: {                                               // STACK_GLOBAL
          const size_t name = pop(), module = pop();
          push(global(text_of(module, "STACK_GLOBAL module"), text_of(name, "STACK_GLOBAL name")));
          break;
        }
        case 'R': {  // REDUCE: callable(*args)
          const size_t args = pop(), callable = pop();
          push(reduce(callable, args));
          break;
        }
        case 'b': {  // BUILD: obj.__setstate__(state); an OrderedDict's state is its _metadata
          const size_t state = pop();
          const Kind k = values_[top()].kind;
          if (k != Kind::Dict && k != Kind::Tensor) fail(fmt::format("BUILD on a {} at byte {}", kind_name(k), at));
          if (k == Kind::Dict && !values_[top()].text.empty()) build_record(top(), state, at);
          break;
        }
        case 'Q': push(persistent(pop())); break;  // BINPERSID
        case 0x81: {                               // NEWOBJ: cls.__new__(cls, *args)
          const size_t args = pop(), cls = pop();
          push(new_record(cls, args));
          break;
        }
        case 's': {                                // SETITEM
          const size_t value = pop(), key = pop();
          set_item(top(), key, value);
          break;
        }
        case 'u': {  // SETITEMS
          const auto kv = pop_mark();
          if (kv.size() % 2) fail("SETITEMS with an odd number of items");
          for (size_t i = 0; i < kv.size(); i += 2) set_item(top(), kv[i], kv[i + 1]);
          break;
        }
        case 'a': {  // APPEND
          const size_t value = pop();
          append(top(), {value});
          break;
        }
        case 'e': append_from_mark(); break;  // APPENDS
        default:
          fail(fmt::format("pickle opcode 0x{:02x} at byte {} is not one torch.save writes for weights", op, at));
      }
    }
  }

 private:
  std::string where_;
  const uint8_t* p_;
  const uint8_t* end_;
  const uint8_t* begin_;
  const StorageReader& storage_;
  std::string hint_;
  PickleRules rules_;
  uint64_t used_ = 0;  // bytes the objects and stacks take, against rules_.memory_budget
  std::vector<PickleValue> values_;
  std::vector<size_t> stack_, marks_;
  std::unordered_map<uint64_t, size_t> memo_;
  std::map<std::string, torch::Tensor> storages_;  // by key: shared storages stay shared

  [[noreturn]] void fail(const std::string& why) const { throw usage_error(where_ + ": " + why, hint_); }

  size_t offset() const { return static_cast<size_t>(p_ - begin_); }
  const uint8_t* take(uint64_t n) {
    if (n > static_cast<uint64_t>(end_ - p_))
      fail(fmt::format("truncated pickle: {} bytes needed at byte {}, {} left", n, offset(), end_ - p_));
    const uint8_t* at = p_;
    p_ += n;
    return at;
  }
  uint8_t byte() { return *take(1); }
  uint16_t u16() {
    const uint8_t* b = take(2);
    return static_cast<uint16_t>(b[0] | (b[1] << 8));
  }
  uint32_t u32() {
    const uint8_t* b = take(4);
    return uint32_t{b[0]} | (uint32_t{b[1]} << 8) | (uint32_t{b[2]} << 16) | (uint32_t{b[3]} << 24);
  }
  uint64_t u64() {
    const uint64_t lo = u32();
    return lo | (uint64_t{u32()} << 32);
  }
  int64_t long1() {
    const uint8_t n = byte();
    if (n > 8) fail(fmt::format("an integer of {} bytes at byte {} (weights need at most 8)", n, offset()));
    const uint8_t* b = take(n);
    uint64_t v = 0;
    for (uint8_t i = 0; i < n; ++i) v |= uint64_t{b[i]} << (8 * i);
    if (n > 0 && n < 8 && (b[n - 1] & 0x80)) v |= ~uint64_t{0} << (8 * n);  // sign-extend
    return static_cast<int64_t>(v);
  }
  std::string line() {
    const uint8_t* nl = static_cast<const uint8_t*>(std::memchr(p_, '\n', static_cast<size_t>(end_ - p_)));
    if (!nl) fail(fmt::format("truncated pickle: a GLOBAL name at byte {} has no end", offset()));
    std::string s(reinterpret_cast<const char*>(p_), static_cast<size_t>(nl - p_));
    p_ = nl + 1;
    return s;
  }

  // Counts `bytes` more against the budget (the vectors' spare capacity is at most as much again).
  void use(uint64_t bytes) {
    used_ += bytes;
    if (used_ > rules_.memory_budget)
      fail(fmt::format("the pickle builds more objects than its file's size allows ({} MiB): not a checkpoint or "
                       "state_dict",
                       rules_.memory_budget >> 20));
  }
  size_t make(Kind k) {
    use(sizeof(PickleValue));
    values_.push_back({});
    values_.back().kind = k;
    return values_.size() - 1;
  }
  size_t integer(int64_t v) {
    const size_t i = make(Kind::Int);
    values_[i].integer = v;
    return i;
  }
  size_t boolean(bool v) {
    const size_t i = make(Kind::Bool);
    values_[i].integer = v;
    return i;
  }
  size_t float64() {
    const uint64_t big = u64();
    const uint64_t bits = __builtin_bswap64(big);  // BINFLOAT is big-endian
    const size_t i = make(Kind::Float);
    std::memcpy(&values_[i].number, &bits, sizeof(double));
    return i;
  }
  size_t string(uint64_t n) {
    const uint8_t* b = take(n);  // checked against the bytes left before anything is allocated
    use(n);
    const size_t i = make(Kind::String);
    values_[i].text.assign(reinterpret_cast<const char*>(b), n);
    return i;
  }
  size_t sequence(Kind k, std::vector<size_t> items) {
    use(items.size() * sizeof(size_t));
    const size_t i = make(k);
    for (size_t item : items) contains(i, item);
    values_[i].items = std::move(items);
    return i;
  }
  // Container `outer` holds `inner`: its depth is at least one more.
  void contains(size_t outer, size_t inner) {
    const uint32_t d = values_[inner].depth + 1;
    if (d > kMaxNesting) fail(fmt::format("the pickle nests containers deeper than {} levels: not a checkpoint", kMaxNesting));
    values_[outer].depth = std::max(values_[outer].depth, d);
  }
  size_t dict_from(const std::vector<size_t>& kv) {
    if (kv.size() % 2) fail("DICT with an odd number of items");
    const size_t d = make(Kind::Dict);
    for (size_t i = 0; i < kv.size(); i += 2) set_item(d, kv[i], kv[i + 1]);
    return d;
  }

  void push(size_t v) {
    use(sizeof(size_t));  // a memo read pushes without making an object
    stack_.push_back(v);
  }
  void mark() {
    if (marks_.size() >= kMaxMarks) fail(fmt::format("the pickle nests deeper than {} levels: not a checkpoint", kMaxMarks));
    marks_.push_back(stack_.size());
  }
  size_t top() const {
    if (stack_.empty() || (!marks_.empty() && marks_.back() == stack_.size())) fail("pickle stack underflow");
    return stack_.back();
  }
  size_t pop() {
    const size_t v = top();
    stack_.pop_back();
    return v;
  }
  std::vector<size_t> pop_n(size_t n) {
    std::vector<size_t> out(n);
    for (size_t i = n; i-- > 0;) out[i] = pop();
    return out;
  }
  std::vector<size_t> pop_mark() {
    if (marks_.empty()) fail("pickle MARK missing");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<size_t> out(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return out;
  }
  void memoize() {  // the next free memo slot, as Python's MEMOIZE counts them
    use(32);          // an unordered_map node
    const uint64_t slot = memo_.size();
    memo_[slot] = top();
  }
  size_t memo(uint64_t key) const {
    auto it = memo_.find(key);
    if (it == memo_.end()) fail(fmt::format("pickle memo {} read before it was written", key));
    return it->second;
  }

  static const char* kind_name(Kind k) {
    switch (k) {
      case Kind::None: return "None";
      case Kind::Bool: return "bool";
      case Kind::Int: return "int";
      case Kind::Float: return "float";
      case Kind::String: return "str";
      case Kind::List: return "list";
      case Kind::Tuple: return "tuple";
      case Kind::Dict: return "dict";
      case Kind::Global: return "global";
      case Kind::Tensor: return "tensor";
      case Kind::Storage: return "storage";
    }
    return "?";
  }
  const PickleValue& expect(size_t i, Kind k, const char* what) const {
    const PickleValue& v = values_[i];
    if (v.kind != k) fail(fmt::format("{} is a {}, not a {}", what, kind_name(v.kind), kind_name(k)));
    return v;
  }
  std::string text_of(size_t i, const char* what) const { return expect(i, Kind::String, what).text; }
  int64_t int_of(size_t i, const char* what) const {
    const PickleValue& v = values_[i];
    if (v.kind != Kind::Int && v.kind != Kind::Bool) fail(fmt::format("{} is a {}, not an int", what, kind_name(v.kind)));
    return v.integer;
  }

  void set_item(size_t dict, size_t key, size_t value) {
    if (values_[dict].kind != Kind::Dict) fail(fmt::format("SETITEM on a {}", kind_name(values_[dict].kind)));
    use(2 * sizeof(size_t));
    contains(dict, key);
    contains(dict, value);
    auto& items = values_[dict].items;
    items.push_back(key);
    items.push_back(value);
  }
  void append(size_t list, const std::vector<size_t>& items) {
    if (values_[list].kind != Kind::List) fail(fmt::format("APPEND on a {}", kind_name(values_[list].kind)));
    use(items.size() * sizeof(size_t));
    for (size_t item : items) contains(list, item);
    auto& to = values_[list].items;
    to.insert(to.end(), items.begin(), items.end());
  }
  void append_from_mark() {
    const auto items = pop_mark();
    append(top(), items);
  }

  size_t global(const std::string& module, const std::string& name) {
    // A name from the file (STACK_GLOBAL can reuse one string many times): counted each time.
    use(module.size() + name.size() + 1);
    const std::string full = module + "." + name;
    const auto& allowed = allowed_pickle_globals();
    const bool record_class = rules_.torchscript_records && full.rfind(kTorchScriptClass, 0) == 0;
    const bool typed = rules_.torchscript_records && full == kRestoreTypeTag;
    if (!record_class && !typed && std::find(allowed.begin(), allowed.end(), full) == allowed.end())
      throw usage_error(fmt::format("{}: forbidden global '{}': a weights file may only name tensors, storages and "
                                    "OrderedDict, and gputrain never runs code from a file",
                                    where_, printable(full, 120)),
                        "save only the weights in Python: torch.save(model.state_dict(), 'weights.pt'), or use "
                        "safetensors");
    const size_t i = make(Kind::Global);
    values_[i].text = full;
    return i;
  }

  size_t reduce(size_t callable, size_t args_index) {
    const std::string fn = expect(callable, Kind::Global, "a REDUCE callable").text;
    const std::vector<size_t> args = expect(args_index, Kind::Tuple, "REDUCE arguments").items;
    if (fn == kOrderedDict) {
      if (!args.empty()) fail("OrderedDict called with arguments (torch.save passes none)");
      return make(Kind::Dict);
    }
    if (fn == kRebuildTensor) {
      if (args.size() != 6 && args.size() != 7)
        fail(fmt::format("{} with {} arguments (expected 6 or 7)", fn, args.size()));
      return rebuild_tensor(args);
    }
    if (fn == kRestoreTypeTag) {  // restore_type_tag(value, type_string): the value, its type dropped
      if (args.size() != 2) fail(fmt::format("{} with {} arguments (expected 2)", fn, args.size()));
      return args[0];
    }
    if (fn == kRebuildParameter) {
      if (args.size() != 3) fail(fmt::format("{} with {} arguments (expected 3)", fn, args.size()));
      expect(args[0], Kind::Tensor, "a Parameter's data");
      return args[0];
    }
    fail(fmt::format("'{}' is not something a weights file calls", fn));
  }

  // NEWOBJ of a record class (argparse.Namespace; TorchScript classes when the rules allow them):
  // an empty Dict that BUILD fills with the object's attributes. No constructor exists to call.
  size_t new_record(size_t cls, size_t args) {
    const std::string name = expect(cls, Kind::Global, "a NEWOBJ class").text;
    if (name != kNamespace && name.rfind(kTorchScriptClass, 0) != 0)
      fail(fmt::format("'{}' is not a record class a weights file may hold", printable(name, 120)));
    if (!expect(args, Kind::Tuple, "NEWOBJ arguments").items.empty())
      fail(fmt::format("{} built with arguments", printable(name, 120)));
    use(name.size());
    const size_t i = make(Kind::Dict);
    values_[i].text = name;
    return i;
  }
  // BUILD of a record: its state is the dict of its attributes, added to it as items.
  void build_record(size_t record, size_t state, size_t at) {
    const PickleValue& s = values_[state];
    if (s.kind != Kind::Dict || !s.text.empty())
      fail(fmt::format("the state of a '{}' at byte {} is a {}, not a dict of attributes", printable(values_[record].text), at,
                       kind_name(s.kind)));
    if (state == record) fail(fmt::format("a '{}' is its own state", printable(values_[record].text)));
    const std::vector<size_t> items = s.items;  // (a copy: set_item may grow values_)
    for (size_t i = 0; i + 1 < items.size(); i += 2) set_item(record, items[i], items[i + 1]);
  }

  // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
  size_t rebuild_tensor(const std::vector<size_t>& a) {
    const torch::Tensor storage = expect(a[0], Kind::Storage, "a tensor's storage").tensor;
    const int64_t offset = int_of(a[1], "a tensor's storage offset");
    const auto& size = expect(a[2], Kind::Tuple, "a tensor's size").items;
    const auto& stride = expect(a[3], Kind::Tuple, "a tensor's stride").items;
    if (size.size() != stride.size() || size.size() > kMaxDims)
      fail(fmt::format("a tensor with {} sizes and {} strides", size.size(), stride.size()));
    std::vector<int64_t> sizes, strides;
    // The last element the view reaches must lie inside the storage: checked without overflow.
    const int64_t numel = storage.numel();
    if (offset < 0 || offset > numel) fail(fmt::format("a tensor's storage offset {} is outside its storage of {} elements", offset, numel));
    int64_t last = offset, elements = 1;
    bool empty = false;
    for (size_t d = 0; d < size.size(); ++d) {
      const int64_t n = int_of(size[d], "a tensor size"), s = int_of(stride[d], "a tensor stride");
      if (n < 0 || s < 0) fail(fmt::format("a tensor with a negative size or stride ({} / {})", n, s));
      if (n > 0 && elements > kMaxElements / n) fail("a tensor whose sizes multiply past 2^50 elements");
      elements *= n;
      sizes.push_back(n);
      strides.push_back(s);
      if (n == 0) empty = true;
      if (n > 1 && s > 0) {
        if (s > (std::numeric_limits<int64_t>::max() - last) / (n - 1))
          fail("a tensor whose shape and strides overflow");
        last += (n - 1) * s;
      }
    }
    if (!empty && last >= numel)
      fail(fmt::format("a tensor of shape [{}] reaches element {} of a storage of {}", fmt::join(sizes, ", "), last, numel));
    const size_t i = make(Kind::Tensor);
    values_[i].tensor = torch::empty({0}, storage.options()).set_(storage.storage(), offset, sizes, strides);
    return i;
  }

  // ('storage', torch.FloatStorage, key, location, numel)
  size_t persistent(size_t pid) {
    const auto& t = expect(pid, Kind::Tuple, "a persistent id").items;
    if (t.size() != 5 || values_[t[0]].kind != Kind::String || values_[t[0]].text != "storage")
      fail("a persistent id that is not ('storage', type, key, location, numel)");
    const std::string type = expect(t[1], Kind::Global, "a storage type").text;
    const auto dtype = storage_types().find(type);
    if (dtype == storage_types().end()) fail(fmt::format("'{}' is not a storage type", type));
    const std::string key = text_of(t[2], "a storage key");
    const int64_t numel = int_of(t[4], "a storage size");
    if (numel < 0) fail(fmt::format("storage '{}' claims {} elements", printable(key), numel));
    auto& s = storages_[key];
    if (!s.defined()) {
      s = storage_(key, dtype->second, numel);
    } else if (s.scalar_type() != dtype->second || s.numel() != numel) {
      fail(fmt::format("storage '{}' is named twice with different types or sizes", printable(key)));
    }
    const size_t i = make(Kind::Storage);
    values_[i].tensor = s;
    return i;
  }

  Unpickled finish(size_t at) {
    if (!marks_.empty()) fail(fmt::format("pickle STOP at byte {} with a MARK still open", at));
    if (stack_.size() != 1)
      fail(fmt::format("pickle STOP at byte {} with {} values on the stack (expected 1)", at, stack_.size()));
    Unpickled out;
    out.root = stack_.back();
    out.values = std::move(values_);
    return out;
  }
};

}  // namespace

const std::vector<std::string>& allowed_pickle_globals() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n = {kOrderedDict, kRebuildTensor, kRebuildParameter, kNamespace};
    for (const auto& [type, dtype] : storage_types()) n.push_back(type);
    return n;
  }();
  return names;
}

std::string printable(const std::string& text, size_t max) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    out += c >= 0x20 && c < 0x7f ? std::string(1, static_cast<char>(c)) : fmt::format("\\x{:02x}", c);
  }
  return text.size() > max ? out + "..." : out;
}

Unpickled unpickle_weights(const std::string& where, const uint8_t* data, size_t size, const StorageReader& storage,
                           const std::string& hint, const PickleRules& rules) {
  return Machine(where, data, size, storage, hint, rules).run();
}

}  // namespace gputrain
