#pragma once
// The machine's ceilings, measured in the process that runs the cells, so that every floor in the
// runner bench's JSON divides by a number taken on the same device minutes before.
//   cuda: a 2 GiB device-to-device copy (bytes read + written) and an 8192^3 BF16 cuBLASLt GEMM,
//         the G1 harness's probes (bench/cuda/g1_harness), median of 25 after warmups.
//   cpu:  STREAM-like read bandwidth over the thread pool (best of a few passes), and a peak that
//         is an estimate, not a measurement: threads x clock x FP32 FLOPs per cycle of the widest
//         vector FMA the CPU flags (AVX-512: 64, AVX2+FMA: 32, else 8; two FMA pipes).
#include <string>

#include "engine/core/thread_pool.h"

namespace sparkglm::bench {

struct Ceilings {
  double bandwidth_gbps = 0;  // 1e9 bytes/s
  double peak_tflops = 0;     // BF16 tensor cores (cuda) or FP32 vector FMA (cpu)
  std::string bandwidth_method;
  std::string peak_method;
};

// Throws Error(kUnsupported) for cuda in a build without it.
Ceilings measure_ceilings(const std::string& device, ThreadPool& pool);

}  // namespace sparkglm::bench
