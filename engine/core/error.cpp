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
    case ErrorKind::kDeviceFatal:
      return "device fault";
  }
  return "error";
}

Error::Error(ErrorKind kind, const std::string& message)
    : std::runtime_error(std::string(to_string(kind)) + ": " + message),
      kind_(kind),
      message_(message) {}

bool is_device_fatal(const std::exception& e) {
  const auto* error = dynamic_cast<const Error*>(&e);
  return error && error->kind() == ErrorKind::kDeviceFatal;
}

void assert_failed(const char* expr, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "sparkglm: internal invariant failed: %s (%s:%d): %s\n", expr, file, line,
               msg.c_str());
  std::abort();
}

}  // namespace sparkglm
