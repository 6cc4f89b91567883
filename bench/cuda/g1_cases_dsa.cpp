// G1 rows for the DSA indexer: pooled keys, pool scores (decode rows over an 8192-token context,
// and one or four over 1,048,576 tokens), and the attended-set selection across the dense/sparse
// edge, tails of 0-3 tokens, tied scores and NaN scores. Reference: cpu::pooled_index_key,
// cpu::index_pool_scores, cpu::select_attended.
#include <algorithm>
#include <cmath>
#include <span>

#include "bench/cuda/g1_harness.h"
#include "engine/backend/cpu/dsa_indexer.h"
#include "engine/backend/cuda/dsa_indexer.h"

namespace sparkglm::g1 {

namespace {

constexpr int kDi = cuda::kIndexDim, kPool = cuda::kIndexKpool;

void run_pool_keys(Harness& h, int64_t context) {
  const int64_t pools = context / kPool;
  const auto keys = host_uniform("dsa.keys", context * kDi, 0.0f, 2.0f);
  const auto gates = host_uniform("dsa.gates", context, 0.0f, 1.0f);
  const auto ape = host_uniform("dsa.ape", kPool, 0.0f, 0.5f);
  auto d_keys = upload(keys), d_gates = upload(gates), d_ape = upload(ape);
  auto d_out = device_alloc(size_t(pools * kDi * 4));
  std::vector<float> ref(size_t(pools * kDi));
  for (int64_t p = 0; p < pools; ++p) {
    const float* rows[kPool];
    for (int i = 0; i < kPool; ++i) rows[i] = &keys[size_t((p * kPool + i) * kDi)];
    cpu::pooled_index_key(rows, &gates[size_t(p * kPool)], ape.data(), kPool, kDi,
                          &ref[size_t(p * kDi)]);
  }
  OperatorCase c;
  c.op = "dsa.pool_keys";
  c.shape = "keys[" + std::to_string(context) + ",128] -> " + std::to_string(pools) + " pools";
  c.rows = pools;
  c.tolerance = 1e-12;
  c.bytes = double(context * (kDi + 1) * 4 + pools * kDi * 4);
  c.flops = double(context * kDi * 2);
  c.flops_on_tensor_cores = false;
  c.note = "one block per pool; why under the floor: a few MB at most, launch latency";
  const float *kp = ptr<float>(d_keys), *gp = ptr<float>(d_gates), *ap = ptr<float>(d_ape);
  float* op = ptr<float>(d_out);
  c.launch = [=](cudaStream_t s) { cuda::dsa_pool_keys(kp, gp, ap, pools, op, s); };
  c.outputs.push_back({"pooled", op, pools * kDi, false, 0, ref, {}});
  c.keep = {d_keys, d_gates, d_ape, d_out};
  h.run(c);
}

void run_scores(Harness& h, int64_t rows, bool decode, int64_t context = 8192) {
  const int heads = h.model().index_n_heads;
  const int64_t pools = context / kPool;
  const auto pooled = host_uniform("dsa.pooled", pools * kDi, 0.0f, 1.0f);
  const auto q = host_uniform("dsa.q", rows * heads * kDi, 0.0f, 1.0f);
  const auto w = host_uniform("dsa.w", rows * heads, 0.0f, 1.0f);
  auto d_pooled = upload(pooled), d_q = upload(q), d_w = upload(w);
  auto d_scores = device_alloc(size_t(rows * pools * 4));
  std::vector<float> ref;
  for (int64_t r = 0; r < rows; ++r) {
    const auto s = cpu::index_pool_scores(&q[size_t(r * heads * kDi)], &w[size_t(r * heads)], heads,
                                          kDi, pooled.data(), pools, h.pool());
    ref.insert(ref.end(), s.begin(), s.end());
  }
  OperatorCase c;
  c.op = "dsa.pool_scores";
  c.shape = std::to_string(rows) + " rows x " + std::to_string(pools) + " pools, " +
            std::to_string(heads) + " heads x " + std::to_string(kDi);
  c.rows = rows;
  c.decode = decode;
  c.tolerance = 1e-10;
  c.bytes = double(pools * kDi * 4 + rows * (heads * kDi + heads + pools) * 4);
  c.flops = double(rows * pools) * heads * (2.0 * kDi + 2);
  c.flops_on_tensor_cores = false;
  c.note =
      "FP32 CUDA cores by design (each score is one FMA chain over increasing c and the heads "
      "are added in order, so a row's selection never depends on its batch): one block per row "
      "below 4 rows, from 4 rows a tiled outer-product kernel (4 rows x 32 heads x 128 pools, "
      "bitwise the same scores); why under the floor: 1-2 rows are one launch's latency, the "
      "tiled kernel reaches ~45 % of FP32 peak";
  const float *qp = ptr<float>(d_q), *wp = ptr<float>(d_w), *pp = ptr<float>(d_pooled);
  float* sp = ptr<float>(d_scores);
  c.launch = [=](cudaStream_t s) {
    cuda::dsa_pool_scores(qp, wp, rows, heads, {pp}, pools, sp, s);
  };
  c.outputs.push_back({"scores", sp, rows * pools, false, pools, ref, {}});
  c.keep = {d_pooled, d_q, d_w, d_scores};
  h.run(c);
}

void run_select(Harness& h) {
  const int topk = h.model().index_topk_pools();
  // Query positions: the last dense one (512 pools, 2051 tokens), the first sparse ones, tails of
  // 0-3 tokens at an 8192-token context, a row of tied scores and one with NaN scores.
  const std::vector<int32_t> positions = {2050, 2051, 2052, 8187, 8188, 8189, 8190, 8191, 8191};
  const int64_t rows = int64_t(positions.size()), stride = 2048;  // score row stride (pools)
  auto scores = host_uniform("dsa.sel_scores", rows * stride, 0.0f, 1.0f);
  for (int64_t p = 0; p < stride; ++p) scores[size_t(7 * stride + p)] = 0.5f;  // all tied
  for (int64_t p = 0; p < stride; p += 3) scores[size_t(8 * stride + p)] = NAN;
  for (int64_t p = 0; p < stride; p += 7) scores[size_t(3 * stride + p)] = 0.25f;  // some ties
  const int64_t out_stride = topk * kPool + 3;
  std::vector<float> ref_pos;
  std::vector<int64_t> checked;
  std::vector<float> ref_counts;
  for (int64_t r = 0; r < rows; ++r) {
    const auto sel =
        cpu::select_attended(std::span<const float>(&scores[size_t(r * stride)], size_t(stride)),
                             positions[size_t(r)], kPool, topk);
    for (size_t i = 0; i < sel.size(); ++i) {
      ref_pos.push_back(float(sel[i]));
      checked.push_back(r * out_stride + int64_t(i));
    }
    ref_counts.push_back(float(sel.size()));
  }
  auto d_scores = upload(scores), d_pos = upload(positions);
  auto d_out = device_alloc(size_t(rows * out_stride * 4)),
       d_counts = device_alloc(size_t(rows * 4));
  OperatorCase c;
  c.op = "dsa.select";
  c.shape = "9 queries: dense edge 2050, sparse 2051-2052, tails 0-3 at 8188-8191, ties, NaN";
  c.rows = rows;
  c.tolerance = 0;
  c.bytes = double(rows * stride * 4 + rows * out_stride * 4);
  c.flops = double(rows) * stride * 512;
  c.flops_on_tensor_cores = false;
  c.note =
      "4-pass radix select over order-preserving keys, one 1024-thread block per query, the tie "
      "rule at the threshold key; why under the floor: a handful of queries is latency (block "
      "barriers between passes), not bytes or FLOPs";
  const float* sp = ptr<float>(d_scores);
  const int32_t* pp = ptr<int32_t>(d_pos);
  int32_t *op = ptr<int32_t>(d_out), *cp = ptr<int32_t>(d_counts);
  c.launch = [=](cudaStream_t s) {
    cuda::dsa_select(sp, stride, pp, rows, stride, topk, op, out_stride, cp, nullptr, s);
  };
  CaseOutput pos{"attended", op, rows * out_stride, true, 0, ref_pos, checked};
  pos.only_checked_written = true;
  c.outputs.push_back(std::move(pos));
  c.outputs.push_back({"count", cp, rows, true, 0, ref_counts, {}});
  c.keep = {d_scores, d_pos, d_out, d_counts};
  h.run(c);
}

}  // namespace

void run_dsa_cases(Harness& h) {
  for (int64_t context : {2048, 8192, 32768}) run_pool_keys(h, context);
  for (int r : kDecodeRows) run_scores(h, r, true);
  run_scores(h, 512, false);
  // A decode row at a 1,048,576-token context: 262,144 pools, what one MLA layer scores per query
  // at the longest context (the part of a 1M decode step that grows with the context).
  // The widest batch first: the harness compares each later row with the same row of the first.
  for (int r : {4, 1}) run_scores(h, r, true, int64_t(1) << 20);
  run_select(h);
}

}  // namespace sparkglm::g1
