#include "engine/server/shutdown_deadline.h"

#include <pthread.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/server/server_log.h"

namespace sparkglm::server {

ShutdownDeadline::ShutdownDeadline(std::chrono::milliseconds after, int exit_status) {
  const auto deadline = std::chrono::steady_clock::now() + after;
  watchdog_ = std::thread([this, deadline, after, exit_status] {
    pthread_setname_np(pthread_self(), "sparkglm-dline");
    std::unique_lock<std::mutex> lock(mutex_);
    if (done_.wait_until(lock, deadline, [this] { return disarmed_; })) return;
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", double(after.count()) / 1000.0);
    log_line(std::string("shutdown did not finish within ") + seconds +
             " s (an engine step may be hung); exiting with status " + std::to_string(exit_status));
    std::_Exit(exit_status);
  });
}

ShutdownDeadline::~ShutdownDeadline() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    disarmed_ = true;
  }
  done_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

std::unique_ptr<ShutdownDeadline> arm_shutdown_deadline(double grace_seconds) {
  const auto grace = std::chrono::milliseconds(int64_t(grace_seconds * 1000.0));
  return std::make_unique<ShutdownDeadline>(grace + kShutdownCloseAllowance);
}

}  // namespace sparkglm::server
