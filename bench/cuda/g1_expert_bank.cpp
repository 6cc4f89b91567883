#include "bench/cuda/g1_expert_bank.h"

#include <cmath>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/dummy_weights.h"
#include "engine/core/dtype.h"

namespace sparkglm::g1 {

SwiGluWeights ExpertBank::weights(int e) {
  const int64_t gu_elems = shape.gate_up(), dn_elems = shape.down();
  const int64_t d = shape.hidden, w = shape.width;
  auto it = host.find(e);
  if (it == host.end()) {
    std::vector<uint16_t> v(size_t(gu_elems + dn_elems));
    const auto* gu = e == shape.experts ? ptr<uint16_t>(shared_gate_up)
                                        : ptr<uint16_t>(gate_up) + int64_t(e) * gu_elems;
    const auto* dn = e == shape.experts ? ptr<uint16_t>(shared_down)
                                        : ptr<uint16_t>(down) + int64_t(e) * dn_elems;
    SPARKGLM_CUDA_CHECK(cudaMemcpy(v.data(), gu, size_t(gu_elems) * 2, cudaMemcpyDeviceToHost));
    SPARKGLM_CUDA_CHECK(
        cudaMemcpy(v.data() + gu_elems, dn, size_t(dn_elems) * 2, cudaMemcpyDeviceToHost));
    it = host.emplace(e, std::move(v)).first;
  }
  const uint16_t* v = it->second.data();
  return SwiGluWeights{Linear{DType::kBF16, w, d, v}, Linear{DType::kBF16, w, d, v + w * d},
                       Linear{DType::kBF16, d, w, v + gu_elems}};
}

ExpertBank make_expert_bank(const ExpertShape& shape, uint32_t seed, cudaStream_t s) {
  const int64_t gu_elems = shape.gate_up(), dn_elems = shape.down();
  const int experts = shape.experts;
  ExpertBank b;
  b.shape = shape;
  b.gate_up = device_alloc(size_t(experts * gu_elems * 2));
  b.down = device_alloc(size_t(experts * dn_elems * 2));
  b.shared_gate_up = device_alloc(size_t(gu_elems * 2));
  b.shared_down = device_alloc(size_t(dn_elems * 2));
  const float in_scale = std::sqrt(3.0f / float(shape.hidden));
  const float mid_scale = std::sqrt(3.0f / float(shape.width));
  cuda::fill_dummy_bf16(ptr<uint16_t>(b.gate_up), experts * gu_elems, seed, 0.0f, in_scale, s);
  cuda::fill_dummy_bf16(ptr<uint16_t>(b.down), experts * dn_elems, seed + 0x0101, 0.0f, mid_scale,
                        s);
  cuda::fill_dummy_bf16(ptr<uint16_t>(b.shared_gate_up), gu_elems, seed + 0x0202, 0.0f, in_scale,
                        s);
  cuda::fill_dummy_bf16(ptr<uint16_t>(b.shared_down), dn_elems, seed + 0x0303, 0.0f, mid_scale, s);
  std::vector<const uint16_t*> ptrs(size_t(2 * experts));
  for (int e = 0; e < experts; ++e) {
    ptrs[size_t(e)] = ptr<uint16_t>(b.gate_up) + int64_t(e) * gu_elems;
    ptrs[size_t(experts + e)] = ptr<uint16_t>(b.down) + int64_t(e) * dn_elems;
  }
  b.ptrs = upload(ptrs);
  SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(s));
  return b;
}

}  // namespace sparkglm::g1
