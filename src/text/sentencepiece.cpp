// SentencePiece models through libgputrain_sentencepiece.so (sentencepiece.h).
#include "text/sentencepiece.h"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.h"

namespace gputrain {

namespace {

const std::string kHint = "give a SentencePiece .model (tokenizer.model beside a model's weights, or the one "
                          "tools/prepare_text.py --train-tokenizer sentencepiece writes)";

struct Shim {
  void* (*load)(const char*, char*, size_t);
  void (*free)(void*);
  int (*size)(void*);
  int (*eos)(void*);
  int (*bos)(void*);
  int (*piece_id)(void*, const char*);
  int (*byte)(void*, int);
  long (*encode)(void*, const char*, size_t, int*, size_t, char*, size_t);
  size_t (*decode)(void*, const int*, size_t, char*, size_t);
};

// The shim beside this program: build/ holds both, an install has it in lib/gputrain/.
const Shim& shim() {
  static std::once_flag once;
  static Shim s{};
  static std::string missing;
  std::call_once(once, [] {
    const auto exe = std::filesystem::read_symlink("/proc/self/exe").parent_path();
    std::string tried;
    void* lib = nullptr;
    for (const auto& path : {exe / "libgputrain_sentencepiece.so", exe / ".." / "lib" / "gputrain" / "libgputrain_sentencepiece.so"}) {
      // RTLD_DEEPBIND: libsentencepiece binds to its own symbols before those of the libraries
      // loaded already (its FLAGS_minloglevel is also c10's name); RTLD_LOCAL: they see none of it.
      lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (lib) break;
      tried += (tried.empty() ? "" : "; ") + std::string(dlerror());
    }
    if (!lib) {
      missing = tried;
      return;
    }
    const auto get = [&](const char* name) {
      void* f = dlsym(lib, name);
      if (!f) throw std::logic_error(std::string("libgputrain_sentencepiece.so lacks ") + name);
      return f;
    };
    s.load = reinterpret_cast<decltype(s.load)>(get("gputrain_spm_load"));
    s.free = reinterpret_cast<decltype(s.free)>(get("gputrain_spm_free"));
    s.size = reinterpret_cast<decltype(s.size)>(get("gputrain_spm_size"));
    s.eos = reinterpret_cast<decltype(s.eos)>(get("gputrain_spm_eos"));
    s.bos = reinterpret_cast<decltype(s.bos)>(get("gputrain_spm_bos"));
    s.piece_id = reinterpret_cast<decltype(s.piece_id)>(get("gputrain_spm_piece_id"));
    s.byte = reinterpret_cast<decltype(s.byte)>(get("gputrain_spm_byte"));
    s.encode = reinterpret_cast<decltype(s.encode)>(get("gputrain_spm_encode"));
    s.decode = reinterpret_cast<decltype(s.decode)>(get("gputrain_spm_decode"));
  });
  if (!s.load)
    throw usage_error("SentencePiece tokenizers need libgputrain_sentencepiece.so, which did not load (" + missing + ")",
                      "build gputrain with tools/setup.sh (it installs libsentencepiece-dev), or use a tokenizer.json");
  return s;
}

}  // namespace

SentencePieceModel::SentencePieceModel(const std::string& path) {
  char error[512] = "";
  model_ = shim().load(path.c_str(), error, sizeof error);
  if (!model_) throw usage_error(fmt::format("tokenizer '{}' is not a SentencePiece model ({})", path, error), kHint);
  size_ = shim().size(model_);
}

SentencePieceModel::~SentencePieceModel() {
  if (model_) shim().free(model_);
}

std::vector<int64_t> SentencePieceModel::encode(const std::string& text) const {
  std::vector<int> ids(text.size() + 16);  // at most one piece a byte, and the rare extra
  char error[512] = "";
  long n = shim().encode(model_, text.data(), text.size(), ids.data(), ids.size(), error, sizeof error);
  if (n > static_cast<long>(ids.size())) {
    ids.resize(static_cast<size_t>(n));
    n = shim().encode(model_, text.data(), text.size(), ids.data(), ids.size(), error, sizeof error);
  }
  if (n < 0) throw usage_error(std::string("SentencePiece could not encode a text: ") + error, "give UTF-8 text");
  return {ids.begin(), ids.begin() + n};
}

int64_t SentencePieceModel::vocab_size() const { return size_; }

int64_t SentencePieceModel::end_of_text() const {
  const int eos = shim().eos(model_);
  return eos >= 0 && eos < size_ ? eos : -1;
}

int64_t SentencePieceModel::start_of_text() const {
  const int bos = shim().bos(model_);
  return bos >= 0 && bos < size_ ? bos : -1;
}

int64_t SentencePieceModel::piece_id(const std::string& piece) const { return shim().piece_id(model_, piece.c_str()); }

std::string SentencePieceModel::decode(const std::vector<int64_t>& ids) const {
  std::vector<int> in;
  for (int64_t id : ids)
    if (id >= 0 && id < size_) in.push_back(static_cast<int>(id));
  std::string text(4 * in.size() + 16, '\0');
  size_t n = shim().decode(model_, in.data(), in.size(), text.data(), text.size());
  if (n > text.size()) {
    text.resize(n);
    n = shim().decode(model_, in.data(), in.size(), text.data(), text.size());
  }
  text.resize(n);
  return text;
}

bool SentencePieceModel::is_byte(int64_t id) const { return id >= 0 && id < size_ && shim().byte(model_, static_cast<int>(id)) >= 0; }

char SentencePieceModel::byte_of(int64_t id) const { return static_cast<char>(shim().byte(model_, static_cast<int>(id))); }

bool is_sentencepiece_file(const std::string& path) {
  return path.size() > 6 && path.compare(path.size() - 6, 6, ".model") == 0;
}

}  // namespace gputrain
