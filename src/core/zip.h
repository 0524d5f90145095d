// Zip archives, as .npz files and LibTorch checkpoints are written: the central directory
// (zip64 included) and each member's data, every offset checked against the file size.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/mapped_file.h"

namespace gputrain {

// One entry of the central directory. Its sizes and CRC are authoritative (local headers may
// hold zip64 placeholders or zeros).
struct ZipMember {
  std::string name;
  uint16_t flags = 0, method = 0;
  uint32_t crc = 0;
  uint64_t csize = 0, usize = 0, offset = 0;
};

// The members of the archive mapped in `m`. Throws a usage error "<path>: <why>" with `hint` for
// anything that is not a sound single-disk zip.
std::vector<ZipMember> zip_directory(const std::string& path, const MappedFile& m, const std::string& hint);

// Where member `z`'s (compressed) bytes start in `m`, after checking its local header and that
// all `z.csize` bytes are in the file. Throws like zip_directory, naming `where`.
uint64_t zip_member_start(const std::string& where, const MappedFile& m, const ZipMember& z, const std::string& hint);

// Member `z` (deflated, its data at `start`) inflated, its size and CRC-32 checked. The buffer
// grows only as data really inflates, so a forged size cannot make it allocate much.
std::shared_ptr<std::vector<uint8_t>> zip_inflate(const std::string& where, const MappedFile& m, const ZipMember& z,
                                                  uint64_t start, const std::string& hint);

// Member `z`'s bytes in the mapping, for archives PyTorch writes (torch.save, torch.export.save),
// which store every member uncompressed: a deflated member (which could inflate a small file into
// millions of objects), sizes that disagree or a CRC-32 mismatch throw like zip_directory.
std::pair<const uint8_t*, uint64_t> zip_stored_bytes(const std::string& where, const MappedFile& m, const ZipMember& z,
                                                     const std::string& hint);

// The zip (zlib) CRC-32 of `size` bytes, any size.
uint32_t crc32_of(const uint8_t* data, uint64_t size);

// crc32_of(data, size) == crc; always true in fuzz builds (FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION),
// so that mutated bytes reach the parser behind the check.
bool crc_matches(const uint8_t* data, uint64_t size, uint32_t crc);

}  // namespace gputrain
