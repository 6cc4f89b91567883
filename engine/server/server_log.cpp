#include "engine/server/server_log.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace sparkglm::server {

void log_line(const std::string& text) {
  static std::mutex mutex;
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  std::lock_guard<std::mutex> lock(mutex);
  std::fprintf(stderr, "%s.%03dZ %s\n", stamp, int(ms), text.c_str());
  std::fflush(stderr);
}

}  // namespace sparkglm::server
