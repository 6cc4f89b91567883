// G1 rows for RMSNorm, LayerNorm (the indexer key norm) and the token embedding.
#include <algorithm>
#include <cmath>

#include "bench/cuda/g1_harness.h"
#include "engine/backend/cpu/ops.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/dummy_weights.h"
#include "engine/backend/cuda/embedding.h"
#include "engine/backend/cuda/norms.h"
#include "engine/core/dtype.h"

namespace sparkglm::g1 {

namespace {

std::vector<int> all_rows(const Harness& h) {
  std::vector<int> rows(std::begin(kDecodeRows), std::end(kDecodeRows));
  for (int r : kPrefillRows)
    if (!(h.quick() && r == 8192)) rows.push_back(r);
  return rows;
}

void run_rms_norm(Harness& h, int64_t n) {
  const float eps = h.model().rms_norm_eps;
  const int64_t max_m = 8192;
  const auto x_host = host_uniform("rms.x." + std::to_string(n), max_m * n, 0.0f, 2.0f);
  const auto w_host = host_uniform("rms.w." + std::to_string(n), n, 1.0f, 0.5f);
  auto x = upload(x_host), w = upload(w_host), y = device_alloc(size_t(max_m * n * 4));
  for (int m : all_rows(h)) {
    OperatorCase c;
    c.op = "rms_norm.d" + std::to_string(n);
    c.shape = "x[" + std::to_string(m) + "," + std::to_string(n) + "] f32";
    c.rows = m;
    c.decode = m <= 32;
    c.tolerance = 1e-10;  // FP32, another summation order
    c.bytes = double(m * n * 8 + n * 4);
    c.flops = 4.0 * double(m * n);
    c.flops_on_tensor_cores = false;
    c.note =
        "one block per row; why under the floor at decode rows: kilobytes, one launch's "
        "latency (fusing norms into their neighbours is the fix)";
    const float *xp = ptr<float>(x), *wp = ptr<float>(w);
    float* yp = ptr<float>(y);
    c.launch = [=](cudaStream_t s) { cuda::rms_norm_rows(xp, wp, eps, m, n, yp, nullptr, s); };
    CaseOutput out{"y", yp, int64_t(m) * n, false, n, std::vector<float>(size_t(m * n)), {}};
    h.pool().parallel_for(m, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r)
        cpu::rms_norm(&x_host[size_t(r * n)], w_host.data(), eps, n, &out.reference[size_t(r * n)]);
    });
    c.outputs.push_back(std::move(out));
    h.run(c);
  }
}

void run_layer_norm(Harness& h) {
  const int64_t n = 128, max_m = 8192;  // the indexer key: LayerNorm(W_ik x), eps 1e-6
  const auto x_host = host_uniform("ln.x", max_m * n, 0.3f, 2.0f);
  const auto w_host = host_uniform("ln.w", n, 1.0f, 0.5f);
  const auto b_host = host_uniform("ln.b", n, 0.0f, 0.1f);
  auto x = upload(x_host), w = upload(w_host), b = upload(b_host);
  auto y = device_alloc(size_t(max_m * n * 4));
  for (int m : all_rows(h)) {
    OperatorCase c;
    c.op = "layer_norm.index_key";
    c.shape = "x[" + std::to_string(m) + ",128] f32";
    c.rows = m;
    c.decode = m <= 32;
    c.tolerance = 1e-10;
    c.bytes = double(m * n * 8);
    c.flops = 6.0 * double(m * n);
    c.note = "one block per row; why under the floor: 512 B a row, launch latency";
    c.flops_on_tensor_cores = false;
    const float *xp = ptr<float>(x), *wp = ptr<float>(w), *bp = ptr<float>(b);
    float* yp = ptr<float>(y);
    c.launch = [=](cudaStream_t s) { cuda::layer_norm_rows(xp, wp, bp, 1e-6f, m, n, yp, s); };
    CaseOutput out{"y", yp, int64_t(m) * n, false, n, std::vector<float>(size_t(m * n)), {}};
    for (int64_t r = 0; r < m; ++r)
      cpu::layer_norm(&x_host[size_t(r * n)], w_host.data(), b_host.data(), 1e-6f, n,
                      &out.reference[size_t(r * n)]);
    c.outputs.push_back(std::move(out));
    h.run(c);
  }
}

void run_embedding(Harness& h) {
  const int64_t vocab = h.model().vocab_size, hidden = h.model().hidden_size;
  const int streams = h.model().hc_mult;
  auto table = device_alloc(size_t(vocab * hidden * 2));
  cuda::fill_dummy_bf16(ptr<uint16_t>(table), vocab * hidden, 0xe111u, 0.0f, 1.0f, h.stream());
  SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(h.stream()));
  std::vector<uint16_t> table_host(size_t(vocab * hidden));
  table->copy_to_host(table_host.data(), table_host.size() * 2);
  const int64_t max_m = 8192;
  std::vector<int32_t> ids(static_cast<size_t>(max_m));
  const auto u = host_uniform("embed.ids", max_m, 0.5f, 0.5f);
  for (int64_t i = 0; i < max_m; ++i)
    ids[size_t(i)] = int32_t(std::min<double>(vocab - 1, u[size_t(i)] * vocab));
  ids[1] = int32_t(vocab - 1);  // the last row of the table
  auto ids_dev = upload(ids);
  auto out_dev = device_alloc(size_t(max_m * streams * hidden * 4));
  for (int m : all_rows(h)) {
    OperatorCase c;
    c.op = "embedding";
    const std::string d = std::to_string(hidden);
    c.shape = "ids[" + std::to_string(m) + "] table[" + std::to_string(vocab) + "," + d +
              "] bf16 -> [rows," + std::to_string(streams) + "," + d + "] f32";
    c.rows = m;
    c.decode = m <= 32;
    c.tolerance = 0;  // a widening copy: exact
    c.bytes = double(m * hidden * 2 + m * streams * hidden * 4);
    c.note = "why under the floor at decode rows: 64 KB a row, one launch's latency";
    const uint16_t* tp = ptr<uint16_t>(table);
    const int32_t* ip = ptr<int32_t>(ids_dev);
    float* op = ptr<float>(out_dev);
    c.launch = [=](cudaStream_t s) {
      cuda::embed_tokens(tp, vocab, hidden, ip, m, streams, op, s);
    };
    CaseOutput out{"streams",
                   op,
                   int64_t(m) * streams * hidden,
                   false,
                   streams * hidden,
                   std::vector<float>(size_t(m * streams * hidden)),
                   {}};
    for (int64_t r = 0; r < m; ++r)
      for (int s = 0; s < streams; ++s)
        for (int64_t i = 0; i < hidden; ++i)
          out.reference[size_t((r * streams + s) * hidden + i)] =
              bf16_to_f32(table_host[size_t(ids[size_t(r)] * hidden + i)]);
    c.outputs.push_back(std::move(out));
    h.run(c);
  }
}

}  // namespace

void run_norm_and_embedding_cases(Harness& h) {
  run_rms_norm(h, h.model().hidden_size);
  run_rms_norm(h, h.model().kv_lora_rank);  // kv_a_layernorm
  run_rms_norm(h, h.model().q_lora_rank);   // q_a_layernorm
  run_layer_norm(h);
  run_embedding(h);
}

}  // namespace sparkglm::g1
