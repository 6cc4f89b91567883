// cpu::linear throughput on the shapes GLM-5.3-Flash decodes and prefills with, next to the two
// limits that bound it: the machine's read bandwidth (decode streams every weight once) and its FMA
// peak (prefill reuses each weight across the batch).
//
//   cpu_linear_bench [--threads N] [--f32] [--min-seconds S]
//
// Decode weights rotate through enough copies to exceed the last-level cache, so GB/s is the rate
// at which weights stream from DRAM, as in a real model whose layers never fit in cache.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include "engine/backend/cpu/linear.h"
#include "engine/backend/cpu/memory_bandwidth.h"

namespace {

using namespace sparkglm;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

#if defined(__AVX2__) && defined(__FMA__)
// Twelve independent FMA chains per thread: enough to cover FMA latency x throughput.
template <typename V, V (*Fma)(V, V, V), V (*Set)(float)>
double fma_peak_gflops(sparkglm::ThreadPool& pool) {
  constexpr int64_t kIters = 20'000'000;
  std::vector<double> rate(size_t(pool.size()));
  pool.parallel_for(pool.size(), 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      V a[12];
      for (auto& v : a) v = Set(0.0f);
      const V m = Set(0.999f), b = Set(1e-3f);
      const auto t0 = Clock::now();
      for (int64_t i = 0; i < kIters; ++i)
        for (auto& v : a) v = Fma(v, m, b);
      const double s = seconds_since(t0);
      volatile float sink = 0.0f;
      float out[16];
      std::memcpy(out, &a[0], sizeof(float));
      sink = sink + out[0];
      rate[size_t(t)] = double(kIters) * 12 * (sizeof(V) / 4) * 2 / s / 1e9;
    }
  });
  double total = 0.0;
  for (double r : rate) total += r;
  return total;
}
__m256 fma256(__m256 a, __m256 b, __m256 c) {
  return _mm256_fmadd_ps(a, b, c);
}
__m256 set256(float f) {
  return _mm256_set1_ps(f);
}
#if defined(__AVX512F__)
__m512 fma512(__m512 a, __m512 b, __m512 c) {
  return _mm512_fmadd_ps(a, b, c);
}
__m512 set512(float f) {
  return _mm512_set1_ps(f);
}
#endif
#endif

// How long an empty parallel_for takes: the fixed cost every linear call pays to use the pool.
double dispatch_us(sparkglm::ThreadPool& pool) {
  std::vector<double> samples;
  for (int rep = 0; rep < 7; ++rep) {
    constexpr int kCalls = 20000;
    const auto t0 = Clock::now();
    for (int i = 0; i < kCalls; ++i) pool.parallel_for(pool.size(), 1, [](int64_t, int64_t) {});
    samples.push_back(seconds_since(t0) / kCalls * 1e6);
  }
  return median(samples);
}

struct Shape {
  int64_t n, k;
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 0;
  bool with_f32 = false;
  double min_seconds = 0.3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--f32") {
      with_f32 = true;
    } else if (a == "--min-seconds" && i + 1 < argc) {
      min_seconds = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--threads N] [--f32] [--min-seconds S]\n", argv[0]);
      return 2;
    }
  }
  ThreadPool pool(threads);
  const double bw = cpu::measure_read_bandwidth_gbs(pool);
  std::printf("threads: %d\n", pool.size());
  std::printf("read bandwidth: %.1f GB/s (measure_read_bandwidth_gbs, best of 5 over 1 GiB)\n", bw);
  double peak = 0.0;
#if defined(__AVX2__) && defined(__FMA__)
  const double peak256 = fma_peak_gflops<__m256, fma256, set256>(pool);
  peak = peak256;
  std::printf("FMA peak, 256-bit: %.1f GFLOP/s\n", peak256);
#if defined(__AVX512F__)
  const double peak512 = fma_peak_gflops<__m512, fma512, set512>(pool);
  std::printf("FMA peak, 512-bit: %.1f GFLOP/s\n", peak512);
#endif
#endif
  std::printf("parallel_for dispatch: %.2f us\n\n", dispatch_us(pool));
  std::printf("%-5s %6s %6s %4s %9s %8s %6s %9s %7s\n", "dtype", "N", "K", "M", "ms", "GB/s", "%bw",
              "GFLOP/s", "%peak256");

  const std::vector<Shape> shapes = {{8192, 4096}, {4096, 8192},  {2048, 4096},
                                     {4096, 2048}, {12288, 4096}, {320, 4096}};
  const std::vector<int64_t> batches = {1, 2, 4, 8, 64, 256, 512};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (DType dt : with_f32 ? std::vector<DType>{DType::kBF16, DType::kF32}
                           : std::vector<DType>{DType::kBF16}) {
    for (const Shape& s : shapes) {
      const size_t elems = size_t(s.n * s.k), wbytes = elems * size_t(dtype_size(dt));
      // Copies enough to cycle through 256 MB, eight times the 32 MB L3.
      const size_t copies = std::max<size_t>(1, (size_t(256) << 20) / wbytes + 1);
      std::vector<std::vector<uint8_t>> store(copies, std::vector<uint8_t>(wbytes));
      for (size_t i = 0; i < elems; ++i) {
        const float v = u(rng) * 0.05f;
        if (dt == DType::kBF16) {
          const uint16_t h = f32_to_bf16(v);
          std::memcpy(&store[0][i * 2], &h, 2);
        } else {
          std::memcpy(&store[0][i * 4], &v, 4);
        }
      }
      for (size_t c = 1; c < copies; ++c) store[c] = store[0];
      std::vector<float> x(size_t(512 * s.k)), y(size_t(512 * s.n));
      for (auto& v : x) v = u(rng);
      for (int64_t M : batches) {
        std::vector<double> times;
        const auto begin = Clock::now();
        size_t c = 0;
        for (int rep = 0; rep < 3 || seconds_since(begin) < min_seconds || times.size() < 5;
             ++rep) {
          const Linear w{dt, s.n, s.k, store[c].data()};
          c = (c + 1) % copies;
          const auto t0 = Clock::now();
          cpu::linear(x.data(), M, w, y.data(), pool);
          if (rep > 0) times.push_back(seconds_since(t0));  // the first call is a warm-up
        }
        const double t = median(times);
        const double gbs = double(wbytes) / t / 1e9;
        const double gflops = 2.0 * double(M) * double(elems) / t / 1e9;
        std::printf("%-5s %6lld %6lld %4lld %9.3f %8.1f %5.0f%% %9.1f %7.0f%%\n",
                    std::string(dtype_name(dt)).c_str(), static_cast<long long>(s.n),
                    static_cast<long long>(s.k), static_cast<long long>(M), t * 1e3, gbs,
                    100.0 * gbs / bw, gflops, peak > 0 ? 100.0 * gflops / peak : 0.0);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
