// The CUDA runner end to end against the CPU reference, once per per-layer geometry the kernels
// serve (served_models.h: tinyglm with production shapes and dummy weights, and the trained
// tinyglm-micro checkpoint): logits within the declared tolerance through prefill, decode, mixed
// steps, the sparse indexer and the MTP head; greedy choices equal where the CPU's margin is wide;
// and bitwise determinism: a row's logits do not depend on the batch it shares, on a replayed CUDA
// graph versus eager launches, or on the run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/core/thread_pool.h"
#include "engine/model/model_loader.h"
#include "engine/model/selection_trace.h"
#include "tests/cuda/cuda_test_support.h"
#include "tests/cuda/served_models.h"

namespace sparkglm {
namespace {

using cuda_test::have_device;
using cuda_test::nmse;
using cuda_test::whole_tensor_tolerance;

// End to end the GPU rounds activations to BF16 before each projection (the CPU keeps FP32), so
// errors compound over the layers; this is the normalised error the whole tinyglm forward must
// stay under (measured on the H200: see docs/cuda-engine.md).
constexpr double kLogitTolerance = 1e-3;
constexpr int kBlock = 16;
constexpr int kBlocksPerSeq = 176;  // 2816 tokens

struct Fixture {
  std::string model;
  std::unique_ptr<LoadedModel> host;
  std::unique_ptr<cpu::CpuModelRunner> cpu;
  std::unique_ptr<cuda::CudaModelRunner> gpu;
};

std::unique_ptr<cuda::CudaModelRunner> make_gpu(const std::string& model, const ModelConfig& c,
                                                bool graphs, SelectionTrace* trace = nullptr) {
  cuda::CudaRunnerOptions o;
  o.num_blocks = 8 * kBlocksPerSeq;
  o.block_size = kBlock;
  o.num_state_slots = 8;
  o.max_rows = 1024 + 8;
  o.max_seq_len = kBlocksPerSeq * kBlock;
  o.kv_dtype = KvDtype::kBF16;
  o.graphs = graphs;
  o.selection_trace = trace;
  return std::make_unique<cuda::CudaModelRunner>(c, cuda_test::served_device_weights(model, c), o);
}

// The CPU reference's runner options, the GPU's cache geometry (make_gpu).
cpu::CpuRunnerOptions cpu_options(SelectionTrace* trace = nullptr) {
  cpu::CpuRunnerOptions o;
  o.num_blocks = 8 * kBlocksPerSeq;
  o.block_size = kBlock;
  o.num_state_slots = 8;
  o.kv_dtype = KvDtype::kBF16;
  o.selection_trace = trace;
  return o;
}

// One fixture per served model, made on first use and kept for the binary's life.
Fixture& fixture(const std::string& model) {
  static std::map<std::string, Fixture> fixtures;
  auto it = fixtures.find(model);
  if (it != fixtures.end()) return it->second;
  Fixture x;
  x.model = model;
  x.host = cuda_test::load_served_model(model);
  x.cpu = std::make_unique<cpu::CpuModelRunner>(x.host->config, x.host->weights, cpu_options(),
                                                default_thread_pool());
  x.gpu = make_gpu(model, x.host->config, true);
  return fixtures.emplace(model, std::move(x)).first->second;
}

std::vector<int32_t> table(int seq) {
  std::vector<int32_t> t(kBlocksPerSeq);
  for (int i = 0; i < kBlocksPerSeq; ++i) t[size_t(i)] = seq * kBlocksPerSeq + i;
  return t;
}

std::vector<int32_t> prompt(int seq, int n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) p[size_t(i)] = (i * 31 + seq * 7 + 3) % 256;
  return p;
}

std::vector<int32_t> blocks_for(int seq, int tokens) {
  auto t = table(seq);
  t.resize(size_t((tokens + kBlock - 1) / kBlock));
  return t;
}

int argmax(const float* row, int n) {
  return int(std::max_element(row, row + n) - row);
}

ForwardOutput run(ModelRunner& r, const ForwardBatch& b) {
  ForwardOutput out;
  r.forward(b, out);
  return out;
}

// Prefill the prompt of sequence `seq` in chunks, returning the last chunk's logits: of its last
// row, or of every row with `all_rows`.
ForwardOutput prefill(ModelRunner& r, int seq, const std::vector<int32_t>& p, int chunk,
                      bool all_rows = false) {
  ForwardOutput out;
  for (int s = 0; s < int(p.size()); s += chunk) {
    const int e = std::min<int>(int(p.size()), s + chunk);
    ForwardBatch b;
    const bool last = e == int(p.size());
    b.add_sequence({p.begin() + s, p.begin() + e}, s, seq, blocks_for(seq, e), last,
                   last && all_rows);
    r.forward(b, out);
  }
  return out;
}

// The normalised error of each row of [rows, vocab] logits.
std::vector<double> row_nmse(const std::vector<float>& got, const std::vector<float>& want,
                             int vocab) {
  std::vector<double> e;
  for (size_t r = 0; r * size_t(vocab) < want.size(); ++r) {
    const auto row = [&](const std::vector<float>& v) {
      return std::vector<float>(v.begin() + int64_t(r) * vocab, v.begin() + int64_t(r + 1) * vocab);
    };
    e.push_back(nmse(row(got), row(want)));
  }
  return e;
}

double rms(const std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += double(x) * double(x);
  return std::sqrt(sum / double(v.size()));
}

// v divided by its RMS: what an RMS norm reads.
std::vector<float> direction(const std::vector<float>& v) {
  const double r = rms(v);
  std::vector<float> d(v.size());
  for (size_t i = 0; i < v.size(); ++i) d[i] = float(double(v[i]) / r);
  return d;
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + int64_t(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Parameter: a served model (served_models.h).
class CudaModelRunnerOn : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaModelRunnerOn, PrefillAndDecodeMatchTheCpuReference) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  if (!cuda_test::compares_with_cpu(GetParam())) GTEST_SKIP() << cuda_test::kNoCpuComparison;
  Fixture& f = fixture(GetParam());
  const int V = f.host->config.vocab_size;
  const auto p = prompt(0, 77);
  ForwardOutput c = prefill(*f.cpu, 0, p, 64);
  ForwardOutput g = prefill(*f.gpu, 0, p, 64);
  // The logits are held to kLogitTolerance on both models. The hidden state's consumers (the final
  // norm, MTP's hnorm) read its direction: on tinyglm that and the raw values are held to the same
  // bound; on the trained micro to whole_tensor_tolerance. The H200 measured (2026-12-03) the
  // micro's hidden at 2.9e-3 raw, 2.2e-3 in direction, RMS ratio 1.025, while its logits sat at
  // 2.5e-5 and its held-out NLL on cuda equalled the CPU's to 1e-4 (docs/trained-tinyglm.md).
  const double hidden_rms_ratio = rms(g.hidden) / rms(c.hidden);
  const double hidden_direction = nmse(direction(g.hidden), direction(c.hidden));
  std::printf(
      "%s prefill of %zu: logits NMSE %.3g; hidden NMSE %.3g, of its direction %.3g, "
      "RMS GPU / CPU %.5f\n",
      GetParam().c_str(), p.size(), nmse(g.logits, c.logits), nmse(g.hidden, c.hidden),
      hidden_direction, hidden_rms_ratio);
  EXPECT_LT(nmse(g.logits, c.logits), kLogitTolerance);
  EXPECT_LT(hidden_direction, whole_tensor_tolerance(GetParam()));
  if (cuda_test::is_dummy(GetParam())) {
    EXPECT_LT(nmse(g.hidden, c.hidden), kLogitTolerance);
  }
  int pos = int(p.size());
  for (int step = 0; step < 6; ++step, ++pos) {
    const int token = argmax(c.logits.data(), V);  // the CPU's choice drives both
    ForwardBatch b;
    b.add_sequence({token}, pos, 0, blocks_for(0, pos + 1));
    c = run(*f.cpu, b);
    g = run(*f.gpu, b);
    const double e = nmse(g.logits, c.logits);
    EXPECT_LT(e, kLogitTolerance) << "decode step " << step;
  }
}

TEST_P(CudaModelRunnerOn, DecodeRowsDoNotDependOnTheBatchOrOnGraphs) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  Fixture& f = fixture(GetParam());
  auto eager = make_gpu(f.model, f.host->config, false);
  // Four sequences of different lengths, prefilled one by one on both runners.
  std::vector<int> lengths = {20, 45, 9, 130};
  std::vector<int32_t> next(4);
  for (int s = 0; s < 4; ++s) {
    const auto p = prompt(s + 1, lengths[size_t(s)]);
    ForwardOutput a = prefill(*f.gpu, s + 1, p, 64);
    ForwardOutput b = prefill(*eager, s + 1, p, 64);
    ASSERT_EQ(a.logits, b.logits);
    next[size_t(s)] = argmax(a.logits.data(), f.host->config.vocab_size);
  }
  // Three steps of all four together (graphed: a capture, then replays at new positions), each
  // followed by each sequence alone on the eager runner (same state).
  const int V = f.host->config.vocab_size;
  const uint64_t replays_before = f.gpu->graph_replays();
  for (int step = 0; step < 3; ++step) {
    ForwardBatch all;
    for (int s = 0; s < 4; ++s)
      all.add_sequence({next[size_t(s)]}, lengths[size_t(s)], s + 1,
                       blocks_for(s + 1, lengths[size_t(s)] + 1));
    const ForwardOutput together = run(*f.gpu, all);
    for (int s = 0; s < 4; ++s) {
      ForwardBatch one;
      one.add_sequence({next[size_t(s)]}, lengths[size_t(s)], s + 1,
                       blocks_for(s + 1, lengths[size_t(s)] + 1));
      const ForwardOutput alone = run(*eager, one);
      EXPECT_TRUE(std::equal(alone.logits.begin(), alone.logits.end(),
                             together.logits.begin() + int64_t(s) * V))
          << "step " << step << ", sequence " << s;
      next[size_t(s)] = argmax(alone.logits.data(), V);
      ++lengths[size_t(s)];
    }
  }
  // Graphed: three of the four rows attend through the indexer on the micro (window 16 tokens),
  // none on tinyglm; both shapes are captured and replayed (cuda_step_graphs.cu).
  EXPECT_GE(f.gpu->graphs_captured(), 1);
  EXPECT_GE(f.gpu->graph_replays(), replays_before + 2);
}

TEST_P(CudaModelRunnerOn, AMixedStepEqualsItsPartsAndRepeatsBitwise) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  Fixture& f = fixture(GetParam());
  const int V = f.host->config.vocab_size;
  // Sequence 5 decodes while sequence 6 prefills, in one step; then the same again from scratch.
  std::vector<std::vector<float>> runs;
  for (int rep = 0; rep < 2; ++rep) {
    const auto p5 = prompt(5, 33);
    ForwardOutput o5 = prefill(*f.gpu, 5, p5, 64);
    const int t5 = argmax(o5.logits.data(), V);
    const auto p6 = prompt(6, 70);
    ForwardBatch mixed;
    mixed.add_sequence({t5}, 33, 5, blocks_for(5, 34));
    mixed.add_sequence(p6, 0, 6, blocks_for(6, 70));
    const ForwardOutput m = run(*f.gpu, mixed);
    runs.push_back(m.logits);
    if (rep == 0 && cuda_test::compares_with_cpu(GetParam())) {
      const ForwardOutput c6 = prefill(*f.cpu, 6, p6, 70);
      EXPECT_LT(nmse({m.logits.begin() + V, m.logits.end()}, c6.logits), kLogitTolerance);
    }
  }
  EXPECT_EQ(runs[0], runs[1]);
}

// Discrete choices amplify the GPU's BF16 rounding: where two experts (or two pools) nearly tie,
// the GPU may route a row to the other one, and that row's logits then differ by up to 5e-2
// (measured on the H200: about one row in ten of a 552-row chunk, the same rows at every
// chunking; perturbing the CPU router's logits by 2 % reproduces it). So sparse rows are judged
// by their median error and the share of rows off by more than 1e-4: a wrong selection moves the
// bulk of the rows (random pools on the CPU put the median at 5e-4 and nine rows in ten past
// 1e-4), a near-tie moves a few.
constexpr double kSparseMedianTolerance = 1e-4;
constexpr double kSparseOffShare = 0.25;

TEST_P(CudaModelRunnerOn, SparseIndexerRowsMatchTheCpuReference) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  if (!cuda_test::compares_with_cpu(GetParam())) GTEST_SKIP() << cuda_test::kNoCpuComparison;
  Fixture& f = fixture(GetParam());
  const int V = f.host->config.vocab_size;
  // Past 2051 tokens the indexer selects 512 of the pools: every row of the last chunk (2048 ..
  // 2599, up to 650 pools) is compared on its own.
  const auto p = prompt(7, 2600);
  ForwardOutput c = prefill(*f.cpu, 7, p, 1024, true);
  ForwardOutput g = prefill(*f.gpu, 7, p, 1024, true);
  ASSERT_EQ(g.logits.size(), c.logits.size());
  const std::vector<double> rows = row_nmse(g.logits, c.logits, V);
  const auto off = std::count_if(rows.begin(), rows.end(), [](double e) { return e > 1e-4; });
  EXPECT_LT(median(rows), kSparseMedianTolerance);
  EXPECT_LT(double(off) / double(rows.size()), kSparseOffShare) << off << " rows off";
  EXPECT_LT(nmse(g.logits, c.logits), whole_tensor_tolerance(GetParam()));
  // Sparse decode steps from the CPU's greedy tokens: the same rule over eight steps.
  c.logits.erase(c.logits.begin(), c.logits.end() - V);
  std::vector<double> steps;
  for (int step = 0; step < 8; ++step) {
    const int pos = 2600 + step;
    ForwardBatch b;
    b.add_sequence({argmax(c.logits.data(), V)}, pos, 7, blocks_for(7, pos + 1));
    c = run(*f.cpu, b);
    g = run(*f.gpu, b);
    steps.push_back(nmse(g.logits, c.logits));
  }
  EXPECT_LT(median(steps), kSparseMedianTolerance);
  EXPECT_LE(std::count_if(steps.begin(), steps.end(), [](double e) { return e > 1e-3; }), 2);
}

// Why sparse rows part from the CPU (selection_trace.h). Both runners record the tokens every
// sparse row attended in each MLA layer, over the sparse test's 2,600-token prompt. Rows before
// the first row whose selection differs in any layer must match the CPU as dense rows do:
// there a kernel computed a row under the same choice. Past it, a pool that one runner chose
// and the other did not enters the KDA state of the layers after it and may move every later
// row. Most rows of each layer must select as the CPU does, or the indexer itself is wrong.
// Where the first difference falls (printed) says how much of the sparse path the first check
// covered. Not yet run on a GPU (written in session 22, after its device time).
TEST_P(CudaModelRunnerOn, SparseRowsMatchTheCpuUntilASelectionDiffers) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  if (!cuda_test::compares_with_cpu(GetParam())) GTEST_SKIP() << cuda_test::kNoCpuComparison;
  Fixture& f = fixture(GetParam());
  const ModelConfig& c = f.host->config;
  const int V = c.vocab_size, n = 2600, seq = 7;
  SelectionTrace cpu_trace, gpu_trace;
  cpu::CpuModelRunner cpu(c, f.host->weights, cpu_options(&cpu_trace), default_thread_pool());
  const auto gpu = make_gpu(GetParam(), c, false, &gpu_trace);
  const auto p = prompt(seq, n);
  std::vector<float> logits[2];  // every row: CPU, GPU
  for (int s = 0; s < n; s += 1024) {
    const int e = std::min(n, s + 1024);
    ForwardBatch b;
    b.add_sequence({p.begin() + s, p.begin() + e}, s, seq, blocks_for(seq, e), true, true);
    for (int r = 0; r < 2; ++r) {
      const ForwardOutput o = run(r == 0 ? static_cast<ModelRunner&>(cpu) : *gpu, b);
      logits[r].insert(logits[r].end(), o.logits.begin(), o.logits.end());
    }
  }
  ASSERT_EQ(logits[0].size(), size_t(n) * size_t(V));
  ASSERT_EQ(cpu_trace.size(), gpu_trace.size()) << "the runners recorded different rows";
  int first_differ = n;
  for (int layer = 0; layer < c.num_mla_layers(); ++layer) {
    int sparse = 0, same = 0, first = n;
    for (int t = 0; t < n; ++t) {
      const std::vector<int32_t> want = cpu_trace.tokens(layer, seq, t);
      if (want.empty()) continue;
      ++sparse;
      if (gpu_trace.tokens(layer, seq, t) == want) {
        ++same;
      } else {
        first = std::min(first, t);
      }
    }
    std::printf("%s MLA layer %d: %d of %d sparse rows select as the CPU does; first other at %d\n",
                GetParam().c_str(), layer, same, sparse, first);
    EXPECT_GT(sparse, 0);
    EXPECT_GE(double(same), 0.5 * double(sparse)) << "layer " << layer;
    first_differ = std::min(first_differ, first);
  }
  const std::vector<double> rows = row_nmse(logits[1], logits[0], V);
  const std::vector<double> before(rows.begin(), rows.begin() + first_differ);
  const double worst = before.empty() ? 0.0 : *std::max_element(before.begin(), before.end());
  std::printf("%s: rows before position %d worst %.3g, median %.3g; rows from it on median %.3g\n",
              GetParam().c_str(), first_differ, worst, before.empty() ? 0.0 : median(before),
              first_differ < n ? median({rows.begin() + first_differ, rows.end()}) : 0.0);
  // The median, not the worst: a near-tied expert may still flip a row of its own (the sparse
  // test above).
  ASSERT_FALSE(before.empty());
  EXPECT_LT(median(before), kSparseMedianTolerance) << "rows computed under the CPU's selections";
}

TEST_P(CudaModelRunnerOn, MtpHeadMatchesTheCpuReference) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  if (!cuda_test::compares_with_cpu(GetParam())) GTEST_SKIP() << cuda_test::kNoCpuComparison;
  Fixture& f = fixture(GetParam());
  const auto p = prompt(3, 40);
  ForwardBatch b;
  b.add_sequence(p, 0, 3, blocks_for(3, 40), true, true);
  const ForwardOutput main_c = run(*f.cpu, b);
  const ForwardOutput main_g = run(*f.gpu, b);
  // Row i carries t_{i+1} with h_i: the MTP batch is the prompt shifted by one.
  ForwardBatch m;
  m.add_sequence({p.begin() + 1, p.end()}, 0, 3, blocks_for(3, 39), true, true);
  const int64_t D = f.host->config.hidden_size;
  std::vector<float> h(main_c.hidden.begin(), main_c.hidden.end() - D);
  ForwardOutput mc, mg;
  f.cpu->forward_mtp(m, h, mc);
  f.gpu->forward_mtp(m, h, mg);
  EXPECT_LT(nmse(mg.logits, mc.logits), kLogitTolerance);
  EXPECT_LT(nmse(main_g.logits, main_c.logits), kLogitTolerance);
}

// Greedy decoding from a byte prompt, both runners fed the CPU's choices (so their states stay
// the same): wherever the CPU's top-2 margin is wide against the GPU's BF16 rounding (a quarter of
// the row's logit RMS, several times the error kLogitTolerance allows), the GPU picks the same
// token.
TEST_P(CudaModelRunnerOn, GreedyChoicesEqualTheCpuWhereItsMarginIsWide) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  if (!cuda_test::compares_with_cpu(GetParam())) GTEST_SKIP() << cuda_test::kNoCpuComparison;
  Fixture& f = fixture(GetParam());
  const int V = f.host->config.vocab_size;
  const std::string text = "Q: 23+45=? A: 68. Q: 17+26=? A: ";
  std::vector<int32_t> p(text.begin(), text.end());
  ForwardOutput c = prefill(*f.cpu, 2, p, 64);
  ForwardOutput g = prefill(*f.gpu, 2, p, 64);
  int pos = int(p.size()), compared = 0;
  for (int step = 0; step < 24; ++step, ++pos) {
    std::vector<float> row(c.logits.begin(), c.logits.begin() + V);
    double ss = 0;
    for (float v : row) ss += double(v) * v;
    const int want = argmax(row.data(), V);
    const float top = row[size_t(want)];
    row[size_t(want)] = -INFINITY;
    const float second = row[size_t(argmax(row.data(), V))];
    if (double(top) - second > 0.25 * std::sqrt(ss / V)) {
      ++compared;
      EXPECT_EQ(argmax(g.logits.data(), V), want)
          << "step " << step << ": CPU margin " << top - second;
    }
    ForwardBatch b;
    b.add_sequence({want}, pos, 2, blocks_for(2, pos + 1));
    c = run(*f.cpu, b);
    g = run(*f.gpu, b);
  }
  std::printf("%s: %d of 24 greedy steps had a wide CPU margin\n", GetParam().c_str(), compared);
  // The trained model is confident on its own curriculum: the test must judge some steps.
  if (GetParam() == cuda_test::kTrainedMicro) {
    EXPECT_GE(compared, 4);
  }
}

INSTANTIATE_TEST_SUITE_P(ServedModels, CudaModelRunnerOn,
                         ::testing::ValuesIn(cuda_test::served_models()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           return cuda_test::model_test_name(i.param);
                         });

// check_config (host only, no device needed): the two geometries pass, each field outside them is
// refused by name.
TEST(CudaModelRunner, CheckConfigServesProductionAndMicroGeometriesOnly) {
  // tinyglm-wide stays in the micro instantiation: more and wider MLA heads, more indexer heads, a
  // larger top-k, more layers (its forward against the CPU: the CudaModelRunnerOn tests).
  for (const char* preset : {"glm-5.3-flash", "tinyglm", "tinyglm-micro", "tinyglm-wide"})
    EXPECT_NO_THROW(cuda::CudaModelRunner::check_config(preset_config(preset))) << preset;
  EXPECT_NO_THROW(
      cuda::CudaModelRunner::check_config(cuda_test::served_config(cuda_test::kTrainedMicro)));
  struct Case {
    const char* field;
    void (*change)(ModelConfig&);
  };
  const Case cases[] = {
      {"hidden_size", [](ModelConfig& c) { c.hidden_size = 512; }},
      {"linear_attn_config.head_dim", [](ModelConfig& c) { c.kda.head_dim = 128; }},
      {"kv_lora_rank", [](ModelConfig& c) { c.kv_lora_rank = 512; }},
      {"index_head_dim", [](ModelConfig& c) { c.index_head_dim = 64; }},
      {"moe_intermediate_size", [](ModelConfig& c) { c.moe_intermediate_size = 48; }},
      {"hc_mult", [](ModelConfig& c) { c.hc_mult = 2; }},
  };
  for (const Case& k : cases) {
    ModelConfig c = preset_config("tinyglm-micro");
    k.change(c);
    try {
      cuda::CudaModelRunner::check_config(c);
      ADD_FAILURE() << k.field << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(k.field), std::string::npos) << e.what();
    }
  }
  ModelConfig production = preset_config("tinyglm");
  production.num_attention_heads = 8;  // production heads come in tensor-core tiles of 16
  EXPECT_THROW(cuda::CudaModelRunner::check_config(production), Error);
}

// A geometry neither instantiation serves: tinyglm-micro with the production KDA head dim is
// refused by name, and the message lists the geometries that are served.
TEST(CudaModelRunner, RefusesShapesItsKernelsDoNotServe) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  ModelConfig c = preset_config("tinyglm-micro");
  c.kda.head_dim = 64;
  try {
    make_gpu(cuda_test::kProductionShapes, c, true);
    FAIL() << "KDA head_dim 64 is served by no kernel instantiation";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("linear_attn_config.head_dim"), std::string::npos) << what;
    EXPECT_NE(what.find("tinyglm-micro (hidden_size 256"), std::string::npos) << what;
  }
  ModelConfig wider = preset_config("tinyglm-micro");
  wider.hidden_size = 512;  // neither 4096 nor 256
  try {
    make_gpu(cuda_test::kProductionShapes, wider, true);
    FAIL() << "hidden_size 512 is served by no kernel instantiation";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("hidden_size = 4096 or 256"), std::string::npos)
        << e.what();
  }
  // tinyglm-micro itself is served, with bf16 latents only: its fp8_g128 records (64 values and
  // a scale) would not be 16-byte aligned.
  const ModelConfig micro = preset_config("tinyglm-micro");
  cuda::CudaRunnerOptions o;
  o.num_blocks = 16;
  o.block_size = kBlock;
  o.num_state_slots = 1;
  o.max_rows = 64;
  o.max_seq_len = 256;
  o.kv_dtype = KvDtype::kFp8G128;
  try {
    cuda::CudaModelRunner r(micro, cuda::DeviceWeights::generate(micro, kDefaultDummySeed), o);
    FAIL() << "fp8_g128 latents of kv_lora_rank 64";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fp8_g128"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sparkglm
