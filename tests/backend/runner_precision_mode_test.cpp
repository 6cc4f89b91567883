// build_runner's precision mode (MODEL.md section 7, engine/model/precision_mode.h): on the CPU,
// spark computes exactly what `sparkglm logits --precision-mode spark` computes (the loaded model
// with apply_precision_mode, one runner; here with the request's KV dtype) and not what strict
// does; tensor-parallel ranks shard the converted weights, so TP2 spark matches one spark rank
// within the TP rounding bound; --device cuda with spark is refused only where there is no CUDA
// backend or device (tests/cuda/spark_*_cuda_test.cpp check spark on a GPU).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/backend/runner_factory.h"
#include "engine/core/error.h"
#include "engine/core/thread_pool.h"
#include "engine/dist/socket_communicator.h"
#include "engine/model/forward_batch.h"
#include "engine/model/model_loader.h"
#include "engine/model/precision_mode.h"
#include "engine/runtime/block_allocator.h"
#include "engine/runtime/latent_cache.h"
#include "tinyglm/dummy_weights.h"

namespace sparkglm {
namespace {

// Row-parallel sums add in another order than one rank's (tests/dist/tensor_parallel_test.cpp):
// about 1e-13 at tinyglm-micro's depth. A rank converting only its own slice would quantize with
// another global scale: 0.06 (tried once, converting after shard_weights).
constexpr double kMaxTpNmse = 1e-9;

RunnerRequest micro(PrecisionMode mode) {
  RunnerRequest r;
  r.preset = "tinyglm-micro";
  r.seed = kDefaultDummySeed;
  r.max_num_seqs = 1;
  r.max_seq_len = 256;
  r.kv_dtype = KvDtype::kBF16;  // what the server keeps (sparkglm logits keeps f32 latents)
  r.precision_mode = mode;
  return r;
}

// Logits [tokens, vocab] of one prefill of a fixed 24-token prompt.
std::vector<float> prompt_logits(ModelRunner& runner) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 24; ++i) prompt.push_back((i * 37 + 11) % 256);
  BlockAllocator blocks(runner.cache_geometry().num_blocks);
  std::vector<int32_t> table;
  blocks.ensure_capacity(table, int(prompt.size()), runner.cache_geometry().block_size);
  ForwardBatch batch;
  batch.add_sequence(prompt, 0, 0, table, /*want_logits=*/true, /*all_logits=*/true);
  ForwardOutput out;
  runner.forward(batch, out);
  return out.logits;
}

double nmse(const std::vector<float>& a, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return num / den;
}

std::vector<float> built_logits(const RunnerRequest& r) {
  ThreadPool pool(2);
  const BuiltRunner b = build_runner(r, pool);
  return prompt_logits(*b.runner);
}

TEST(RunnerPrecisionMode, SparkOnTheCpuIsWhatSparkglmLogitsComputesAndNotStrict) {
  ThreadPool pool(2);
  const BuiltRunner spark = build_runner(micro(PrecisionMode::kSpark), pool);
  bool logged = false;
  for (const std::string& line : spark.log_lines)
    logged = logged || line.rfind("precision mode spark: KDA and shared-expert weights", 0) == 0;
  EXPECT_TRUE(logged) << ::testing::PrintToString(spark.log_lines);
  const std::vector<float> served = prompt_logits(*spark.runner);

  // apps/sparkglm.cpp's path: load, apply the mode, one runner over the whole model.
  auto model = load_model_preset("tinyglm-micro", 0, kDefaultDummySeed, pool);
  apply_precision_mode(model->config, PrecisionMode::kSpark, model->weights);
  const RunnerRequest r = micro(PrecisionMode::kSpark);
  cpu::CpuRunnerOptions o;
  o.num_blocks = spark.runner->cache_geometry().num_blocks;
  o.block_size = r.block_size;
  o.num_state_slots = r.max_num_seqs;
  o.kv_dtype = r.kv_dtype;
  cpu::CpuModelRunner reference(model->config, model->weights, o, pool);
  EXPECT_EQ(served, prompt_logits(reference)) << "spark served differs from sparkglm logits";

  const std::vector<float> strict = built_logits(micro(PrecisionMode::kStrict));
  const double e = nmse(served, strict);
  std::printf("tinyglm-micro spark vs strict prompt logits NMSE: %.3g\n", e);
  EXPECT_GT(e, 1e-6) << "spark computes what strict does: nothing converted?";
}

TEST(RunnerPrecisionMode, TensorParallelRanksShardTheConvertedWeights) {
  const std::vector<float> one = built_logits(micro(PrecisionMode::kSpark));
  constexpr int kWorld = 2;
  auto group = dist::SocketCommunicator::local_group(kWorld);
  std::vector<std::vector<float>> logits(kWorld);
  std::vector<std::string> errors(kWorld);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r)
    ranks.emplace_back([&, r] {
      try {
        RunnerRequest req = micro(PrecisionMode::kSpark);
        req.comm = group[size_t(r)].get();
        logits[size_t(r)] = built_logits(req);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < kWorld; ++r) ASSERT_EQ(errors[size_t(r)], "") << "rank " << r;
  ASSERT_EQ(logits[0].size(), one.size());
  const double e = nmse(logits[0], one);
  std::printf("TP%d spark vs one spark rank prompt logits NMSE: %.3g\n", kWorld, e);
  EXPECT_LT(e, kMaxTpNmse);
  EXPECT_EQ(logits[1], logits[0]) << "the ranks disagree";
}

// Spark runs on cuda now (spark_moe.h): what still refuses it is the machine. Without the CUDA
// backend or without a GPU the refusal names the device, never the mode; with a GPU the made-up
// preset is what fails.
TEST(RunnerPrecisionMode, SparkOnCudaIsRefusedOnlyForWantOfADevice) {
  RunnerRequest r = micro(PrecisionMode::kSpark);
  r.device = "cuda";
  r.preset = "no-such-preset";  // loading anything would fail with another error
  try {
    ThreadPool pool(1);
    build_runner(r, pool);
    FAIL() << "a preset that does not exist was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find("--precision-mode"), std::string::npos) << what;
    if (!cuda_backend_built()) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
      EXPECT_NE(what.find("--device cuda: this binary was built without the CUDA backend"),
                std::string::npos)
          << what;
    } else {
      EXPECT_TRUE(what.find("--device cuda: no CUDA device is visible") != std::string::npos ||
                  what.find("no-such-preset") != std::string::npos)
          << what;
    }
  }
}

}  // namespace
}  // namespace sparkglm
