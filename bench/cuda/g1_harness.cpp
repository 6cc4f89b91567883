#include "bench/cuda/g1_harness.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/dsa_indexer.h"
#include "engine/backend/cuda/dummy_weights.h"
#include "engine/backend/cuda/kda.h"
#include "engine/backend/cuda/mhc.h"
#include "engine/backend/cuda/mla_decode.h"
#include "engine/core/dtype.h"
#include "engine/core/error.h"
#include "tinyglm/dummy_hash.h"

namespace sparkglm::g1 {

namespace {

constexpr size_t kFlushBytes = size_t(256) << 20;  // > 4x the H200's 60 MB L2
constexpr int kWarmup = 3;
constexpr int kRepeats = 2;  // reruns compared bit for bit with the first

void poison(const OperatorCase& c, cudaStream_t s) {
  for (const CaseOutput& o : c.outputs)
    SPARKGLM_CUDA_CHECK(cudaMemsetAsync(const_cast<void*>(o.device), 0xff, size_t(o.count) * 4, s));
}

std::vector<std::vector<uint32_t>> fetch(const OperatorCase& c, cudaStream_t s) {
  SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<std::vector<uint32_t>> out;
  for (const CaseOutput& o : c.outputs) {
    std::vector<uint32_t> bits(size_t(o.count));
    SPARKGLM_CUDA_CHECK(cudaMemcpy(bits.data(), o.device, bits.size() * 4, cudaMemcpyDeviceToHost));
    out.push_back(std::move(bits));
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::shared_ptr<cuda::DeviceBuffer> device_alloc(size_t bytes) {
  return std::make_shared<cuda::DeviceBuffer>(std::max<size_t>(bytes, 16));
}

std::vector<float> host_uniform(const std::string& tag, int64_t n, float center, float half) {
  std::vector<float> v(static_cast<size_t>(n));
  const uint64_t key = dummy::tensor_key(20261129, tag);
  static ThreadPool pool(0);
  pool.parallel_for(n, 1 << 16, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) v[size_t(i)] = dummy::value(key, uint64_t(i), center, half);
  });
  return v;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(v[i]);
  return out;
}

std::vector<float> from_bf16(const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_f32(v[i]);
  return out;
}

Harness::Harness(int timed_runs, bool quick)
    : model_(preset_config(kG1Preset)),
      pool_(0),
      flush_(kFlushBytes),
      timed_runs_(timed_runs),
      quick_(quick) {
  const ModelConfig& m = model_;
  const std::pair<const char*, bool> specialised[] = {
      {"kv_lora_rank = cuda::kMlaLatentDim", m.kv_lora_rank == cuda::kMlaLatentDim},
      {"linear_attn_config.head_dim = cuda::kKdaHeadDim", m.kda.head_dim == cuda::kKdaHeadDim},
      {"linear_attn_config.short_conv_kernel_size = cuda::kKdaTaps",
       m.kda.short_conv_kernel_size == cuda::kKdaTaps},
      {"index_head_dim = cuda::kIndexDim", m.index_head_dim == cuda::kIndexDim},
      {"index_kpool = cuda::kIndexKpool", m.index_kpool == cuda::kIndexKpool},
      {"hc_mult = cuda::kHcStreams", m.hc_mult == cuda::kHcStreams},
      {"hidden_size = cuda::kHcWidth", m.hidden_size == cuda::kHcWidth},
      {"hc_mix_count() = cuda::kHcMixes", m.hc_mix_count() == cuda::kHcMixes}};
  for (const auto& [what, holds] : specialised)
    if (!holds)
      throw Error(ErrorKind::kUnsupported,
                  std::string("G1 at preset ") + kG1Preset + ": the CUDA kernels need " + what);
  SPARKGLM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  SPARKGLM_CUDA_CHECK(cudaEventCreate(&start_));
  SPARKGLM_CUDA_CHECK(cudaEventCreate(&stop_));
}

Harness::~Harness() {
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
  cudaStreamDestroy(stream_);
}

void Harness::flush_l2() {
  SPARKGLM_CUDA_CHECK(cudaMemsetAsync(flush_.data(), 0, flush_.bytes(), stream_));
}

double Harness::time_median_us(const std::function<void(cudaStream_t)>& launch) {
  for (int i = 0; i < kWarmup; ++i) launch(stream_);
  std::vector<double> us;
  for (int i = 0; i < timed_runs_; ++i) {
    flush_l2();
    SPARKGLM_CUDA_CHECK(cudaEventRecord(start_, stream_));
    launch(stream_);
    SPARKGLM_CUDA_CHECK(cudaEventRecord(stop_, stream_));
    SPARKGLM_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    SPARKGLM_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    us.push_back(double(ms) * 1e3);
  }
  return median(us);
}

void Harness::measure_ceilings() {
  // HBM: a 2 GiB device-to-device copy, bytes read plus bytes written.
  const size_t bytes = size_t(2) << 30;
  cuda::DeviceBuffer src(bytes), dst(bytes);
  SPARKGLM_CUDA_CHECK(cudaMemsetAsync(src.data(), 0x3c, bytes, stream_));
  const double copy_us = time_median_us([&](cudaStream_t s) {
    SPARKGLM_CUDA_CHECK(
        cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, s));
  });
  ceilings_.hbm_gbps = 2.0 * double(bytes) / (copy_us * 1e-6) / 1e9;

  // BF16 tensor cores: an 8192^3 cuBLASLt product on dummy-generator data (never zeros).
  const int64_t n = 8192;
  cuda::DeviceBuffer a(size_t(n * n * 2)), b(size_t(n * n * 2)), c(size_t(n * n * 4));
  cuda::fill_dummy_bf16(static_cast<uint16_t*>(a.data()), n * n, 11, 0.0f, 1.0f, stream_);
  cuda::fill_dummy_bf16(static_cast<uint16_t*>(b.data()), n * n, 12, 0.0f, 1.0f, stream_);
  const double gemm_us = time_median_us([&](cudaStream_t s) {
    gemm_.cublaslt(static_cast<uint16_t*>(a.data()), n, static_cast<uint16_t*>(b.data()), n, n,
                   static_cast<float*>(c.data()), s);
  });
  ceilings_.bf16_tflops = 2.0 * double(n) * n * n / (gemm_us * 1e-6) / 1e12;

  int dev = 0, sms = 0, clock_khz = 0;
  SPARKGLM_CUDA_CHECK(cudaGetDevice(&dev));
  SPARKGLM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  SPARKGLM_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
  ceilings_.fp32_tflops = 2.0 * sms * 128 * double(clock_khz) * 1e3 / 1e12;
  std::printf("ceilings: HBM %.0f GB/s, BF16 %.0f TFLOP/s, FP32 %.1f TFLOP/s (datasheet form)\n",
              ceilings_.hbm_gbps, ceilings_.bf16_tflops, ceilings_.fp32_tflops);
}

bool Harness::run(OperatorCase& c) {
  auto once = [&] {
    poison(c, stream_);
    if (c.reset) c.reset(stream_);
    c.launch(stream_);
    SPARKGLM_CUDA_CHECK(cudaGetLastError());
    return fetch(c, stream_);
  };
  const auto first = once();

  bool poison_ok = true, finite = true;
  double error = 0;
  for (size_t k = 0; k < c.outputs.size(); ++k) {
    const CaseOutput& o = c.outputs[k];
    const std::vector<uint32_t>& bits = first[k];
    const int64_t must = o.only_checked_written ? int64_t(o.checked.size()) : o.count;
    for (int64_t i = 0; i < must; ++i) {
      const uint32_t b = bits[size_t(o.only_checked_written ? o.checked[size_t(i)] : i)];
      if (b == 0xffffffffu) poison_ok = false;
      if (!o.is_int) {
        float f;
        std::memcpy(&f, &b, 4);
        if (!std::isfinite(f)) finite = false;
      }
    }
    const int64_t n = o.checked.empty() ? o.count : int64_t(o.checked.size());
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t at = o.checked.empty() ? i : o.checked[size_t(i)];
      const double ref = o.reference[size_t(i)];
      if (o.is_int) {
        num += double(int32_t(bits[size_t(at)])) != ref ? 1.0 : 0.0;
        den += 1.0;
      } else {
        float f;
        std::memcpy(&f, &bits[size_t(at)], 4);
        num += (double(f) - ref) * (double(f) - ref);
        den += ref * ref;
      }
    }
    const double e = o.is_int ? num / std::max(den, 1.0) : num / std::max(den, 1e-30);
    error = std::max(error, std::isfinite(e) ? e : 1e30);
  }

  bool repeatable = true;
  for (int r = 0; r < kRepeats; ++r)
    if (once() != first) repeatable = false;

  bool invariant = true;
  bool invariance_checked = false;
  if (c.decode) {
    for (size_t k = 0; k < c.outputs.size(); ++k) {
      const CaseOutput& o = c.outputs[k];
      if (o.row_elems <= 0) continue;
      // Cases of one operator over inputs of another row width (pool scores at 8K and at 1M
      // tokens) are separate batches: a row is compared only with rows of its own width.
      const std::string key = c.op + "|" + o.name + "|" + std::to_string(o.row_elems);
      auto it = widest_.find(key);
      if (it == widest_.end()) {
        widest_[key] = first[k];
        continue;
      }
      invariance_checked = true;
      const size_t n = size_t(c.rows * o.row_elems);
      if (n > it->second.size() ||
          !std::equal(first[k].begin(), first[k].begin() + n, it->second.begin()))
        invariant = false;
    }
  }

  const double t = time_median_us([&](cudaStream_t s) { c.launch(s); });
  const double hbm_us = c.bytes / (ceilings_.hbm_gbps * 1e9) * 1e6;
  const double rate = c.flops_on_tensor_cores ? ceilings_.bf16_tflops : ceilings_.fp32_tflops;
  const double flop_us = c.flops / (rate * 1e12) * 1e6;
  const double floor_us = std::max(hbm_us, flop_us);
  const bool pass = error <= c.tolerance && poison_ok && finite && repeatable && invariant;

  nlohmann::json row = {{"operator", c.op},
                        {"shape", c.shape},
                        {"rows", c.rows},
                        {"tolerance", c.tolerance},
                        {"error", error},
                        {"poison_ok", poison_ok},
                        {"finite", finite},
                        {"repeatable", repeatable},
                        {"batch_invariant", invariant},
                        {"batch_invariance_checked", invariance_checked},
                        {"median_us", t},
                        {"runs", timed_runs_},
                        {"floor_us", floor_us},
                        {"floor_kind", hbm_us >= flop_us ? "hbm" : "compute"},
                        {"floor_fraction", floor_us / t},
                        {"bytes", c.bytes},
                        {"flops", c.flops},
                        {"pass", pass},
                        {"note", c.note}};
  rows_.push_back(row);
  std::printf("%-28s %-44s rows %5lld err %.2e/%.0e %s%s%s%s %9.2f us floor %8.2f (%3.0f%%) %s\n",
              c.op.c_str(), c.shape.c_str(), (long long)c.rows, error, c.tolerance,
              poison_ok ? "" : "POISON ", finite ? "" : "NONFINITE ",
              repeatable ? "" : "NONREPEAT ", invariant ? "" : "BATCHVAR ", t, floor_us,
              100.0 * floor_us / t, pass ? "pass" : "FAIL");
  std::fflush(stdout);
  return pass;
}

void Harness::add_peer(const std::string& peer, const std::string& op, const std::string& shape,
                       const std::function<void(cudaStream_t)>& launch) {
  const double t = time_median_us(launch);
  peers_.push_back({{"peer", peer}, {"operator", op}, {"shape", shape}, {"median_us", t}});
  std::printf("  peer %-12s %-28s %-44s %9.2f us\n", peer.c_str(), op.c_str(), shape.c_str(), t);
}

void Harness::add_external_peers(const nlohmann::json& peers) {
  for (const auto& p : peers) peers_.push_back(p);
}

nlohmann::json Harness::report() const {
  int dev = 0;
  cudaDeviceProp prop{};
  SPARKGLM_CUDA_CHECK(cudaGetDevice(&dev));
  SPARKGLM_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  int driver = 0, runtime = 0;
  SPARKGLM_CUDA_CHECK(cudaDriverGetVersion(&driver));
  SPARKGLM_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  auto version = [](int v) {
    return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
  };
  return {{"schema", "sparkglm.operators/1"},
          {"device",
           {{"name", prop.name},
            {"sm", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
            {"memory_bytes", prop.totalGlobalMem},
            {"driver", version(driver)},
            {"cuda", version(runtime)}}},
          {"measured",
           {{"hbm_gbps", ceilings_.hbm_gbps},
            {"bf16_tflops", ceilings_.bf16_tflops},
            {"fp32_tflops_datasheet_form", ceilings_.fp32_tflops}}},
          {"operators", rows_},
          {"peers", peers_}};
}

}  // namespace sparkglm::g1
