#pragma once
// Speculative decoding's KDA state records on the device (the CUDA twin of KdaStatePool's
// record_state / record_conv): copies of one KDA layer's recurrent state and conv history from
// state slots into records of the same slots, launched beside the token-by-token groups of a
// verify step (engine/backend/step_layout.h), so a later step can resume from the state after any
// of a verify slice's rows. Which rows record, and into which record, is read from device words
// (StepInputs' record arrays), so a captured verify step replays with any records.
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::cuda {

// One layer's pools. state: [slots][state_floats] (the layer's slot 0); conv: [slots][conv_floats];
// record_state: [slots][records][state_floats]; record_conv: [slots][records][conv_floats].
struct KdaRecordPools {
  const float* state = nullptr;
  const float* conv = nullptr;
  float* record_state = nullptr;
  float* record_conv = nullptr;
  int64_t state_floats = 0;  // H * K * V
  int64_t conv_floats = 0;   // 3 * (taps - 1) * H * K
  int records = 0;           // per slot
};

// For each of `rows` rows i (device words): when records[i] >= 0, slot slots[i]'s state and conv
// history go into that slot's record records[i]; rows with -1 copy nothing. The rows' slots are
// distinct (one KDA group). The bits are copied, nothing is computed.
void kda_record_states(const int32_t* slots, const int32_t* records, int rows,
                       const KdaRecordPools& pools, cudaStream_t stream);

}  // namespace sparkglm::cuda
