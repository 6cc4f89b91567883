// FP4-Local weights on the CUDA backend (issue 15): DeviceWeights keeps NVFP4 / MXFP8 / FP8 block
// projections in their format. The checks that need no device (a refused layout names the
// tensor; the arena's size from a checkpoint equals the preset's) run anywhere; on a GPU: the
// device quantizer's bytes equal engine/model/weight_quantizer.cpp's, an upload of the C++
// maker's checkpoint equals generate() byte for byte, and the runner on that checkpoint matches
// the CPU runner (which dequantizes it to FP32) through a prefill and decode steps; so does the
// runner on generated weights with a MoE layer (the quantized MoE kernels of moe_quant_*).
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/backend/cuda/device_weights.h"
#include "engine/backend/cuda/projection.h"
#include "engine/core/error.h"
#include "engine/core/thread_pool.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_loader.h"
#include "engine/model/tensor_layout.h"
#include "engine/model/weight_quantizer.h"
#include "tests/cuda/cuda_test_support.h"
#include "tinyglm/checkpoint_writer.h"
#include "tinyglm/dummy_hash.h"
#include "tinyglm/dummy_weights.h"
#include "tinyglm/stored_weights.h"

namespace sparkglm {
namespace {

using cuda_test::have_device;
using cuda_test::nmse;

// The CPU runner reads the dequantized FP32 weights and keeps FP32 activations; the GPU rounds
// activations to BF16 before each projection and, for prefill rows, each weight to BF16 once
// (projection.h): the same size of error as the BF16 path's, whose end-to-end bound this is
// (cuda_model_runner_test.cpp's kLogitTolerance).
constexpr double kLogitTolerance = 1e-3;
constexpr int kBlock = 16;
constexpr int kBlocksPerSeq = 176;

// tinyglm's production layer shapes, two layers (KDA, then MLA + DSA), no MTP head.
ModelConfig two_layers(bool moe) {
  ModelConfig c = preset_config("tinyglm");
  c.num_hidden_layers = 2;
  c.layer_types = {LayerKind::kLinearAttention, LayerKind::kSparseAttention};
  c.first_k_dense_replace = moe ? 1 : 2;  // without MoE: every layer a dense MLP
  c.num_nextn_predict_layers = 0;
  c.validate();
  return c;
}

TensorSpec spec_of(const ModelConfig& c, const std::string& name) {
  for (const TensorSpec& s : checkpoint_tensors(c))
    if (s.name == name) return s;
  throw Error(ErrorKind::kInvalidArgument, "no tensor " + name);
}

// The first `rows` rows of the dummy tensor as the CPU quantizer sees it (BF16 values).
std::vector<float> dummy_rows(const ModelConfig& c, const std::string& name, int64_t rows) {
  const TensorSpec s = spec_of(c, name);
  std::vector<float> v =
      cuda_test::uniform(dummy::tensor_key(kDefaultDummySeed, name), size_t(rows * s.shape[1]),
                         s.init.center, s.init.half_width);
  for (float& x : v) x = bf16_to_f32(f32_to_bf16(x));
  return v;
}

template <typename T>
std::vector<T> from_device(const void* p, size_t n) {
  std::vector<T> out(n);
  SPARKGLM_CUDA_CHECK(cudaMemcpy(out.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return out;
}

// A source that answers one name differently (a tampered checkpoint).
class Tampered : public TensorSource {
 public:
  Tampered(std::shared_ptr<const TensorSource> base, std::string name, TensorView view)
      : base_(std::move(base)), name_(std::move(name)), view_(std::move(view)) {}
  std::optional<TensorView> find(const std::string& name) const override {
    return name == name_ ? std::optional<TensorView>(view_) : base_->find(name);
  }
  std::vector<std::string> names() const override { return base_->names(); }
  std::string identity() const override { return "tampered"; }

 private:
  std::shared_ptr<const TensorSource> base_;
  std::string name_;
  TensorView view_;
};

std::shared_ptr<const TensorSource> micro_fp4_local() {
  static const auto source = [] {
    const ModelConfig c = preset_config("tinyglm-micro");
    ThreadPool& pool = default_thread_pool();
    return stored_weights(c, make_dummy_weights(c, kDefaultDummySeed, pool),
                          CheckpointFormat::kFp4Local, pool)
        .tensors;
  }();
  return source;
}

std::string refusal(const TensorSource& src) {
  try {
    cuda::DeviceWeights::arena_bytes(preset_config("tinyglm-micro"), src);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceWeightsFp4, ArenaOfACheckpointEqualsThePresetsAndIsSmallerThanBf16) {
  const ModelConfig c = preset_config("tinyglm-micro");
  const size_t fp4 = cuda::DeviceWeights::arena_bytes(c, CheckpointFormat::kFp4Local);
  EXPECT_EQ(cuda::DeviceWeights::arena_bytes(c, *micro_fp4_local()), fp4);
  EXPECT_LT(fp4, cuda::DeviceWeights::arena_bytes(c, CheckpointFormat::kBf16));
}

TEST(DeviceWeightsFp4, TheMakersCheckpointDirectoryPassesTheUploadChecks) {
  // The safetensors route (F8_E8M0 scales, 0-d scalars, mapped views) of `tinyglm make`.
  const ModelConfig c = preset_config("tinyglm-micro");
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("sparkglm_fp4_micro_test_" + std::to_string(::getpid())))
                              .string();
  CheckpointWriteOptions o;
  o.seed = kDefaultDummySeed;
  o.overwrite = true;
  o.format = CheckpointFormat::kFp4Local;
  write_dummy_checkpoint(c, dir, o, default_thread_pool());
  EXPECT_EQ(cuda::DeviceWeights::arena_bytes(c, *Checkpoint::open(dir)),
            cuda::DeviceWeights::arena_bytes(c, CheckpointFormat::kFp4Local));
  std::filesystem::remove_all(dir);
}

TEST(DeviceWeightsFp4, ARefusedLayoutNamesTheTensor) {
  const auto base = micro_fp4_local();
  ASSERT_EQ(refusal(*base), "");
  // MXFP8 scales of the wrong shape (one per 16 values instead of 32).
  const std::string q_scale = "model.layers.0.self_attn.q_proj.weight_scale";
  TensorView v = *base->find(q_scale);
  v.shape[1] *= 2;
  EXPECT_NE(refusal(Tampered(base, q_scale, v)).find(q_scale), std::string::npos);
  // A quantized embedding: the embedding kernel reads BF16 rows.
  const std::string embed = "model.embed_tokens.weight";
  TensorView e = *base->find(embed);  // bytes the checks never read: only dtype and shape
  e.dtype = DType::kF8E4M3;
  e.nbytes = size_t(e.numel());
  const std::string why = refusal(Tampered(base, embed, e));
  EXPECT_NE(why.find(embed), std::string::npos) << why;
  // A norm stored in F8: only projections may be quantized.
  const std::string norm = "model.layers.0.input_layernorm.weight";
  TensorView n = *base->find(norm);
  n.dtype = DType::kF8E4M3;
  n.nbytes = size_t(n.numel());
  EXPECT_NE(refusal(Tampered(base, norm, n)).find(norm), std::string::npos);
}

TEST(DeviceWeightsFp4, GeneratedBytesEqualTheCpuQuantizer) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const ModelConfig c = two_layers(/*moe=*/true);
  const auto dw = cuda::DeviceWeights::generate(c, kDefaultDummySeed, CheckpointFormat::kFp4Local);
  const ModelWeights& w = dw->weights();

  // MXFP8 (per-row blocks: the first rows are a slice of their own): KDA q_proj, the dense MLP's
  // up_proj, the LM head.
  const std::vector<std::pair<std::string, const Linear*>> mx = {
      {"model.layers.0.self_attn.q_proj.weight", &w.layers[0].kda.q_proj},
      {"model.layers.0.mlp.up_proj.weight", &w.layers[0].mlp.up},
      {"lm_head.weight", &w.lm_head}};
  for (const auto& [name, l] : mx) {
    ASSERT_EQ(l->format, LinearFormat::kMxfp8) << name;
    const int64_t rows = std::min<int64_t>(64, l->rows);
    const Mxfp8Weight want = quantize_mxfp8(dummy_rows(c, name, rows).data(), rows, l->cols, name);
    EXPECT_EQ(from_device<uint8_t>(l->data, want.values.size()), want.values) << name;
    EXPECT_EQ(from_device<uint8_t>(l->scale, want.scale.size()), want.scale) << name;
  }
  // FP8 block (128-row slices): MLA q_a, the indexer's wk, the shared expert's down_proj.
  const std::vector<std::pair<std::string, const Linear*>> fp8 = {
      {"model.layers.1.self_attn.q_a_proj.weight", &w.layers[1].mla.q_a},
      {"model.layers.1.self_attn.indexer.wk.weight", &w.layers[1].mla.indexer.wk},
      {"model.layers.1.mlp.shared_experts.down_proj.weight", &w.layers[1].moe.shared->down}};
  for (const auto& [name, l] : fp8) {
    ASSERT_EQ(l->format, LinearFormat::kFp8Block) << name;
    const int64_t rows = std::min<int64_t>(128, l->rows);
    const BlockFp8Weight want =
        quantize_block_fp8(dummy_rows(c, name, rows).data(), rows, l->cols, name);
    EXPECT_EQ(from_device<uint8_t>(l->data, want.values.size()), want.values) << name;
    EXPECT_EQ(from_device<float>(l->scale_inv, want.scale_inv.size()), want.scale_inv) << name;
  }
  // NVFP4 (the global scale needs the whole tensor): two routed experts' projections.
  const std::vector<std::pair<std::string, const Linear*>> nv = {
      {"model.layers.1.mlp.experts.3.down_proj.weight", &w.layers[1].moe.experts[3].down},
      {"model.layers.1.mlp.experts.0.gate_proj.weight", &w.layers[1].moe.experts[0].gate}};
  for (const auto& [name, l] : nv) {
    ASSERT_EQ(l->format, LinearFormat::kNvfp4) << name;
    const Nvfp4Weight want =
        quantize_nvfp4(dummy_rows(c, name, l->rows).data(), l->rows, l->cols, name);
    EXPECT_EQ(l->global_scale, want.scale_2) << name;
    EXPECT_EQ(from_device<uint8_t>(l->data, want.packed.size()), want.packed) << name;
    EXPECT_EQ(from_device<uint8_t>(l->scale, want.scale.size()), want.scale) << name;
  }
  // kv_b_proj: stored FP8 block, kept as BF16 of the dequantized values.
  const std::string kvb = "model.layers.1.self_attn.kv_b_proj.weight";
  const Linear& l = w.layers[1].mla.kv_b;
  ASSERT_FALSE(l.quantized());
  ASSERT_EQ(l.dtype, DType::kBF16);
  const BlockFp8Weight q = quantize_block_fp8(dummy_rows(c, kvb, 128).data(), 128, l.cols, kvb);
  std::vector<uint16_t> want(size_t(128 * l.cols));
  for (int64_t r = 0; r < 128; ++r)
    for (int64_t col = 0; col < l.cols; ++col)
      want[size_t(r * l.cols + col)] = f32_to_bf16(e4m3_to_f32(q.values[size_t(r * l.cols + col)]) *
                                                   q.scale_inv[size_t(col / 128)]);
  EXPECT_EQ(from_device<uint16_t>(l.data, want.size()), want);
}

TEST(DeviceWeightsFp4, FusedOperandsAreContiguous) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const ModelConfig c = two_layers(/*moe=*/true);
  const auto dw = cuda::DeviceWeights::generate(c, kDefaultDummySeed, CheckpointFormat::kFp4Local);
  const ModelWeights& w = dw->weights();
  const KdaWeights& k = w.layers[0].kda;
  EXPECT_EQ(cuda::fused({&k.q_proj, &k.k_proj, &k.v_proj}, "q/k/v").rows, 3 * k.q_proj.rows);
  EXPECT_EQ(cuda::fused({&w.layers[0].mlp.gate, &w.layers[0].mlp.up}, "gate/up").rows,
            2 * w.layers[0].mlp.gate.rows);
  // What the MoE kernels may rely on: each expert's up_proj elements and scales follow its
  // gate_proj's (their global scales differ, so one NVFP4 product cannot cover both).
  const SwiGluWeights& e = w.layers[1].moe.experts[5];
  EXPECT_EQ(static_cast<const char*>(e.up.data),
            static_cast<const char*>(e.gate.data) + e.gate.rows * e.gate.cols / 2);
  EXPECT_EQ(e.up.scale, e.gate.scale + e.gate.rows * e.gate.cols / 16);
  const SwiGluWeights& s = *w.layers[1].moe.shared;
  EXPECT_EQ(cuda::fused({&s.gate, &s.up}, "shared gate/up").rows, 2 * s.gate.rows);
}

// The C++ maker's fp4-local checkpoint of a two-layer model without MoE, written once.
struct Fp4Checkpoint {
  ModelConfig config;
  std::string dir;
  Fp4Checkpoint() : config(two_layers(/*moe=*/false)) {
    dir = (std::filesystem::temp_directory_path() /
           ("sparkglm_fp4_local_cuda_test_" + std::to_string(::getpid())))
              .string();
    CheckpointWriteOptions o;
    o.seed = kDefaultDummySeed;
    o.overwrite = true;
    o.format = CheckpointFormat::kFp4Local;
    write_dummy_checkpoint(config, dir, o, default_thread_pool());
  }
  ~Fp4Checkpoint() { std::filesystem::remove_all(dir); }
};

Fp4Checkpoint& checkpoint() {
  static Fp4Checkpoint c;
  return c;
}

// Every projection's stored bytes (elements, then scales) of two device weights are equal.
void expect_same_projections(const ModelWeights& a, const ModelWeights& b) {
  auto check = [](const Linear& x, const Linear& y, const std::string& what) {
    ASSERT_EQ(int(x.format), int(y.format)) << what;
    ASSERT_EQ(x.rows, y.rows) << what;
    const size_t n = size_t(x.rows * x.cols);
    const size_t data = x.format == LinearFormat::kNvfp4 ? n / 2
                        : x.quantized()                  ? n
                                                         : n * size_t(dtype_size(x.dtype));
    EXPECT_EQ(from_device<uint8_t>(x.data, data), from_device<uint8_t>(y.data, data)) << what;
    if (x.format == LinearFormat::kMxfp8) {
      EXPECT_EQ(from_device<uint8_t>(x.scale, n / 32), from_device<uint8_t>(y.scale, n / 32))
          << what;
    }
    if (x.format == LinearFormat::kFp8Block) {
      const size_t s = size_t((x.rows + 127) / 128 * ((x.cols + 127) / 128));
      EXPECT_EQ(from_device<float>(x.scale_inv, s), from_device<float>(y.scale_inv, s)) << what;
    }
  };
  check(a.lm_head, b.lm_head, "lm_head");
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const LayerWeights &x = a.layers[i], &y = b.layers[i];
    const std::string l = "layer " + std::to_string(i) + " ";
    if (x.kind == LayerKind::kLinearAttention) {
      check(x.kda.q_proj, y.kda.q_proj, l + "q_proj");
      check(x.kda.f_b, y.kda.f_b, l + "f_b_proj");
      check(x.kda.o_proj, y.kda.o_proj, l + "o_proj");
    } else {
      check(x.mla.q_a, y.mla.q_a, l + "q_a_proj");
      check(x.mla.kv_b, y.mla.kv_b, l + "kv_b_proj");
      check(x.mla.o_proj, y.mla.o_proj, l + "o_proj");
      check(x.mla.indexer.wq_b, y.mla.indexer.wq_b, l + "wq_b");
    }
    check(x.mlp.gate, y.mlp.gate, l + "gate_proj");
    check(x.mlp.down, y.mlp.down, l + "down_proj");
  }
}

TEST(DeviceWeightsFp4, UploadOfTheMakersCheckpointEqualsGenerate) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Fp4Checkpoint& ck = checkpoint();
  const auto up = cuda::DeviceWeights::upload(ck.config, *Checkpoint::open(ck.dir));
  const auto gen =
      cuda::DeviceWeights::generate(ck.config, kDefaultDummySeed, CheckpointFormat::kFp4Local);
  EXPECT_EQ(up->bytes(), gen->bytes());
  expect_same_projections(up->weights(), gen->weights());
}

std::vector<int32_t> blocks_for(int seq, int tokens) {
  std::vector<int32_t> t;
  for (int i = 0; i < (tokens + kBlock - 1) / kBlock; ++i) t.push_back(seq * kBlocksPerSeq + i);
  return t;
}

// The GPU runner on `device` against the CPU runner on `host` (the same weights dequantized):
// a prefill in two chunks (prefill rows: the dequantize-and-GEMM path), then decode steps
// (quantized_gemv), the CPU's choice of token driving both.
void expect_runner_matches_cpu(const ModelConfig& config, const ModelWeights& host,
                               std::unique_ptr<cuda::DeviceWeights> device) {
  cpu::CpuRunnerOptions co;
  co.num_blocks = 2 * kBlocksPerSeq;
  co.block_size = kBlock;
  co.num_state_slots = 2;
  co.kv_dtype = KvDtype::kBF16;
  cpu::CpuModelRunner cpu(config, host, co, default_thread_pool());
  cuda::CudaRunnerOptions go;
  go.num_blocks = 2 * kBlocksPerSeq;
  go.block_size = kBlock;
  go.num_state_slots = 2;
  go.max_rows = 1024 + 8;  // as cuda_model_runner_test.cpp
  go.max_seq_len = kBlocksPerSeq * kBlock;
  go.kv_dtype = KvDtype::kBF16;
  go.graphs = true;
  cuda::CudaModelRunner gpu(config, std::move(device), go);
  const int V = config.vocab_size;
  std::vector<int32_t> p(77);
  for (int i = 0; i < 77; ++i) p[size_t(i)] = (i * 31 + 3) % 256;
  ForwardOutput c, g;
  for (int s = 0; s < 77; s += 64) {
    const int e = std::min(77, s + 64);
    ForwardBatch b;
    b.add_sequence({p.begin() + s, p.begin() + e}, s, 0, blocks_for(0, e), e == 77);
    cpu.forward(b, c);
    gpu.forward(b, g);
  }
  EXPECT_LT(nmse(g.logits, c.logits), kLogitTolerance) << "prefill";
  for (int step = 0, pos = 77; step < 4; ++step, ++pos) {
    const int token =
        int(std::max_element(c.logits.begin(), c.logits.begin() + V) - c.logits.begin());
    ForwardBatch b;
    b.add_sequence({token}, pos, 0, blocks_for(0, pos + 1));
    cpu.forward(b, c);
    gpu.forward(b, g);
    EXPECT_LT(nmse(g.logits, c.logits), kLogitTolerance) << "decode step " << step;
  }
}

// Dense projections only (every layer a dense MLP): this helper's path, from the maker's files.
TEST(DeviceWeightsFp4, RunnerOnAnFp4LocalCheckpointMatchesTheCpuRunner) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Fp4Checkpoint& ck = checkpoint();
  const auto host = load_model_dir(ck.dir);  // the CPU binder dequantizes to FP32
  expect_runner_matches_cpu(ck.config, host->weights,
                            cuda::DeviceWeights::upload(ck.config, *Checkpoint::open(ck.dir)));
}

// With a MoE layer (NVFP4 routed experts, FP8 block shared expert: the quantized MoE kernels),
// the weights generated on the device against the maker's bytes dequantized on the CPU.
TEST(DeviceWeightsFp4, GeneratedFp4LocalWithExpertsMatchesTheCpuRunner) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const ModelConfig c = two_layers(/*moe=*/true);
  ThreadPool& pool = default_thread_pool();
  const ModelWeights host =
      ModelWeights::bind(c, stored_weights(c, make_dummy_weights(c, kDefaultDummySeed, pool),
                                           CheckpointFormat::kFp4Local, pool)
                                .tensors);
  expect_runner_matches_cpu(
      c, host, cuda::DeviceWeights::generate(c, kDefaultDummySeed, CheckpointFormat::kFp4Local));
}

}  // namespace
}  // namespace sparkglm
