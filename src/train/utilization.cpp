// Memory peaks and MFU.
#include "train/utilization.h"

#include <torch/types.h>

#include "core/device_cuda.h"
#include "core/host_info.h"
#include "models/flops.h"

namespace gputrain {

PeakFlops device_peak_flops(const Recipe& r, const MachineInfo& m) {
  const std::string dtype = r.precision.amp ? (r.precision.dtype == torch::kBFloat16 ? "bf16" : "fp16") : r.tf32 ? "tf32" : "fp32";
  if (!r.cuda) return cpu_peak_flops(r.threads > 0 ? r.threads : m.default_threads, dtype);
  const auto index = static_cast<size_t>(r.device.index());
  if (index >= m.gpus.size()) return {0, "n/a: the GPU is unknown"};
  return gpu_peak_flops(m.gpus[index].name, dtype);
}

void reset_memory_peaks(const Recipe& r) {
  if (r.cuda)
    cuda_reset_peak(r.device.index());
  else
    reset_peak_rss();
}

nlohmann::json memory_peaks(const Recipe& r) {
  if (!r.cuda) return {{"peak_rss_bytes", peak_rss_bytes()}};
  return {{"peak_allocated_bytes", cuda_peak_allocated(r.device.index())},
          {"peak_reserved_bytes", cuda_peak_reserved(r.device.index())}};
}

int64_t peak_memory_bytes(const Recipe& r) {
  return r.cuda ? cuda_peak_allocated(r.device.index()) : peak_rss_bytes();
}

double training_mfu(double forward_flops, double samples_per_sec, const PeakFlops& peak) {
  if (peak.flops <= 0 || forward_flops <= 0) return 0;
  return training_flops(forward_flops) * samples_per_sec / peak.flops;
}

}  // namespace gputrain
