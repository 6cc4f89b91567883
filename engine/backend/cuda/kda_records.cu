#include "engine/backend/cuda/kda_records.h"

#include "engine/backend/cuda/cuda_check.h"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

// Grid: (blocks, copies); each block strides over the copy's state and conv floats.
__global__ void record_kernel(const __grid_constant__ KdaRecordCopies copies,
                              const KdaRecordPools p) {
  const int i = blockIdx.y;
  const int64_t slot = copies.slot[i], record = copies.record[i];
  const float* state = p.state + slot * p.state_floats;
  const float* conv = p.conv + slot * p.conv_floats;
  float* rstate = p.record_state + (slot * p.records + record) * p.state_floats;
  float* rconv = p.record_conv + (slot * p.records + record) * p.conv_floats;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t j = tid; j < p.state_floats; j += step) rstate[j] = state[j];
  for (int64_t j = tid; j < p.conv_floats; j += step) rconv[j] = conv[j];
}

}  // namespace

void kda_record_states(const KdaRecordCopies& copies, const KdaRecordPools& pools,
                       cudaStream_t stream) {
  SPARKGLM_ASSERT(copies.count >= 0 && copies.count <= kKdaMaxRecordCopies,
                  "kda_record_states: copy count outside [0, kKdaMaxRecordCopies]");
  if (copies.count == 0) return;
  const dim3 grid(64, unsigned(copies.count));
  record_kernel<<<grid, 256, 0, stream>>>(copies, pools);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparkglm::cuda
