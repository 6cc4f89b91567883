#include "engine/core/error.h"

#include <cstdio>
#include <cstdlib>

namespace sparkglm {

const char* to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidConfig:
      return "invalid config";
    case ErrorKind::kInvalidCheckpoint:
      return "invalid checkpoint";
    case ErrorKind::kInvalidArgument:
      return "invalid argument";
    case ErrorKind::kIo:
      return "i/o error";
    case ErrorKind::kCapacity:
      return "capacity";
    case ErrorKind::kUnsupported:
      return "unsupported";
  }
  return "error";
}

Error::Error(ErrorKind kind, const std::string& message)
    : std::runtime_error(std::string(to_string(kind)) + ": " + message),
      kind_(kind),
      message_(message) {}

void assert_failed(const char* expr, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "sparkglm: internal invariant failed: %s (%s:%d): %s\n", expr, file, line,
               msg.c_str());
  std::abort();
}

}  // namespace sparkglm
