// cpu::linear and cpu::dot against the reduction order that linear.h promises, bit for bit.
#include "engine/backend/cpu/linear.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace sparkglm::cpu {
namespace {

// The contract, one element at a time: 8 lanes, lane l takes k = l, l+8, ... with std::fma, then
// ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)). Written here, apart from the library, on purpose.
float reference_dot(const float* x, const Linear& w, int64_t n) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t k = 0; k < w.cols; ++k) lane[k % 8] = std::fma(x[k], w.at(n, k), lane[k % 8]);
  return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

// A weight matrix whose storage lives in the test.
struct TestWeight {
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  Linear view;
  TestWeight(int64_t rows, int64_t cols, DType dt, std::mt19937& rng) {
    // Magnitudes spread over several binades so that any change of summation order shows up in
    // the low bits of most outputs.
    std::uniform_real_distribution<float> u(-1.0f, 1.0f), e(-6.0f, 2.0f);
    view = Linear{dt, rows, cols, nullptr};
    const size_t count = size_t(rows * cols);
    if (dt == DType::kBF16) {
      bf16.resize(count);
      for (auto& v : bf16) v = f32_to_bf16(u(rng) * std::exp2(e(rng)));
      view.data = bf16.data();
    } else {
      f32.resize(count);
      for (auto& v : f32) v = u(rng) * std::exp2(e(rng));
      view.data = f32.data();
    }
  }
};

std::vector<float> random_x(int64_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f), e(-6.0f, 2.0f);
  std::vector<float> x(size_t(std::max<int64_t>(count, 1)));
  for (auto& v : x) v = u(rng) * std::exp2(e(rng));
  return x;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

const char* name(DType dt) {
  return dt == DType::kBF16 ? "bf16" : "f32";
}

// Runs linear_slice with padded strides and checks every output against reference_dot, and that
// the padding around the outputs was not written. Returns the number of mismatches.
int check_against_reference(int64_t M, int64_t N, int64_t K, DType dt, int64_t n0, int64_t n1,
                            ThreadPool& pool, std::mt19937& rng) {
  TestWeight w(N, K, dt, rng);
  const int64_t ldx = K + 3, ldy = (n1 - n0) + 5;
  const std::vector<float> x = random_x(M * ldx, rng);
  const float sentinel = -12345.0f;
  std::vector<float> y(size_t(M * ldy), sentinel);
  linear_slice(x.data(), ldx, M, w.view, n0, n1, y.data(), ldy, pool);
  int bad = 0;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t c = 0; c < ldy; ++c) {
      const float got = y[size_t(m * ldy + c)];
      const float want =
          c < n1 - n0 ? reference_dot(&x[size_t(m * ldx)], w.view, n0 + c) : sentinel;
      if (bits(got) != bits(want) && bad++ == 0) {
        ADD_FAILURE() << name(dt) << " M=" << M << " N=" << N << " K=" << K << " slice [" << n0
                      << "," << n1 << ") threads=" << pool.size() << ": y[" << m << "][" << c
                      << "] = " << got << " (0x" << std::hex << bits(got) << "), reference " << want
                      << " (0x" << bits(want) << std::dec << ")";
      }
    }
  }
  return bad;
}

TEST(LinearBitwise, MatchesScalarReferenceAcrossShapes) {
  std::mt19937 rng(1);
  ThreadPool pool(2);
  int cases = 0, bad_cases = 0;
  for (DType dt : {DType::kBF16, DType::kF32})
    for (int64_t M : {1, 2, 3, 4, 5, 7, 8, 9, 16, 33, 100})
      for (int64_t N : {1, 7, 8, 9, 64, 130})
        for (int64_t K : {1, 7, 8, 9, 31, 64, 100, 257}) {
          ++cases;
          bad_cases += check_against_reference(M, N, K, dt, 0, N, pool, rng) > 0;
        }
  std::printf("%d of %d shapes differ from the reference\n", bad_cases, cases);
  EXPECT_EQ(bad_cases, 0);
}

// Shapes past every blocking boundary of the fast paths. Decode-sized batches on either side of
// the 16-row streaming limit; then batches whose x (over 2 MB) is too large to stream, so they
// take the packed path: K = 1031 walks two 512-wide slices and a slice that holds only the
// partial last chunk; N = 170 on two threads gives each thread a full 80-row block plus a partial
// one; M = 515 is 16 blocks of 32 pairs, a partial tile and an odd row.
TEST(LinearBitwise, MatchesScalarReferenceOnLargeShapes) {
  std::mt19937 rng(2);
  ThreadPool pool(2);
  int bad = 0;
  for (DType dt : {DType::kBF16, DType::kF32}) {
    for (int64_t M : {1, 2, 6, 8, 15, 16, 17, 150})
      bad += check_against_reference(M, 97, 1100, dt, 0, 97, pool, rng);
    bad += check_against_reference(515, 170, 1031, dt, 0, 170, pool, rng);
    bad += check_against_reference(300, 45, 2003, dt, 3, 44, pool, rng);
  }
  EXPECT_EQ(bad, 0);
}

TEST(LinearBitwise, SliceComputesOnlyItsRows) {
  std::mt19937 rng(3);
  ThreadPool pool(2);
  int bad = 0;
  for (DType dt : {DType::kBF16, DType::kF32})
    for (int64_t M : {1, 3, 8, 33})
      for (auto [n0, n1] :
           {std::pair<int64_t, int64_t>{0, 1}, {5, 6}, {3, 67}, {64, 130}, {17, 129}})
        bad += check_against_reference(M, 130, 257, dt, n0, n1, pool, rng);
  EXPECT_EQ(bad, 0);
}

TEST(LinearBitwise, OneThreadMatchesReference) {
  std::mt19937 rng(4);
  ThreadPool pool(1);
  int bad = 0;
  for (DType dt : {DType::kBF16, DType::kF32})
    for (int64_t M : {1, 4, 9, 100})
      bad += check_against_reference(M, 130, 257, dt, 0, 130, pool, rng);
  EXPECT_EQ(bad, 0);
}

// A lane that ends at -0 must stay -0 when the partial last chunk does not reach it: zero-padding
// the tail with an unmasked FMA would add +0 and flip it to +0. Each product here underflows to -0.
TEST(LinearBitwise, NegativeZeroLanesSurviveThePartialChunk) {
  ThreadPool pool(2);
  for (DType dt : {DType::kBF16, DType::kF32}) {
    for (int64_t M : {1, 40}) {
      const int64_t K = 9, N = 3;
      std::vector<float> wf(size_t(N * K), 1e-30f);
      std::vector<uint16_t> wb(size_t(N * K), f32_to_bf16(1e-30f));
      const Linear w{dt, N, K,
                     dt == DType::kBF16 ? static_cast<const void*>(wb.data()) : wf.data()};
      std::vector<float> x(size_t(M * K), -1e-30f), y(size_t(M * N), 1.0f);
      linear(x.data(), M, w, y.data(), pool);
      for (int64_t i = 0; i < M * N; ++i) {
        ASSERT_EQ(bits(y[size_t(i)]), bits(-0.0f))
            << name(dt) << " M=" << M << " output " << i << " is " << y[size_t(i)] << " (0x"
            << std::hex << bits(y[size_t(i)]) << "), want -0";
      }
    }
  }
}

// The bitwise tests only mean something if a different order gives different bits: a plain left
// to right sum must disagree with the reference on these inputs.
TEST(LinearBitwise, ReferenceOrderIsObservable) {
  std::mt19937 rng(5);
  const int64_t N = 200, K = 1000;
  TestWeight w(N, K, DType::kF32, rng);
  const std::vector<float> x = random_x(K, rng);
  int differ = 0;
  for (int64_t n = 0; n < N; ++n) {
    float s = 0.0f;
    for (int64_t k = 0; k < K; ++k) s = std::fma(x[size_t(k)], w.view.at(n, k), s);
    differ += bits(s) != bits(reference_dot(x.data(), w.view, n));
  }
  std::printf("sequential order differs from the lane order in %d of %lld outputs\n", differ,
              static_cast<long long>(N));
  EXPECT_GT(differ, N / 2);
}

// Rounding error of the documented order: each lane is a chain of ceil(K/8) FMAs, each rounding
// once, and three more additions combine the lanes, so |y - exact| <= (ceil(K/8) + 3) * 2^-24 *
// sum_k |x_k w_k| (to first order; no underflow at these magnitudes).
TEST(LinearAccuracy, WithinErrorBoundOfFp64Dot) {
  std::mt19937 rng(6);
  ThreadPool pool(2);
  for (DType dt : {DType::kBF16, DType::kF32}) {
    for (int64_t K : {7, 100, 4096}) {
      const int64_t M = 20, N = 64;
      TestWeight w(N, K, dt, rng);
      const std::vector<float> x = random_x(M * K, rng);
      std::vector<float> y(size_t(M * N));
      linear(x.data(), M, w.view, y.data(), pool);
      double worst = 0.0;  // largest error as a fraction of the bound
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
          double exact = 0.0, mag = 0.0;
          for (int64_t k = 0; k < K; ++k) {
            const double t = double(x[size_t(m * K + k)]) * double(w.view.at(n, k));
            exact += t;
            mag += std::fabs(t);
          }
          const int64_t chain = (K + 7) / 8 + 3;  // roundings on the longest path
          const double bound = double(chain) * std::ldexp(1.0, -24) * mag * 1.0001;
          const double err = std::fabs(double(y[size_t(m * N + n)]) - exact);
          worst = std::max(worst, err / bound);
          ASSERT_LE(err, bound) << name(dt) << " K=" << K << " y[" << m << "][" << n
                                << "] = " << y[size_t(m * N + n)] << ", FP64 " << exact;
        }
      }
      std::printf("%s K=%lld: worst error = %.3f of the bound\n", name(dt),
                  static_cast<long long>(K), worst);
    }
  }
}

// A row's output is the same bits whatever other rows share the batch (including batches on either
// side of the decode/prefill switch) and whatever the thread count.
TEST(LinearBatchInvariance, RowDoesNotDependOnBatchOrThreads) {
  std::mt19937 rng(7);
  ThreadPool one(1), two(2);
  for (DType dt : {DType::kBF16, DType::kF32}) {
    const int64_t Mmax = 300, N = 130, K = 1100;
    TestWeight w(N, K, dt, rng);
    const std::vector<float> x = random_x(Mmax * K, rng);
    std::vector<float> full(size_t(Mmax * N));
    linear(x.data(), Mmax, w.view, full.data(), two);
    int bad = 0;
    for (ThreadPool* pool : {&one, &two}) {
      for (int64_t M : {1, 2, 3, 5, 8, 9, 16, 17, 33, 64, 65, 200, 300}) {
        for (int64_t start : {int64_t(0), Mmax - M, (Mmax - M) / 3}) {
          std::vector<float> y(size_t(M * N));
          linear(&x[size_t(start * K)], M, w.view, y.data(), *pool);
          for (int64_t i = 0; i < M * N; ++i) {
            const float want = full[size_t(start * N + i)];
            if (bits(y[size_t(i)]) != bits(want) && bad++ == 0) {
              ADD_FAILURE() << name(dt) << " batch of " << M << " from row " << start << " on "
                            << pool->size() << " threads: row " << start + i / N << " col " << i % N
                            << " = " << y[size_t(i)] << ", in the batch of " << Mmax
                            << " on 2 threads " << want;
            }
          }
        }
      }
    }
    EXPECT_EQ(bad, 0) << name(dt);
  }
}

TEST(LinearDot, FollowsTheLaneOrder) {
  std::mt19937 rng(8);
  int bad = 0;
  for (int64_t n = 0; n <= 4200; n += (n < 80 ? 1 : 257)) {
    const std::vector<float> a = random_x(n, rng), b = random_x(n, rng);
    const Linear w{DType::kF32, 1, n, b.data()};
    const float got = dot(a.data(), b.data(), n), want = reference_dot(a.data(), w, 0);
    if (bits(got) != bits(want)) {
      ++bad;
      ADD_FAILURE() << "n=" << n << ": dot = " << got << ", reference " << want;
    }
  }
  EXPECT_EQ(bad, 0);
}

}  // namespace
}  // namespace sparkglm::cpu
