// The pickle opcodes torch.save writes for a state_dict (protocol 2), and no others: the
// reader on the other side (torch.load with weights_only=True, or unpickler.cpp) then has
// nothing to call but the tensor rebuild and OrderedDict it allows.
#include "weights/pickle_writer.h"

#include <cstring>

#include "core/error.h"

namespace gputrain {
namespace {

// The legacy storage class that names each dtype in a persistent id, as torch.save writes it.
const char* storage_class(torch::ScalarType t) {
  switch (t) {
    case torch::kDouble: return "DoubleStorage";
    case torch::kFloat: return "FloatStorage";
    case torch::kHalf: return "HalfStorage";
    case torch::kBFloat16: return "BFloat16Storage";
    case torch::kLong: return "LongStorage";
    case torch::kInt: return "IntStorage";
    case torch::kShort: return "ShortStorage";
    case torch::kChar: return "CharStorage";
    case torch::kByte: return "ByteStorage";
    case torch::kBool: return "BoolStorage";
    default: throw std::invalid_argument(std::string("no storage class for dtype ") + c10::toString(t));
  }
}

}  // namespace

PickleWriter::PickleWriter() {
  op(0x80);  // PROTO 2: what torch.save writes
  op(2);
}

void PickleWriter::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void PickleWriter::none() { op('N'); }
void PickleWriter::boolean(bool v) { op(v ? 0x88 : 0x89); }

void PickleWriter::integer(int64_t v) {
  if (v >= 0 && v < 256) {
    op('K');  // BININT1
    op(static_cast<uint8_t>(v));
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    op('J');  // BININT, signed 32-bit little-endian
    u32(static_cast<uint32_t>(static_cast<int32_t>(v)));
  } else {
    op(0x8a);  // LONG1: 8 bytes of two's complement, little-endian
    op(8);
    const auto u = static_cast<uint64_t>(v);
    for (int i = 0; i < 8; ++i) op(static_cast<uint8_t>((u >> (8 * i)) & 0xff));
  }
}

void PickleWriter::number(double v) {
  op('G');  // BINFLOAT: big-endian IEEE 754
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  for (int i = 7; i >= 0; --i) op(static_cast<uint8_t>((bits >> (8 * i)) & 0xff));
}

void PickleWriter::text(std::string_view s) {
  if (s.size() > UINT32_MAX) throw std::invalid_argument("a string of 4 GiB or more in a checkpoint");
  op('X');  // BINUNICODE: UTF-8 bytes
  u32(static_cast<uint32_t>(s.size()));
  out_.append(s);
}

void PickleWriter::global(const char* module, const char* name) {
  op('c');
  out_ += module;
  out_ += '\n';
  out_ += name;
  out_ += '\n';
}

void PickleWriter::tensor(const torch::Tensor& t) {
  const char* type = storage_class(t.scalar_type());  // throws before anything is written
  global("torch._utils", "_rebuild_tensor_v2");
  op('(');
  // The persistent id: ('storage', torch.<Type>Storage, key, location, numel). Always 'cpu':
  // a checkpoint opens on any machine, and the run moves tensors where it needs them.
  op('(');
  text("storage");
  global("torch", type);
  text(std::to_string(storages_.size()));
  text("cpu");
  integer(t.numel());
  op('t');
  op('Q');  // BINPERSID
  integer(0);  // storage offset
  begin_tuple();
  for (int64_t d : t.sizes()) integer(d);
  end();
  begin_tuple();  // contiguous strides, as the storage is written
  int64_t stride = 1;
  std::vector<int64_t> strides(t.dim());
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= std::max<int64_t>(t.size(d), 1);
  }
  for (int64_t s : strides) integer(s);
  end();
  boolean(false);  // requires_grad
  global("collections", "OrderedDict");  // backward hooks: none
  op(')');
  op('R');
  op('t');
  op('R');
  storages_.push_back(t);
}

void PickleWriter::begin_dict() {
  op('}');
  op('(');
  open_.push_back(Open::Dict);
}
void PickleWriter::begin_list() {
  op(']');
  op('(');
  open_.push_back(Open::List);
}
void PickleWriter::begin_tuple() {
  op('(');
  open_.push_back(Open::Tuple);
}

void PickleWriter::end() {
  if (open_.empty()) throw std::logic_error("PickleWriter::end with nothing open");
  switch (open_.back()) {
    case Open::Dict: op('u'); break;   // SETITEMS
    case Open::List: op('e'); break;   // APPENDS
    case Open::Tuple: op('t'); break;  // TUPLE
  }
  open_.pop_back();
}

std::string PickleWriter::finish() {
  if (!open_.empty()) throw std::logic_error("PickleWriter::finish with a container still open");
  op('.');  // STOP
  return std::move(out_);
}

}  // namespace gputrain
