// G1 rows for MLA absorbed decode over the paged latent cache, bf16 and fp8_g128 records
// (runtime/latent_cache.h layouts), dense up to the 2048-token edge and sparse DSA selections with
// tails of 0-3 tokens. Reference: scores by cpu::dot, cpu::softmax, the weighted sum in increasing
// position order, over the same dequantized latents.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "bench/cuda/g1_harness.h"
#include "engine/backend/cpu/linear.h"
#include "engine/backend/cpu/ops.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/mla_decode.h"
#include "engine/core/dtype.h"

namespace sparkglm::g1 {

namespace {

constexpr int kR = cuda::kMlaLatentDim, kBlock = 64;

// One token's record in `format`, and the values a reader gets back from it.
void encode(cuda::LatentFormat format, const float* v, uint8_t* rec, float* back) {
  if (format == cuda::LatentFormat::kBF16) {
    for (int i = 0; i < kR; ++i) {
      const uint16_t b = f32_to_bf16(v[i]);
      std::memcpy(rec + 2 * i, &b, 2);
      back[i] = bf16_to_f32(b);
    }
    return;
  }
  for (int g = 0; g < kR / 128; ++g) {  // E4M3 with one FP32 scale (amax / 448) per 128
    float amax = 0.0f;
    for (int i = g * 128; i < (g + 1) * 128; ++i) amax = std::max(amax, std::fabs(v[i]));
    const float scale = amax / 448.0f;
    const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
    for (int i = g * 128; i < (g + 1) * 128; ++i) {
      rec[i] = f32_to_e4m3(v[i] * inv);
      back[i] = e4m3_to_f32(rec[i]) * scale;
    }
    std::memcpy(rec + kR + 4 * g, &scale, 4);
  }
}

struct Pages {
  std::shared_ptr<cuda::DeviceBuffer> pages, table;
  std::vector<float> latents;  // [rows, context, R]: dequantized, by logical position
  int table_stride = 0;
};

// rows sequences of `context` tokens; logical block b of row r lives at a scattered physical block.
Pages make_pages(cuda::LatentFormat format, int rows, int context) {
  const int blocks_per_row = (context + kBlock - 1) / kBlock;
  const int total = rows * blocks_per_row;
  const int64_t rec = cuda::latent_record_bytes(format);
  const auto raw = host_uniform("mla.latent." + std::to_string(context),
                                int64_t(rows) * context * kR, 0.0f, 2.0f);
  Pages p;
  p.table_stride = blocks_per_row;
  std::vector<int32_t> table(static_cast<size_t>(total));
  for (int i = 0; i < total; ++i) table[size_t(i)] = int32_t((int64_t(i) * 7919) % total);
  if (total % 7919 == 0) std::iota(table.begin(), table.end(), 0);
  std::vector<uint8_t> bytes(size_t(total) * kBlock * size_t(rec), 0);
  p.latents.resize(raw.size());
  for (int r = 0; r < rows; ++r)
    for (int pos = 0; pos < context; ++pos) {
      const int phys = table[size_t(r * blocks_per_row + pos / kBlock)];
      const size_t at = (size_t(phys) * kBlock + size_t(pos % kBlock)) * size_t(rec);
      const size_t v = (size_t(r) * context + size_t(pos)) * kR;
      encode(format, &raw[v], &bytes[at], &p.latents[v]);
    }
  p.pages = upload(bytes);
  p.table = upload(table);
  return p;
}

void run_case(Harness& h, cuda::LatentFormat format, const Pages& pg, int rows, int context,
              const std::vector<std::vector<int32_t>>& lists, const std::string& op, bool decode) {
  const int heads = h.model().num_attention_heads;
  const float softmax_scale = h.model().mla_softmax_scale();
  const char* fmt = format == cuda::LatentFormat::kBF16 ? "bf16" : "fp8_g128";
  const auto qt = host_uniform("mla.q_tilde", int64_t(rows) * heads * kR, 0.0f, 1.0f);
  auto d_q = upload(qt);
  int max_len = 0;
  std::vector<int32_t> lengths(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    lengths[size_t(r)] = lists.empty() ? context : int32_t(lists[size_t(r)].size());
    max_len = std::max(max_len, lengths[size_t(r)]);
  }
  std::vector<int32_t> flat;
  if (!lists.empty()) {
    flat.assign(size_t(rows) * max_len, 0);
    for (int r = 0; r < rows; ++r)
      std::copy(lists[size_t(r)].begin(), lists[size_t(r)].end(),
                flat.begin() + int64_t(r) * max_len);
  }
  auto d_len = upload(lengths);
  auto d_list = flat.empty() ? nullptr : upload(flat);
  auto d_ws = device_alloc(size_t(cuda::mla_decode_workspace_floats(rows, heads, max_len)) * 4);
  auto d_o = device_alloc(size_t(rows) * heads * kR * 4);

  std::vector<float> ref(size_t(rows) * heads * kR);
  h.pool().parallel_for(int64_t(rows) * heads, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t r = item / heads;
      const int n = lengths[size_t(r)];
      std::vector<float> p(static_cast<size_t>(n));
      auto latent = [&](int j) {
        const int pos = lists.empty() ? j : lists[size_t(r)][size_t(j)];
        return &pg.latents[(size_t(r) * context + size_t(pos)) * kR];
      };
      const float* q = &qt[size_t(item) * kR];
      for (int j = 0; j < n; ++j) p[size_t(j)] = softmax_scale * cpu::dot(q, latent(j), kR);
      cpu::softmax(p.data(), n);
      float* o = &ref[size_t(item) * kR];
      for (int e = 0; e < kR; ++e) o[e] = 0.0f;
      for (int j = 0; j < n; ++j) {
        const float* c = latent(j);
        for (int e = 0; e < kR; ++e) o[e] = std::fma(p[size_t(j)], c[e], o[e]);
      }
    }
  });

  cuda::MlaDecodeArgs a;
  a.rows = rows;
  a.heads = heads;
  a.q_tilde = ptr<float>(d_q);
  a.pages = ptr<uint8_t>(pg.pages);
  a.format = format;
  a.block_size = kBlock;
  a.block_table = ptr<int32_t>(pg.table);
  a.table_stride = pg.table_stride;
  a.lengths = ptr<int32_t>(d_len);
  a.attended = d_list ? ptr<int32_t>(d_list) : nullptr;
  a.max_len = max_len;
  a.scale = softmax_scale;
  a.workspace = ptr<float>(d_ws);
  a.o_bar = ptr<float>(d_o);

  OperatorCase c;
  c.op = op + "." + fmt;
  c.shape = std::to_string(rows) + " rows x " + std::to_string(max_len) + " attended of " +
            std::to_string(context) + ", H " + std::to_string(heads) + ", R " + std::to_string(kR) +
            ", block " + std::to_string(kBlock);
  c.rows = rows;
  c.decode = decode;
  // q~ and the probabilities (and fp8 latents after their scale) enter the tensor cores as BF16
  // (2^-9 relative each): about 1e-6 in practice.
  c.tolerance = 1e-5;
  const double attended = std::accumulate(lengths.begin(), lengths.end(), 0.0);
  c.bytes = attended * double(cuda::latent_record_bytes(format)) + 2.0 * rows * heads * kR * 4;
  c.flops = attended * heads * kR * 4.0;
  c.note =
      "tensor-core flash decode (BF16 operands, FP32 accumulate), 128-token splits merged in "
      "split order; why under the floor: each 16-head group re-reads the row's latents (four "
      "reads of the 1 KB records for 64 heads) and the split partials round-trip through memory";
  c.launch = [a](cudaStream_t st) { cuda::mla_decode(a, st); };
  c.outputs.push_back(
      {"o_bar", a.o_bar, int64_t(rows) * heads * kR, false, int64_t(heads) * kR, ref, {}});
  c.keep = {d_q, d_len, d_ws, d_o};
  if (d_list) c.keep.push_back(d_list);
  h.run(c);
}

}  // namespace

void run_mla_cases(Harness& h) {
  for (auto format : {cuda::LatentFormat::kBF16, cuda::LatentFormat::kFp8G128}) {
    // Dense: every row sees 2048 tokens, the most a query attends before the indexer selects.
    const Pages dense = make_pages(format, 32, 2048);
    for (int r : kDecodeRows) run_case(h, format, dense, r, 2048, {}, "mla.decode", true);
    // Sparse: 8192-token contexts, 512 chosen pools (4 tokens each) plus a tail of 0-3 tokens.
    const int context = 8192;
    const Pages sparse = make_pages(format, 4, context);
    std::vector<std::vector<int32_t>> lists(4);
    const auto u = host_uniform("mla.pools", 4 * 2047, 0.5f, 0.5f);
    for (int r = 0; r < 4; ++r) {
      const int tail = r;                // tokens after the last complete pool
      const int t = context - 5 + tail;  // query position: (t + 1) % 4 == tail
      const int pools = (t + 1) / 4;
      std::vector<int32_t> chosen(static_cast<size_t>(pools));
      std::iota(chosen.begin(), chosen.end(), 0);
      for (int i = pools - 1; i > 0; --i)  // a seeded shuffle: the indexer's picks look scattered
        std::swap(chosen[size_t(i)],
                  chosen[size_t(int(u[size_t(r * 2047 + i % 2047)] * float(i + 1)) % (i + 1))]);
      chosen.resize(512);
      std::sort(chosen.begin(), chosen.end());
      for (int32_t p : chosen)
        for (int j = 0; j < 4; ++j) lists[size_t(r)].push_back(p * 4 + j);
      for (int j = pools * 4; j <= t; ++j) lists[size_t(r)].push_back(j);
    }
    run_case(h, format, sparse, 4, context, lists, "mla.decode_sparse", false);
  }
}

}  // namespace sparkglm::g1
