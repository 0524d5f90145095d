// What the host CPU is and how much memory this process has used, from /proc.
#include "core/host_info.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>

namespace gputrain {

std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) {
      auto colon = line.find(':');
      return colon == std::string::npos || colon + 2 > line.size() ? "" : line.substr(colon + 2);
    }
  return "";
}

std::string cpu_model() {
  const std::string model = cpuinfo_field("model name");
  return model.empty() ? "unknown" : model;
}

bool cpu_has_bf16() {
  const std::string flags = " " + cpuinfo_field("flags") + " ";
  return flags.find(" avx512_bf16 ") != std::string::npos || flags.find(" amx_bf16 ") != std::string::npos;
}

int64_t rss_bytes() {
  std::ifstream in("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

int64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

double seconds_since_process_start() {
  // Field 22 of /proc/self/stat is the start time in clock ticks since boot; the command name
  // (field 2) may hold spaces, so counting starts after its closing parenthesis.
  std::ifstream in("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close + 1));  // field 3 on
  std::string field;
  for (int i = 3; i <= 22; ++i)
    if (!(fields >> field)) return 0;
  timespec now{};
  if (clock_gettime(CLOCK_BOOTTIME, &now) != 0) return 0;
  const double started = std::stod(field) / static_cast<double>(sysconf(_SC_CLK_TCK));
  return std::max(0.0, static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec) - started);
}

}  // namespace gputrain
