// The MLA prefill kernel (cuda/mla_prefill.h) against the CPU reference and against the first path
// (the decode kernel): causal chunks from position 0 and after a cached prefix, and rows with their
// own lists (DSA selections), over bf16 and fp8_g128 pages at all 64 heads. A row's bits depend on
// the row alone: not on the chunk or the rows it is launched with, nor on the run. They skip
// without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "engine/backend/cpu/linear.h"
#include "engine/backend/cpu/ops.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/mla_decode.h"
#include "engine/backend/cuda/mla_prefill.h"
#include "engine/core/dtype.h"
#include "engine/core/thread_pool.h"
#include "tests/cuda/cuda_test_support.h"

namespace sparkglm {
namespace {

using namespace cuda_test;

constexpr int kH = 64, kR = cuda::kMlaLatentDim, kBlock = 16;
constexpr float kScale = 0.0625f;
constexpr double kTolerance = 1e-5;  // the G1 tolerance of the mla rows (BF16 q~ and P)

const char* name(cuda::LatentFormat f) {
  return f == cuda::LatentFormat::kBF16 ? "bf16" : "fp8_g128";
}

// A sequence's latents as paged records, its blocks scattered; `back` holds the values the records
// decode to, which the reference attends.
struct Pages {
  std::vector<uint8_t> bytes;
  std::vector<int32_t> table;
  std::vector<float> back;  // [context, R]
};

Pages make_pages(cuda::LatentFormat format, int context, uint64_t key) {
  const int blocks = (context + kBlock - 1) / kBlock;
  const int64_t rec = cuda::latent_record_bytes(format);
  Pages p;
  p.table.resize(size_t(blocks));
  int step = 7;
  while (std::gcd(step, blocks) != 1) ++step;  // i -> (i * step + 3) % blocks is a bijection
  for (int i = 0; i < blocks; ++i) p.table[size_t(i)] = int32_t((int64_t(i) * step + 3) % blocks);
  const auto lat = uniform(key, size_t(context) * kR, 0.0f, 2.0f);
  p.bytes.assign(size_t(blocks) * kBlock * size_t(rec), 0);
  p.back.resize(lat.size());
  for (int pos = 0; pos < context; ++pos) {
    uint8_t* out =
        &p.bytes[(size_t(p.table[size_t(pos / kBlock)]) * kBlock + size_t(pos % kBlock)) *
                 size_t(rec)];
    cuda_test::encode_latent(format, &lat[size_t(pos) * kR], kR, out, &p.back[size_t(pos) * kR]);
  }
  return p;
}

// ō of `rows` (all heads) over their positions: cpu::dot scores, cpu::softmax, then FMA sums in
// list order (cpu::mla_layer_forward's attention core). positions(r) gives row r's list.
template <typename Positions>
std::vector<float> reference(const std::vector<float>& qt, const std::vector<float>& back,
                             const std::vector<int>& rows, Positions positions) {
  std::vector<float> want(rows.size() * kH * kR, 0.0f);
  ThreadPool pool;
  pool.parallel_for(int64_t(rows.size()) * kH, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      const int r = rows[size_t(item / kH)], h = int(item % kH);
      const std::vector<int32_t> list = positions(r);
      const float* q = &qt[(size_t(r) * kH + size_t(h)) * kR];
      float* o = &want[size_t(item) * kR];
      if (list.empty()) continue;
      std::vector<float> p(list.size());
      for (size_t j = 0; j < list.size(); ++j)
        p[j] = kScale * cpu::dot(q, &back[size_t(list[j]) * kR], kR);
      cpu::softmax(p.data(), int64_t(p.size()));
      for (size_t j = 0; j < list.size(); ++j)
        for (int e = 0; e < kR; ++e)
          o[e] = std::fma(p[j], back[size_t(list[j]) * kR + size_t(e)], o[e]);
    }
  });
  return want;
}

std::vector<float> pick_rows(const std::vector<float>& all, const std::vector<int>& rows) {
  std::vector<float> v;
  for (int r : rows)
    v.insert(v.end(), all.begin() + int64_t(r) * kH * kR, all.begin() + int64_t(r + 1) * kH * kR);
  return v;
}

bool same_bits(const std::vector<float>& a, size_t a0, const std::vector<float>& b, size_t b0,
               size_t n) {
  return std::memcmp(a.data() + a0, b.data() + b0, n * 4) == 0;
}

struct Chunk {
  int start, rows;
};

class CudaMlaPrefill : public ::testing::TestWithParam<Chunk> {};

TEST_P(CudaMlaPrefill, CausalChunkMatchesTheCpuAndTheFirstPathAndDependsOnTheRowAlone) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Chunk chunk = GetParam();
  const int start = chunk.start, rows = chunk.rows, context = start + rows;
  const int blocks = (context + kBlock - 1) / kBlock;
  // Rows compared with the CPU: around tile edges (64 entries) and evenly spaced.
  std::set<int> picked;
  for (int r : {0, 1, 62, 63, 64, 65, 127, 128, rows / 2, rows - 2, rows - 1})
    if (r >= 0 && r < rows) picked.insert(r);
  for (int i = 0; i < 8; ++i) picked.insert(i * (rows - 1) / 7);
  const std::vector<int> sampled(picked.begin(), picked.end());
  const auto qt = uniform(71, size_t(rows) * kH * kR, 0.0f, 1.0f);
  auto dq = to_device(qt);
  const size_t n = size_t(rows) * kH * kR;
  for (auto format : {cuda::LatentFormat::kBF16, cuda::LatentFormat::kFp8G128}) {
    SCOPED_TRACE(std::string(name(format)) + ", " + std::to_string(rows) + " rows from " +
                 std::to_string(start));
    const Pages pages = make_pages(format, context, 72);
    auto dp = to_device(pages.bytes), dt = to_device(pages.table);
    cuda::DeviceBuffer ws(cuda::mla_prefill_workspace_bytes(rows, kH, start, blocks));
    cuda::DeviceBuffer out(n * 4);
    cuda::MlaPrefillArgs a;
    a.rows = rows, a.heads = kH, a.start = start;
    a.q_tilde = static_cast<float*>(dq.data());
    a.pages = static_cast<uint8_t*>(dp.data());
    a.format = format;
    a.block_size = kBlock;
    a.block_table = static_cast<int32_t*>(dt.data());
    a.table_len = blocks;
    a.scale = kScale;
    a.workspace = ws.data();
    a.o_bar = static_cast<float*>(out.data());
    auto launch = [&](const cuda::MlaPrefillArgs& args) {
      SPARKGLM_CUDA_CHECK(cudaMemset(out.data(), 0xff, out.bytes()));  // NaN: unwritten shows
      cuda::mla_prefill(args, nullptr);
      return to_host<float>(out, n);
    };
    const auto got = launch(a);
    const auto again = launch(a);
    EXPECT_TRUE(same_bits(got, 0, again, 0, n)) << "not repeatable";
    cuda::MlaPrefillArgs first = a;
    first.decode_path = true;
    const auto old = launch(first);

    const auto want = reference(qt, pages.back, sampled, [&](int r) {
      std::vector<int32_t> list(size_t(start + r + 1));
      std::iota(list.begin(), list.end(), 0);
      return list;
    });
    EXPECT_LT(nmse(pick_rows(got, sampled), want), kTolerance);
    EXPECT_LT(nmse(pick_rows(old, sampled), want), kTolerance);
    EXPECT_LT(nmse(got, old), kTolerance);  // every row, every head

    // The chunk cut in two at a row that is not a tile edge: the same bits for every row.
    const int cut = rows / 3 + 1;
    cuda::MlaPrefillArgs tail = a;
    tail.rows = rows - cut;
    tail.start = start + cut;
    tail.q_tilde += int64_t(cut) * kH * kR;
    const auto split = launch(tail);
    EXPECT_TRUE(same_bits(split, 0, got, size_t(cut) * kH * kR, size_t(rows - cut) * kH * kR))
        << "rows after the cut differ";
    cuda::MlaPrefillArgs head = a;
    head.rows = cut;
    head.table_len = (start + cut + kBlock - 1) / kBlock;
    const auto front = launch(head);
    EXPECT_TRUE(same_bits(front, 0, got, 0, size_t(cut) * kH * kR)) << "rows before the cut";
  }
}

INSTANTIATE_TEST_SUITE_P(Chunks, CudaMlaPrefill,
                         ::testing::Values(Chunk{0, 512}, Chunk{0, 2048}, Chunk{1700, 300},
                                           Chunk{0, 77}),
                         [](const ::testing::TestParamInfo<Chunk>& i) {
                           return std::to_string(i.param.rows) + "RowsFrom" +
                                  std::to_string(i.param.start);
                         });

TEST(CudaMlaPrefillLists, SelectedRowsMatchTheCpuAndTheDecodeKernelAndDependOnTheRowAlone) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  // 24 rows of a prefill chunk past the dense edge sharing one table, each with its own ascending
  // list: full DSA selections (2051) and short lists around tile edges, one empty.
  const int rows = 24, context = 3000, max_len = 2051;
  const std::vector<int> lens = {2051, 0,    1,    63,   64,   65,   127,  128,
                                 129,  2051, 2051, 2050, 1000, 2051, 640,  2051,
                                 3,    2051, 2051, 700,  2051, 2051, 1999, 2051};
  std::vector<std::vector<int32_t>> lists(rows);
  std::vector<int32_t> flat(size_t(rows) * max_len, 0), counts(rows);
  for (int r = 0; r < rows; ++r) {
    const int last = 2100 + 35 * r;  // the row's position: it may attend 0 .. last
    std::vector<int32_t> all(size_t(last + 1));
    std::iota(all.begin(), all.end(), 0);
    std::mt19937 rng(uint32_t(1000 + r));
    std::shuffle(all.begin(), all.end() - 1, rng);  // the row itself is always selected
    std::vector<int32_t> list(all.end() - lens[size_t(r)], all.end());
    std::sort(list.begin(), list.end());
    std::copy(list.begin(), list.end(), flat.begin() + int64_t(r) * max_len);
    counts[size_t(r)] = int32_t(list.size());
    lists[size_t(r)] = list;
  }
  std::vector<int> every(rows);
  std::iota(every.begin(), every.end(), 0);
  const auto qt = uniform(81, size_t(rows) * kH * kR, 0.0f, 1.0f);
  const size_t n = size_t(rows) * kH * kR;
  auto dq = to_device(qt), dl = to_device(flat), dc = to_device(counts);
  for (auto format : {cuda::LatentFormat::kBF16, cuda::LatentFormat::kFp8G128}) {
    SCOPED_TRACE(name(format));
    const Pages pages = make_pages(format, context, 82);
    auto dp = to_device(pages.bytes), dt = to_device(pages.table);
    cuda::DeviceBuffer ws(size_t(cuda::mla_decode_workspace_floats(rows, kH, max_len)) * 4);
    cuda::DeviceBuffer out(n * 4);
    cuda::MlaDecodeArgs a;
    a.rows = rows;
    a.heads = kH;
    a.q_tilde = static_cast<float*>(dq.data());
    a.pages = static_cast<uint8_t*>(dp.data());
    a.format = format;
    a.block_size = kBlock;
    a.block_table = static_cast<int32_t*>(dt.data());
    a.table_stride = 0;
    a.lengths = static_cast<int32_t*>(dc.data());
    a.attended = static_cast<int32_t*>(dl.data());
    a.max_len = max_len;
    a.scale = kScale;
    a.workspace = static_cast<float*>(ws.data());
    a.o_bar = static_cast<float*>(out.data());
    auto launch = [&](const cuda::MlaDecodeArgs& args, bool decode) {
      SPARKGLM_CUDA_CHECK(cudaMemset(out.data(), 0xff, out.bytes()));
      if (decode) {
        cuda::mla_decode(args, nullptr);
      } else {
        cuda::mla_prefill_lists(args, nullptr);
      }
      return to_host<float>(out, n);
    };
    const auto got = launch(a, false);
    const auto again = launch(a, false);
    EXPECT_TRUE(same_bits(got, 0, again, 0, n)) << "not repeatable";
    const auto dec = launch(a, true);
    const auto want = reference(qt, pages.back, every, [&](int r) { return lists[size_t(r)]; });
    EXPECT_LT(nmse(got, want), kTolerance);
    EXPECT_LT(nmse(dec, want), kTolerance);
    for (int r = 0; r < rows; ++r) {
      const std::vector<float> g(got.begin() + int64_t(r) * kH * kR,
                                 got.begin() + int64_t(r + 1) * kH * kR),
          w(want.begin() + int64_t(r) * kH * kR, want.begin() + int64_t(r + 1) * kH * kR);
      if (lens[size_t(r)] == 0) {
        EXPECT_TRUE(std::all_of(g.begin(), g.end(), [](float v) { return v == 0.0f; }));
      } else {
        EXPECT_LT(nmse(g, w), kTolerance) << "row " << r << " of " << lens[size_t(r)];
      }
    }
    // Rows 5 .. 11 launched alone: the same bits.
    cuda::MlaDecodeArgs some = a;
    some.rows = 7;
    some.q_tilde += int64_t(5) * kH * kR;
    some.lengths += 5;
    some.attended += int64_t(5) * max_len;
    const auto part = launch(some, false);
    EXPECT_TRUE(same_bits(part, 0, got, size_t(5) * kH * kR, size_t(7) * kH * kR));
  }
}

}  // namespace
}  // namespace sparkglm
