#pragma once
// What rank 0 sends the other ranks before each runner call, so that they make the same call on
// the same inputs (rank_leader.h, rank_follower.h): the call, its batch (token ids, positions,
// sequences with block tables and snapshots), and for submit the sampling a rank needs to take
// part in the picks (which rows are picked, which are masked; never the masks themselves: only
// rank 0 applies them). Encoded little-endian as the host lays it out: the ranks of one run are
// one binary (the start-up fingerprint checks it).
#include <cstdint>
#include <span>
#include <vector>

#include "engine/model/forward_batch.h"
#include "engine/model/step_sampling.h"

namespace sparkglm::dist {

enum class StepCall : uint8_t { kForward = 1, kForwardMtp, kSubmit, kCollect, kStop };

struct StepMessage {
  StepCall call = StepCall::kStop;
  ForwardBatch batch;         // kForward, kForwardMtp, kSubmit
  std::vector<float> hidden;  // kForwardMtp: [rows, D]
  StepSampling sampling;      // kSubmit: picked, draws, token_from, mask_row, mask_words
};

// A message is at most this long (a batch of 64K rows with its tables is far below).
constexpr size_t kMaxStepMessageBytes = size_t(1) << 30;

std::vector<uint8_t> encode_step(const StepMessage& message);
// Throws Error(kDeviceFatal) naming what is malformed: a truncated message, a count past its end,
// an unknown call. Every count is checked against the bytes that remain.
StepMessage decode_step(std::span<const uint8_t> bytes);

}  // namespace sparkglm::dist
