// The CUDA operators against the CPU reference at small, awkward shapes (widths that are not a
// multiple of the tiles, short and paged contexts, ties and NaN). Production shapes and timings
// are the G1 runner's (bench/cuda/g1_operators); these tests pin the edge behaviour. They skip
// on machines without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <set>
#include <vector>

#include "engine/backend/cpu/expert_router.h"
#include "engine/backend/cpu/kda_delta_rule.h"
#include "engine/backend/cpu/linear.h"
#include "engine/backend/cpu/mlp.h"
#include "engine/backend/cpu/ops.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/embedding.h"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/kda.h"
#include "engine/backend/cuda/mla_decode.h"
#include "engine/backend/cuda/mla_prefill.h"
#include "engine/backend/cuda/moe_prefill.h"
#include "engine/backend/cuda/moe_router.h"
#include "engine/backend/cuda/sampling.h"
#include "engine/backend/cuda/sampling_topk_topp.h"
#include "engine/core/dtype.h"
#include "engine/core/thread_pool.h"
#include "engine/model/config.h"
#include "engine/runtime/sampler.h"
#include "tests/cuda/cuda_test_support.h"
#include "tinyglm/dummy_hash.h"

namespace sparkglm {
namespace {

using namespace cuda_test;

TEST(CudaOperators, GemvMatchesCpuLinearAndRowsDoNotDependOnTheBatch) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  cuda::Gemm gemm;
  for (int64_t k : {512, 264}) {  // the tensor-core path, and the CUDA-core fallback (k % 512 != 0)
    const int64_t n = 40;         // not a multiple of 16 output rows
    std::vector<uint16_t> w(size_t(n * k)), x(size_t(32 * k));
    const auto wf = uniform(1, w.size(), 0.0f, 0.2f), xf = uniform(2, x.size(), 0.0f, 1.0f);
    for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(wf[i]);
    for (size_t i = 0; i < x.size(); ++i) x[i] = f32_to_bf16(xf[i]);
    auto dw = to_device(w), dx = to_device(x);
    cuda::DeviceBuffer dy(size_t(32 * n * 4));
    std::vector<float> x32(x.size()), want(size_t(32 * n));
    for (size_t i = 0; i < x.size(); ++i) x32[i] = bf16_to_f32(x[i]);
    ThreadPool pool(1);
    cpu::linear(x32.data(), 32, Linear{DType::kBF16, n, k, w.data()}, want.data(), pool);
    gemm.decode(static_cast<uint16_t*>(dx.data()), 32, static_cast<uint16_t*>(dw.data()), n, k,
                static_cast<float*>(dy.data()), nullptr);
    const auto all = to_host<float>(dy, size_t(32 * n));
    EXPECT_LT(nmse(all, want), 1e-9) << "k " << k;
    for (int64_t m : {1, 3, 9, 17}) {
      SPARKGLM_CUDA_CHECK(cudaMemset(dy.data(), 0xff, dy.bytes()));
      gemm.decode(static_cast<uint16_t*>(dx.data()), m, static_cast<uint16_t*>(dw.data()), n, k,
                  static_cast<float*>(dy.data()), nullptr);
      const auto part = to_host<float>(dy, size_t(m * n));
      EXPECT_EQ(std::memcmp(part.data(), all.data(), part.size() * 4), 0)
          << "k " << k << " m " << m;
    }
  }
}

// The streamed GEMV (GemvKernel::kStream) feeds the same values to the same MMAs as the
// 2026-12-02 kernel (kRegisters): the same bits, at every tile count (1-32 rows), for a warp's k of
// half a stage, whole stages and a stage and a half, with and without the split over blocks, and
// with a ragged last tile of W rows.
TEST(CudaOperators, StreamedGemvMatchesTheRegisterKernelBitForBit) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  cuda::Gemm gemm;
  struct Shape {
    int64_t n, k;
  };
  // k per warp without a split: 128, 384, 1024; Gemm::decode splits the few-row ones.
  for (const Shape s : {Shape{40, 512}, Shape{72, 1536}, Shape{1000, 4096}, Shape{4104, 4096}}) {
    std::vector<uint16_t> w(size_t(s.n * s.k)), x(size_t(32 * s.k));
    const auto wf = uniform(3, w.size(), 0.0f, 0.2f), xf = uniform(4, x.size(), 0.0f, 1.0f);
    for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(wf[i]);
    for (size_t i = 0; i < x.size(); ++i) x[i] = f32_to_bf16(xf[i]);
    auto dw = to_device(w), dx = to_device(x);
    cuda::DeviceBuffer dy(size_t(32 * s.n * 4));
    const auto* xp = static_cast<const uint16_t*>(dx.data());
    const auto* wp = static_cast<const uint16_t*>(dw.data());
    auto* yp = static_cast<float*>(dy.data());
    for (int64_t m : {1, 5, 8, 9, 16, 17, 24, 25, 32}) {
      for (bool split : {false, true}) {
        std::vector<float> got[2];
        for (auto kernel : {cuda::GemvKernel::kStream, cuda::GemvKernel::kRegisters}) {
          SPARKGLM_CUDA_CHECK(cudaMemset(dy.data(), 0xff, dy.bytes()));
          if (split) {
            gemm.decode(xp, m, wp, s.n, s.k, yp, nullptr, kernel);
          } else {
            cuda::gemv_bf16(xp, m, wp, s.n, s.k, yp, nullptr, kernel);
          }
          got[kernel == cuda::GemvKernel::kRegisters] = to_host<float>(dy, size_t(m * s.n));
        }
        EXPECT_EQ(std::memcmp(got[0].data(), got[1].data(), got[0].size() * 4), 0)
            << "n " << s.n << " k " << s.k << " m " << m << (split ? " through decode" : "");
        EXPECT_TRUE(std::all_of(got[0].begin(), got[0].end(), [](float v) { return v == v; }))
            << "an output was left unwritten: n " << s.n << " k " << s.k << " m " << m;
      }
    }
  }
}

// Gemm::decode_group: each part's outputs are, bit for bit, what its own decode() writes, for
// parts of their own inputs, widths and depths (CUDA-core parts sharing one launch, one on the
// tensor-core path beside them), at row counts of one tile, ragged tiles and two 32-row pieces.
TEST(CudaOperators, GroupedGemvPartsKeepTheBitsOfTheirOwnLaunches) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  cuda::Gemm gemm;
  struct Shape {
    int64_t n, k;
  };
  // tinyglm's MLA group (latent 40 of 264 here, a 1-row gate, a short-k factor) and a 512-k part.
  const Shape shapes[cuda::kGemvGroupMax] = {{40, 264}, {1, 256}, {100, 32}, {48, 512}};
  const int64_t max_m = 40;
  std::vector<cuda::DeviceBuffer> xs, ws, ys;
  for (int i = 0; i < cuda::kGemvGroupMax; ++i) {
    std::vector<uint16_t> w(size_t(shapes[i].n * shapes[i].k)), x(size_t(max_m * shapes[i].k));
    const auto wf = uniform(10 + i, w.size(), 0.0f, 0.2f);
    const auto xf = uniform(20 + i, x.size(), 0.0f, 1.0f);
    for (size_t j = 0; j < w.size(); ++j) w[j] = f32_to_bf16(wf[j]);
    for (size_t j = 0; j < x.size(); ++j) x[j] = f32_to_bf16(xf[j]);
    ws.push_back(to_device(w));
    xs.push_back(to_device(x));
    ys.emplace_back(size_t(max_m * shapes[i].n * 4));
  }
  for (int count : {1, 3, 4}) {
    for (int64_t m : {1, 2, 3, 5, 9, 33, 40}) {
      cuda::GemvPart parts[cuda::kGemvGroupMax];
      std::vector<std::vector<float>> want(static_cast<size_t>(count));
      for (int i = 0; i < count; ++i) {
        parts[i] = cuda::GemvPart{static_cast<const uint16_t*>(xs[size_t(i)].data()),
                                  static_cast<const uint16_t*>(ws[size_t(i)].data()), shapes[i].n,
                                  shapes[i].k, static_cast<float*>(ys[size_t(i)].data())};
        SPARKGLM_CUDA_CHECK(cudaMemset(ys[size_t(i)].data(), 0xff, ys[size_t(i)].bytes()));
        gemm.decode(parts[i].x, m, parts[i].w, parts[i].n, parts[i].k, parts[i].y, nullptr);
        want[size_t(i)] = to_host<float>(ys[size_t(i)], size_t(m * shapes[i].n));
        SPARKGLM_CUDA_CHECK(cudaMemset(ys[size_t(i)].data(), 0xff, ys[size_t(i)].bytes()));
      }
      gemm.decode_group(parts, count, m, nullptr);
      for (int i = 0; i < count; ++i) {
        const auto got = to_host<float>(ys[size_t(i)], size_t(m * shapes[i].n));
        EXPECT_EQ(std::memcmp(got.data(), want[size_t(i)].data(), got.size() * 4), 0)
            << "part " << i << " (n " << shapes[i].n << ", k " << shapes[i].k << ") of " << count
            << ", m " << m;
        EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float v) { return v == v; }))
            << "part " << i << " left an output unwritten, m " << m;
      }
    }
  }
}

// Prefill rows: the fixed-tile GEMM, within tolerance of the CPU and, row for row, the same bits
// whatever the number of rows sharing the product (1 to 700, ragged tiles included); a weight of
// n % 8 != 0 columns takes the CUDA-core kernel with the same promise.
TEST(CudaOperators, PrefillRowsDoNotDependOnHowManyRowsShareTheProduct) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  cuda::Gemm gemm;
  const int64_t rows = 700, k = 512;
  for (int64_t n : {264, 1}) {
    std::vector<uint16_t> w(size_t(n * k)), x(size_t(rows * k));
    const auto wf = uniform(5, w.size(), 0.0f, 0.2f), xf = uniform(6, x.size(), 0.0f, 1.0f);
    for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(wf[i]);
    for (size_t i = 0; i < x.size(); ++i) x[i] = f32_to_bf16(xf[i]);
    auto dw = to_device(w), dx = to_device(x);
    cuda::DeviceBuffer dy(size_t(rows * n * 4));
    gemm.prefill(static_cast<uint16_t*>(dx.data()), rows, static_cast<uint16_t*>(dw.data()), n, k,
                 static_cast<float*>(dy.data()), nullptr);
    const auto all = to_host<float>(dy, size_t(rows * n));
    std::vector<float> x32(x.size()), want(size_t(rows * n));
    for (size_t i = 0; i < x.size(); ++i) x32[i] = bf16_to_f32(x[i]);
    ThreadPool pool(1);
    cpu::linear(x32.data(), rows, Linear{DType::kBF16, n, k, w.data()}, want.data(), pool);
    EXPECT_LT(nmse(all, want), 1e-9) << "n " << n;
    for (int64_t first : {0, 63, 130})
      for (int64_t m : {1, 2, 65, 129, 511}) {
        if (first + m > rows) continue;
        SPARKGLM_CUDA_CHECK(cudaMemset(dy.data(), 0xff, dy.bytes()));
        gemm.prefill(static_cast<uint16_t*>(dx.data()) + first * k, m,
                     static_cast<uint16_t*>(dw.data()), n, k, static_cast<float*>(dy.data()),
                     nullptr);
        const auto part = to_host<float>(dy, size_t(m * n));
        EXPECT_EQ(std::memcmp(part.data(), all.data() + first * n, part.size() * 4), 0)
            << "n " << n << " rows " << first << ".." << first + m;
      }
  }
}

// mla_decode at one geometry: `heads` heads of R = r (fp8_g128 records at R = 512 only).
void check_mla_decode(int heads, int r) {
  const int rows = 3, block = 16, context = 200;
  const int blocks_per_row = (context + block - 1) / block, total = rows * blocks_per_row;
  std::vector<int32_t> table(static_cast<size_t>(total));
  for (int i = 0; i < total; ++i) table[size_t(i)] = (i * 7) % total;  // scattered, a bijection
  const auto lat = uniform(3, size_t(rows) * context * r, 0.0f, 2.0f);
  const auto qt = uniform(4, size_t(rows) * heads * r, 0.0f, 1.0f);
  const std::vector<int32_t> lengths = {1, 33, 200};
  // Row 2 attends an explicit ascending list (a DSA selection); rows 0 and 1 are dense.
  std::vector<int32_t> list(size_t(rows) * context, 0);
  for (int j = 0; j < 200; ++j) list[size_t(2 * context + j)] = j;
  for (auto format : {cuda::LatentFormat::kBF16, cuda::LatentFormat::kFp8G128}) {
    if (r != cuda::kMlaLatentDim && format != cuda::LatentFormat::kBF16) continue;
    const int64_t rec = cuda::latent_record_bytes(format, r);
    std::vector<uint8_t> pages(size_t(total) * block * size_t(rec));
    std::vector<float> back(lat.size());
    for (int row = 0; row < rows; ++row)
      for (int pos = 0; pos < context; ++pos) {
        uint8_t* out = &pages[(size_t(table[size_t(row * blocks_per_row + pos / block)]) * block +
                               size_t(pos % block)) *
                              size_t(rec)];
        const size_t at = (size_t(row) * context + size_t(pos)) * r;
        cuda_test::encode_latent(format, &lat[at], int(r), out, &back[at]);
      }
    std::vector<float> want(size_t(rows) * heads * r, 0.0f);
    for (int row = 0; row < rows; ++row)
      for (int h = 0; h < heads; ++h) {
        const int n = lengths[size_t(row)];
        std::vector<float> p(static_cast<size_t>(n));
        const float* q = &qt[(size_t(row) * heads + size_t(h)) * r];
        for (int j = 0; j < n; ++j)
          p[size_t(j)] = 0.0625f * cpu::dot(q, &back[(size_t(row) * context + size_t(j)) * r], r);
        cpu::softmax(p.data(), n);
        float* o = &want[(size_t(row) * heads + size_t(h)) * r];
        for (int j = 0; j < n; ++j)
          for (int e = 0; e < r; ++e)
            o[e] = std::fma(p[size_t(j)], back[(size_t(row) * context + size_t(j)) * r + size_t(e)],
                            o[e]);
      }
    auto dq = to_device(qt), dp = to_device(pages), dt = to_device(table), dl = to_device(lengths);
    cuda::DeviceBuffer dws(size_t(cuda::mla_decode_workspace_floats(rows, heads, context, r)) * 4);
    cuda::DeviceBuffer dout(size_t(rows) * heads * r * 4);
    for (bool with_list : {false, true}) {
      auto dlist = to_device(list);
      cuda::MlaDecodeArgs a;
      a.rows = rows;
      a.heads = heads;
      a.q_tilde = static_cast<float*>(dq.data());
      a.pages = static_cast<uint8_t*>(dp.data());
      a.format = format;
      a.block_size = block;
      a.block_table = static_cast<int32_t*>(dt.data());
      a.table_stride = blocks_per_row;
      a.lengths = static_cast<int32_t*>(dl.data());
      a.attended = with_list ? static_cast<int32_t*>(dlist.data()) : nullptr;
      a.max_len = context;
      a.scale = 0.0625f;
      a.workspace = static_cast<float*>(dws.data());
      a.o_bar = static_cast<float*>(dout.data());
      a.latent_dim = r;
      SPARKGLM_CUDA_CHECK(cudaMemset(dout.data(), 0xff, dout.bytes()));
      cuda::mla_decode(a, nullptr);
      const auto got = to_host<float>(dout, want.size());
      // With the list, only row 2's list is meaningful (rows 0 and 1 would attend position 0
      // repeatedly), so the list run compares row 2 alone.
      const size_t per_row = size_t(heads) * r;
      const size_t from = with_list ? 2 * per_row : 0;
      const std::vector<float> g(got.begin() + long(from), got.end()),
          w(want.begin() + long(from), want.end());
      EXPECT_LT(nmse(g, w), 1e-5) << "heads " << heads << " R " << r << " record "
                                  << cuda::latent_record_bytes(format, r) << " list " << with_list;
      if (with_list) continue;
      // Rows 0 and 1 (lengths 1 and 33, or 0 and 33) fit one split: a launch of them alone at that
      // bucket writes ō from its split kernel, without the combine, and must give the bits the
      // two-split launch above gives them (and 0 for an empty row).
      for (const std::vector<int32_t>& lens : {lengths, std::vector<int32_t>{0, 33, 200}}) {
        auto dlens = to_device(lens);
        cuda::MlaDecodeArgs two = a;
        two.lengths = static_cast<int32_t*>(dlens.data());
        cuda::MlaDecodeArgs one = two;
        one.rows = 2;
        one.max_len = cuda::kMlaSplitTokens;
        std::vector<std::vector<float>> outs;
        for (const cuda::MlaDecodeArgs& args : {two, one}) {
          SPARKGLM_CUDA_CHECK(cudaMemset(dout.data(), 0xff, dout.bytes()));
          cuda::mla_decode(args, nullptr);
          outs.push_back(to_host<float>(dout, 2 * per_row));
        }
        EXPECT_EQ(0, std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * 4))
            << "heads " << heads << " R " << r << " first length " << lens[0];
        if (lens[0] == 0) {
          EXPECT_EQ(std::vector<float>(per_row, 0.0f),
                    std::vector<float>(outs[1].begin(), outs[1].begin() + long(per_row)));
        }
      }
    }
  }
}

// Production's 16-head tiles of R = 512, and tinyglm-micro's 4 heads of R = 64 (padded to the
// MMA's 16 rows with zero queries that are never stored); a launch of one split against two.
TEST(CudaOperators, MlaDecodeMatchesTheReferenceOverScatteredPagesAndLists) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  check_mla_decode(16, cuda::kMlaLatentDim);
  check_mla_decode(4, cuda::kMlaMicroLatentDim);
}

// kda_recurrent at head dim kd against cpu::kda_recurrent_run.
void check_kda_recurrence(int kd) {
  const int heads = 2;
  const int64_t hk = int64_t(heads) * kd;
  for (int n : {1, 5}) {  // the decode kernel and the prefill kernel
    const int seqs = 2;
    const int64_t rows = int64_t(seqs) * n;
    auto q = uniform(5, size_t(rows * hk), 0.0f, 1.0f),
         k = uniform(6, size_t(rows * hk), 0.0f, 1.0f);
    const auto v = uniform(7, size_t(rows * hk), 0.0f, 1.0f);
    const auto gz = uniform(8, size_t(rows * hk), -2.5f, 2.5f);
    const auto beta = uniform(9, size_t(rows * heads), 0.5f, 0.5f);
    const auto s0 = uniform(10, size_t(seqs * hk * kd), 0.0f, 0.1f);
    std::vector<float> g(gz.size()), decay(gz.size());
    for (size_t i = 0; i < gz.size(); ++i)
      g[i] = -5.0f * cpu::sigmoid(gz[i]), decay[i] = std::exp(g[i]);
    for (int64_t i = 0; i < rows * heads; ++i) {
      cpu::l2_normalize(&q[size_t(i * kd)], kd, 1e-6f);
      cpu::l2_normalize(&k[size_t(i * kd)], kd, 1e-6f);
    }
    std::vector<float> o(q.size()), state(s0);
    for (int s = 0; s < seqs; ++s)
      for (int h = 0; h < heads; ++h) {
        cpu::KdaHeadRun run;
        run.n = n, run.k_dim = kd, run.v_dim = kd, run.stride = hk, run.beta_stride = heads;
        const size_t at = size_t(s * n * hk + h * kd);
        run.q = &q[at], run.k = &k[at], run.v = &v[at], run.g = &g[at], run.o = &o[at];
        run.beta = &beta[size_t(s * n * heads + h)];
        cpu::kda_recurrent_run(run, &state[size_t((s * heads + h) * kd * kd)]);
      }
    auto dq = to_device(q), dk = to_device(k), dv = to_device(v), dd = to_device(decay);
    auto db = to_device(beta), ds = to_device(s0);
    cuda::DeviceBuffer dout(q.size() * 4);
    cuda::KdaBatch batch{seqs, n, heads};
    batch.head_dim = kd;
    cuda::kda_recurrent(batch, static_cast<float*>(dq.data()), static_cast<float*>(dk.data()),
                        static_cast<float*>(dv.data()), static_cast<float*>(dd.data()),
                        static_cast<float*>(db.data()), static_cast<float*>(ds.data()),
                        static_cast<float*>(dout.data()), nullptr);
    EXPECT_LT(nmse(to_host<float>(dout, o.size()), o), 1e-10) << "K " << kd << " n " << n;
    EXPECT_LT(nmse(to_host<float>(ds, state.size()), state), 1e-10) << "K " << kd << " n " << n;
  }
}

// Production's K = 128 (decode and prefill tilings) and tinyglm-micro's K = 32 (one tiling).
TEST(CudaOperators, KdaRecurrenceMatchesTheCpuTokenByTokenForm) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  check_kda_recurrence(cuda::kKdaHeadDim);
  check_kda_recurrence(cuda::kKdaMicroHeadDim);
}

TEST(CudaOperators, RouterKeepsTheTieRuleAndNeverChoosesNan) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const ModelConfig c = preset_config("glm-5.3-flash");
  const int e = c.n_routed_experts, top = c.num_experts_per_tok;
  std::vector<float> logits(size_t(2 * e), 0.5f);  // row 0: all tied
  const auto r1 = uniform(11, size_t(e), 0.0f, 3.0f);
  for (int i = 0; i < e; ++i) logits[size_t(e + i)] = i % 3 == 0 ? NAN : r1[size_t(i)];
  const std::vector<float> bias(static_cast<size_t>(e), 0.0f);
  auto dl = to_device(logits), dbias = to_device(bias);
  cuda::DeviceBuffer de(size_t(2 * top * 4)), dw(size_t(2 * top * 4));
  cuda::route_experts(static_cast<float*>(dl.data()), static_cast<float*>(dbias.data()), 2, e, top,
                      c.norm_topk_prob, c.routed_scaling_factor, static_cast<int32_t*>(de.data()),
                      static_cast<float*>(dw.data()), nullptr);
  const auto experts = to_host<int32_t>(de, size_t(2 * top));
  const auto weights = to_host<float>(dw, size_t(2 * top));
  for (int row = 0; row < 2; ++row) {
    std::vector<cpu::ExpertChoice> want(static_cast<size_t>(top));
    cpu::select_experts(c, &logits[size_t(row * e)], bias.data(), want.data());
    for (int i = 0; i < top; ++i) {
      EXPECT_EQ(experts[size_t(row * top + i)], want[size_t(i)].expert) << row << " " << i;
      EXPECT_NEAR(weights[size_t(row * top + i)], want[size_t(i)].weight, 1e-6f);
    }
  }
  for (int i = 0; i < top; ++i) EXPECT_EQ(experts[size_t(i)], i);  // ties: lowest index first
}

// At a vocabulary the split form spreads over blocks (5,003: 3) and one of a single block
// (tinyglm-micro's 320: one launch, the block writes the token).
TEST(CudaOperators, GreedyTakesTheLowestIdAmongTheMaxima) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (const int64_t vocab : {int64_t(5003), int64_t(320)}) {  // not multiples of the block
    const int64_t hi = vocab * 4 / 5, last = vocab - 4;
    std::vector<float> logits = uniform(12, size_t(2 * vocab), 0.0f, 4.0f);
    logits[17] = NAN;
    logits[size_t(hi)] = 9.0f;
    logits[size_t(last)] = 9.0f;
    for (int64_t i = 0; i < vocab; ++i) logits[size_t(vocab + i)] = i == 3 ? NAN : -INFINITY;
    logits[size_t(vocab + vocab - 1)] = -1.0f;  // row 1's only finite logit is the last id
    auto dl = to_device(logits);
    cuda::DeviceBuffer dt(8), keys(2 * sizeof(unsigned long long));
    ASSERT_EQ(cudaMemset(keys.data(), 0, keys.bytes()), cudaSuccess);
    // The two rows' picks, in one launch (split: false) or the split form.
    auto greedy = [&](const cuda::DeviceBuffer& rows, bool split) {
      EXPECT_EQ(cudaMemset(dt.data(), 0x7f, dt.bytes()), cudaSuccess);
      cuda::sample_greedy(static_cast<const float*>(rows.data()), 2, vocab,
                          static_cast<int32_t*>(dt.data()), nullptr,
                          split ? static_cast<unsigned long long*>(keys.data()) : nullptr);
      return to_host<int32_t>(dt, 2);
    };
    for (bool split : {false, true}) {
      const auto tokens = greedy(dl, split);
      EXPECT_EQ(tokens[0], hi) << "split " << split << " vocab " << vocab;
      EXPECT_EQ(tokens[1], vocab - 1) << "split " << split << " vocab " << vocab;
    }
    // Signed zeros are equal values: the lower id wins in both forms; an all -inf/NaN row gives -1.
    std::vector<float> zeros(size_t(2 * vocab), -1.0f);
    zeros[100] = -0.0f;
    zeros[200] = 0.0f;
    for (int64_t i = 0; i < vocab; ++i) zeros[size_t(vocab + i)] = i % 2 ? NAN : -INFINITY;
    auto dz = to_device(zeros);
    for (bool split : {false, true}) {
      const auto tokens = greedy(dz, split);
      EXPECT_EQ(tokens[0], 100) << "split " << split << " vocab " << vocab;
      EXPECT_EQ(tokens[1], -1) << "split " << split << " vocab " << vocab;
    }
    // The split form leaves its scratch zeroed for the next call.
    const auto left = to_host<unsigned long long>(keys, 2);
    EXPECT_EQ(left[0], 0u) << "vocab " << vocab;
    EXPECT_EQ(left[1], 0u) << "vocab " << vocab;
  }
}

// The CPU sampler's token for `s` (draw index skipped by accepting tokens; penalties are off).
TEST(CudaOperators, EmbeddingCopiesTheRowIntoEveryStreamAndMarksBadIds) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const int64_t vocab = 10, d = 64;
  std::vector<uint16_t> table(size_t(vocab * d));
  for (size_t i = 0; i < table.size(); ++i) table[i] = f32_to_bf16(float(i) * 0.25f);
  const std::vector<int32_t> ids = {9, 0, 10};  // the last id is out of range
  auto dt = to_device(table), di = to_device(ids);
  cuda::DeviceBuffer out(size_t(3 * 4 * d * 4));
  cuda::embed_tokens(static_cast<uint16_t*>(dt.data()), vocab, d, static_cast<int32_t*>(di.data()),
                     3, 4, static_cast<float*>(out.data()), nullptr);
  const auto got = to_host<float>(out, size_t(3 * 4 * d));
  for (int s = 0; s < 4; ++s)
    for (int64_t i = 0; i < d; ++i) {
      EXPECT_EQ(got[size_t(s * d + i)], bf16_to_f32(table[size_t(9 * d + i)]));
      EXPECT_EQ(got[size_t((4 + s) * d + i)], bf16_to_f32(table[size_t(i)]));
      EXPECT_TRUE(std::isnan(got[size_t((8 + s) * d + i)]));
    }
}

}  // namespace
}  // namespace sparkglm
