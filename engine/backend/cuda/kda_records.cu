#include "engine/backend/cuda/kda_records.h"

#include "engine/backend/cuda/cuda_check.h"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

// Grid: (blocks, rows); each block strides over its row's state and conv floats.
__global__ void record_kernel(const int32_t* slots, const int32_t* records,
                              const __grid_constant__ KdaRecordPools p) {
  const int i = blockIdx.y;
  const int64_t record = records[i];
  if (record < 0) return;
  const int64_t slot = slots[i];
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

void kda_record_states(const int32_t* slots, const int32_t* records, int rows,
                       const KdaRecordPools& pools, cudaStream_t stream) {
  SPARKGLM_ASSERT(rows >= 0 && rows <= 65535, "kda_record_states: rows outside [0, 65535]");
  if (rows == 0) return;
  const dim3 grid(64, unsigned(rows));
  record_kernel<<<grid, 256, 0, stream>>>(slots, records, pools);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparkglm::cuda
