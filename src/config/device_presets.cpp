#include "config/device_presets.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace gputrain {
namespace {

bool name_has(const std::string& name, const std::string& word) {
  std::string upper = name;
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char ch) { return std::toupper(ch); });
  // A whole word: "A10" must not match "A100", nor "L4" "L40".
  for (size_t at = upper.find(word); at != std::string::npos; at = upper.find(word, at + 1)) {
    const size_t end = at + word.size();
    const bool starts = at == 0 || !std::isalnum(static_cast<unsigned char>(upper[at - 1]));
    const bool ends = end == upper.size() || !std::isalnum(static_cast<unsigned char>(upper[end])) ||
                      (word == "A10" && upper[end] == 'G');  // the A10G of AWS is an A10
    if (starts && ends) return true;
  }
  return false;
}

// The GPUs the presets were written for, by the name the driver reports.
std::string by_name(const std::string& name) {
  static const std::vector<std::pair<std::string, std::string>> rows = {
      {"T4", "t4"},        {"L4", "l4"},          {"A10", "a10"},         {"RTX 3090", "rtx3090"},
      {"RTX 4090", "rtx3090"}, {"A100", "a100"}, {"H100", "h100"},       {"H200", "h100"},
      {"GH200", "h100"}};
  for (const auto& [word, preset] : rows)
    if (name_has(name, word)) return preset;
  return "";
}

// Any other GPU: tensor cores with bf16 and TF32 from sm_80; the batch grows with memory.
std::string by_capability(const GpuInfo& g) {
  const double gib = static_cast<double>(g.total_bytes) / (1LL << 30);
  if (g.major < 8) return "t4";  // Turing: fp16 AMP with a grad scaler
  if (gib >= 70) return g.major >= 9 ? "h100" : "a100";
  if (gib >= 32) return "a100";
  if (gib >= 20) return "rtx3090";
  return "l4";
}

}  // namespace

DevicePresetChoice choose_device_preset(const std::vector<GpuInfo>& gpus, const std::string& device) {
  if (device == "cpu") return {"cpu", "--device cpu"};
  const GpuInfo* gpu = nullptr;
  if (device.rfind("cuda:", 0) == 0) {
    const size_t index = std::strtoul(device.c_str() + 5, nullptr, 10);
    if (index < gpus.size()) gpu = &gpus[index];
  } else if (!gpus.empty()) {
    const auto usable = std::find_if(gpus.begin(), gpus.end(), [](const GpuInfo& g) { return g.kernels; });
    gpu = usable != gpus.end() ? &*usable : &gpus.front();  // none usable: say why for the first
  }
  if (!gpu) return {"cpu", "no CUDA device"};
  const std::string what = fmt::format("{}: sm_{}{}, {:.0f} GiB", gpu->name, gpu->major, gpu->minor,
                                       static_cast<double>(gpu->total_bytes) / (1LL << 30));
  if (!gpu->kernels) return {"cpu", what + ", not supported by this LibTorch"};
  if (std::string preset = by_name(gpu->name); !preset.empty()) return {preset, what};
  return {by_capability(*gpu), what + ", by compute capability and memory"};
}

}  // namespace gputrain
