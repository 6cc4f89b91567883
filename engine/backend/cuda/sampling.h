#pragma once
// Greedy sampling on the device: the lowest id among the maxima of each row's logits, NaN counted
// as -inf (runtime/sampler.h steps 1 and 4, without penalties). A row of only NaN/-inf gives -1.
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::cuda {

// logits: [rows, vocab] FP32; tokens: [rows]. With `scratch` ([rows] zeros on the device, left
// zeroed), a row spreads over up to 64 blocks that merge their (value, id) bests with one 64-bit
// atomicMax on an order-preserving key (the maximum value, then the lowest id: an order-free
// merge, so the token is the same whatever the block count; a vocabulary of one block, 2,048 ids
// or fewer, takes one launch); without it one block per row scans
// the whole vocabulary, latency-bound at large vocabularies.
void sample_greedy(const float* logits, int64_t rows, int64_t vocab, int32_t* tokens,
                   cudaStream_t stream, unsigned long long* scratch = nullptr);

// Each row's greedy pick as a later kernel reads it (greedy_row.cuh: greedy_pick): from `picks`,
// or, with `picks` null, scanned by that kernel's block from the row's logits [rows, vocab].
struct GreedyPicks {
  const int32_t* picks;
  const float* logits;
  int64_t vocab;
};
// The one choice between the two: a vocabulary of one greedy block (kGreedyBlockVocab) is scanned
// by the kernel that reads the picks, one launch fewer; a larger one by sample_greedy's split scan,
// launched here into `picks` ([rows]; scratch as sample_greedy's). The same tokens either way.
GreedyPicks greedy_picks(const float* logits, int64_t rows, int64_t vocab, int32_t* picks,
                         cudaStream_t stream, unsigned long long* scratch);

}  // namespace sparkglm::cuda
