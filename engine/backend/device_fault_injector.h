#pragma once
// A test hook behind --inject-device-fault-after-steps N: wraps the runner the factory built and,
// when step N + 1 is submitted, provokes a device fault. On the CUDA backend that is a real
// illegal-address fault (engine/backend/cuda/device_fault.h): the wrapped runner's own checks then
// report the sticky error, so the production path is the one tested. On the CPU backend, which has
// no device to poison, the provoking call throws Error(kDeviceFatal) in place of the step, and so
// does every later call, as a poisoned context would. Never used outside tests.
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>

#include "engine/model/model_runner.h"

namespace sparkglm {

class DeviceFaultInjector : public ModelRunner {
 public:
  // `provoke` runs once, in place of nothing, before step after_steps + 1 reaches `inner`; what it
  // throws is thrown again by every later call.
  DeviceFaultInjector(std::unique_ptr<ModelRunner> inner, int64_t after_steps,
                      std::function<void()> provoke);

  const ModelConfig& config() const override { return inner_->config(); }
  CacheGeometry cache_geometry() const override { return inner_->cache_geometry(); }
  void forward(const ForwardBatch& batch, ForwardOutput& out) override;
  void forward_mtp(const ForwardBatch& batch, const std::vector<float>& hidden,
                   ForwardOutput& out) override;
  void submit(const ForwardBatch& batch, const StepSampling& sampling) override;
  void collect(StepResult& result) override;
  bool main_rows_early() const override { return inner_->main_rows_early(); }
  void collect_main(StepResult& main) override;
  size_t host_block_bytes() const override { return inner_->host_block_bytes(); }
  size_t host_snapshot_bytes() const override { return inner_->host_snapshot_bytes(); }
  void copy_block_to_host(int32_t block, std::byte* host) override;
  void copy_block_from_host(int32_t block, const std::byte* host) override;
  void copy_snapshot_to_host(int snapshot, std::byte* host) override;
  void copy_snapshot_from_host(int snapshot, const std::byte* host) override;

 private:
  void before_step();  // counts the step; provokes the fault at step after_steps_ + 1
  void rethrow_if_failed() const;

  std::unique_ptr<ModelRunner> inner_;
  int64_t after_steps_;
  int64_t steps_ = 0;
  std::function<void()> provoke_;
  std::exception_ptr failure_;
};

// The CPU backend's fault: throws Error(kDeviceFatal) naming the hook.
std::function<void()> throw_injected_device_fault(int64_t after_steps);

}  // namespace sparkglm
