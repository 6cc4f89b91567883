// G1 rows for causal MLA attention over a prefill chunk (cuda/mla_prefill.h), bf16 latent records
// in scattered 64-token blocks: chunks of 512 and 2048 rows from position 0, 512 rows after a
// cached 1536-token prefix (ending at the 2048-token dense edge), and 8192 rows from position 0.
// mla_prefill is dense causal attention; the runner sends it only the rows before the 2051-token
// dense edge (later rows take the indexer's selection), in passes of kMlaRowChunk rows. The 8192
// row times what the kernel computes for a dense 8192-row chunk, launched in those passes (one
// launch of 8192 rows would need a 64 GiB split workspace). Reference: scores by cpu::dot,
// cpu::softmax, the weighted sum in increasing position order (cpu::mla_layer_forward's attention
// core), all 64 heads, on every row of the 512- and 2048-row chunks and on a sample of the 8192
// chunk's rows (said in its shape).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "bench/cuda/g1_harness.h"
#include "engine/backend/cpu/linear.h"
#include "engine/backend/cpu/ops.h"
#include "engine/backend/cuda/mla_prefill.h"
#include "engine/backend/cuda/runner_buffers.h"
#include "engine/core/dtype.h"

namespace sparkglm::g1 {

namespace {

constexpr int kR = cuda::kMlaLatentDim, kBlock = 64;
// Every row is compared up to 2048 rows (< 0.3 TFLOP of reference); an 8192-row chunk would be
// 4.4 TFLOP (10-25 s on 16 cores), so it is compared on a sample.
constexpr int kFullRows = 2048, kSampled = 256;

// `pass`: query rows per mla_prefill launch (rows: one launch).
void run_chunk(Harness& h, int start, int rows, int pass) {
  const int heads = h.model().num_attention_heads;
  const float softmax_scale = h.model().mla_softmax_scale();
  const int context = start + rows;
  const int blocks = (context + kBlock - 1) / kBlock;
  // The sequence's latents (BF16 records), its blocks scattered over the pages.
  const auto raw = host_uniform("mla_prefill.latent", int64_t(context) * kR, 0.0f, 2.0f);
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  for (int i = 0; i < blocks; ++i) table[size_t(i)] = int32_t((int64_t(i) * 37 + 11) % blocks);
  if (blocks % 37 == 0)
    for (int i = 0; i < blocks; ++i) table[size_t(i)] = blocks - 1 - i;
  std::vector<uint16_t> records(size_t(blocks) * kBlock * kR, 0);
  std::vector<float> latent(raw.size());
  for (int pos = 0; pos < context; ++pos) {
    const size_t at = (size_t(table[size_t(pos / kBlock)]) * kBlock + size_t(pos % kBlock)) * kR;
    for (int i = 0; i < kR; ++i) {
      const uint16_t b = f32_to_bf16(raw[size_t(pos) * kR + size_t(i)]);
      records[at + size_t(i)] = b;
      latent[size_t(pos) * kR + size_t(i)] = bf16_to_f32(b);
    }
  }
  const auto qt = host_uniform("mla_prefill.q_tilde", int64_t(rows) * heads * kR, 0.0f, 1.0f);

  // Rows compared: every row up to kFullRows; else kSampled evenly spaced (the first and the last
  // among them) and the first and last row of every pass.
  std::set<int64_t> rows_set;
  const int n = rows <= kFullRows ? rows : kSampled;
  for (int i = 0; i < n; ++i) rows_set.insert(n == 1 ? 0 : int64_t(i) * (rows - 1) / (n - 1));
  if (n < rows && pass < rows)
    for (int r0 = 0; r0 < rows; r0 += pass) {
      rows_set.insert(r0);
      rows_set.insert(std::min(r0 + pass, rows) - 1);
    }
  const std::vector<int64_t> sampled(rows_set.begin(), rows_set.end());
  const int64_t items = int64_t(sampled.size()) * heads;
  std::vector<float> ref(size_t(items) * kR);
  const bool all = int64_t(sampled.size()) == rows;  // then ref is in output order
  std::vector<int64_t> checked(all ? 0 : ref.size());
  h.pool().parallel_for(items, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t t = sampled[size_t(item / heads)], head = item % heads;
      const int len = start + int(t) + 1;  // causal: positions 0 .. start + t
      const float* q = &qt[size_t((t * heads + head) * kR)];
      std::vector<float> p(static_cast<size_t>(len));
      for (int j = 0; j < len; ++j)
        p[size_t(j)] = softmax_scale * cpu::dot(q, &latent[size_t(j) * kR], kR);
      cpu::softmax(p.data(), len);
      float* o = &ref[size_t(item) * kR];
      for (int e = 0; e < kR; ++e) o[e] = 0.0f;
      for (int j = 0; j < len; ++j)
        for (int e = 0; e < kR; ++e)
          o[e] = std::fma(p[size_t(j)], latent[size_t(j) * kR + e], o[e]);
      if (!all)
        for (int e = 0; e < kR; ++e)
          checked[size_t(item) * kR + size_t(e)] = (t * heads + head) * kR + e;
    }
  });

  // Per pass: its rows, position and table length (as the runner gives them); the workspace is
  // the largest pass's (sized for the decode-kernel fallback, which the 64-head kernel leaves
  // unused).
  size_t ws_bytes = 0;
  for (int r0 = 0; r0 < rows; r0 += pass) {
    const int pr = std::min(pass, rows - r0);
    ws_bytes =
        std::max(ws_bytes, cuda::mla_prefill_workspace_bytes(
                               pr, heads, start + r0, (start + r0 + pr + kBlock - 1) / kBlock));
  }
  auto d_pages = upload(records), d_table = upload(table), d_q = upload(qt);
  auto d_ws = device_alloc(ws_bytes);
  auto d_o = device_alloc(size_t(rows) * heads * kR * 4);
  cuda::MlaPrefillArgs a;
  a.rows = rows;
  a.heads = heads;
  a.start = start;
  a.q_tilde = ptr<float>(d_q);
  a.pages = reinterpret_cast<const uint8_t*>(d_pages->data());
  a.format = cuda::LatentFormat::kBF16;
  a.block_size = kBlock;
  a.block_table = ptr<int32_t>(d_table);
  a.table_len = blocks;
  a.scale = softmax_scale;
  a.workspace = d_ws->data();
  a.o_bar = ptr<float>(d_o);

  OperatorCase c;
  c.op = "mla.prefill.bf16";
  c.shape = std::to_string(rows) + " rows from position " + std::to_string(start) + ", causal, H " +
            std::to_string(heads) + ", R " + std::to_string(kR) + ", block " +
            std::to_string(kBlock);
  if (context > 2051) c.shape += ", dense past the 2051-token edge";
  if (pass < rows) c.shape += ", " + std::to_string(pass) + "-row passes";
  if (!all)
    c.shape +=
        ", " + std::to_string(sampled.size()) + " of " + std::to_string(rows) + " rows compared";
  c.rows = rows;
  c.decode = false;
  c.tolerance = 1e-5;  // q~ and the probabilities enter the tensor cores as BF16, as in decode
  // Floor: the latents once (a prefill kernel's minimum) and q~ / o_bar; the arithmetic of every
  // row over its causal prefix.
  const double attended = double(rows) * start + double(rows) * (rows + 1) / 2.0;
  c.bytes = double(context) * kR * 2 + 2.0 * rows * heads * kR * 4;
  c.flops = attended * heads * kR * 4.0;
  const std::string compared =
      all ? std::string("every row")
          : std::to_string(sampled.size()) +
                " rows (evenly spaced, each pass's first and last; every element checked written "
                "and finite)";
  c.note =
      "absorbed form, one block per query row over all 64 heads, each 64-entry latent tile "
      "loaded once into shared memory (tensor-core scores and values, online softmax); "
      "reference on " +
      compared + ", all heads";
  c.launch = [a, pass](cudaStream_t st) {
    for (int r0 = 0; r0 < a.rows; r0 += pass) {
      cuda::MlaPrefillArgs p = a;
      p.rows = std::min(pass, a.rows - r0);
      p.start = a.start + r0;
      p.q_tilde = a.q_tilde + int64_t(r0) * a.heads * kR;
      p.table_len = (p.start + p.rows + kBlock - 1) / kBlock;
      p.o_bar = a.o_bar + int64_t(r0) * a.heads * kR;
      cuda::mla_prefill(p, st);
    }
  };
  c.outputs.push_back({"o_bar", a.o_bar, int64_t(rows) * heads * kR, false, 0, ref, checked});
  c.keep = {d_pages, d_table, d_q, d_ws, d_o};
  h.run(c);
}

}  // namespace

void run_mla_prefill_cases(Harness& h) {
  run_chunk(h, 0, 512, 512);
  run_chunk(h, 0, 2048, 2048);
  run_chunk(h, 1536, 512, 512);
  if (!h.quick()) run_chunk(h, 0, 8192, cuda::kMlaRowChunk);
}

}  // namespace sparkglm::g1
