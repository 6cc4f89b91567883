// build_runner's weight format (RunnerRequest::weight_format, --weight-format): a preset's dummy
// weights in fp4-local on the CPU are the maker's quantized checkpoint dequantized (another
// identity than bf16, other logits), and with a checkpoint directory the option is refused, naming
// it, since a directory has its own formats.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/backend/runner_factory.h"
#include "engine/core/error.h"
#include "engine/core/thread_pool.h"
#include "engine/model/checkpoint_format.h"
#include "engine/model/forward_batch.h"
#include "engine/runtime/block_allocator.h"
#include "tinyglm/dummy_weights.h"

namespace sparkglm {
namespace {

RunnerRequest micro(CheckpointFormat format) {
  RunnerRequest r;
  r.preset = "tinyglm-micro";
  r.seed = kDefaultDummySeed;
  r.max_num_seqs = 1;
  r.max_seq_len = 256;
  r.weight_format = format;
  return r;
}

std::vector<float> last_logits(ModelRunner& runner) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 16; ++i) prompt.push_back((i * 37 + 11) % 256);
  BlockAllocator blocks(runner.cache_geometry().num_blocks);
  std::vector<int32_t> table;
  blocks.ensure_capacity(table, int(prompt.size()), runner.cache_geometry().block_size);
  ForwardBatch batch;
  batch.add_sequence(prompt, 0, 0, table);
  ForwardOutput out;
  runner.forward(batch, out);
  return out.logits;
}

TEST(RunnerWeightFormat, Fp4LocalPresetIsTheQuantizedModelUnderItsOwnIdentity) {
  ThreadPool& pool = default_thread_pool();
  BuiltRunner bf16 = build_runner(micro(CheckpointFormat::kBf16), pool);
  BuiltRunner fp4 = build_runner(micro(CheckpointFormat::kFp4Local), pool);
  EXPECT_EQ(fp4.weights_identity, bf16.weights_identity + ",format=fp4-local");
  const std::vector<float> a = last_logits(*bf16.runner), b = last_logits(*fp4.runner);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_NE(a, b);  // the quantized weights are other values
}

TEST(RunnerWeightFormat, Fp4LocalWithAModelDirectoryIsRefusedNamingTheOption) {
  RunnerRequest r = micro(CheckpointFormat::kFp4Local);
  r.model_dir = "/nonexistent";
  try {
    build_runner(r, default_thread_pool());
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("--weight-format fp4-local"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace sparkglm
