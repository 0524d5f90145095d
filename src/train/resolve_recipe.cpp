// The recipe resolver: Config + machine -> device and speed switches, each with its reason.
#include "train/resolve_recipe.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "core/text.h"
#include "models/registry.h"
#include "train/utilization.h"

namespace gputrain {
namespace {

std::string unsupported_text(const GpuInfo& g, const MachineInfo& m) {
  return fmt::format("cuda:{} {} (sm_{}{}) is not supported by this LibTorch (CUDA {}: no kernels for it)", g.index,
                     g.name, g.major, g.minor, m.cuda_build);
}

// auto and cuda take the GPU with the most free memory (another process may hold cuda:0) among
// those torch has kernels for; cuda:N takes that one. -1: auto found no GPU torch can use.
int pick_gpu(const std::string& device, const MachineInfo& m) {
  const std::string hint = "the pinned torch runs on sm_75 (T4) and newer; use --device cpu";
  if (device.size() > 5) {
    int index = std::stoi(device.substr(5));
    if (index >= static_cast<int>(m.gpus.size()))
      throw usage_error(fmt::format("device '{}' does not exist ({} CUDA devices)", device, m.gpus.size()),
                        "gputrain info lists the GPUs");
    if (!m.gpus[static_cast<size_t>(index)].kernels)
      throw usage_error(unsupported_text(m.gpus[static_cast<size_t>(index)], m), hint);
    return index;
  }
  const GpuInfo* best = nullptr;
  for (const auto& g : m.gpus)
    if (g.kernels && (!best || g.free_bytes > best->free_bytes)) best = &g;
  if (!best && device == "cuda") throw usage_error(unsupported_text(m.gpus.front(), m), hint);
  return best ? best->index : -1;
}

// Whether a model has 2-D convolution weights, the only ones channels_last changes.
bool uses_channels_last(const std::string& model) { return family(model).ranks == std::vector<size_t>{3}; }

}  // namespace

Recipe resolve_recipe(ResolvedConfig& rc, const MachineInfo& m) {
  const Config c = rc.resolved;  // a copy: decisions below write into rc.resolved
  Recipe r;
  auto& report = r.report;
  const bool have_cuda = m.cuda_available && !m.gpus.empty();

  // --- device
  GpuInfo gpu;
  const int picked = c.device != "cpu" && have_cuda ? pick_gpu(c.device, m) : -1;
  if (c.device == "auto" && have_cuda && picked < 0) {
    // Say it at start, in one line, and train on the CPU rather than fail at the first kernel.
    const std::string why = unsupported_text(m.gpus.front(), m);
    fmt::print(stderr, "gputrain: {}: training on the CPU\n", why);
    rc.decide("device", "cpu", why);
    report.push_back({"device", fmt::format("cpu ({}, {} cores)", m.cpu_model, m.cpu_cores)});
    report.push_back({"CUDA / cuDNN", "not used: " + why});
  } else if (c.device == "cpu" || (c.device == "auto" && !have_cuda)) {
    if (c.device == "auto") rc.decide("device", "cpu", "no CUDA device");
    report.push_back({"device", fmt::format("cpu ({}, {} cores)", m.cpu_model, m.cpu_cores)});
    report.push_back({"CUDA / cuDNN",
                      have_cuda ? "available, not used (--device cpu)" : "not available (no CUDA device or driver)"});
  } else {
    if (!have_cuda)
      throw usage_error("device '" + c.device + "' is not available (torch sees no CUDA device)",
                        "use --device cpu, or --device auto to pick a GPU when there is one");
    gpu = m.gpus.at(static_cast<size_t>(picked));
    r.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(gpu.index));
    r.cuda = true;
    const std::string name = fmt::format("cuda:{}", gpu.index);
    if (c.device != name)
      rc.decide(
          "device", name,
          m.gpus.size() > 1 ? fmt::format("the GPU with the most free memory of {}", m.gpus.size()) : "the only GPU");
    report.push_back({"device", fmt::format("cuda:{} {}", gpu.index, gpu.name)});
    report.push_back({"memory", format_bytes(static_cast<double>(gpu.total_bytes)) + " total, " +
                                    format_bytes(static_cast<double>(gpu.free_bytes)) + " free"});
    report.push_back({"compute capability", fmt::format("{}.{}", gpu.major, gpu.minor)});
    report.push_back({"CUDA / cuDNN", m.cuda_build + " / " + m.cudnn});
  }

  if (c.device_preset != "none")
    report.push_back({"device preset", c.device_preset + (c.device_preset_why.empty() ? "" : " (" + c.device_preset_why + ")")});

  // --- threads and seed
  r.threads = c.threads > 0 ? static_cast<int>(c.threads) : m.default_threads;
  if (c.threads == 0) rc.decide("threads", r.threads, "torch's default on this machine");
  report.push_back({"intra-op threads", std::to_string(r.threads)});
  r.seed = static_cast<uint64_t>(c.seed);

  // --- mixed precision
  std::string amp = "off";  // the resolved amp_dtype, "off" when autocast stays off
  if (!c.use_amp) {
    report.push_back({"AMP", "off (--no-use_amp)"});
  } else if (r.cuda) {
    amp = c.amp_dtype == "auto" ? (gpu.bf16 ? "bf16" : "fp16") : c.amp_dtype;
    if (amp == "bf16" && !gpu.bf16) {
      amp = "fp16";
      report.push_back({"AMP", "fp16 (bf16 n/a on " + gpu.name + ": needs compute capability 8.0+)"});
      rc.decide("amp_dtype", amp, "bf16 n/a on " + gpu.name);
    } else {
      report.push_back({"AMP", amp == "fp16" ? "on (fp16 autocast + grad scaler)" : "on (bf16 autocast)"});
      if (c.amp_dtype == "auto")
        rc.decide("amp_dtype", amp, gpu.bf16 ? "native bf16 on " + gpu.name : "no bf16 on " + gpu.name);
    }
  } else if (c.amp_dtype == "fp16") {
    report.push_back({"AMP", "off: fp16 autocast n/a on cpu (--amp_dtype bf16 runs CPU bf16)"});
    rc.decide("use_amp", false, "fp16 autocast n/a on cpu");
  } else if (c.amp_dtype == "bf16" || m.cpu_bf16) {
    amp = "bf16";
    report.push_back({"AMP", c.amp_dtype == "bf16" ? "on (bf16 autocast on cpu)"
                                                   : "on (bf16 autocast on cpu: native bf16 instructions)"});
    if (c.amp_dtype == "auto") rc.decide("amp_dtype", "bf16", "native bf16 instructions on this cpu");
  } else {
    report.push_back({"AMP", "off on cpu (auto: no native bf16; --amp_dtype bf16 forces CPU bf16 autocast)"});
    rc.decide("use_amp", false, "no native bf16 on this cpu (emulated bf16 is slower than fp32)");
  }
  r.precision.amp = amp != "off";
  r.precision.dtype = amp == "bf16" ? c10::kBFloat16 : amp == "fp16" ? c10::kHalf : c10::kFloat;
  r.precision.scaler = amp == "fp16";
  r.precision.why = report.back().second;  // the AMP line, just added

  // --- determinism, cuDNN and TF32
  r.deterministic = c.deterministic;
  report.push_back({"deterministic", c.deterministic ? "on (deterministic algorithms; an op without one raises)"
                                                     : "off (--deterministic for bit-identical runs)"});
  r.cudnn_deterministic = c.cudnn_deterministic || c.deterministic;
  r.cudnn_benchmark = r.cuda && c.cudnn_benchmark && !r.cudnn_deterministic;
  if (!r.cuda) {
    report.push_back({"cuDNN benchmark", "n/a on cpu"});
    if (c.cudnn_benchmark) rc.decide("cudnn_benchmark", false, "n/a on cpu");
  } else if (r.cudnn_deterministic && c.cudnn_benchmark) {
    report.push_back({"cuDNN benchmark", "off (deterministic kernels requested)"});
    rc.decide("cudnn_benchmark", false, "deterministic kernels requested");
  } else {
    report.push_back({"cuDNN benchmark", r.cudnn_benchmark ? "on" : "off (--no-cudnn_benchmark)"});
  }
  report.push_back({"cuDNN deterministic", !r.cuda ? "n/a on cpu" : r.cudnn_deterministic ? "on" : "off"});

  r.tf32 = r.cuda && c.tf32 && gpu.tf32;
  if (!r.cuda)
    report.push_back({"TF32", "n/a on cpu"});
  else if (!gpu.tf32)
    report.push_back({"TF32", "n/a on " + gpu.name + " (needs compute capability 8.0+)"});
  else
    report.push_back({"TF32", r.tf32 ? "on" : "off (--no-tf32)"});
  if (c.tf32 && !r.tf32) rc.decide("tf32", false, r.cuda ? "needs compute capability 8.0+" : "n/a on cpu");

  // --- memory format and transfers
  r.channels_last = c.channels_last && uses_channels_last(c.model);
  if (!uses_channels_last(c.model)) {
    report.push_back({"channels_last", "n/a for " + c.model + " (no 2-D convolutions)"});
    if (c.channels_last) rc.decide("channels_last", false, "n/a for " + c.model + " (no 2-D convolutions)");
  } else {
    report.push_back({"channels_last", r.channels_last ? "on" : "off (--no-channels_last)"});
  }
  r.pin_memory = r.cuda && c.pin_memory;
  r.non_blocking = r.cuda && c.non_blocking;
  report.push_back({"pinned memory", !r.cuda ? "n/a on cpu" : r.pin_memory ? "on" : "off (--no-pin_memory)"});
  report.push_back({"non-blocking copies", !r.cuda ? "n/a on cpu" : r.non_blocking ? "on" : "off (--no-non_blocking)"});
  if (!r.cuda && c.pin_memory) rc.decide("pin_memory", false, "n/a on cpu (no host-to-device copy)");
  if (!r.cuda && c.non_blocking) rc.decide("non_blocking", false, "n/a on cpu (no host-to-device copy)");

  // --- the optimizer update: LibTorch has fused CPU and CUDA kernels for every optimizer
  // gputrain offers (SGD, Adam, AdamW), so "auto" means on.
  r.fused_optimizer = c.fused_optimizer != "off";
  report.push_back({"fused optimizer", r.fused_optimizer ? "on (one kernel per device for all tensors)"
                                                         : "off (--fused_optimizer off)"});
  if (c.fused_optimizer == "auto")
    rc.decide("fused_optimizer", "on", c.optimizer + " has a fused kernel on " + r.device.str());

  // --- a language model's head with its loss, in chunks: the same numbers in less memory (the
  // [tokens, vocabulary] logits are never whole), so on wherever the model has such a head.
  const bool has_head = family(c.model).linear_head;
  r.fused_head_loss = c.fused_head_loss && has_head;
  if (!has_head) {
    report.push_back({"fused head loss", "n/a for " + c.model + " (no language-model head)"});
    if (c.fused_head_loss) rc.decide("fused_head_loss", false, "n/a for " + c.model + " (no language-model head)");
  } else {
    report.push_back({"fused head loss", r.fused_head_loss ? "on (the head's logits a chunk of tokens at a time)"
                                                           : "off (--no-fused_head_loss)"});
  }

  // --- CUDA graphs: the whole step (forward, backward, scaler, fused update, EMA) launched as
  // one graph. The fused optimizer is what makes the update capturable: its step counts and
  // learning rate live on the device.
  std::string no_graphs;
  if (!r.cuda)
    no_graphs = "n/a on cpu";
  else if (!r.fused_optimizer)
    no_graphs = "needs the fused optimizer (--fused_optimizer on)";
  else if (c.grad_checkpointing)
    no_graphs = "n/a with --grad_checkpointing (its recomputation restores RNG states, which a graph cannot hold)";
  r.cuda_graphs = c.cuda_graphs && no_graphs.empty();
  if (r.cuda_graphs)
    report.push_back({"CUDA graphs", "on (captured after 3 eager steps, replayed while batch shapes match)"});
  else if (!r.cuda)
    report.push_back({"CUDA graphs", no_graphs});
  else
    report.push_back({"CUDA graphs", c.cuda_graphs ? "off: " + no_graphs : "off (--cuda_graphs to capture the step)"});
  if (c.cuda_graphs && !r.cuda_graphs) rc.decide("cuda_graphs", false, no_graphs);

  // --- loop-level switches (applied by the loader and the trainer)
  const bool main_thread = c.num_workers == 0;  // loads each batch when needed: nothing in flight
  if (main_thread && c.prefetch_factor == kAuto)
    rc.decide("prefetch_factor", 2, "auto: n/a with --num_workers 0 (the main thread loads each batch when needed)");
  report.push_back({"loader", c.num_workers == kAuto || (c.prefetch_factor == kAuto && !main_thread)
                                  ? std::string("auto: measured once the data and model are ready")
                              : main_thread
                                  ? std::string("main thread (--num_workers 0)")
                                  : fmt::format("{} threads, prefetch {}{}", c.num_workers, c.prefetch_factor,
                                                c.persistent_workers ? ", persistent" : "")});
  report.push_back(
      {"gradient accumulation", c.accumulation_steps == 1
                                    ? std::string("off (1 micro-batch per step)")
                                    : fmt::format("{} micro-batches (effective batch {})", c.accumulation_steps,
                                                  c.accumulation_steps * c.batch_size)});
  report.push_back({"gradient clipping", c.clip_max_norm > 0 ? fmt::format("max norm {:g}{}", c.clip_max_norm,
                                                                           r.precision.scaler ? " (after unscale)" : "")
                                                             : std::string("off")});
  // The denominator of the MFU in metrics.jsonl and the report.
  const PeakFlops peak = device_peak_flops(r, m);
  report.push_back({"peak rate (MFU)", peak.flops > 0 ? fmt::format("{:.1f} TFLOP/s: {}", peak.flops / 1e12, peak.basis)
                                                      : peak.basis});
  return r;
}

std::string fall_back_precision(ResolvedConfig& rc, Recipe& r, const MachineInfo& m, const std::string& why) {
  const bool from_fp16 = r.precision.amp && r.precision.dtype == c10::kHalf;
  bool bf16 = false;
  if (from_fp16)
    for (const auto& g : m.gpus) bf16 |= r.cuda && g.index == r.device.index() && g.bf16;
  const std::string from = from_fp16 ? "fp16" : "bf16", to = bf16 ? "bf16" : "fp32";
  r.precision.amp = bf16;
  r.precision.dtype = bf16 ? c10::kBFloat16 : c10::kFloat;
  r.precision.scaler = false;
  const std::string reason = fmt::format("{} fell back to {}: {}", from, to, why);
  r.precision.why = (bf16 ? "on (bf16 autocast; " : "off (fp32; ") + reason + ")";
  if (bf16)
    rc.decide("amp_dtype", "bf16", reason);
  else
    rc.decide("use_amp", false, reason);
  for (auto& [what, state] : r.report)
    if (what == "AMP") state = r.precision.why;
  return to;
}

}  // namespace gputrain
