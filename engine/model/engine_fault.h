#pragma once
// Faults built into an engine on purpose: issue 18's negative controls, which show that the quality
// gate (gates/quality_gate.h) fails an engine broken inside its own code, not only one fed broken
// weights or a broken schedule (tests/gates/quality_gate_test.cpp).
//
// A runner carries one fault in its options (cpu::CpuRunnerOptions::fault and
// cuda::CudaRunnerOptions::fault, default kNone) and hands it, as an argument, to exactly the code
// it breaks: the DSA indexer's selection, the MoE experts' SwiGLU and the latent cache's fp8_g128
// encoding (the CUDA runner takes the first two and refuses the third). Only tests construct
// runners with a fault: no flag, typed option or profile of sparkglm-serve or sparkglm-qualify sets
// one, no environment variable is read and there is no global switch. With kNone a faulted site
// costs one comparison of the argument, outside the inner loops.
//
// It lives beside ModelRunner, not in one backend, because the latent cache (engine/runtime) reads
// it too and the CUDA runner takes the same controls.
namespace sparkglm {

enum class EngineFault {
  kNone,
  // Equal DSA indexer scores pick the higher pool first (MODEL.md section 4: the lower one).
  kIndexerTieFlipped,
  // The routed and shared experts' SwiGLU run without MODEL.md's clamp at swiglu_limit.
  kMoeClampDropped,
  // fp8_g128 groups store their scale with the exponent one too high (x2), so every latent and
  // indexer key the cache holds in fp8_g128 reads back doubled; other dtypes are unaffected.
  kFp8ScaleOffByOneExponent,
};

}  // namespace sparkglm
