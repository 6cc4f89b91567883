#pragma once
// The machine's sustained read bandwidth: the floor under any weight-streaming kernel (a decode
// step reads every weight once), so benchmarks state their GB/s as a fraction of it.
#include <cstddef>

#include "engine/core/thread_pool.h"

namespace sparkglm::cpu {

// STREAM-like read bandwidth in GB/s (1e9 bytes/s): every thread of `pool` sums its share of a
// `bytes` buffer (far larger than the caches by default); the best of a few passes is returned.
double measure_read_bandwidth_gbs(ThreadPool& pool, size_t bytes = size_t(1) << 30);

}  // namespace sparkglm::cpu
