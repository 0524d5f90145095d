// The IDX format of MNIST-family datasets (raw or gzip), checked before anything is allocated.
#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"

namespace gputrain {
namespace {

// Larger than any real IDX file; a header promising more is corrupt or hostile.
constexpr int64_t kMaxIdxBytes = int64_t{1} << 34;

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};

}  // namespace

IdxArray read_idx(const std::string& path) {
  auto fail = [&](const std::string& why) {
    return usage_error("IDX file '" + path + "': " + why,
                       "MNIST-format files come from the dataset-fashion-mnist package or the dataset's site");
  };
  // gzread reads plain files transparently, so one path handles both.
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
  if (!f) throw fail("cannot open (no such file, or not readable)");
  gzbuffer(f.get(), 1 << 20);

  auto read_exact = [&](void* dst, int64_t n, const char* what) {
    auto* p = static_cast<uint8_t*>(dst);
    while (n > 0) {
      unsigned chunk = static_cast<unsigned>(std::min<int64_t>(n, 1 << 30));
      int got = gzread(f.get(), p, chunk);
      if (got < 0) throw fail(std::string("corrupt compressed data while reading ") + what);
      if (got == 0) throw fail(std::string("truncated: the file ends inside the ") + what);
      p += got;
      n -= got;
    }
  };

  uint8_t magic[4];
  read_exact(magic, 4, "header");
  if (magic[0] != 0 || magic[1] != 0) throw fail("bad magic number (not an IDX file; first bytes must be 0x00 0x00)");
  if (magic[2] != 0x08) {
    throw fail(fmt::format("unsupported element type 0x{:02x} (gputrain reads unsigned bytes, type 0x08, as in MNIST)",
                           magic[2]));
  }
  int ndims = magic[3];
  if (ndims < 1 || ndims > 4) throw fail(fmt::format("unsupported rank {} (expected 1 to 4)", ndims));

  IdxArray a;
  int64_t total = 1;
  for (int i = 0; i < ndims; ++i) {
    uint8_t b[4];
    read_exact(b, 4, "header");
    int64_t d = (int64_t{b[0]} << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
    if (d == 0) throw fail(fmt::format("dimension {} is 0", i));
    if (d > kMaxIdxBytes / total)  // checked before multiplying, so it cannot overflow
      throw fail("absurd header: dimensions multiply to more than 16 GiB (corrupt file?)");
    total *= d;
    a.dims.push_back(d);
  }
  // Grow while reading, so a header that lies about the size cannot make us allocate it all
  // up front: the data must really be there.
  constexpr int64_t kChunk = int64_t{1} << 24;
  a.data.reserve(static_cast<size_t>(std::min(total, kChunk)));
  for (int64_t done = 0; done < total;) {
    int64_t n = std::min(kChunk, total - done);
    a.data.resize(static_cast<size_t>(done + n));
    read_exact(a.data.data() + done, n, "data");
    done += n;
  }
  uint8_t extra;
  if (gzread(f.get(), &extra, 1) > 0) throw fail("trailing bytes after the data the header describes (corrupt file?)");
  return a;
}

}  // namespace gputrain
