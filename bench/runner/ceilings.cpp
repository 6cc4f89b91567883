#include "bench/runner/ceilings.h"

#include <fstream>
#include <string>

#include "engine/backend/cpu/memory_bandwidth.h"
#include "engine/core/error.h"
#ifdef SPARKGLM_HAVE_CUDA
#include "bench/cuda/g1_harness.h"
#endif

namespace sparkglm::bench {

namespace {

Ceilings cpu_ceilings(ThreadPool& pool) {
  Ceilings c;
  c.bandwidth_gbps = cpu::measure_read_bandwidth_gbs(pool);
  c.bandwidth_method = "cpu read bandwidth, " + std::to_string(pool.size()) +
                       " threads over 1 GiB, best pass (engine/backend/cpu/memory_bandwidth)";
  double mhz = 0;
  std::string flags, line;
  std::ifstream in("/proc/cpuinfo");
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (mhz == 0 && line.rfind("cpu MHz", 0) == 0) mhz = std::stod(line.substr(colon + 1));
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = line.substr(colon + 1) + " ";
  }
  const auto has = [&](const char* f) {
    return flags.find(std::string(" ") + f + " ") != std::string::npos;
  };
  const int per_cycle = has("avx512f") ? 64 : (has("avx2") && has("fma")) ? 32 : 8;
  c.peak_tflops = pool.size() * mhz * 1e6 * per_cycle / 1e12;
  c.peak_method = "cpu estimate, not measured: " + std::to_string(pool.size()) + " threads x " +
                  std::to_string(int(mhz)) + " MHz x " + std::to_string(per_cycle) +
                  " FP32 FLOP/cycle (two FMA pipes of the widest vector in /proc/cpuinfo flags)";
  return c;
}

}  // namespace

Ceilings measure_ceilings(const std::string& device, ThreadPool& pool) {
  if (device == "cpu") return cpu_ceilings(pool);
#ifdef SPARKGLM_HAVE_CUDA
  // Scoped: the probe's buffers (4 GiB copy, 512 MiB GEMM, 256 MiB L2 flush) are freed before the
  // runner sizes its caches from what the device has left.
  g1::Harness h(25, false);
  h.measure_ceilings();
  Ceilings c;
  c.bandwidth_gbps = h.ceilings().hbm_gbps;
  c.peak_tflops = h.ceilings().bf16_tflops;
  c.bandwidth_method =
      "cuda 2 GiB device-to-device copy, (read + written) / time, median of 25 "
      "(bench/cuda/g1_harness)";
  c.peak_method = "cuda BF16 cuBLASLt 8192^3 GEMM, median of 25 (bench/cuda/g1_harness)";
  return c;
#else
  throw Error(ErrorKind::kUnsupported, "--device cuda: this build has no CUDA backend");
#endif
}

}  // namespace sparkglm::bench
