// NumPy .npy and .npz arrays (npy.cpp, npz.cpp), memory-mapped where possible and checked before allocating.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"

namespace gputrain {

// The element types gputrain reads; all little-endian (or single-byte).
enum class NpyDtype { f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, b1 };

// "float32", "int64", "bool", ...
const char* npy_dtype_name(NpyDtype t);
int npy_dtype_size(NpyDtype t);
bool npy_dtype_is_integer(NpyDtype t);  // signed or unsigned integers and bool

// One array. The bytes live in a memory mapping of the file (.npy files and stored .npz members:
// zero copy, so opening a 10 GB file costs nothing until samples are read) or in an owned buffer
// (deflated .npz members). Copies share the storage, so they are cheap.
struct NpyArray {
  std::string path;   // for messages: "data.npy" or "data.npz:x_train"
  std::string descr;  // the header's dtype string, e.g. "<f4"
  NpyDtype dtype = NpyDtype::f32;
  std::vector<int64_t> shape;  // () for a scalar
  int64_t numel = 0;

  // Writes elements [first, first + count) as floats into `out`. Throws if out of range.
  void to_float(int64_t first, int64_t count, float* out) const;
  // Element i as a double (exact for every integer up to 2^53): for labels.
  double at(int64_t i) const;
  bool is_integer() const { return npy_dtype_is_integer(dtype); }
  // The raw little-endian element bytes (numel * element size); may be unaligned.
  const uint8_t* bytes() const { return data_; }

  // Parses an .npy image held by `owner` (data..data+size). `path` names it in messages.
  static NpyArray parse(const std::string& path, std::shared_ptr<const void> owner, const uint8_t* data, uint64_t size);
  // An array over values made in memory (texts tokenized by gputrain itself), read as a file's.
  template <typename T>
  static NpyArray of(const std::string& path, NpyDtype dtype, std::vector<int64_t> shape, std::vector<T> values) {
    auto owner = std::make_shared<std::vector<T>>(std::move(values));
    NpyArray a;
    a.path = path;
    a.dtype = dtype;
    a.shape = std::move(shape);
    a.numel = static_cast<int64_t>(owner->size());
    a.data_ = reinterpret_cast<const uint8_t*>(owner->data());
    a.owner_ = std::move(owner);
    return a;
  }

 private:
  std::shared_ptr<const void> owner_;  // keeps the mapping or buffer alive
  const uint8_t* data_ = nullptr;
};

// Reads an .npy file (versions 1.0, 2.0, 3.0) by memory-mapping it. Throws a usage error
// "<path>: <reason>" for a missing file, bad magic, unsupported dtype (big-endian, complex,
// object, strings), fortran_order, absurd shape, or a size that does not match the header.
NpyArray read_npy(const std::string& path);

// The array names in an .npz archive (member names without ".npy"), without reading data.
std::vector<std::string> npz_keys(const std::string& path);

// Reads the arrays of an .npz archive (np.savez or np.savez_compressed, zip64 included), keyed
// by member name without ".npy". With `only` non-empty, reads just those keys (others are not
// inflated; a listed key that is absent is simply not in the result).
std::map<std::string, NpyArray> read_npz(const std::string& path, const std::vector<std::string>& only = {});

}  // namespace gputrain
