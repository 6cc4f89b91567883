#pragma once
// Speculative decoding's KDA state records on the device (the CUDA twin of KdaStatePool's
// record_state / record_conv): copies of one KDA layer's recurrent state and conv history from
// state slots into records of the same slots, launched between the token-by-token groups of a
// verify step (engine/backend/step_layout.h), so a later step can resume from the state after any
// of a verify slice's rows.
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::cuda {

inline constexpr int kKdaMaxRecordCopies = 64;  // copies of one launch

// Copy i: slot slot[i] -> its record record[i]. Passed by value (kernel parameter space).
struct KdaRecordCopies {
  int count = 0;
  int slot[kKdaMaxRecordCopies] = {};
  int record[kKdaMaxRecordCopies] = {};
};

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

// Runs the copies in order on `stream` (count may exceed kKdaMaxRecordCopies only by splitting:
// the caller passes at most that many). The bits are copied, nothing is computed.
void kda_record_states(const KdaRecordCopies& copies, const KdaRecordPools& pools,
                       cudaStream_t stream);

}  // namespace sparkglm::cuda
