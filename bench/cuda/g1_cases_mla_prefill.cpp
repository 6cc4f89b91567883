// G1 rows for causal MLA attention over a prefill chunk (cuda/mla_prefill.h), bf16 latent records
// in scattered 64-token blocks: chunks of 512 and 2048 rows from position 0, and 512 rows after a
// cached 1536-token prefix (ending at the 2048-token dense edge). Reference: scores by cpu::dot,
// cpu::softmax, the weighted sum in increasing position order (cpu::mla_layer_forward's attention
// core); the host would take minutes for every row, so 16 evenly spaced rows (all 64 heads) are
// checked.
#include <cmath>
#include <cstring>

#include "bench/cuda/g1_harness.h"
#include "engine/backend/cpu/linear.h"
#include "engine/backend/cpu/ops.h"
#include "engine/backend/cuda/mla_prefill.h"
#include "engine/core/dtype.h"

namespace sparkglm::g1 {

namespace {

constexpr int kH = 64, kR = cuda::kMlaLatentDim, kBlock = 64, kSampled = 16;
constexpr float kScale = 0.0625f;

void run_chunk(Harness& h, int start, int rows) {
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
  const auto qt = host_uniform("mla_prefill.q_tilde", int64_t(rows) * kH * kR, 0.0f, 1.0f);

  std::vector<int64_t> sampled;
  for (int i = 0; i < kSampled; ++i) sampled.push_back(int64_t(i) * (rows - 1) / (kSampled - 1));
  std::vector<float> ref(size_t(kSampled) * kH * kR);
  std::vector<int64_t> checked(ref.size());
  h.pool().parallel_for(int64_t(kSampled) * kH, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t t = sampled[size_t(item / kH)], head = item % kH;
      const int n = start + int(t) + 1;  // causal: positions 0 .. start + t
      const float* q = &qt[size_t((t * kH + head) * kR)];
      std::vector<float> p(static_cast<size_t>(n));
      for (int j = 0; j < n; ++j) p[size_t(j)] = kScale * cpu::dot(q, &latent[size_t(j) * kR], kR);
      cpu::softmax(p.data(), n);
      float* o = &ref[size_t(item) * kR];
      for (int e = 0; e < kR; ++e) o[e] = 0.0f;
      for (int j = 0; j < n; ++j)
        for (int e = 0; e < kR; ++e)
          o[e] = std::fma(p[size_t(j)], latent[size_t(j) * kR + e], o[e]);
      for (int e = 0; e < kR; ++e)
        checked[size_t(item) * kR + size_t(e)] = (t * kH + head) * kR + e;
    }
  });

  auto d_pages = upload(records), d_table = upload(table), d_q = upload(qt);
  auto d_ws = device_alloc(cuda::mla_prefill_workspace_bytes(rows, kH, start, blocks));
  auto d_o = device_alloc(size_t(rows) * kH * kR * 4);
  cuda::MlaPrefillArgs a;
  a.rows = rows;
  a.heads = kH;
  a.start = start;
  a.q_tilde = ptr<float>(d_q);
  a.pages = reinterpret_cast<const uint8_t*>(d_pages->data());
  a.format = cuda::LatentFormat::kBF16;
  a.block_size = kBlock;
  a.block_table = ptr<int32_t>(d_table);
  a.table_len = blocks;
  a.scale = kScale;
  a.workspace = d_ws->data();
  a.o_bar = ptr<float>(d_o);

  OperatorCase c;
  c.op = "mla.prefill.bf16";
  c.shape = std::to_string(rows) + " rows from position " + std::to_string(start) +
            ", causal, H 64, R 512, block 64";
  c.rows = rows;
  c.decode = false;
  c.tolerance = 1e-5;  // q~ and the probabilities enter the tensor cores as BF16, as in decode
  // Floor: the latents once (a prefill kernel's minimum) and q~ / o_bar; the arithmetic of every
  // row over its causal prefix.
  const double attended = double(rows) * start + double(rows) * (rows + 1) / 2.0;
  c.bytes = double(context) * kR * 2 + 2.0 * rows * kH * kR * 4;
  c.flops = attended * kH * kR * 4.0;
  c.note =
      "absorbed form through the decode kernel, one decode row per query row (prefix "
      "re-read per row); reference on 16 evenly spaced rows, all heads";
  c.launch = [a](cudaStream_t st) { cuda::mla_prefill(a, st); };
  c.outputs.push_back({"o_bar", a.o_bar, int64_t(rows) * kH * kR, false, 0, ref, checked});
  c.keep = {d_pages, d_table, d_q, d_ws, d_o};
  h.run(c);
}

}  // namespace

void run_mla_prefill_cases(Harness& h) {
  run_chunk(h, 0, 512);
  run_chunk(h, 0, 2048);
  run_chunk(h, 1536, 512);
}

}  // namespace sparkglm::g1
