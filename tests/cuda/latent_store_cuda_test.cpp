// Latent-cache writes on the device produce the bytes LatentCache::store_latent produces (bf16:
// R BF16 values; fp8_g128: R E4M3 bytes then amax/448 scales), bit for bit, at tinyGLM's R = 512
// over a scattered block table, including an all-zero group (scale 0, zero bytes, no NaN), a
// group holding a NaN, saturating and subnormal magnitudes, and signed zeros. Indexer keys and
// gates land unchanged in their pages. The MLA step's rows in one launch (store_mla_rows) carry
// the bits of the norms and stores launched one by one.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/latent_store.h"
#include "engine/backend/cuda/norms.h"
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

// store_mla_rows against rms_norm_rows, store_latents, layer_norm_rows, store_index_keys and
// rms_norm_rows launched one by one, bit for bit in every buffer either writes: at the production
// MLA widths (tinyglm) and the micro's, both latent formats where R allows, 1, 3 and 41 rows.
TEST(CudaLatentStore, TheMlaStepsRowsInOneLaunchCarryTheBitsOfFiveLaunches) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  constexpr float kEps = 1e-5f, kKeyEps = 1e-6f;
  for (const char* preset : {"tinyglm", "tinyglm-micro"}) {
    const ModelConfig c = preset_config(preset);
    const int R = c.kv_lora_rank, di = c.index_head_dim, ql = c.q_lora_rank;
    for (auto format : {cuda::LatentFormat::kBF16, cuda::LatentFormat::kFp8G128}) {
      if (format == cuda::LatentFormat::kFp8G128 && R % 128 != 0) continue;
      for (int rows : {1, 3, 41}) {
        SCOPED_TRACE(testing::Message()
                     << preset << ", format " << int(format) << ", rows " << rows);
        const uint64_t key = 900 + uint64_t(rows) + 7 * uint64_t(R);
        const auto lat = uniform(key, size_t(rows) * R, 0.0f, 3.0f);
        const auto keys = uniform(key + 1, size_t(rows) * di, 0.5f, 2.0f);
        const auto gates = uniform(key + 2, size_t(rows), 0.0f, 2.0f);
        const auto cq = uniform(key + 3, size_t(rows) * ql, 0.0f, 1.5f);
        const auto lat_w = uniform(key + 4, size_t(R), 1.0f, 0.5f);
        const auto key_w = uniform(key + 5, size_t(di), 1.0f, 0.5f);
        const auto key_b = uniform(key + 6, size_t(di), 0.0f, 0.2f);
        const auto cq_w = uniform(key + 7, size_t(ql), 1.0f, 0.5f);
        std::vector<int32_t> page_rows(static_cast<size_t>(rows));
        for (int i = 0; i < rows; ++i) page_rows[size_t(i)] = page_row(i);
        auto dpr = to_device(page_rows), dg = to_device(gates), dlw = to_device(lat_w),
             dkw = to_device(key_w), dkb = to_device(key_b), dcw = to_device(cq_w);
        const int64_t rec = format == cuda::LatentFormat::kBF16 ? 2 * R : R + 4 * (R / 128);
        const size_t slots = size_t(kBlocks * kBlock);
        // What each way writes: the three row buffers and the three page buffers.
        struct Out {
          cuda::DeviceBuffer lat, keys, cq, cq_bf16, pages, key_pages, gate_pages;
        };
        auto make = [&](const auto& l, const auto& k, const auto& q) {
          Out o{to_device(l),
                to_device(k),
                to_device(q),
                cuda::DeviceBuffer(size_t(rows) * ql * 2),
                cuda::DeviceBuffer(slots * rec),
                cuda::DeviceBuffer(slots * di * 4),
                cuda::DeviceBuffer(slots * 4)};
          SPARKGLM_CUDA_CHECK(cudaMemset(o.pages.data(), 0, slots * rec));
          SPARKGLM_CUDA_CHECK(cudaMemset(o.key_pages.data(), 0, slots * di * 4));
          SPARKGLM_CUDA_CHECK(cudaMemset(o.gate_pages.data(), 0, slots * 4));
          return o;
        };
        Out one = make(lat, keys, cq), fused = make(lat, keys, cq);
        auto f = [](cuda::DeviceBuffer& b) { return static_cast<float*>(b.data()); };
        const auto* pr = static_cast<const int32_t*>(dpr.data());
        cuda::rms_norm_rows(f(one.lat), f(dlw), kEps, rows, R, f(one.lat), nullptr, nullptr);
        cuda::store_latents(f(one.lat), rows, R, format, pr,
                            static_cast<uint8_t*>(one.pages.data()), nullptr);
        cuda::layer_norm_rows(f(one.keys), f(dkw), f(dkb), kKeyEps, rows, di, f(one.keys), nullptr);
        cuda::store_index_keys(f(one.keys), f(dg), rows, di, pr, f(one.key_pages),
                               f(one.gate_pages), nullptr);
        cuda::rms_norm_rows(f(one.cq), f(dcw), kEps, rows, ql, f(one.cq),
                            static_cast<uint16_t*>(one.cq_bf16.data()), nullptr);
        cuda::store_mla_rows(
            {pr, f(fused.lat), f(dlw), R, format, static_cast<uint8_t*>(fused.pages.data()),
             f(fused.keys), f(dkw), f(dkb), kKeyEps, f(dg), di, f(fused.key_pages),
             f(fused.gate_pages), f(fused.cq), f(dcw), static_cast<uint16_t*>(fused.cq_bf16.data()),
             ql, kEps},
            rows, nullptr);
        auto same = [&](const cuda::DeviceBuffer& a, const cuda::DeviceBuffer& b, size_t bytes) {
          const auto x = to_host<uint8_t>(a, bytes), y = to_host<uint8_t>(b, bytes);
          return std::memcmp(x.data(), y.data(), bytes) == 0;
        };
        EXPECT_TRUE(same(one.lat, fused.lat, size_t(rows) * R * 4)) << "normed latents";
        EXPECT_TRUE(same(one.pages, fused.pages, slots * rec)) << "latent records";
        EXPECT_TRUE(same(one.keys, fused.keys, size_t(rows) * di * 4)) << "normed keys";
        EXPECT_TRUE(same(one.key_pages, fused.key_pages, slots * di * 4)) << "key pages";
        EXPECT_TRUE(same(one.gate_pages, fused.gate_pages, slots * 4)) << "gate pages";
        EXPECT_TRUE(same(one.cq, fused.cq, size_t(rows) * ql * 4)) << "normed query latents";
        EXPECT_TRUE(same(one.cq_bf16, fused.cq_bf16, size_t(rows) * ql * 2)) << "their BF16";
        // Not vacuous: the norms changed the rows, and every row reached its page.
        const auto normed = to_host<float>(fused.lat, size_t(rows) * R);
        EXPECT_NE(std::memcmp(normed.data(), lat.data(), size_t(rows) * R * 4), 0);
        const auto gp = to_host<float>(fused.gate_pages, slots);
        for (int i = 0; i < rows; ++i)
          EXPECT_EQ(gp[size_t(page_rows[size_t(i)])], gates[size_t(i)]) << "gate of row " << i;
      }
    }
  }
}

}  // namespace
}  // namespace sparkglm
