#pragma once
// The G1 operator table's harness (the llama.cpp test-backend-ops idea: one case drives both the
// correctness check and the timing). A case names an operator and a shape, owns its device
// buffers, knows how to launch itself, and carries the CPU reference of its outputs. The harness
// poisons outputs (all bits set: NaN for FP32, -1 for int32) before every run, checks every
// element was written and finite, compares with the reference by normalised squared error, reruns
// for bitwise repeatability, compares decode rows with the same rows of the widest batch, then
// times the launch with CUDA events (L2 flushed before each run, median of >= 25).
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/gemm.h"
#include "engine/core/thread_pool.h"
#include "engine/model/config.h"

namespace sparkglm::g1 {

struct CaseOutput {
  std::string name;
  const void* device = nullptr;
  int64_t count = 0;
  bool is_int = false;           // int32 (compared exactly) rather than FP32
  int64_t row_elems = 0;         // elements per batch row (decode batch-invariance check); 0: none
  std::vector<float> reference;  // FP32 reference for every element, or for `checked` only
  std::vector<int64_t> checked;  // element indices the reference covers (empty: all)
  // Only `checked` must be written (a variable-length result such as an attended list); else
  // every element must be.
  bool only_checked_written = false;
};

struct OperatorCase {
  std::string op;     // e.g. "linear.kda_qkv"
  std::string shape;  // human-readable dims
  int64_t rows = 0;
  bool decode = false;   // rows are independent sequences: checked against the widest batch
  double tolerance = 0;  // on the normalised squared error; int outputs need an exact match
  double bytes = 0;      // the fewest bytes the operator must move through HBM
  double flops = 0;      // its arithmetic (an FMA counts 2)
  bool flops_on_tensor_cores = true;  // the compute floor uses the BF16 peak (else FP32 CUDA cores)
  std::string note;
  std::function<void(cudaStream_t)> launch;
  std::function<void(cudaStream_t)> reset;  // restores state a launch consumes (may be empty)
  std::vector<CaseOutput> outputs;
  std::vector<std::shared_ptr<void>> keep;  // buffers the launch uses
};

struct Ceilings {
  double hbm_gbps = 0;
  double bf16_tflops = 0;
  double fp32_tflops = 0;  // the FP32 CUDA-core rate: 2 * SMs * 128 lanes * clock (datasheet form)
};

// The table runs at the geometry of this preset: every case takes its dimensions from model(),
// none restates them (288 experts, a 154880-token vocabulary, the softmax scale, ...).
inline constexpr const char* kG1Preset = "glm-5.3-flash";

class Harness {
 public:
  // Throws Error(kUnsupported) when the preset's geometry is not the one the CUDA kernels are
  // specialised for (MLA latent width, KDA head width and taps, indexer width and pool, mHC).
  Harness(int timed_runs, bool quick);
  ~Harness();

  const ModelConfig& model() const { return model_; }

  cuda::Gemm& gemm() { return gemm_; }
  ThreadPool& pool() { return pool_; }
  cudaStream_t stream() const { return stream_; }
  bool quick() const { return quick_; }
  const Ceilings& ceilings() const { return ceilings_; }

  void measure_ceilings();
  // Checks and times one case and appends its row. Returns the row's pass.
  bool run(OperatorCase& c);
  // Times `launch` alone (a peer such as cuBLASLt on the same shape).
  void add_peer(const std::string& peer, const std::string& op, const std::string& shape,
                const std::function<void(cudaStream_t)>& launch);
  double time_median_us(const std::function<void(cudaStream_t)>& launch);

  nlohmann::json report() const;
  void add_external_peers(const nlohmann::json& peers);

 private:
  void flush_l2();
  ModelConfig model_;
  cuda::Gemm gemm_;
  ThreadPool pool_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  cuda::DeviceBuffer flush_;
  int timed_runs_;
  bool quick_;
  Ceilings ceilings_;
  nlohmann::json rows_ = nlohmann::json::array();
  nlohmann::json peers_ = nlohmann::json::array();
  // Widest decode batch's output bits per (op, output, row width), for the batch-invariance check.
  std::map<std::string, std::vector<uint32_t>> widest_;
};

// Device buffer helpers shared by the case families.
std::shared_ptr<cuda::DeviceBuffer> device_alloc(size_t bytes);
// Uniform in [center - half, center + half) from the dummy-weight generator: a pure function of
// (tag, index), so the first r rows of a tensor are the same whatever its row count.
std::vector<float> host_uniform(const std::string& tag, int64_t n, float center, float half);
std::vector<uint16_t> to_bf16(const std::vector<float>& v);
std::vector<float> from_bf16(const std::vector<uint16_t>& v);
template <typename T>
std::shared_ptr<cuda::DeviceBuffer> upload(const std::vector<T>& v) {
  auto b = device_alloc(v.size() * sizeof(T));
  b->copy_from_host(v.data(), v.size() * sizeof(T));
  return b;
}
template <typename T>
T* ptr(const std::shared_ptr<cuda::DeviceBuffer>& b) {
  return static_cast<T*>(b->data());
}

// The case families (one file each).
void run_linear_cases(Harness& h);
void run_quantized_linear_cases(Harness& h);  // FP4-Local formats: only when asked (--only)
void run_moe_quant_cases(Harness& h);  // FP4-Local MoE decode, new vs baseline: only when asked
void run_norm_and_embedding_cases(Harness& h);
void run_kda_cases(Harness& h);
void run_mla_cases(Harness& h);
void run_router_and_sampling_cases(Harness& h);
void run_mhc_cases(Harness& h);
void run_dsa_cases(Harness& h);
void run_moe_cases(Harness& h);
void run_sampling_cases(Harness& h);
void run_moe_prefill_cases(Harness& h);
void run_mla_prefill_cases(Harness& h);

inline constexpr int kDecodeRows[] = {32, 1, 2, 4, 8, 16};  // widest first: the invariance baseline
inline constexpr int kPrefillRows[] = {512, 2048, 8192};

}  // namespace sparkglm::g1
