#include "engine/backend/cpu/memory_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

namespace sparkglm::cpu {

namespace {

// Integer sums vectorize without reassociating floating point (the build forbids that), so the
// loop is as wide as the hardware allows and the memory system, not the adder, is the limit.
// Four independent sums keep several loads in flight.
uint64_t sum_words(const uint64_t* p, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a += p[i];
    b += p[i + 1];
    c += p[i + 2];
    d += p[i + 3];
  }
  for (; i < n; ++i) a += p[i];
  return a + b + c + d;
}

}  // namespace

double measure_read_bandwidth_gbs(ThreadPool& pool, size_t bytes) {
  const size_t words = std::max<size_t>(bytes / sizeof(uint64_t), 1024);
  auto* buf = static_cast<uint64_t*>(std::aligned_alloc(4096, (words * 8 + 4095) / 4096 * 4096));
  if (!buf) throw std::bad_alloc();
  // Each thread first touches the part it will read (its own pages, mapped before timing).
  const int64_t parts = pool.size();
  pool.parallel_for(parts, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t)
      for (size_t i = words * size_t(t) / size_t(parts); i < words * size_t(t + 1) / size_t(parts);
           ++i)
        buf[i] = i;
  });
  std::vector<uint64_t> sums(static_cast<size_t>(parts));
  double best = 0.0;
  for (int pass = 0; pass < 5; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(parts, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) {
        const size_t b = words * size_t(t) / size_t(parts),
                     e = words * size_t(t + 1) / size_t(parts);
        sums[size_t(t)] = sum_words(buf + b, e - b);
      }
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, double(words * 8) / s / 1e9);
  }
  // The sums are consumed so the reads cannot be optimized away.
  volatile uint64_t sink = 0;
  for (uint64_t v : sums) sink = sink + v;
  std::free(buf);
  return best;
}

}  // namespace sparkglm::cpu
