// Latent-cache writes on the device produce the bytes LatentCache::store_latent produces (bf16:
// R BF16 values; fp8_g128: R E4M3 bytes then amax/448 scales), bit for bit, at tinyGLM's R = 512
// over a scattered block table, including an all-zero group (scale 0, zero bytes, no NaN), a
// group holding a NaN, saturating and subnormal magnitudes, and signed zeros. Indexer keys and
// gates land unchanged in their pages.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/latent_store.h"
#include "engine/core/dtype.h"
#include "engine/model/config.h"
#include "engine/runtime/latent_cache.h"
#include "tests/cuda/cuda_test_support.h"

namespace sparkglm {
namespace {

using namespace cuda_test;

constexpr int kBlock = 16, kBlocks = 4;
const std::vector<int32_t> kTable = {2, 0, 3};  // the sequence's logical blocks -> physical

int32_t page_row(int64_t pos) {
  return kTable[size_t(pos / kBlock)] * kBlock + int32_t(pos % kBlock);
}

// The record layout of runtime/latent_cache.h read back on the host.
void decode(cuda::LatentFormat format, const uint8_t* rec, int r, float* out) {
  if (format == cuda::LatentFormat::kBF16) {
    for (int i = 0; i < r; ++i) {
      uint16_t h;
      std::memcpy(&h, rec + 2 * i, 2);
      out[i] = bf16_to_f32(h);
    }
    return;
  }
  for (int g = 0; g < r / 128; ++g) {
    float scale;
    std::memcpy(&scale, rec + r + 4 * g, 4);
    for (int i = g * 128; i < g * 128 + 128; ++i) out[i] = e4m3_to_f32(rec[i]) * scale;
  }
}

// Rows of latents at positions 0..rows-1, row 0 holding the awkward groups.
std::vector<float> latents(int rows, int r) {
  auto v = uniform(60, size_t(rows) * r, 0.0f, 3.0f);
  for (int i = 0; i < 128; ++i) v[size_t(i)] = 0.0f;                                  // zeros
  v[130] = std::numeric_limits<float>::quiet_NaN();                                   // a NaN
  v[256] = 1e30f, v[257] = -1e-30f, v[258] = 1e-40f;                                  // range
  for (int i = 384; i < 512; ++i) v[size_t(i)] = (i % 2) ? -0.0f : 1e-3f * float(i);  // -0
  return v;
}

TEST(CudaLatentStore, StoredRecordsEqualLatentCacheBytesAndValues) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const ModelConfig c = preset_config("tinyglm");
  const int r = c.kv_lora_rank, rows = 41;
  const auto v = latents(rows, r);
  std::vector<int32_t> page_rows(static_cast<size_t>(rows));
  for (int i = 0; i < rows; ++i) page_rows[size_t(i)] = page_row(i);
  auto dv = to_device(v), dpr = to_device(page_rows);
  for (auto [format, dtype] : {std::pair{cuda::LatentFormat::kBF16, KvDtype::kBF16},
                               std::pair{cuda::LatentFormat::kFp8G128, KvDtype::kFp8G128}}) {
    const int64_t rec = cuda::latent_record_bytes(format);
    ASSERT_EQ(size_t(rec), kv_vector_bytes(dtype, r));
    const size_t bytes = size_t(kBlocks * kBlock) * size_t(rec);
    cuda::DeviceBuffer pages(bytes);
    SPARKGLM_CUDA_CHECK(cudaMemset(pages.data(), 0, bytes));
    cuda::store_latents(static_cast<const float*>(dv.data()), rows, r, format,
                        static_cast<const int32_t*>(dpr.data()),
                        static_cast<uint8_t*>(pages.data()), nullptr);
    const auto got = to_host<uint8_t>(pages, bytes);

    LatentCache cache(c, kBlocks, kBlock, dtype);
    std::vector<float> want(static_cast<size_t>(r)), back(static_cast<size_t>(r));
    std::vector<uint8_t> expect(static_cast<size_t>(rec));
    for (int i = 0; i < rows; ++i) {
      const float* row = &v[size_t(i) * size_t(r)];
      const uint8_t* mine = &got[size_t(page_rows[size_t(i)]) * size_t(rec)];
      // The bytes store_latent writes (latent_cache.cpp's quantize, spelled out).
      if (format == cuda::LatentFormat::kBF16) {
        for (int e = 0; e < r; ++e) {
          const uint16_t h = f32_to_bf16(row[e]);
          std::memcpy(&expect[size_t(2 * e)], &h, 2);
        }
      } else {
        for (int g = 0; g < r / 128; ++g) {
          float amax = 0.0f;
          for (int e = g * 128; e < g * 128 + 128; ++e) amax = std::max(amax, std::fabs(row[e]));
          const float scale = amax / 448.0f, inv = scale > 0.0f ? 1.0f / scale : 0.0f;
          for (int e = g * 128; e < g * 128 + 128; ++e)
            expect[size_t(e)] = f32_to_e4m3(row[e] * inv);
          std::memcpy(&expect[size_t(r + 4 * g)], &scale, 4);
        }
      }
      EXPECT_EQ(std::memcmp(mine, expect.data(), size_t(rec)), 0) << "record bytes, row " << i;
      // And what LatentCache itself stores, through its own load.
      cache.store_latent(0, kTable, i, row);
      cache.load_latent(0, kTable, i, want.data());
      decode(format, mine, r, back.data());
      EXPECT_EQ(std::memcmp(back.data(), want.data(), size_t(r) * 4), 0) << "values, row " << i;
    }
    if (format == cuda::LatentFormat::kFp8G128) {  // row 0, group 0: all zeros
      const uint8_t* z = &got[size_t(page_rows[0]) * size_t(rec)];
      float scale;
      std::memcpy(&scale, z + r, 4);
      EXPECT_EQ(scale, 0.0f);
      EXPECT_TRUE(std::all_of(z, z + 128, [](uint8_t b) { return b == 0; }));
    }
  }
}

TEST(CudaLatentStore, IndexKeysAndGatesLandInTheirPages) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const int d_i = 128, n = 41;  // the indexer's key width; three blocks, the last partial
  const auto keys = uniform(61, size_t(n) * d_i, 0.0f, 2.0f);
  const auto gates = uniform(62, size_t(n), 0.0f, 2.0f);
  std::vector<int32_t> page_rows(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) page_rows[size_t(i)] = page_row(i);
  auto dk = to_device(keys), dg = to_device(gates), dpr = to_device(page_rows);
  const size_t slots = size_t(kBlocks * kBlock);
  cuda::DeviceBuffer kp(slots * d_i * 4), gp(slots * 4);
  cuda::store_index_keys(static_cast<const float*>(dk.data()), static_cast<const float*>(dg.data()),
                         n, d_i, static_cast<const int32_t*>(dpr.data()),
                         static_cast<float*>(kp.data()), static_cast<float*>(gp.data()), nullptr);
  const auto pages = to_host<float>(kp, slots * d_i);
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(std::memcmp(&pages[size_t(page_rows[size_t(i)]) * d_i], &keys[size_t(i) * d_i],
                          size_t(d_i) * 4),
              0)
        << "key page of position " << i;
  const auto gate_pages = to_host<float>(gp, slots);
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(std::memcmp(&gate_pages[size_t(page_rows[size_t(i)])], &gates[size_t(i)], 4), 0)
        << "gate page of position " << i;
}

}  // namespace
}  // namespace sparkglm
