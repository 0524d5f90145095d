// SHA-256 through OpenSSL's EVP interface, read in 1 MiB pieces.
#include "core/sha256.h"

#include <openssl/evp.h>

#include <fstream>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace gputrain {

std::string sha256_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw usage_error("cannot read '" + path + "' to hash it");
  const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) throw runtime_error("SHA-256: no digest context");
  std::vector<char> buf(1 << 20);
  while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0)
    EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(in.gcount()));
  if (in.bad()) throw usage_error("reading '" + path + "' to hash it failed");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &size);
  std::string hex;
  for (unsigned int i = 0; i < size; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

}  // namespace gputrain
