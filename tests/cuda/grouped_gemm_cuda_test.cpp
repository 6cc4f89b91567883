// The prefill MoE's grouped GEMM (cuda/grouped_gemm.h) against a host double-precision reference:
// small groups of every kind (empty, one row, a partial tile, whole tiles, several tiles) with a
// row gather and the shared-expert weight, odd n and k, and the model's shape (n 4096 / 2048,
// k 4096) on sampled outputs. Rows outside the groups must stay untouched; a row's bits must not
// depend on the tile size or on the other rows of its group. They skip without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/grouped_gemm.h"
#include "engine/core/dtype.h"
#include "tests/cuda/cuda_test_support.h"

namespace sparkglm {
namespace {

using namespace cuda_test;

// One grouped problem, host side. Group g's weight is block g of `w` ([w_rows, k] each); groups
// at or past w_count use w_last, which is the last block, so the reference never has to know.
struct Problem {
  int64_t n = 0, k = 0;
  bool swiglu = false;
  float limit = 0.0f;
  std::vector<int32_t> offsets;  // [G + 1]; rows before offsets[0] belong to no group
  std::vector<int32_t> a_rows;   // [out_rows] or empty: identity
  int64_t out_rows = 0;          // output rows allocated (max_rows); rows past offsets[G] untouched
  int w_count = 0;
  std::vector<uint16_t> a, w;  // BF16: [a_count, k], [G * w_rows, k]

  int groups() const { return int(offsets.size()) - 1; }
  int64_t w_rows() const { return swiglu ? 2 * n : n; }
  int64_t out_bytes() const { return out_rows * n * (swiglu ? 2 : 4); }
  int group_of(int64_t r) const {
    return int(std::upper_bound(offsets.begin(), offsets.end(), int32_t(r)) - offsets.begin()) - 1;
  }
  int64_t source(int64_t r) const { return a_rows.empty() ? r : a_rows[size_t(r)]; }
};

std::vector<uint16_t> bf16_values(uint64_t key, size_t n, float center, float half) {
  std::vector<uint16_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = f32_to_bf16(dummy::value(key, i, center, half));
  return v;
}

// The output's bytes after one plan + GEMM on a poisoned (all bits set) buffer.
std::vector<uint8_t> run(const Problem& p, int tile_rows) {
  auto d_off = to_device(p.offsets), d_a = to_device(p.a), d_w = to_device(p.w);
  cuda::DeviceBuffer d_rows = p.a_rows.empty() ? cuda::DeviceBuffer() : to_device(p.a_rows);
  cuda::DeviceBuffer d_tiles(size_t(p.groups() + 1) * 4), out(size_t(p.out_bytes()));
  const auto* w0 = static_cast<const uint16_t*>(d_w.data());
  std::vector<const uint16_t*> table;
  for (int g = 0; g < p.w_count; ++g) table.push_back(w0 + g * p.w_rows() * p.k);
  auto d_table = to_device(table);
  SPARKGLM_CUDA_CHECK(cudaMemset(out.data(), 0xff, out.bytes()));

  cuda::GroupedGemmArgs g;
  g.groups = p.groups();
  g.tile_rows = tile_rows;
  g.offsets = static_cast<const int32_t*>(d_off.data());
  g.tile_offsets = static_cast<const int32_t*>(d_tiles.data());
  g.max_rows = p.out_rows;
  g.a = static_cast<const uint16_t*>(d_a.data());
  g.a_rows = static_cast<const int32_t*>(d_rows.data());
  g.w = static_cast<const uint16_t* const*>(d_table.data());
  g.w_count = p.w_count;
  g.w_last = w0 + (p.groups() - 1) * p.w_rows() * p.k;
  g.n = p.n;
  g.k = p.k;
  cuda::grouped_gemm_plan(g.offsets, g.groups, tile_rows, static_cast<int32_t*>(d_tiles.data()),
                          nullptr);
  if (p.swiglu)
    cuda::grouped_gemm_swiglu(g, p.limit, static_cast<uint16_t*>(out.data()), nullptr);
  else
    cuda::grouped_gemm(g, static_cast<float*>(out.data()), nullptr);
  return to_host<uint8_t>(out, size_t(p.out_bytes()));
}

bool poisoned(const Problem& p, const std::vector<uint8_t>& b, int64_t r, int64_t c) {
  const int64_t s = p.swiglu ? 2 : 4;
  for (int64_t i = 0; i < s; ++i)
    if (b[size_t((r * p.n + c) * s + i)] != 0xff) return false;
  return true;
}

float value_at(const Problem& p, const std::vector<uint8_t>& b, int64_t r, int64_t c) {
  if (p.swiglu) {
    uint16_t h;
    std::memcpy(&h, &b[size_t((r * p.n + c) * 2)], 2);
    return bf16_to_f32(h);
  }
  float f;
  std::memcpy(&f, &b[size_t((r * p.n + c) * 4)], 4);
  return f;
}

// a[source(r)] . w_g[row] in double, with the sum of |terms| for the tolerance.
double dot(const Problem& p, int64_t r, int64_t wrow, double* abs_sum) {
  const uint16_t* x = &p.a[size_t(p.source(r) * p.k)];
  const uint16_t* w = &p.w[size_t((p.group_of(r) * p.w_rows() + wrow) * p.k)];
  double s = 0, as = 0;
  for (int64_t i = 0; i < p.k; ++i) {
    const double t = double(bf16_to_f32(x[i])) * double(bf16_to_f32(w[i]));
    s += t;
    as += std::fabs(t);
  }
  *abs_sum = as;
  return s;
}

// cpu::swiglu_forward's activation.
float swiglu_ref(float g, float u, float limit) {
  if (limit > 0.0f) {
    g = std::min(g, limit);
    u = std::clamp(u, -limit, limit);
  }
  return g / (1.0f + std::exp(-g)) * u;
}

// Checks the written outputs (every column in `cols`, every grouped row in `rows` or all grouped
// rows when empty) against the reference, and that rows outside the groups are untouched.
void check(const Problem& p, const std::vector<uint8_t>& b, std::vector<int64_t> cols,
           std::vector<int64_t> rows = {}) {
  const int64_t first = p.offsets.front(), last = p.offsets.back();
  if (rows.empty())
    for (int64_t r = first; r < last; ++r) rows.push_back(r);
  if (cols.empty())
    for (int64_t c = 0; c < p.n; ++c) cols.push_back(c);
  int bad = 0;
  for (int64_t r : rows)
    for (int64_t c : cols) {
      ASSERT_FALSE(poisoned(p, b, r, c)) << "row " << r << " col " << c << " not written";
      const float got = value_at(p, b, r, c);
      double want, tol;
      if (p.swiglu) {
        double sg, su;
        const double g = dot(p, r, c, &sg), u = dot(p, r, p.n + c, &su);
        want = swiglu_ref(float(g), float(u), p.limit);
        tol = std::ldexp(std::fabs(want), -8) + 1e-4 * (sg + su);
      } else {
        double s;
        want = dot(p, r, c, &s);
        tol = 1e-5 * s + 1e-6;
      }
      if (!(std::fabs(double(got) - want) <= tol) && ++bad <= 5)
        ADD_FAILURE() << "row " << r << " (group " << p.group_of(r) << ") col " << c << ": got "
                      << got << ", want " << want << " +- " << tol;
    }
  EXPECT_EQ(bad, 0);
  // Untouched: rows before the first group and after the last, every column.
  for (int64_t r = 0; r < p.out_rows; ++r) {
    if (r >= first && r < last) continue;
    for (int64_t c = 0; c < p.n; ++c)
      ASSERT_TRUE(poisoned(p, b, r, c)) << "row " << r << " outside the groups was written";
  }
}

// Groups {0, 1, 37, 128, 300} after 5 rows of no group, 27 spare rows after them; rows gathered
// from 333 source rows; the last group through w_last (the shared expert's place).
Problem small_problem(bool swiglu, int64_t n, int64_t k, const std::vector<int32_t>& sizes,
                      bool gather, bool last_shared) {
  Problem p;
  p.n = n, p.k = k, p.swiglu = swiglu, p.limit = 0.5f;
  p.offsets.push_back(5);
  for (int32_t s : sizes) p.offsets.push_back(p.offsets.back() + s);
  p.out_rows = p.offsets.back() + 27;
  p.w_count = p.groups() - (last_shared ? 1 : 0);
  const int64_t a_count = gather ? 333 : p.out_rows;
  if (gather)
    for (int64_t r = 0; r < p.out_rows; ++r) p.a_rows.push_back(int32_t((r * 131 + 7) % a_count));
  p.a = bf16_values(0x61, size_t(a_count * k), 0.0f, 1.0f);
  p.w = bf16_values(swiglu ? 0x62 : 0x63, size_t(p.groups() * p.w_rows() * k), 0.0f, 0.1f);
  return p;
}

TEST(GroupedGemm, SmallGroupsMatchTheHostReference) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (bool swiglu : {false, true}) {
    const Problem p = small_problem(swiglu, 384, 256, {0, 1, 37, 128, 300}, true, true);
    for (int tile_rows : {64, 128}) {
      SCOPED_TRACE(std::string(swiglu ? "swiglu" : "plain") + " tile_rows " +
                   std::to_string(tile_rows));
      const auto b = run(p, tile_rows);
      check(p, b, {});
      EXPECT_EQ(run(p, tile_rows), b);  // repeatable bit for bit
    }
  }
}

TEST(GroupedGemm, OddWidthsAndReductionLengths) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  // n 72: a partial column tile (and, for SwiGLU, gate and up rows 72 apart); k 200 and 40: a
  // partial last k stage.
  for (bool swiglu : {false, true})
    for (int64_t k : {200, 40}) {
      const Problem p = small_problem(swiglu, 72, k, {5, 70, 0, 129}, false, false);
      for (int tile_rows : {64, 128}) {
        SCOPED_TRACE(std::string(swiglu ? "swiglu" : "plain") + " k " + std::to_string(k) +
                     " tile_rows " + std::to_string(tile_rows));
        check(p, run(p, tile_rows), {});
      }
    }
}

TEST(GroupedGemm, RowBitsDependOnlyOnTheRowAndItsWeight) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (bool swiglu : {false, true}) {
    const Problem p = small_problem(swiglu, 384, 256, {0, 1, 37, 128, 300}, true, true);
    const auto b64 = run(p, 64), b128 = run(p, 128);
    EXPECT_EQ(b64, b128);  // the tile size changes each row's place in its tile, not its bits
    // The same rows alone, each a group of one with its group's weight.
    for (int64_t r : {5, 6, 43, 44, 170, 171, 299, 470}) {
      Problem one = p;
      const int g = p.group_of(r);
      one.offsets = {0, 1};
      one.a_rows = {int32_t(p.source(r))};
      one.out_rows = 1;
      one.w_count = 1;
      one.w.assign(p.w.begin() + g * p.w_rows() * p.k, p.w.begin() + (g + 1) * p.w_rows() * p.k);
      const auto alone = run(one, 64);
      const int64_t s = p.swiglu ? 2 : 4;
      EXPECT_TRUE(std::equal(alone.begin(), alone.end(), b128.begin() + r * p.n * s))
          << "row " << r << (swiglu ? " (swiglu)" : "");
    }
  }
}

// The model's shapes: down (n 4096, k 4096 here) and gate_up with SwiGLU (n 2048, k 4096), four
// groups with a one-row group, a tile and two rows, an empty group and the shared expert's 64
// rows; sampled columns across tile edges, every grouped row.
TEST(GroupedGemm, ModelShapesOnSampledOutputs) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const std::vector<int64_t> cols = {0,   1,   2,   7,    8,    63,   64,   65,
                                     127, 128, 129, 1000, 1023, 1024, 2046, 2047};
  for (bool swiglu : {false, true}) {
    SCOPED_TRACE(swiglu ? "swiglu" : "plain");
    Problem p;
    p.n = swiglu ? 2048 : 4096, p.k = 4096, p.swiglu = swiglu, p.limit = 10.0f;
    p.offsets = {0, 1, 131, 131, 195};
    p.out_rows = 200;
    p.w_count = 3;
    const int64_t a_count = 150;
    for (int64_t r = 0; r < p.out_rows; ++r) p.a_rows.push_back(int32_t((r * 37) % a_count));
    p.a = bf16_values(0x71, size_t(a_count * p.k), 0.0f, 1.0f);
    p.w = bf16_values(0x72, size_t(p.groups() * p.w_rows() * p.k), 0.0f, 0.05f);
    std::vector<int64_t> c = cols;
    if (!swiglu) c.insert(c.end(), {2048, 3071, 4094, 4095});
    const auto b = run(p, 128);
    check(p, b, c);
    EXPECT_EQ(run(p, 64), b);
  }
}

}  // namespace
}  // namespace sparkglm
