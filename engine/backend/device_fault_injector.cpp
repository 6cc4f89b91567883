#include "engine/backend/device_fault_injector.h"

#include <string>
#include <utility>

#include "engine/core/error.h"

namespace sparkglm {

DeviceFaultInjector::DeviceFaultInjector(std::unique_ptr<ModelRunner> inner, int64_t after_steps,
                                         std::function<void()> provoke)
    : inner_(std::move(inner)), after_steps_(after_steps), provoke_(std::move(provoke)) {
  SPARKGLM_ASSERT(inner_ && provoke_, "DeviceFaultInjector needs a runner and a fault");
}

void DeviceFaultInjector::rethrow_if_failed() const {
  if (failure_) std::rethrow_exception(failure_);
}

void DeviceFaultInjector::before_step() {
  rethrow_if_failed();
  if (++steps_ != after_steps_ + 1) return;
  try {
    provoke_();
  } catch (...) {
    failure_ = std::current_exception();
    throw;
  }
}

void DeviceFaultInjector::forward(const ForwardBatch& batch, ForwardOutput& out) {
  before_step();
  inner_->forward(batch, out);
}

void DeviceFaultInjector::forward_mtp(const ForwardBatch& batch, const std::vector<float>& hidden,
                                      ForwardOutput& out) {
  rethrow_if_failed();
  inner_->forward_mtp(batch, hidden, out);
}

void DeviceFaultInjector::submit(const ForwardBatch& batch, const StepSampling& sampling) {
  before_step();
  inner_->submit(batch, sampling);
}

void DeviceFaultInjector::collect(StepResult& result) {
  rethrow_if_failed();
  inner_->collect(result);
}

void DeviceFaultInjector::collect_main(StepResult& main) {
  rethrow_if_failed();
  inner_->collect_main(main);
}

void DeviceFaultInjector::copy_block_to_host(int32_t block, std::byte* host) {
  rethrow_if_failed();
  inner_->copy_block_to_host(block, host);
}

void DeviceFaultInjector::copy_block_from_host(int32_t block, const std::byte* host) {
  rethrow_if_failed();
  inner_->copy_block_from_host(block, host);
}

void DeviceFaultInjector::copy_snapshot_to_host(int snapshot, std::byte* host) {
  rethrow_if_failed();
  inner_->copy_snapshot_to_host(snapshot, host);
}

void DeviceFaultInjector::copy_snapshot_from_host(int snapshot, const std::byte* host) {
  rethrow_if_failed();
  inner_->copy_snapshot_from_host(snapshot, host);
}

std::function<void()> throw_injected_device_fault(int64_t after_steps) {
  return [after_steps] {
    throw Error(ErrorKind::kDeviceFatal,
                "injected device fault after " + std::to_string(after_steps) +
                    " engine steps (--inject-device-fault-after-steps, a test hook)");
  };
}

}  // namespace sparkglm
