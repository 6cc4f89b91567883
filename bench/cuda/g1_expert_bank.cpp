#include "bench/cuda/g1_expert_bank.h"

#include <cmath>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/dummy_weights.h"
#include "engine/core/dtype.h"

namespace sparkglm::g1 {

SwiGluWeights ExpertBank::weights(int e) {
  auto it = host.find(e);
  if (it == host.end()) {
    std::vector<uint16_t> v(size_t(kGateUp + kDown));
    const auto* gu = e == kExperts ? ptr<uint16_t>(shared_gate_up)
                                   : ptr<uint16_t>(gate_up) + int64_t(e) * kGateUp;
    const auto* dn =
        e == kExperts ? ptr<uint16_t>(shared_down) : ptr<uint16_t>(down) + int64_t(e) * kDown;
    SPARKGLM_CUDA_CHECK(cudaMemcpy(v.data(), gu, size_t(kGateUp) * 2, cudaMemcpyDeviceToHost));
    SPARKGLM_CUDA_CHECK(
        cudaMemcpy(v.data() + kGateUp, dn, size_t(kDown) * 2, cudaMemcpyDeviceToHost));
    it = host.emplace(e, std::move(v)).first;
  }
  const uint16_t* v = it->second.data();
  return SwiGluWeights{Linear{DType::kBF16, kExpertW, kExpertD, v},
                       Linear{DType::kBF16, kExpertW, kExpertD, v + kExpertW * kExpertD},
                       Linear{DType::kBF16, kExpertD, kExpertW, v + kGateUp}};
}

ExpertBank make_expert_bank(uint32_t seed, cudaStream_t s) {
  ExpertBank b;
  b.gate_up = device_alloc(size_t(kExperts * kGateUp * 2));
  b.down = device_alloc(size_t(kExperts * kDown * 2));
  b.shared_gate_up = device_alloc(size_t(kGateUp * 2));
  b.shared_down = device_alloc(size_t(kDown * 2));
  const float in_scale = std::sqrt(3.0f / float(kExpertD));
  const float mid_scale = std::sqrt(3.0f / float(kExpertW));
  cuda::fill_dummy_bf16(ptr<uint16_t>(b.gate_up), kExperts * kGateUp, seed, 0.0f, in_scale, s);
  cuda::fill_dummy_bf16(ptr<uint16_t>(b.down), kExperts * kDown, seed + 0x0101, 0.0f, mid_scale, s);
  cuda::fill_dummy_bf16(ptr<uint16_t>(b.shared_gate_up), kGateUp, seed + 0x0202, 0.0f, in_scale, s);
  cuda::fill_dummy_bf16(ptr<uint16_t>(b.shared_down), kDown, seed + 0x0303, 0.0f, mid_scale, s);
  std::vector<const uint16_t*> ptrs(2 * kExperts);
  for (int e = 0; e < kExperts; ++e) {
    ptrs[size_t(e)] = ptr<uint16_t>(b.gate_up) + int64_t(e) * kGateUp;
    ptrs[size_t(kExperts + e)] = ptr<uint16_t>(b.down) + int64_t(e) * kDown;
  }
  b.ptrs = upload(ptrs);
  SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(s));
  return b;
}

}  // namespace sparkglm::g1
