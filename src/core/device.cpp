// The run context: device choice, global backend switches, and the device report.
#include "core/device.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include <fstream>
#include <thread>

#include "core/device_cuda.h"
#include "core/error.h"
#include "core/text.h"

namespace gputrain {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

bool cpu_has_bf16() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0)
      return line.find(" avx512_bf16") != std::string::npos || line.find(" amx_bf16") != std::string::npos;
  }
  return false;
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

RunContext make_run_context(const Config& c) {
  RunContext ctx;
  auto& r = ctx.report;
  const bool have_cuda = torch::cuda::is_available();

  // --- device
  if (c.device == "cpu" || (c.device == "auto" && !have_cuda)) {
    ctx.device = torch::kCPU;
  } else {
    if (!have_cuda)
      throw usage_error("device '" + c.device + "' is not available (torch sees no CUDA device)",
                        "use --device cpu, or --device auto to pick a GPU when there is one");
    int index = c.device.size() > 5 ? std::stoi(c.device.substr(5)) : 0;
    if (index >= static_cast<int>(torch::cuda::device_count()))
      throw usage_error(
          "device '" + c.device + "' does not exist (" + std::to_string(torch::cuda::device_count()) + " CUDA devices)",
          "gputrain info lists the GPUs");
    ctx.device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
    ctx.cuda = true;
  }
  GpuInfo gpu;
  if (ctx.cuda) {
    gpu = query_gpus().at(ctx.device.index());
    r.push_back({"device", "cuda:" + std::to_string(gpu.index) + " " + gpu.name});
    r.push_back({"memory", format_bytes(gpu.total_bytes) + " total, " + format_bytes(gpu.free_bytes) + " free"});
    r.push_back({"compute capability", std::to_string(gpu.major) + "." + std::to_string(gpu.minor)});
    r.push_back({"CUDA / cuDNN", cuda_build_version() + " / " + cudnn_version()});
  } else {
    r.push_back(
        {"device", "cpu (" + cpu_model() + ", " + std::to_string(std::thread::hardware_concurrency()) + " cores)"});
    r.push_back({"CUDA / cuDNN",
                 have_cuda ? "available, not used (--device cpu)" : "not available (no CUDA device or driver)"});
  }

  // --- threads and seed
  if (c.threads > 0) at::set_num_threads(static_cast<int>(c.threads));
  r.push_back({"intra-op threads", std::to_string(at::get_num_threads())});
  torch::manual_seed(static_cast<uint64_t>(c.seed));  // seeds CPU and every CUDA device

  // --- mixed precision
  const std::string on_dev = ctx.cuda ? "on " + gpu.name : "on cpu";
  if (!c.use_amp) {
    r.push_back({"AMP", "off (--no-use_amp)"});
  } else if (ctx.cuda) {
    std::string dt = c.amp_dtype == "auto" ? (gpu.bf16 ? "bf16" : "fp16") : c.amp_dtype;
    if (dt == "bf16" && !gpu.bf16) {
      r.push_back({"AMP", "fp16 (bf16 n/a " + on_dev + ": needs compute capability 8.0+)"});
      dt = "fp16";
    }
    ctx.amp = true;
    ctx.amp_dtype = dt == "bf16" ? torch::kBFloat16 : torch::kHalf;
    ctx.grad_scaler = dt == "fp16";
    if (r.back().first != "AMP")
      r.push_back({"AMP", dt == "fp16" ? "on (fp16 autocast + grad scaler)" : "on (bf16 autocast)"});
  } else if (c.amp_dtype == "fp16") {
    r.push_back({"AMP", "off: fp16 autocast n/a on cpu (--amp_dtype bf16 runs CPU bf16)"});
  } else if (c.amp_dtype == "bf16" || cpu_has_bf16()) {
    ctx.amp = true;
    ctx.amp_dtype = torch::kBFloat16;
    r.push_back({"AMP", c.amp_dtype == "bf16" ? "on (bf16 autocast on cpu)"
                                              : "on (bf16 autocast on cpu: native bf16 instructions)"});
  } else {
    r.push_back({"AMP", "off on cpu (auto: no native bf16; --amp_dtype bf16 forces CPU bf16 autocast)"});
  }

  // --- determinism, cuDNN and TF32 (global switches)
  auto& ctx_g = at::globalContext();
  if (c.deterministic && ctx.cuda) setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0);  // cuBLAS needs it
  ctx_g.setDeterministicAlgorithms(c.deterministic, /*warn_only=*/false);
  r.push_back({"deterministic", c.deterministic ? "on (deterministic algorithms; an op without one raises)"
                                                : "off (--deterministic for bit-identical runs)"});
  ctx_g.setDeterministicCuDNN(c.cudnn_deterministic || c.deterministic);
  bool bench = ctx.cuda && c.cudnn_benchmark && !c.cudnn_deterministic && !c.deterministic;
  ctx_g.setBenchmarkCuDNN(bench);
  if (!ctx.cuda)
    r.push_back({"cuDNN benchmark", "n/a on cpu"});
  else if ((c.cudnn_deterministic || c.deterministic) && c.cudnn_benchmark)
    r.push_back({"cuDNN benchmark", "off (deterministic kernels requested)"});
  else
    r.push_back({"cuDNN benchmark", bench ? "on" : "off (--no-cudnn_benchmark)"});
  r.push_back({"cuDNN deterministic", !ctx.cuda                                    ? "n/a on cpu"
                                      : (c.cudnn_deterministic || c.deterministic) ? "on"
                                                                                   : "off"});

  bool tf32 = ctx.cuda && c.tf32 && gpu.tf32;
  ctx_g.setAllowTF32CuBLAS(tf32);
  ctx_g.setAllowTF32CuDNN(tf32);
  if (!ctx.cuda)
    r.push_back({"TF32", "n/a on cpu"});
  else if (!gpu.tf32)
    r.push_back({"TF32", "n/a " + on_dev + " (needs compute capability 8.0+)"});
  else
    r.push_back({"TF32", tf32 ? "on" : "off (--no-tf32)"});

  // --- memory format and transfers
  ctx.channels_last = c.channels_last && c.model != "mlp";
  if (c.model == "mlp")
    r.push_back({"channels_last", "n/a for mlp (flat inputs)"});
  else
    r.push_back({"channels_last", ctx.channels_last ? "on" : "off (--no-channels_last)"});
  ctx.pin_memory = ctx.cuda && c.pin_memory;
  ctx.non_blocking = ctx.cuda && c.non_blocking;
  r.push_back({"pinned memory", !ctx.cuda ? "n/a on cpu" : ctx.pin_memory ? "on" : "off (--no-pin_memory)"});
  r.push_back({"non-blocking copies", !ctx.cuda ? "n/a on cpu" : ctx.non_blocking ? "on" : "off (--no-non_blocking)"});

  // --- loop-level switches (applied by the loader and the trainer)
  r.push_back({"loader", c.num_workers == 0
                             ? std::string("main thread (--num_workers 0)")
                             : std::to_string(c.num_workers) + " threads, prefetch " +
                                   std::to_string(c.prefetch_factor) + (c.persistent_workers ? ", persistent" : "")});
  r.push_back({"gradient accumulation",
               c.accumulation_steps == 1 ? std::string("off (1 micro-batch per step)")
                                         : std::to_string(c.accumulation_steps) + " micro-batches (effective batch " +
                                               std::to_string(c.accumulation_steps * c.batch_size) + ")"});
  r.push_back({"gradient clipping", c.clip_max_norm > 0 ? "max norm " + std::to_string(c.clip_max_norm).substr(0, 6) +
                                                              (ctx.grad_scaler ? " (after unscale)" : "")
                                                        : std::string("off")});
  return ctx;
}

}  // namespace gputrain
