#pragma once
// The hard end of a graceful shutdown. After SIGTERM, in-flight requests get --shutdown-grace and
// connections a moment more to close; but ServingEngine::shutdown joins the engine thread, and a
// step that never returns (a wedged device, a kernel that does not terminate) would hold that join,
// and the process, forever. The deadline is a watchdog thread: when it passes before the shutdown
// is done, it logs why and ends the process at once with kExitShutdownOverdue (no destructors: they
// may wait on the same hung step). Disarmed when the object goes.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

namespace sparkglm::server {

// The status of a process that did not shut down in time (0 is a clean drain).
inline constexpr int kExitShutdownOverdue = 4;
// What the server takes beyond the grace to cancel requests and close connections.
inline constexpr std::chrono::milliseconds kShutdownCloseAllowance{5000};

class ShutdownDeadline {
 public:
  // Exits the process with `exit_status` when `after` passes before this object is destroyed.
  explicit ShutdownDeadline(std::chrono::milliseconds after,
                            int exit_status = kExitShutdownOverdue);
  ~ShutdownDeadline();  // disarms and joins the watchdog
  ShutdownDeadline(const ShutdownDeadline&) = delete;
  ShutdownDeadline& operator=(const ShutdownDeadline&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  bool disarmed_ = false;
  std::thread watchdog_;
};

// For sparkglm-serve after a shutdown signal: a deadline of `grace_seconds` plus
// kShutdownCloseAllowance, to be kept alive until the shutdown is complete.
std::unique_ptr<ShutdownDeadline> arm_shutdown_deadline(double grace_seconds);

}  // namespace sparkglm::server
