// libFuzzer target: the CSV reader and CsvDataset (tabular and windowed) on arbitrary bytes.
// Errors for people are expected; crashes, hangs, leaks and huge allocations are bugs.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/csv.h"
#include "data/csv_dataset.h"

namespace {

// Reads every sample, so an index or size mistake in get() shows up under the sanitizers.
void touch_all(const gputrain::CsvDataset& d) {
  std::vector<float> x(static_cast<size_t>(d.sample_numel()));
  std::vector<float> t(static_cast<size_t>(d.target_numel()) + 1);
  for (int64_t i = 0; i < d.size(); ++i) {
    int64_t label = d.get(i, x.data(), t.data(), 0);
    if (d.num_classes() > 0 && (label < 0 || label >= d.num_classes())) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int fd = memfd_create("csv", 0);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  gputrain::CsvTable table;
  try {
    table = gputrain::read_csv("/proc/self/fd/" + std::to_string(fd));
  } catch (const gputrain::Error&) {
    return 0;
  }
  gputrain::CsvOptions options;
  options.targets = {table.columns.back()};
  try {
    auto d = gputrain::CsvDataset(table, options);
    touch_all(d);
    // The test-split path: map labels with the classes just found.
    if (d.num_classes() > 0) touch_all(gputrain::CsvDataset(table, options, &d.class_names()));
  } catch (const gputrain::Error&) {}
  // Windows whose settings come from the input, so short and long windows both get tried.
  options.window = 1 + size % 5;
  options.stride = 1 + size % 3;
  options.horizon = size % 4;
  try {
    touch_all(gputrain::CsvDataset(table, options));
  } catch (const gputrain::Error&) {}
  return 0;
}
