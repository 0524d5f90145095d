// libgputrain_sentencepiece.so: libsentencepiece behind a C interface, which sentencepiece.cpp
// loads with dlopen(RTLD_LOCAL | RTLD_DEEPBIND).
//
// Why a library of its own: libsentencepiece exports symbols that libc10 defines too
// (FLAGS_minloglevel, an absl::Flag there and an int here). Linked into gputrain, one of the two
// binds to the other's object: each library's static initializer then writes over the other's,
// and TorchScript models hung on a corrupted c10 logging lock. Loaded locally with deep binding,
// libsentencepiece resolves its symbols in its own scope first, and c10 never sees them.
#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace {

void copy_message(const std::string& message, char* out, size_t size) {
  if (size == 0) return;
  const size_t n = std::min(message.size(), size - 1);
  std::memcpy(out, message.data(), n);
  out[n] = '\0';
}

}  // namespace

extern "C" {

// A model read from `path`, or null with the reason in `error`.
void* gputrain_spm_load(const char* path, char* error, size_t error_size) {
  auto* sp = new sentencepiece::SentencePieceProcessor();
  if (const auto status = sp->Load(path); !status.ok()) {
    copy_message(status.ToString(), error, error_size);
    delete sp;
    return nullptr;
  }
  return sp;
}

void gputrain_spm_free(void* model) { delete static_cast<sentencepiece::SentencePieceProcessor*>(model); }

int gputrain_spm_size(void* model) { return static_cast<sentencepiece::SentencePieceProcessor*>(model)->GetPieceSize(); }

int gputrain_spm_eos(void* model) { return static_cast<sentencepiece::SentencePieceProcessor*>(model)->eos_id(); }

int gputrain_spm_bos(void* model) { return static_cast<sentencepiece::SentencePieceProcessor*>(model)->bos_id(); }

// The id of the piece `piece`, or -1 when the model has no such piece (PieceToId answers the
// unknown token's id for it).
int gputrain_spm_piece_id(void* model, const char* piece) {
  auto* sp = static_cast<sentencepiece::SentencePieceProcessor*>(model);
  const int id = sp->PieceToId(piece);
  return id == sp->unk_id() && sp->IdToPiece(id) != piece ? -1 : id;
}

// The byte a byte piece (<0xAB>) stands for, or -1 for any other piece.
int gputrain_spm_byte(void* model, int id) {
  auto* sp = static_cast<sentencepiece::SentencePieceProcessor*>(model);
  if (id < 0 || id >= sp->GetPieceSize() || !sp->IsByte(id)) return -1;
  return std::stoi(sp->IdToPiece(id).substr(3, 2), nullptr, 16);
}

// The ids of text[0, length) into ids[0, capacity); returns how many there are (call again with
// more room when that is above capacity), or -1 with the reason in `error`.
long gputrain_spm_encode(void* model, const char* text, size_t length, int* ids, size_t capacity, char* error,
                         size_t error_size) {
  std::vector<int> out;
  const auto status = static_cast<sentencepiece::SentencePieceProcessor*>(model)->Encode(std::string(text, length), &out);
  if (!status.ok()) {
    copy_message(status.ToString(), error, error_size);
    return -1;
  }
  std::memcpy(ids, out.data(), std::min(out.size(), capacity) * sizeof(int));
  return static_cast<long>(out.size());
}

// The text of ids[0, count) into text[0, capacity); returns its length (call again with more room
// when that is above capacity).
size_t gputrain_spm_decode(void* model, const int* ids, size_t count, char* text, size_t capacity) {
  const std::string out =
      static_cast<sentencepiece::SentencePieceProcessor*>(model)->DecodeIds(std::vector<int>(ids, ids + count));
  std::memcpy(text, out.data(), std::min(out.size(), capacity));
  return out.size();
}

}  // extern "C"
