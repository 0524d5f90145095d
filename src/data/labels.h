// Classification labels and float values checked once at load, before anything is trained: a
// label outside the model's outputs, a class count guessed from gappy labels or a NaN feature
// would otherwise train silently wrong (or fail deep inside a kernel).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace gputrain {

// Class indices label(0..n-1) read from `file`. With `given` > 0 (--num_classes, or the class
// count a format fixes, like MNIST's 10) every label must lie in [0, given). With `given` == 0
// the count is inferred, and the labels must then be exactly 0..K-1 with every class present
// and K >= 2. Returns the class count; anything else is a usage error naming the file, the
// index (or `name(index)`, when given: "shard.tar: sample '000012'") and the value, with a hint.
int64_t check_class_indices(const std::string& file, int64_t n, const std::function<double(int64_t)>& label,
                            int64_t given, const std::function<std::string(int64_t)>& name = {});

// Classes named by their values (CSV labels, folder names): `found` distinct names. Returns the
// class count: `given` when set (it must cover every name), else `found`, which must be >= 2.
int64_t check_class_names(const std::string& where, int64_t found, int64_t given);

// The n float values of `file` (features or regression targets), which values(first, count, out)
// writes in chunks: a NaN or an infinity is a usage error giving their count and the first index.
void check_finite(const std::string& file, const std::string& what, int64_t n,
                  const std::function<void(int64_t, int64_t, float*)>& values);

}  // namespace gputrain
