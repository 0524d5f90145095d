// torch.save's layout written by caffe2::serialize::PyTorchStreamWriter, the writer torch.save
// itself uses: records aligned to 64 bytes, CRC-32s, zip64 when a checkpoint passes 4 GiB.
#include "weights/torch_save_writer.h"

#include <caffe2/serialize/inline_container.h>

namespace gputrain {

void write_torch_save(PickleWriter& pickle, const std::function<size_t(const void*, size_t)>& sink) {
  const std::string data = pickle.finish();
  caffe2::serialize::PyTorchStreamWriter writer(sink);
  writer.writeRecord("data.pkl", data.data(), data.size());
  writer.writeRecord("byteorder", "little", 6);  // storages are written in the host's order (x86, Arm: little)
  const auto& storages = pickle.storages();
  for (size_t i = 0; i < storages.size(); ++i) {
    const torch::Tensor t = storages[i].detach().to(torch::kCPU).contiguous();
    static const char kNone = 0;  // an empty tensor has no data pointer; the record is empty all the same
    writer.writeRecord("data/" + std::to_string(i), t.nbytes() ? t.data_ptr() : &kNone, t.nbytes());
  }
  writer.writeEndOfFile();
}

}  // namespace gputrain
