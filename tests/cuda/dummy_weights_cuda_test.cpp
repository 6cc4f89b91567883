// On a GPU, the device dummy-weight generator gives the CPU generator's bits exactly. Built only
// with the CUDA backend; skipped on machines without a device.
#include "engine/backend/cuda/dummy_weights.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/model/tensor_layout.h"
#include "tinyglm/dummy_hash.h"
#include "tinyglm/dummy_weights.h"

namespace sparkglm {
namespace {

bool have_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

void expect_bitwise_equal(const ModelConfig& config, const std::vector<std::string>& only) {
  ThreadPool pool(0);
  const auto cpu = make_dummy_weights(config, kDefaultDummySeed, pool);
  size_t checked = 0;
  for (const TensorSpec& spec : checkpoint_tensors(config)) {
    if (!only.empty() && std::find(only.begin(), only.end(), spec.name) == only.end()) continue;
    const TensorView want = *cpu->find(spec.name);
    cuda::DeviceBuffer dev(want.nbytes);
    const uint64_t key = dummy::tensor_key(kDefaultDummySeed, spec.name);
    if (spec.dtype == DType::kBF16) {
      cuda::fill_dummy_bf16(static_cast<uint16_t*>(dev.data()), spec.numel(), key, spec.init.center,
                            spec.init.half_width, nullptr);
    } else {
      cuda::fill_dummy_f32(static_cast<float*>(dev.data()), spec.numel(), key, spec.init.center,
                           spec.init.half_width, nullptr);
    }
    SPARKGLM_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<std::byte> got(want.nbytes);
    dev.copy_to_host(got.data(), got.size());
    ASSERT_EQ(std::memcmp(got.data(), want.data, want.nbytes), 0) << spec.name;
    checked += want.nbytes;
  }
  EXPECT_GT(checked, 0u);
  std::printf("compared %zu bytes bit for bit\n", checked);
}

TEST(CudaDummyWeights, EveryMicroTensorMatchesTheCpuGeneratorBitForBit) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  expect_bitwise_equal(preset_config("tinyglm-micro"), {});
}

TEST(CudaDummyWeights, ProductionWidthTensorsMatchTheCpuGeneratorBitForBit) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  expect_bitwise_equal(preset_config("tinyglm"),
                       {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                        "model.layers.1.mlp.experts.3.down_proj.weight", "model.hc_head_fn",
                        "model.layers.3.self_attn.A_log", "model.layers.2.mlp.gate.weight"});
}

}  // namespace
}  // namespace sparkglm
