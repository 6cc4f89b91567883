// The prefill and sampling CUDA operators against the CPU reference: seeded top-k/top-p/min-p
// sampling draws the CPU sampler's token, MoE prefill groups tokens by expert and combines as the
// CPU does, MLA prefill is causal and equal to decode at each position. They skip without a device.
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

// The kept set written the plain way: sort by (weight desc, id asc), cut by top-k, then the
// smallest prefix reaching top_p of the top-k mass, then min_p.
std::set<int32_t> kept_set(const cuda::SampleParams& s, const float* x, int64_t vocab) {
  float m = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i)
    if (x[i] > m) m = x[i];
  std::vector<float> w(size_t(vocab), 0.0f);
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < vocab; ++i) {
    if (std::isnan(x[i])) continue;
    w[size_t(i)] = exp_nonpositive((x[i] - m) / s.temperature);
    if (w[size_t(i)] > 0.0f) ids.push_back(int32_t(i));
  }
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return w[a] > w[b]; });
  if (s.top_k > 0 && s.top_k < int64_t(ids.size())) ids.resize(size_t(s.top_k));
  double mass = 0.0;
  for (int32_t id : ids) mass += w[size_t(id)];
  double run = 0.0;
  size_t n = 0;
  while (n < ids.size() && run < double(s.top_p) * mass) run += w[size_t(ids[n++])];
  ids.resize(std::max<size_t>(n, 1));
  std::set<int32_t> kept;
  for (int32_t id : ids)
    if (w[size_t(id)] >= s.min_p) kept.insert(id);
  return kept;
}

TEST(CudaOperators, SeededSamplingDrawsTheCpuSamplersTokenFromTheKeptSet) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const int64_t vocab = 3001, rows = 64;  // vocab not a multiple of the 256-token draw block
  std::vector<float> logits = uniform(31, size_t(rows * vocab), 0.0f, 6.0f);
  std::vector<cuda::SampleParams> params(static_cast<size_t>(rows));
  const float ts[] = {0.0f, 0.5f, 1.0f, 1.7f};
  const int32_t ks[] = {0, 1, 7, 300, int32_t(vocab)};
  const float ps[] = {1.0f, 0.3f, 0.9f};
  const float mins[] = {0.0f, 0.2f};
  for (int64_t r = 0; r < rows; ++r) {
    float* x = &logits[size_t(r * vocab)];
    if (r % 4 == 3)  // tied maxima across the cuts, NaN and -inf around them
      for (int64_t i = 0; i < 12; ++i)
        x[5 + 211 * i] = 7.0f, x[6 + 211 * i] = NAN, x[7 + i] = -INFINITY;
    params[size_t(r)] = {
        ts[r % 4],      ps[r % 3], mins[(r / 3) % 2], ks[r % 5], 977u * uint64_t(r) + 1,
        uint64_t(r % 6)};
  }
  logits[size_t(9 * vocab + 42)] = INFINITY;  // a +inf logit takes all the mass
  auto dl = to_device(logits);
  auto dp = to_device(params);
  cuda::DeviceBuffer scratch(cuda::sample_scratch_bytes(rows, vocab)), dt(size_t(rows) * 4);
  auto sample = [&] {
    cuda::sample_top_k_top_p(static_cast<float*>(dl.data()), rows, vocab,
                             static_cast<cuda::SampleParams*>(dp.data()), scratch.data(),
                             static_cast<int32_t*>(dt.data()), nullptr);
    return to_host<int32_t>(dt, size_t(rows));
  };
  const auto tokens = sample();
  EXPECT_EQ(sample(), tokens);  // the same seed and index draw the same token
  for (int64_t r = 0; r < rows; ++r) {
    const cuda::SampleParams& s = params[size_t(r)];
    const float* x = &logits[size_t(r * vocab)];
    EXPECT_EQ(tokens[size_t(r)], cuda::cpu_sampler_token(s, x, vocab)) << "row " << r;
    if (s.temperature > 0.0f && r != 9) {
      EXPECT_TRUE(kept_set(s, x, vocab).count(tokens[size_t(r)])) << "row " << r;
    }
  }
  EXPECT_EQ(tokens[9], 42);

  // One row under 200 seeds with top_k 5: every draw inside the top 5, more than one of them drawn.
  const int64_t seeds = 200;
  std::vector<float> same(static_cast<size_t>(seeds * vocab));
  for (int64_t r = 0; r < seeds; ++r)
    std::copy(logits.begin() + vocab, logits.begin() + 2 * vocab, same.begin() + r * vocab);
  std::vector<cuda::SampleParams> seeded(static_cast<size_t>(seeds));
  for (int64_t r = 0; r < seeds; ++r) seeded[size_t(r)] = {1.0f, 1.0f, 0.0f, 5, uint64_t(r), 0};
  auto dl2 = to_device(same);
  auto dp2 = to_device(seeded);
  cuda::DeviceBuffer scratch2(cuda::sample_scratch_bytes(seeds, vocab)), dt2(size_t(seeds) * 4);
  cuda::sample_top_k_top_p(static_cast<float*>(dl2.data()), seeds, vocab,
                           static_cast<cuda::SampleParams*>(dp2.data()), scratch2.data(),
                           static_cast<int32_t*>(dt2.data()), nullptr);
  const auto drawn = to_host<int32_t>(dt2, size_t(seeds));
  const auto top5 = kept_set(seeded[0], &same[0], vocab);
  ASSERT_EQ(top5.size(), 5u);
  std::set<int32_t> distinct(drawn.begin(), drawn.end());
  for (int32_t t : drawn) EXPECT_TRUE(top5.count(t)) << t;
  EXPECT_GE(distinct.size(), 3u);

  // A row with nothing to draw gives -1 (the CPU sampler throws).
  std::vector<float> empty(static_cast<size_t>(vocab), NAN);
  auto de = to_device(empty);
  cuda::sample_top_k_top_p(static_cast<float*>(de.data()), 1, vocab,
                           static_cast<cuda::SampleParams*>(dp.data()), scratch.data(),
                           static_cast<int32_t*>(dt.data()), nullptr);
  EXPECT_EQ(to_host<int32_t>(dt, 1)[0], -1);
}

TEST(CudaOperators, MoePrefillGroupsPairsByExpertAndMatchesTheCpuCombine) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  // Expert 0 takes 45 rows (a partial row tile), the others fewer and expert 4 none: the grouped
  // GEMM meets partial and empty groups.
  const int E = 5, k = 2;
  const int64_t T = 50, D = 64, W = 40;
  const float limit = 7.0f;
  std::vector<uint16_t> gu(size_t(E + 1) * size_t(2 * W * D)), dn(size_t(E + 1) * size_t(D * W));
  const auto guf = uniform(41, gu.size(), 0.0f, 0.4f), dnf = uniform(42, dn.size(), 0.0f, 0.4f);
  for (size_t i = 0; i < gu.size(); ++i) gu[i] = f32_to_bf16(guf[i]);
  for (size_t i = 0; i < dn.size(); ++i) dn[i] = f32_to_bf16(dnf[i]);
  std::vector<uint16_t> xb(size_t(T * D));
  const auto xf = uniform(43, xb.size(), 0.0f, 2.0f);
  for (size_t i = 0; i < xb.size(); ++i) xb[i] = f32_to_bf16(xf[i]);
  std::vector<float> x(xb.size());
  for (size_t i = 0; i < xb.size(); ++i) x[i] = bf16_to_f32(xb[i]);
  std::vector<int32_t> experts(size_t(T * k));
  std::vector<float> weights(size_t(T * k));
  for (int64_t t = 0; t < T; ++t) {
    experts[size_t(t * k)] = t < 45 ? 0 : 1;
    experts[size_t(t * k + 1)] = t % 7 == 0 ? -1 : (t % 11 == 0 ? E : 1 + int32_t(t % 3));
    weights[size_t(t * k)] = 0.25f + 0.01f * float(t);
    weights[size_t(t * k + 1)] = 0.5f;
  }
  auto d_gu = to_device(gu), d_dn = to_device(dn), d_x = to_device(xb);
  auto d_e = to_device(experts), d_w = to_device(weights);
  cuda::DeviceBuffer ws(cuda::moe_prefill_workspace_bytes(T, k, E, D, W)), out(size_t(T * D) * 4);
  cuda::MoePrefillArgs a;
  a.tokens = T, a.top_k = k, a.n_experts = E, a.hidden = D, a.width = W, a.clamp_limit = limit;
  a.x = static_cast<uint16_t*>(d_x.data());
  a.experts = static_cast<int32_t*>(d_e.data());
  a.weights = static_cast<float*>(d_w.data());
  const auto* gup = static_cast<const uint16_t*>(d_gu.data());
  const auto* dnp = static_cast<const uint16_t*>(d_dn.data());
  for (int e = 0; e < E; ++e) {
    a.gate_up.push_back(gup + int64_t(e) * 2 * W * D);
    a.down.push_back(dnp + int64_t(e) * D * W);
  }
  a.shared_gate_up = gup + int64_t(E) * 2 * W * D;
  a.shared_down = dnp + int64_t(E) * D * W;
  a.workspace = ws.data();
  a.out = static_cast<float*>(out.data());
  cuda::Gemm gemm;
  cuda::moe_experts_prefill(a, gemm, nullptr);
  const auto got = to_host<float>(out, size_t(T * D));
  cuda::moe_experts_prefill(a, gemm, nullptr);
  EXPECT_EQ(to_host<float>(out, size_t(T * D)), got);  // repeatable bit for bit

  ThreadPool pool(0);
  auto expert = [&](int e) {
    return SwiGluWeights{Linear{DType::kBF16, W, D, gu.data() + int64_t(e) * 2 * W * D},
                         Linear{DType::kBF16, W, D, gu.data() + int64_t(e) * 2 * W * D + W * D},
                         Linear{DType::kBF16, D, W, dn.data() + int64_t(e) * D * W}};
  };
  std::vector<float> want(size_t(T * D), 0.0f), y(static_cast<size_t>(D));
  for (int64_t t = 0; t < T; ++t) {
    float* o = &want[size_t(t * D)];
    for (int r = 0; r < k; ++r) {
      const int e = experts[size_t(t * k + r)];
      if (e < 0 || e >= E) continue;
      cpu::swiglu_forward(expert(e), &x[size_t(t * D)], 1, y.data(), pool, limit);
      for (int64_t d = 0; d < D; ++d) o[d] += weights[size_t(t * k + r)] * y[size_t(d)];
    }
    cpu::swiglu_forward(expert(E), &x[size_t(t * D)], 1, y.data(), pool, limit);
    for (int64_t d = 0; d < D; ++d) o[d] += y[size_t(d)];
  }
  EXPECT_LT(nmse(got, want), 1e-5);  // h enters the down projection as BF16
}

TEST(CudaOperators, MlaPrefillIsCausalAndEqualsDecodeAtEachPosition) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  // A 40-row chunk after 150 cached tokens, 16-token blocks in scattered order.
  const int heads = 16, r = cuda::kMlaLatentDim, block = 16, start = 150, rows = 40;
  const int context = start + rows, blocks = (context + block - 1) / block;
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  for (int i = 0; i < blocks; ++i) table[size_t(i)] = (i * 5) % blocks;  // 12 blocks: a bijection
  const auto lat = uniform(51, size_t(context) * r, 0.0f, 2.0f);
  const auto qt = uniform(52, size_t(rows) * heads * r, 0.0f, 1.0f);
  std::vector<uint16_t> pages(size_t(blocks) * block * r);
  std::vector<float> back(lat.size());
  for (int pos = 0; pos < context; ++pos)
    for (int i = 0; i < r; ++i) {
      const uint16_t b = f32_to_bf16(lat[size_t(pos) * r + size_t(i)]);
      pages[(size_t(table[size_t(pos / block)]) * block + size_t(pos % block)) * r + size_t(i)] = b;
      back[size_t(pos) * r + size_t(i)] = bf16_to_f32(b);
    }
  auto dq = to_device(qt), dp = to_device(pages), dt = to_device(table);
  cuda::DeviceBuffer ws(cuda::mla_prefill_workspace_bytes(rows, heads, start, blocks));
  cuda::DeviceBuffer out(size_t(rows) * heads * r * 4);
  cuda::MlaPrefillArgs a;
  a.rows = rows, a.heads = heads, a.start = start;
  a.q_tilde = static_cast<float*>(dq.data());
  a.pages = static_cast<uint8_t*>(dp.data());
  a.format = cuda::LatentFormat::kBF16;
  a.block_size = block;
  a.block_table = static_cast<int32_t*>(dt.data());
  a.table_len = blocks;
  a.scale = 0.0625f;
  a.workspace = ws.data();
  a.o_bar = static_cast<float*>(out.data());
  cuda::mla_prefill(a, nullptr);
  const auto got = to_host<float>(out, size_t(rows) * heads * r);

  std::vector<float> want(got.size(), 0.0f);
  for (int t = 0; t < rows; ++t)
    for (int h = 0; h < heads; ++h) {
      const int n = start + t + 1;  // causal
      std::vector<float> p(static_cast<size_t>(n));
      const float* q = &qt[(size_t(t) * heads + size_t(h)) * r];
      for (int j = 0; j < n; ++j) p[size_t(j)] = 0.0625f * cpu::dot(q, &back[size_t(j) * r], r);
      cpu::softmax(p.data(), n);
      float* o = &want[(size_t(t) * heads + size_t(h)) * r];
      for (int j = 0; j < n; ++j)
        for (int e = 0; e < r; ++e)
          o[e] = std::fma(p[size_t(j)], back[size_t(j) * r + size_t(e)], o[e]);
    }
  EXPECT_LT(nmse(got, want), 1e-5);

  // Row 17 alone, as a decode row at position start + 17: the same bits.
  const int t = 17;
  const std::vector<int32_t> len = {start + t + 1};
  auto dl = to_device(len);
  auto dq1 = to_device(std::vector<float>(qt.begin() + int64_t(t) * heads * r,
                                          qt.begin() + int64_t(t + 1) * heads * r));
  cuda::DeviceBuffer ws1(size_t(cuda::mla_decode_workspace_floats(1, heads, context)) * 4);
  cuda::DeviceBuffer out1(size_t(heads) * r * 4);
  cuda::MlaDecodeArgs d;
  d.rows = 1, d.heads = heads;
  d.q_tilde = static_cast<float*>(dq1.data());
  d.pages = static_cast<uint8_t*>(dp.data());
  d.format = cuda::LatentFormat::kBF16;
  d.block_size = block;
  d.block_table = static_cast<int32_t*>(dt.data());
  d.table_stride = blocks;
  d.lengths = static_cast<int32_t*>(dl.data());
  d.max_len = context;
  d.scale = 0.0625f;
  d.workspace = static_cast<float*>(ws1.data());
  d.o_bar = static_cast<float*>(out1.data());
  cuda::mla_decode(d, nullptr);
  const auto one = to_host<float>(out1, size_t(heads) * r);
  EXPECT_TRUE(std::equal(one.begin(), one.end(), got.begin() + int64_t(t) * heads * r));

  a.table_len = 2;  // too short for 190 tokens
  EXPECT_THROW(cuda::mla_prefill(a, nullptr), Error);
}

}  // namespace
}  // namespace sparkglm
