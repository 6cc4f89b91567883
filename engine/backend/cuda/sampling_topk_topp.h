#pragma once
// Seeded temperature / top-k / top-p / min-p sampling on the device, one block per row, drawing the
// same token as runtime/sampler.h's SequenceSampler::draw() on the same processed logits (masks and
// penalties are the caller's, as they are per request and touch few ids). The CPU contract is
// followed step by step so the result is the CPU's token, not merely a token of the kept set:
//  - weights w = exp_nonpositive((x - max) / T) with the same IEEE float steps (no contraction);
//  - every filter keeps a prefix of the order "larger w first, ties by lower id", described by one
//    threshold key (w bits << 32 | ~id); top-k and top-p find theirs by a radix descent over the
//    weight bits (4 bits a pass, counts or masses summed in double in a fixed order), then by id;
//  - the draw is the CPU's inverse CDF in id order: 256-token block sums in the CPU's lane order,
//    u = sampling_uniform(seed, index), the same walk and the same fallback.
// The one place the two can differ is the top-p cut when the running mass lies within double
// rounding of top_p * mass (the CPU sums in another order); random logits never meet it.
// Temperature 0 is greedy (lowest id among the maxima). A row whose logits are all NaN or -inf gets
// -1 (the CPU throws).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace sparkglm::cuda {

struct SampleParams {
  float temperature = 1.0f;  // 0: greedy
  float top_p = 1.0f;        // (0, 1]
  float min_p = 0.0f;        // [0, 1]
  int32_t top_k = 0;         // <= 0 or >= vocab: off
  uint64_t seed = 0;
  uint64_t index = 0;  // the draw's index: the number of tokens the sequence generated before
};

// Bytes of device scratch sample_top_k_top_p needs for `rows` x `vocab`.
size_t sample_scratch_bytes(int64_t rows, int64_t vocab);

// logits: [rows, vocab] FP32 processed logits; params: [rows] on the device; scratch: at least
// sample_scratch_bytes(rows, vocab), 8-byte aligned; tokens: [rows].
void sample_top_k_top_p(const float* logits, int64_t rows, int64_t vocab,
                        const SampleParams* params, void* scratch, int32_t* tokens,
                        cudaStream_t stream);

// The contract on the host: the token runtime/sampler.h's SequenceSampler draws for one row of
// `params` (its index-th draw, penalties off). What the G1 table and the tests compare against.
int32_t cpu_sampler_token(const SampleParams& params, const float* logits, int64_t vocab);

}  // namespace sparkglm::cuda
