#pragma once
// Greedy sampling on the device: the lowest id among the maxima of each row's logits, NaN counted
// as -inf (runtime/sampler.h steps 1 and 4, without penalties). A row of only NaN/-inf gives -1.
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::cuda {

// logits: [rows, vocab] FP32; tokens: [rows].
void sample_greedy(const float* logits, int64_t rows, int64_t vocab, int32_t* tokens,
                   cudaStream_t stream);

}  // namespace sparkglm::cuda
