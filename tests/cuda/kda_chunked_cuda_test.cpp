// The chunked KDA prefill (kda_chunked_prefill) against the CPU's chunked form at awkward lengths
// (one position, one short of a chunk, exactly one, one over, several) starting inside a chunk,
// so the first and last chunks are partial. Production shapes and timings are the G1 runner's.
// Skips on machines without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "engine/backend/cpu/kda_delta_rule.h"
#include "engine/backend/cpu/ops.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/kda.h"
#include "engine/backend/cuda/kda_chunked.h"
#include "tests/cuda/cuda_test_support.h"

namespace sparkglm {
namespace {

using cuda_test::have_device;
using cuda_test::nmse;
using cuda_test::to_device;
using cuda_test::to_host;
using cuda_test::uniform;

constexpr int kHeads = 2, kSeqs = 2, kD = cuda::kKdaHeadDim;
constexpr int64_t kHK = int64_t(kHeads) * kD;
// TF32 inputs to every product: about 2e-7 on these inputs, against ~1e-13 for FP32 ones (the
// same bound serves the comparison with the token-by-token kernel).
constexpr double kTolerance = 1e-5;

struct Inputs {
  std::vector<float> q, k, v, g, decay, beta, state0;
};

Inputs make_inputs(int n, uint64_t key) {
  const int64_t rows = int64_t(kSeqs) * n;
  Inputs in;
  in.q = uniform(key + 1, size_t(rows * kHK), 0.0f, 1.0f);
  in.k = uniform(key + 2, size_t(rows * kHK), 0.0f, 1.0f);
  in.v = uniform(key + 3, size_t(rows * kHK), 0.0f, 1.0f);
  const auto z = uniform(key + 4, size_t(rows * kHK), -1.0f, 4.0f);
  in.beta = uniform(key + 5, size_t(rows * kHeads), 0.5f, 0.5f);
  in.state0 = uniform(key + 6, size_t(kSeqs * kHK * kD), 0.0f, 0.1f);
  in.g.resize(z.size());
  in.decay.resize(z.size());
  for (size_t i = 0; i < z.size(); ++i)
    in.g[i] = -5.0f * cpu::sigmoid(z[i]), in.decay[i] = std::exp(in.g[i]);
  for (int64_t r = 0; r < rows * kHeads; ++r) {
    cpu::l2_normalize(&in.q[size_t(r * kD)], kD, 1e-6f);
    for (int i = 0; i < kD; ++i) in.q[size_t(r * kD + i)] /= std::sqrt(float(kD));
    cpu::l2_normalize(&in.k[size_t(r * kD)], kD, 1e-6f);
  }
  return in;
}

// The CPU chunked form over rows [r0, r0 + len) of every sequence, from absolute position start.
void cpu_run(const Inputs& in, int n, int r0, int len, int64_t start, std::vector<float>& o,
             std::vector<float>& state) {
  for (int s = 0; s < kSeqs; ++s)
    for (int h = 0; h < kHeads; ++h) {
      cpu::KdaHeadRun run;
      run.n = len, run.k_dim = kD, run.v_dim = kD, run.stride = kHK, run.beta_stride = kHeads;
      const size_t at = size_t((int64_t(s) * n + r0) * kHK + h * kD);
      run.q = &in.q[at], run.k = &in.k[at], run.v = &in.v[at], run.g = &in.g[at];
      run.o = &o[at];
      run.beta = &in.beta[size_t((int64_t(s) * n + r0) * kHeads + h)];
      cpu::kda_chunked_run(run, start, &state[size_t((s * kHeads + h) * kD * kD)]);
    }
}

// Runs the device prefill on n rows per sequence from `start` with o poisoned (all bits set).
struct DeviceRun {
  std::vector<float> o, state;
};
DeviceRun device_run(const Inputs& in, int n, int64_t start) {
  const cuda::KdaBatch batch{kSeqs, n, kHeads};
  auto dq = to_device(in.q), dk = to_device(in.k), dv = to_device(in.v);
  auto dd = to_device(in.decay), db = to_device(in.beta), ds = to_device(in.state0);
  cuda::DeviceBuffer dout(in.q.size() * 4);
  SPARKGLM_CUDA_CHECK(cudaMemset(dout.data(), 0xff, in.q.size() * 4));
  cuda::kda_chunked_prefill(batch, start, static_cast<float*>(dq.data()),
                            static_cast<float*>(dk.data()), static_cast<float*>(dv.data()),
                            static_cast<float*>(dd.data()), static_cast<float*>(db.data()),
                            static_cast<float*>(ds.data()), static_cast<float*>(dout.data()),
                            nullptr);
  return {to_host<float>(dout, in.q.size()), to_host<float>(ds, in.state0.size())};
}

TEST(CudaKdaChunked, MatchesTheCpuChunkedFormFromAnUnalignedPosition) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (int n : {1, 63, 64, 65, 200}) {
    for (int64_t start : {int64_t(37), int64_t(128)}) {
      const Inputs in = make_inputs(n, 40 + uint64_t(n));
      std::vector<float> o(in.q.size()), state(in.state0);
      cpu_run(in, n, 0, n, start, o, state);
      const DeviceRun got = device_run(in, n, start);
      for (float x : got.o) ASSERT_TRUE(std::isfinite(x)) << "n " << n << ": unwritten or NaN";
      EXPECT_LT(nmse(got.o, o), kTolerance) << "n " << n << " start " << start;
      EXPECT_LT(nmse(got.state, state), kTolerance) << "n " << n << " start " << start;
    }
  }
}

TEST(CudaKdaChunked, IsBitwiseRepeatable) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Inputs in = make_inputs(200, 90);
  const DeviceRun a = device_run(in, 200, 37), b = device_run(in, 200, 37);
  EXPECT_EQ(std::memcmp(a.o.data(), b.o.data(), a.o.size() * 4), 0);
  EXPECT_EQ(std::memcmp(a.state.data(), b.state.data(), a.state.size() * 4), 0);
}

TEST(CudaKdaChunked, ResumingMidChunkMatchesOneRun) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  // 200 rows from position 37 in one call against the CPU doing 100 + 100 (its chunks restart
  // at the same absolute boundaries, so the split changes nothing beyond rounding).
  const int n = 200;
  const Inputs in = make_inputs(n, 120);
  std::vector<float> o(in.q.size()), state(in.state0);
  for (int s = 0; s < kSeqs; ++s)
    for (int h = 0; h < kHeads; ++h) {
      float* st = &state[size_t((s * kHeads + h) * kD * kD)];
      for (int part = 0; part < 2; ++part) {
        cpu::KdaHeadRun run;
        run.n = 100, run.k_dim = kD, run.v_dim = kD, run.stride = kHK, run.beta_stride = kHeads;
        const size_t at = size_t((int64_t(s) * n + part * 100) * kHK + h * kD);
        run.q = &in.q[at], run.k = &in.k[at], run.v = &in.v[at], run.g = &in.g[at];
        run.o = &o[at];
        run.beta = &in.beta[size_t((int64_t(s) * n + part * 100) * kHeads + h)];
        cpu::kda_chunked_run(run, 37 + part * 100, st);
      }
    }
  const DeviceRun got = device_run(in, n, 37);
  EXPECT_LT(nmse(got.o, o), kTolerance);
  EXPECT_LT(nmse(got.state, state), kTolerance);
}

TEST(CudaKdaChunked, MatchesTheCpuAndTheTokenByTokenKernelAtG1Lengths) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  // The G1 lengths (several full chunks, the partial last one) from 0 and from inside a chunk:
  // against the CPU's chunked form and against the device's token-by-token kernel.
  for (int n : {77, 512, 2048}) {
    for (int64_t start : {int64_t(0), int64_t(37)}) {
      const Inputs in = make_inputs(n, 200 + uint64_t(n));
      std::vector<float> o(in.q.size()), state(in.state0);
      cpu_run(in, n, 0, n, start, o, state);
      const DeviceRun got = device_run(in, n, start);
      for (float x : got.o) ASSERT_TRUE(std::isfinite(x)) << "n " << n << ": unwritten or NaN";
      EXPECT_LT(nmse(got.o, o), kTolerance) << "n " << n << " start " << start;
      EXPECT_LT(nmse(got.state, state), kTolerance) << "n " << n << " start " << start;

      const cuda::KdaBatch batch{kSeqs, n, kHeads};
      auto dq = to_device(in.q), dk = to_device(in.k), dv = to_device(in.v);
      auto dd = to_device(in.decay), db = to_device(in.beta), ds = to_device(in.state0);
      cuda::DeviceBuffer dout(in.q.size() * 4);
      cuda::kda_recurrent(batch, static_cast<float*>(dq.data()), static_cast<float*>(dk.data()),
                          static_cast<float*>(dv.data()), static_cast<float*>(dd.data()),
                          static_cast<float*>(db.data()), static_cast<float*>(ds.data()),
                          static_cast<float*>(dout.data()), nullptr);
      const auto seq_o = to_host<float>(dout, in.q.size());
      const auto seq_state = to_host<float>(ds, in.state0.size());
      EXPECT_LT(nmse(got.o, seq_o), kTolerance) << "n " << n << " start " << start;
      EXPECT_LT(nmse(got.state, seq_state), kTolerance) << "n " << n << " start " << start;
    }
  }
}

}  // namespace
}  // namespace sparkglm
