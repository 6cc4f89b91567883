// Probe: a chain of small dependent kernels in a CUDA graph, launched plainly or with
// programmatic dependent launch (PDL): the time per kernel boundary on this GPU.
#include <cuda_runtime.h>
#include <cstdio>
#include <vector>
#define CK(x)                                        \
  do {                                               \
    cudaError_t e = (x);                             \
    if (e != cudaSuccess) {                          \
      printf("%s: %s\n", #x, cudaGetErrorString(e)); \
      return 1;                                      \
    }                                                \
  } while (0)

template <int Mode>  // 0 plain, 1 wait then trigger, 2 trigger then wait
__global__ void step(const float* in, float* out, int n, int work) {
  if (Mode == 2) asm volatile("griddepcontrol.launch_dependents;");
  if (Mode >= 1) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (Mode == 1) asm volatile("griddepcontrol.launch_dependents;");
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = in[i];
    for (int k = 0; k < work; ++k) v = v * 0.999f + 0.001f;
    out[i] = v + 1.0f;
  }
}

template <int Mode>
int run(int kernels, int blocks, int work, float* a, float* b, int n, cudaStream_t s, float* us,
        float* check) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int k = 0; k < kernels; ++k) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = blocks;
    cfg.blockDim = 256;
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = Mode > 0 ? 1 : 0;
    const float* in = (k & 1) ? b : a;
    float* out = (k & 1) ? a : b;
    CK(cudaLaunchKernelEx(&cfg, step<Mode>, in, out, n, work));
  }
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphUpload(ge, s));
  CK(cudaMemset(a, 0, n * 4));
  CK(cudaMemset(b, 0, n * 4));
  for (int w = 0; w < 20; ++w) CK(cudaGraphLaunch(ge, s));
  CK(cudaStreamSynchronize(s));
  CK(cudaMemset(a, 0, n * 4));
  CK(cudaMemset(b, 0, n * 4));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  const int reps = 200;
  CK(cudaEventRecord(e0, s));
  for (int r = 0; r < reps; ++r) CK(cudaGraphLaunch(ge, s));
  CK(cudaEventRecord(e1, s));
  CK(cudaEventSynchronize(e1));
  float ms;
  cudaEventElapsedTime(&ms, e0, e1);
  *us = 1000.f * ms / reps;
  float h;
  CK(cudaMemcpy(&h, (kernels & 1) ? b : a, 4, cudaMemcpyDeviceToHost));
  *check = h;
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  return 0;
}

int main() {
  const int n = 1 << 16;
  float *a, *b;
  cudaStream_t s;
  CK(cudaMalloc(&a, n * 4));
  CK(cudaMalloc(&b, n * 4));
  CK(cudaStreamCreate(&s));
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  printf("device %s\n", p.name);
  for (int blocks : {1, 32, 132})
    for (int work : {0, 200}) {
      float t0, t1, t2, c0, c1, c2;
      const int K = 150;
      if (run<0>(K, blocks, work, a, b, n, s, &t0, &c0) ||
          run<1>(K, blocks, work, a, b, n, s, &t1, &c1) ||
          run<2>(K, blocks, work, a, b, n, s, &t2, &c2))
        return 1;
      printf(
          "blocks %3d work %3d: plain %.1f us/graph (%.2f/kernel), wait-trigger %.1f (%.2f), "
          "trigger-wait %.1f (%.2f); checks %.1f %.1f %.1f\n",
          blocks, work, t0, t0 / K, t1, t1 / K, t2, t2 / K, c0, c1, c2);
    }
  return 0;
}
