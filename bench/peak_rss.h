#pragma once
// The process's peak resident set, for the benches that report memory beside speed.
#include <sys/resource.h>

#include <cstdint>

namespace sparkglm::bench {

inline int64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return int64_t(u.ru_maxrss) * 1024;  // Linux reports KiB
}

}  // namespace sparkglm::bench
