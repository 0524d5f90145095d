// SHA-256 of a file (OpenSSL's libcrypto), as `sha256sum` and Python's hashlib print it: what a
// run records of the program it was trained with.
#pragma once
#include <string>

namespace gputrain {

// The lowercase hex digest of the file's bytes. Throws a usage error when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace gputrain
