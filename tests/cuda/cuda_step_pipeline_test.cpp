// The CUDA runner's pipelined steps under the scheduler, on tinyglm: greedy requests whose rows
// read the previous step's picks on the device (and replay decode graphs with them) produce the
// tokens of the unpipelined path, where every step's logits come to the host and the host picks.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/model/config.h"
#include "engine/runtime/scheduler.h"
#include "tests/cuda/cuda_test_support.h"
#include "tinyglm/dummy_weights.h"

namespace sparkglm {
namespace {

// Forwards to the CUDA runner, counting the rows that take their token from a device pick.
class Counting : public ModelRunner {
 public:
  explicit Counting(cuda::CudaModelRunner& r, bool device_draws = false)
      : r_(r), device_draws_(device_draws) {}
  const ModelConfig& config() const override { return r_.config(); }
  CacheGeometry cache_geometry() const override { return r_.cache_geometry(); }
  void forward(const ForwardBatch& b, ForwardOutput& out) override { r_.forward(b, out); }
  void forward_mtp(const ForwardBatch& b, const std::vector<float>& h,
                   ForwardOutput& out) override {
    r_.forward_mtp(b, h, out);
  }
  void submit(const ForwardBatch& b, const StepSampling& s) override {
    for (int32_t from : s.token_from) picked_inputs += from >= 0;
    r_.submit(b, s);
  }
  void collect(StepResult& result) override { r_.collect(result); }
  // Off: the scheduler asks the runner for greedy rows only and samples the others on the host.
  bool draws_sampled() const override { return device_draws_; }
  int picked_inputs = 0;

 private:
  cuda::CudaModelRunner& r_;
  bool device_draws_;
};

// temperature 0: greedy (logprobs on when not pipelined, so every step is collected first);
// otherwise seeded draws (top-k, top-p, min-p), pipelined only where the runner draws them.
std::vector<std::vector<int32_t>> generate(ModelRunner& runner, bool pipelined,
                                           float temperature = 0.0f) {
  SchedulerLimits limits;
  limits.max_num_seqs = 4;
  limits.max_batch_size = 4;
  limits.max_prefill_tokens = 256;
  limits.max_seq_len = 1024;
  Scheduler s(runner, limits);
  const int lens[] = {100, 37, 300, 64};
  std::vector<std::vector<int32_t>> out(4);
  for (int i = 0; i < 4; ++i) {
    GenerationRequest r;
    for (int j = 0; j < lens[i]; ++j) r.prompt.push_back((j * 17 + i * 5 + 1) % 256);
    r.sampling.temperature = temperature;
    r.sampling.max_tokens = 24;
    r.sampling.ignore_eos = true;
    r.sampling.logprobs = temperature == 0.0f && !pipelined;
    if (temperature != 0.0f) {
      r.sampling.seed = uint64_t(1000 + i);
      r.sampling.top_k = i == 1 ? 40 : 0;
      r.sampling.top_p = i == 2 ? 0.9f : 1.0f;
      r.sampling.min_p = i == 3 ? 0.05f : 0.0f;
    }
    r.on_event = [&out, i](const RequestEvent& e) {
      for (const auto& t : e.tokens) out[size_t(i)].push_back(t.id);
    };
    s.add(std::make_shared<RequestHandle>(i + 1), std::move(r));
  }
  for (int guard = 0; !s.idle() && guard < 10000; ++guard) s.step();
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(s.blocks().num_free(), runner.cache_geometry().num_blocks);
  return out;
}

// tinyglm with four state slots, sized for the scheduler limits of generate().
std::unique_ptr<cuda::CudaModelRunner> tinyglm_runner() {
  const ModelConfig c = preset_config("tinyglm");
  cuda::CudaRunnerOptions o;
  o.num_blocks = 4 * 64;
  o.block_size = 16;
  o.num_state_slots = 4;
  o.max_rows = 256 + 4;
  o.max_seq_len = 1024;
  return std::make_unique<cuda::CudaModelRunner>(
      c, cuda::DeviceWeights::generate(c, kDefaultDummySeed), o);
}

TEST(CudaStepPipeline, PipelinedGreedyEqualsTheHostPickedPath) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device";
  const auto runner = tinyglm_runner();
  cuda::CudaModelRunner& gpu = *runner;
  Counting piped(gpu), plain(gpu);
  const auto a = generate(piped, true);
  const auto b = generate(plain, false);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(a[size_t(i)].size(), 24u);
    EXPECT_EQ(a[size_t(i)], b[size_t(i)]) << "request " << i;
  }
  EXPECT_GT(piped.picked_inputs, 60);
  EXPECT_EQ(plain.picked_inputs, 0);
  EXPECT_GT(gpu.graph_replays(), 0u);
}

// Seeded sampling drawn on the device (sample_top_k_top_p: the CPU sampler's token) equals the
// host's draw from the logits, token for token, and lets the steps pipeline: sampled rows no longer
// bring 154,880 logits each back to the host.
TEST(CudaStepPipeline, DeviceDrawsEqualTheHostSampler) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device";
  const auto runner = tinyglm_runner();
  cuda::CudaModelRunner& gpu = *runner;
  Counting device(gpu, true), host(gpu, false);
  const auto a = generate(device, true, 0.7f);
  const auto b = generate(host, true, 0.7f);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(a[size_t(i)].size(), 24u);
    EXPECT_EQ(a[size_t(i)], b[size_t(i)]) << "request " << i;
  }
  EXPECT_GT(device.picked_inputs, 60) << "sampled steps pipeline when the device draws";
  EXPECT_EQ(host.picked_inputs, 0);
}

}  // namespace
}  // namespace sparkglm
