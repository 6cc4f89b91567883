#pragma once
// The decode MoE's workspaces and output for T tokens (moe_experts.h: MoeExpertArgs), which the
// quantized and spark tests both need: allocated once here and pointed to by `fill`, so that a new
// workspace field is added in one place.
#include <cstdint>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/moe_experts.h"

namespace sparkglm::cuda_test {

struct MoeDecodeWorkspace {
  cuda::DeviceBuffer h, y, groups, shared_gu, shared_h, shared_y, out;

  // T tokens, k experts a token, hidden D, expert width W.
  MoeDecodeWorkspace(int64_t T, int k, int64_t D, int64_t W)
      : h(size_t(T * k * W) * 2),
        y(size_t(T * k * D) * 4),
        groups(size_t(cuda::moe_decode_group_ints(T, k)) * 4),
        shared_gu(size_t(T * 2 * W) * 4),
        shared_h(size_t(T * W) * 2),
        shared_y(size_t(T * D) * 4),
        out(size_t(T * D) * 4) {}

  // Points a's workspaces and output here (its shapes, inputs and weights are the caller's).
  void fill(cuda::MoeExpertArgs& a) const {
    a.h = static_cast<uint16_t*>(h.data());
    a.y = static_cast<float*>(y.data());
    a.groups = static_cast<int32_t*>(groups.data());
    a.shared_gu = static_cast<float*>(shared_gu.data());
    a.shared_h = static_cast<uint16_t*>(shared_h.data());
    a.shared_y = static_cast<float*>(shared_y.data());
    a.out = static_cast<float*>(out.data());
  }
};

}  // namespace sparkglm::cuda_test
