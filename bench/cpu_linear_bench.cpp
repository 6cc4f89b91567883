// cpu::linear throughput on the shapes GLM-5.3-Flash decodes and prefills with, next to the two
// limits that bound it: the machine's read bandwidth (decode streams every weight once) and its FMA
// peak (prefill reuses each weight across the batch).
//
//   cpu_linear_bench [--threads N] [--passes P] [--f32] [--min-seconds S]
//                    [--shapes NxK,...] [--batches M,...]
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
// Twelve independent FMA chains per thread: enough to cover FMA latency x throughput. Every chain
// starts from a different value and all twelve are consumed, so none can be merged or dropped.
template <typename V, V (*Fma)(V, V, V), V (*Set)(float)>
double fma_peak_gflops(sparkglm::ThreadPool& pool) {
  constexpr int64_t kIters = 20'000'000;
  constexpr int kChains = 12;
  std::vector<double> rate(size_t(pool.size()));
  pool.parallel_for(pool.size(), 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      V a[kChains];
      for (int c = 0; c < kChains; ++c) a[c] = Set(float(c + t));
      const V m = Set(0.999f), b = Set(1e-3f);
      const auto t0 = Clock::now();
      for (int64_t i = 0; i < kIters; ++i)
        for (auto& v : a) v = Fma(v, m, b);
      const double s = seconds_since(t0);
      float sum = 0.0f;
      for (auto& v : a) {
        float lane0;
        std::memcpy(&lane0, &v, sizeof(float));
        sum += lane0;
      }
      volatile float sink = sum;
      (void)sink;
      constexpr int64_t kLanes = sizeof(V) / sizeof(float);
      rate[size_t(t)] = double(kIters * kChains * kLanes * 2) / s / 1e9;
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

// "8192x4096,320x4096" -> shapes; "1,256" -> batch sizes.
std::vector<Shape> parse_shapes(const std::string& s) {
  std::vector<Shape> out;
  for (size_t pos = 0; pos < s.size();) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(pos, end - pos);
    const size_t x = item.find('x');
    if (x != std::string::npos)
      out.push_back(
          {std::atoll(item.substr(0, x).c_str()), std::atoll(item.substr(x + 1).c_str())});
    pos = end + 1;
  }
  return out;
}
std::vector<int64_t> parse_batches(const std::string& s) {
  std::vector<int64_t> out;
  for (size_t pos = 0; pos < s.size();) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    out.push_back(std::atoll(s.substr(pos, end - pos).c_str()));
    pos = end + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0, passes = 3;
  bool with_f32 = false;
  double min_seconds = 0.1;
  std::vector<Shape> shapes = {{8192, 4096}, {4096, 8192},  {2048, 4096},
                               {4096, 2048}, {12288, 4096}, {320, 4096}};
  std::vector<int64_t> batches = {1, 2, 4, 8, 64, 256, 512};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--passes" && i + 1 < argc) {
      passes = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--f32") {
      with_f32 = true;
    } else if (a == "--min-seconds" && i + 1 < argc) {
      min_seconds = std::atof(argv[++i]);
    } else if (a == "--shapes" && i + 1 < argc) {
      shapes = parse_shapes(argv[++i]);
    } else if (a == "--batches" && i + 1 < argc) {
      batches = parse_batches(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--threads N] [--passes P] [--f32] [--min-seconds S]"
                   " [--shapes NxK,...] [--batches M,...]\n",
                   argv[0]);
      return 2;
    }
  }
  ThreadPool pool(threads);
  const double bw = cpu::measure_read_bandwidth_gbs(pool);
  std::printf("threads: %d\n", pool.size());
  std::printf("read bandwidth: %.1f GB/s (measure_read_bandwidth_gbs, best of 5 over 1 GiB)\n", bw);
  double peak256 = 0.0, peak512 = 0.0;
#if defined(__AVX2__) && defined(__FMA__)
  peak256 = fma_peak_gflops<__m256, fma256, set256>(pool);
  std::printf("FMA peak, 256-bit: %.1f GFLOP/s\n", peak256);
#if defined(__AVX512F__)
  peak512 = fma_peak_gflops<__m512, fma512, set512>(pool);
  std::printf("FMA peak, 512-bit: %.1f GFLOP/s\n", peak512);
#endif
#endif
  std::printf("parallel_for dispatch: %.2f us\n", dispatch_us(pool));
  std::printf(
      "each row: median over %d passes of the median call; spread = (max - min) / median\n\n",
      passes);
  std::printf("%-5s %6s %6s %4s %9s %7s %5s %8s %5s %5s %6s\n", "dtype", "N", "K", "M", "ms",
              "GB/s", "%bw", "GFLOP/s", "%p256", "%p512", "spread");

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
      const int64_t max_m = *std::max_element(batches.begin(), batches.end());
      std::vector<float> x(size_t(max_m * s.k)), y(size_t(max_m * s.n));
      for (auto& v : x) v = u(rng);
      // Passes interleave the batch sizes, so a burst of load from elsewhere lands on one pass
      // of several rows rather than on every pass of one row.
      std::vector<std::vector<double>> pass_times(batches.size());
      size_t c = 0;
      for (int pass = 0; pass < passes; ++pass) {
        for (size_t b = 0; b < batches.size(); ++b) {
          std::vector<double> times;
          const auto begin = Clock::now();
          for (int rep = 0; rep < 3 || seconds_since(begin) < min_seconds || times.size() < 3;
               ++rep) {
            const Linear w{dt, s.n, s.k, store[c].data()};
            c = (c + 1) % copies;
            const auto t0 = Clock::now();
            cpu::linear(x.data(), batches[b], w, y.data(), pool);
            if (rep > 0) times.push_back(seconds_since(t0));  // the first call is a warm-up
          }
          pass_times[b].push_back(median(times));
        }
      }
      for (size_t b = 0; b < batches.size(); ++b) {
        const int64_t M = batches[b];
        const auto& v = pass_times[b];
        const double t = median(v);
        const double spread =
            (*std::max_element(v.begin(), v.end()) - *std::min_element(v.begin(), v.end())) / t;
        const double gbs = double(wbytes) / t / 1e9;
        const double gflops = 2.0 * double(M) * double(elems) / t / 1e9;
        std::printf("%-5s %6lld %6lld %4lld %9.3f %7.1f %4.0f%% %8.1f %4.0f%% %4.0f%% %5.0f%%\n",
                    std::string(dtype_name(dt)).c_str(), static_cast<long long>(s.n),
                    static_cast<long long>(s.k), static_cast<long long>(M), t * 1e3, gbs,
                    100.0 * gbs / bw, gflops, peak256 > 0 ? 100.0 * gflops / peak256 : 0.0,
                    peak512 > 0 ? 100.0 * gflops / peak512 : 0.0, 100.0 * spread);
      }
      std::fflush(stdout);
    }
  }
  std::printf("\nread bandwidth after: %.1f GB/s\n", cpu::measure_read_bandwidth_gbs(pool));
  return 0;
}
