// Writing plain data as a pickle that torch.load(weights_only=True) and gputrain's own
// weights-only unpickler both read: dicts, lists, tuples, numbers, strings and tensors, nothing
// that names code. The inverse of unpickler.h, limited to what that reader accepts.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <torch/types.h>

namespace gputrain {

// A stream of values in pickle protocol 2, built in order: a dict's items are pushed as key,
// value, key, value between begin_dict() and end(). Tensors become torch.save's
// `_rebuild_tensor_v2` of a storage named by a persistent id ("0", "1", ... in order); the
// caller writes each storage's bytes beside the pickle (see torch_save_writer.h).
class PickleWriter {
 public:
  PickleWriter();

  void none();
  void boolean(bool v);
  void integer(int64_t v);
  void number(double v);
  void text(std::string_view s);
  // A tensor of any device and layout: recorded as a contiguous tensor of its sizes, its storage
  // the next key. The tensor is kept (not copied) until the storages are written.
  void tensor(const torch::Tensor& t);

  void begin_dict();
  void begin_list();
  void begin_tuple();
  void end();  // closes the innermost dict, list or tuple

  // The pickle (STOP appended); every container must be closed.
  std::string finish();
  // The tensors whose storages the pickle names, storage key i = index i.
  const std::vector<torch::Tensor>& storages() const { return storages_; }

 private:
  enum class Open { Dict, List, Tuple };
  std::string out_;
  std::vector<Open> open_;
  std::vector<torch::Tensor> storages_;
  void op(uint8_t code) { out_.push_back(static_cast<char>(code)); }
  void u32(uint32_t v);
  void global(const char* module, const char* name);
};

}  // namespace gputrain
