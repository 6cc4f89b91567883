// KDA state slots: with KdaBatch::slots, each sequence's conv history and recurrent state are read
// and written at its slot of a pool, with the same bits as the slot-less kernels on compact
// per-sequence arrays, and slots the batch does not name are left untouched. Production head
// count (64 x 128); decode (n = 1), prefill (n = 5) and the chunked scan.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/kda.h"
#include "engine/backend/cuda/kda_chunked.h"
#include "tests/cuda/cuda_test_support.h"

namespace sparkglm {
namespace {

using namespace cuda_test;

constexpr int kHeads = 64, kD = cuda::kKdaHeadDim, kHist = cuda::kKdaTaps - 1;
constexpr int64_t kHk = int64_t(kHeads) * kD;
constexpr int64_t kHistFloats = 3 * kHist * kHk;             // one slot of conv history
constexpr int64_t kStateFloats = int64_t(kHeads) * kD * kD;  // one slot of S

float* f(const cuda::DeviceBuffer& b) {
  return static_cast<float*>(b.data());
}

// Per-sequence data of slots `order` copied out of a pool: [order.size()][per_slot].
std::vector<float> compact(const std::vector<float>& pool, const std::vector<int32_t>& order,
                           int64_t per_slot) {
  std::vector<float> out;
  for (int32_t s : order)
    out.insert(out.end(), pool.begin() + s * per_slot, pool.begin() + (s + 1) * per_slot);
  return out;
}

bool same_bits(const std::vector<float>& a, const float* b, size_t n) {
  return std::memcmp(a.data(), b, n * sizeof(float)) == 0;
}

// prepare -> recurrent -> advance history for one batch, on whatever pool layout `batch` names.
std::vector<float> run_step(const cuda::KdaBatch& batch, uint64_t seed, cuda::DeviceBuffer& hist,
                            cuda::DeviceBuffer& state) {
  const int64_t rows = int64_t(batch.num_seqs) * batch.rows_per_seq;
  const size_t act = size_t(rows * kHk);
  auto rq = to_device(uniform(seed + 1, act, 0.0f, 1.0f));
  auto rk = to_device(uniform(seed + 2, act, 0.0f, 1.0f));
  auto rv = to_device(uniform(seed + 3, act, 0.0f, 1.0f));
  auto fa = to_device(uniform(seed + 4, act, 0.0f, 1.0f));
  auto bl = to_device(uniform(seed + 5, size_t(rows * kHeads), 0.0f, 2.0f));
  auto cw = to_device(uniform(seed + 6, size_t(3 * kHk * cuda::kKdaTaps), 0.0f, 0.5f));
  auto al = to_device(uniform(seed + 7, size_t(kHeads), 0.0f, 1.0f));
  auto dt = to_device(uniform(seed + 8, size_t(kHk), 0.0f, 0.5f));
  cuda::DeviceBuffer q(act * 4), k(act * 4), v(act * 4), decay(act * 4), beta(size_t(rows) * 256),
      o(act * 4);
  const cuda::KdaPrepareArgs args{f(rq), f(rk), f(rv), f(fa), f(bl), f(cw),    f(hist), f(al),
                                  f(dt), -5.0f, f(q),  f(k),  f(v),  f(decay), f(beta)};
  cuda::kda_prepare(batch, args, nullptr);
  cuda::kda_recurrent(batch, f(q), f(k), f(v), f(decay), f(beta), f(state), f(o), nullptr);
  cuda::kda_advance_conv_history(batch, f(rq), f(rk), f(rv), f(hist), nullptr);
  return to_host<float>(o, act);
}

TEST(CudaKdaSlots, SlottedStepsEqualCompactStepsAndLeaveOtherSlotsAlone) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const std::vector<int32_t> slots = {2, 0};  // 2 sequences in a pool of 3; slot 1 is not named
  const int pool_slots = 3, seqs = 2;
  const auto hist0 = uniform(20, size_t(pool_slots * kHistFloats), 0.0f, 1.0f);
  const auto state0 = uniform(21, size_t(pool_slots * kStateFloats), 0.0f, 0.1f);
  auto d_slots = to_device(slots);
  for (int n : {1, 5}) {  // the decode and the prefill recurrent kernels
    cuda::DeviceBuffer pool_hist = to_device(hist0), pool_state = to_device(state0);
    cuda::DeviceBuffer hist = to_device(compact(hist0, slots, kHistFloats));
    cuda::DeviceBuffer state = to_device(compact(state0, slots, kStateFloats));
    // Two steps, so the second reads the history the first advanced.
    for (int step = 0; step < 2; ++step) {
      cuda::KdaBatch slotted{seqs, n, kHeads, static_cast<const int32_t*>(d_slots.data())};
      const auto got = run_step(slotted, 100 * step, pool_hist, pool_state);
      const auto want = run_step(cuda::KdaBatch{seqs, n, kHeads}, 100 * step, hist, state);
      EXPECT_TRUE(same_bits(want, got.data(), want.size())) << "o, n " << n << " step " << step;
    }
    const auto ph = to_host<float>(pool_hist, hist0.size());
    const auto ps = to_host<float>(pool_state, state0.size());
    const auto ch = to_host<float>(hist, size_t(seqs * kHistFloats));
    const auto cs = to_host<float>(state, size_t(seqs * kStateFloats));
    for (int b = 0; b < seqs; ++b) {
      EXPECT_TRUE(same_bits(compact(ph, {slots[size_t(b)]}, kHistFloats),
                            &ch[size_t(b * kHistFloats)], size_t(kHistFloats)))
          << "history of sequence " << b << ", n " << n;
      EXPECT_TRUE(same_bits(compact(ps, {slots[size_t(b)]}, kStateFloats),
                            &cs[size_t(b * kStateFloats)], size_t(kStateFloats)))
          << "state of sequence " << b << ", n " << n;
    }
    EXPECT_TRUE(
        same_bits(compact(hist0, {1}, kHistFloats), &ph[size_t(kHistFloats)], size_t(kHistFloats)))
        << "unnamed slot's history changed, n " << n;
    EXPECT_TRUE(same_bits(compact(state0, {1}, kStateFloats), &ps[size_t(kStateFloats)],
                          size_t(kStateFloats)))
        << "unnamed slot's state changed, n " << n;
  }
}

TEST(CudaKdaSlots, ChunkedScanReadsAndWritesTheSlot) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const std::vector<int32_t> slots = {1};
  const int n = 70, pool_slots = 2;  // two chunks, the second partial
  const int64_t start = 0, act = int64_t(n) * kHk;
  auto q = to_device(uniform(30, size_t(act), 0.0f, 0.1f));
  auto k = to_device(uniform(31, size_t(act), 0.0f, 0.1f));
  auto v = to_device(uniform(32, size_t(act), 0.0f, 1.0f));
  auto decay = to_device(uniform(33, size_t(act), 0.9f, 0.09f));
  auto beta = to_device(uniform(34, size_t(n * kHeads), 0.5f, 0.4f));
  const auto state0 = uniform(35, size_t(pool_slots * kStateFloats), 0.0f, 0.1f);
  auto d_slots = to_device(slots);
  const cuda::KdaBatch plain{1, n, kHeads};
  const cuda::KdaBatch slotted{1, n, kHeads, static_cast<const int32_t*>(d_slots.data())};
  cuda::DeviceBuffer o1(size_t(act) * 4), o2(size_t(act) * 4);
  auto pool = to_device(state0);
  auto one = to_device(compact(state0, slots, kStateFloats));
  cuda::kda_chunked_prefill(slotted, start, f(q), f(k), f(v), f(decay), f(beta), f(pool), f(o1),
                            nullptr);
  cuda::kda_chunked_prefill(plain, start, f(q), f(k), f(v), f(decay), f(beta), f(one), f(o2),
                            nullptr);
  const auto a = to_host<float>(o1, size_t(act)), b = to_host<float>(o2, size_t(act));
  EXPECT_TRUE(same_bits(a, b.data(), a.size())) << "o";
  const auto ps = to_host<float>(pool, state0.size());
  const auto s1 = to_host<float>(one, size_t(kStateFloats));
  EXPECT_TRUE(same_bits(s1, &ps[size_t(kStateFloats)], size_t(kStateFloats))) << "slot 1 state";
  EXPECT_TRUE(same_bits(state0, ps.data(), size_t(kStateFloats))) << "slot 0 changed";
}

}  // namespace
}  // namespace sparkglm
