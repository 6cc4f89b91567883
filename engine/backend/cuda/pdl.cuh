#pragma once
// Programmatic dependent launch (sm_90 and later): a decode kernel's blocks are launched and made
// resident while the kernel ahead of it on the stream still runs, and start work the moment it
// has finished, without the gap of a launch. Launched so (launch_dependent): the decode GEMVs,
// the norms, mHC's pre and post, the KDA kernels, the MLA decode attention, the router and its
// f32 logits, the MoE experts, the indexer, the latent stores, the greedy pick and the draft
// chain (session 29: a tinyglm-micro decode step 13 % faster on an H100; docs/cuda-engine.md,
// "PDL over the whole decode path"). `pdl_trigger` lets the next kernel's blocks be scheduled as
// soon as every block of this one has started; `pdl_wait` returns once the kernel ahead has
// finished and its writes are visible. Before the wait a PDL kernel may read only what no kernel
// writes: the GEMVs request their first stage of the model's weights there (gemv_bf16.cu,
// quantized_linear.cu), mHC's partial sums its fn rows, the f32 linear its W rows and the MLA
// absorb its W_kb tile; x, the split partials and y come after it. What the kernel ahead wrote is
// read past L1 (__ldcg), never through __ldg: ld.global.nc needs data that stays read-only for the
// reading kernel's whole life, and a PDL kernel lives while the kernel ahead still writes.
// (Session 17's prefetch read x through __ldg and nine CUDA tests failed on the H200; with
// __ldcg every test passes, 2026-12-05.) Every thread of a PDL kernel runs pdl_wait before its
// first global write and before it exits: the kernel after it waits for it alone, so it must
// not end before the kernel ahead of it; ci/pdl_check.py (a CI test) checks that every kernel
// launched with launch_dependent reaches pdl_wait before its first return. Both calls are no-ops
// where nothing was launched so, and below sm_90; they are live on sm_90a and sm_121 (GB10, not
// run there yet).
#include <cuda_runtime.h>

#include "engine/backend/cuda/cuda_check.h"

namespace sparkglm::cuda {

__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...), allowed to start before the stream's previous
// kernel has finished (the kernel must call pdl_wait before it reads anything that kernel wrote).
template <typename... Params, typename... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                      cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = &attr;
  config.numAttrs = 1;
  SPARKGLM_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace sparkglm::cuda
