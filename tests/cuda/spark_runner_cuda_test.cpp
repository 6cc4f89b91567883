// --precision-mode spark's CUDA runner (issue 15, MODEL.md section 7): on tinyglm's shapes with
// BF16 and fp4-local weights it matches the CPU runner in spark within kSparkLogitTolerance and is
// closer to it than CPU strict is; spark's arena is smaller than strict's and strict's is what it
// was; and the whole tinyglm's strict-against-spark A/B line (SPARK_AB) that
// bench/results/h200-2026-12-03/step_spark.sh records. The operators: spark_fp4_cuda_test.cpp.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/backend/cuda/device_weights.h"
#include "engine/backend/runner_factory.h"
#include "engine/core/thread_pool.h"
#include "engine/model/forward_batch.h"
#include "engine/model/precision_mode.h"
#include "tests/cuda/cuda_test_support.h"
#include "tinyglm/dummy_weights.h"
#include "tinyglm/stored_weights.h"

namespace sparkglm {
namespace {

using cuda_test::have_device;
using cuda_test::nmse;

// GPU spark against CPU spark, logits NMSE. Beside strict's own error (BF16 activations into
// every dense projection, kLogitTolerance 1e-3 in the other runner tests), an FP4 code of a
// routed activation flips where the two inputs straddle a rounding boundary: the inputs differ
// by strict's error (~2^-9 relative), a code step is 1/4 to 1/2 of the value, so roughly 1 % of
// the codes of a layer move by one step. Measured numbers are printed; spark against strict is
// printed beside them (it must be larger). On the H200 (2026-12-03) the steps measured 3.4e-3 to
// 5.4e-3 (bf16 weights) and 3.7e-3 to 1.38e-2 (fp4-local: one step's flips compounded), mean
// 4.2e-3 and 6.4e-3, against 2.5e-2 to 6.1e-2 for strict: a step is bounded at 2e-2 and the mean
// over the steps at 1e-2.
constexpr double kSparkLogitTolerance = 2e-2;
constexpr double kSparkMeanTolerance = 1e-2;

constexpr int kBlock = 16;
constexpr int kBlocksPerSeq = 64;

// tinyglm's production layer shapes, two layers (KDA + MoE, then MLA + DSA + MoE), no MTP head.
ModelConfig two_moe_layers() {
  ModelConfig c = preset_config("tinyglm");
  c.num_hidden_layers = 2;
  c.layer_types = {LayerKind::kLinearAttention, LayerKind::kSparseAttention};
  c.first_k_dense_replace = 0;
  c.num_nextn_predict_layers = 0;
  c.validate();
  return c;
}

std::vector<int32_t> blocks_for(int tokens) {
  std::vector<int32_t> t;
  for (int i = 0; i < (tokens + kBlock - 1) / kBlock; ++i) t.push_back(i);
  return t;
}

// Logits of a 77-token prefill (two chunks) and 4 greedy decode steps, the CPU spark runner's
// token driving every runner.
struct Run {
  std::vector<std::vector<float>> logits;  // [prefill, decode steps]
};

std::vector<Run> run_all(const ModelConfig& c, std::vector<ModelRunner*> runners) {
  std::vector<Run> out(runners.size());
  std::vector<int32_t> p(77);
  for (int i = 0; i < 77; ++i) p[size_t(i)] = (i * 31 + 3) % 256;
  std::vector<ForwardOutput> o(runners.size());
  for (int s = 0; s < 77; s += 64) {
    const int e = std::min(77, s + 64);
    ForwardBatch b;
    b.add_sequence({p.begin() + s, p.begin() + e}, s, 0, blocks_for(e), e == 77);
    for (size_t i = 0; i < runners.size(); ++i) runners[i]->forward(b, o[i]);
  }
  for (size_t i = 0; i < runners.size(); ++i) out[i].logits.push_back(o[i].logits);
  for (int step = 0, pos = 77; step < 4; ++step, ++pos) {
    const int token =
        int(std::max_element(o[0].logits.begin(), o[0].logits.end()) - o[0].logits.begin());
    ForwardBatch b;
    b.add_sequence({token}, pos, 0, blocks_for(pos + 1));
    for (size_t i = 0; i < runners.size(); ++i) {
      runners[i]->forward(b, o[i]);
      out[i].logits.push_back(o[i].logits);
    }
  }
  (void)c;
  return out;
}

int argmax(const std::vector<float>& v) {
  return int(std::max_element(v.begin(), v.end()) - v.begin());
}

void expect_spark_runner_matches_cpu(CheckpointFormat format) {
  const ModelConfig c = two_moe_layers();
  ThreadPool& pool = default_thread_pool();
  auto host = [&](PrecisionMode mode) {
    auto tensors = make_dummy_weights(c, kDefaultDummySeed, pool);
    ModelWeights w = format == CheckpointFormat::kBf16
                         ? ModelWeights::bind(c, tensors)
                         : ModelWeights::bind(c, stored_weights(c, tensors, format, pool).tensors);
    apply_precision_mode(c, mode, w);
    return w;
  };
  const ModelWeights spark_w = host(PrecisionMode::kSpark), strict_w = host(PrecisionMode::kStrict);
  cpu::CpuRunnerOptions co;
  co.num_blocks = kBlocksPerSeq;
  co.block_size = kBlock;
  co.num_state_slots = 1;
  co.kv_dtype = KvDtype::kBF16;
  cpu::CpuModelRunner cpu_spark(c, spark_w, co, pool), cpu_strict(c, strict_w, co, pool);
  cuda::CudaRunnerOptions go;
  go.num_blocks = kBlocksPerSeq;
  go.block_size = kBlock;
  go.num_state_slots = 1;
  go.max_rows = 1024 + 8;
  go.max_seq_len = kBlocksPerSeq * kBlock;
  go.kv_dtype = KvDtype::kBF16;
  go.precision_mode = PrecisionMode::kSpark;
  cuda::CudaModelRunner gpu(
      c, cuda::DeviceWeights::generate(c, kDefaultDummySeed, format, PrecisionMode::kSpark), go);
  const std::vector<Run> r = run_all(c, {&cpu_spark, &gpu, &cpu_strict});
  int agree = 0;
  double sum = 0;
  for (size_t i = 0; i < r[0].logits.size(); ++i) {
    const double e = nmse(r[1].logits[i], r[0].logits[i]);
    sum += e;
    const double strict = nmse(r[2].logits[i], r[0].logits[i]);
    std::printf("%s step %zu: GPU spark vs CPU spark NMSE %.3g; CPU strict vs CPU spark %.3g\n",
                checkpoint_format_name(format), i, e, strict);
    EXPECT_LT(e, kSparkLogitTolerance) << "step " << i;
    EXPECT_LT(e, strict) << "step " << i << ": the GPU is no closer to spark than strict is";
    agree += argmax(r[1].logits[i]) == argmax(r[0].logits[i]);
  }
  std::printf("%s greedy agreement GPU spark vs CPU spark: %d of %zu\n",
              checkpoint_format_name(format), agree, r[0].logits.size());
  EXPECT_LT(sum / double(r[0].logits.size()), kSparkMeanTolerance);
}

TEST(SparkRunner, Bf16WeightsMatchTheCpuRunnerInSpark) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  expect_spark_runner_matches_cpu(CheckpointFormat::kBf16);
}

TEST(SparkRunner, Fp4LocalWeightsMatchTheCpuRunnerInSpark) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  expect_spark_runner_matches_cpu(CheckpointFormat::kFp4Local);
}

// Spark's arena keeps the converted projections in NVFP4: smaller than strict's, and strict's is
// what it was without the mode (no device needed).
TEST(SparkRunner, ArenaInSparkIsSmallerAndStrictsIsUnchanged) {
  const ModelConfig c = two_moe_layers();
  for (CheckpointFormat f : {CheckpointFormat::kBf16, CheckpointFormat::kFp4Local}) {
    const size_t strict = cuda::DeviceWeights::arena_bytes(c, f);
    EXPECT_EQ(cuda::DeviceWeights::arena_bytes(c, f, PrecisionMode::kStrict), strict);
    EXPECT_LT(cuda::DeviceWeights::arena_bytes(c, f, PrecisionMode::kSpark), strict);
  }
}

// G2's A/B on the whole tinyglm (bench/results/h200-2026-12-03/step_spark.sh greps these lines):
// the GPU in strict and in spark through build_runner, the same prompt and then the strict
// runner's greedy tokens fed to both, logit NMSE and greedy agreement per position. Asserts only
// that spark changes the logits and both stay finite; the numbers are the measurement.
TEST(SparkAb, TinyglmStrictAgainstSparkOnTheGpu) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  auto build = [](PrecisionMode mode) {
    RunnerRequest r;
    r.device = "cuda";
    r.preset = "tinyglm";
    r.seed = kDefaultDummySeed;
    r.max_num_seqs = 1;
    r.max_seq_len = 1024;
    r.max_tokens_per_step = 512;
    r.kv_cache_bytes = size_t(256) << 20;
    r.precision_mode = mode;
    return build_runner(r, default_thread_pool());
  };
  BuiltRunner strict = build(PrecisionMode::kStrict), spark = build(PrecisionMode::kSpark);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 200; ++i) prompt.push_back((i * 37 + 11) % 256);
  const int bs = strict.runner->cache_geometry().block_size;
  auto table = [&](int tokens) {
    std::vector<int32_t> t;
    for (int i = 0; i < (tokens + bs - 1) / bs; ++i) t.push_back(i);
    return t;
  };
  ForwardOutput a, b;
  ForwardBatch first;
  first.add_sequence(prompt, 0, 0, table(int(prompt.size())), true, /*all_logits=*/true);
  strict.runner->forward(first, a);
  spark.runner->forward(first, b);
  const double prompt_nmse = nmse(b.logits, a.logits);
  const int V = strict.config.vocab_size;
  int agree = 0, positions = 0;
  for (size_t r = 0; r * size_t(V) < a.logits.size(); ++r, ++positions)
    agree +=
        std::max_element(a.logits.begin() + int64_t(r) * V, a.logits.begin() + int64_t(r + 1) * V) -
            a.logits.begin() - int64_t(r) * V ==
        std::max_element(b.logits.begin() + int64_t(r) * V, b.logits.begin() + int64_t(r + 1) * V) -
            b.logits.begin() - int64_t(r) * V;
  double decode_nmse = 0;
  int pos = int(prompt.size());
  std::vector<float> last_a(a.logits.end() - V, a.logits.end());
  for (int step = 0; step < 32; ++step, ++pos, ++positions) {
    ForwardBatch d;
    d.add_sequence({argmax(last_a)}, pos, 0, table(pos + 1));
    strict.runner->forward(d, a);
    spark.runner->forward(d, b);
    decode_nmse += nmse(b.logits, a.logits) / 32;
    agree += argmax(a.logits) == argmax(b.logits);
    last_a = a.logits;
  }
  for (float v : b.logits) ASSERT_TRUE(std::isfinite(v));
  std::printf(
      "SPARK_AB tinyglm cuda: prompt logit NMSE %.4g, decode logit NMSE (mean of 32) "
      "%.4g, greedy agreement %d of %d\n",
      prompt_nmse, decode_nmse, agree, positions);
  EXPECT_GT(prompt_nmse, 1e-8) << "spark computes what strict does";
}

}  // namespace
}  // namespace sparkglm
