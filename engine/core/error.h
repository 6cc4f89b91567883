#pragma once
// Errors that reach a user: bad input (config, checkpoint, request) becomes an Error whose message
// names what is wrong and what was expected. Internal invariants use SPARKGLM_ASSERT instead.
#include <stdexcept>
#include <string>

namespace sparkglm {

enum class ErrorKind {
  kInvalidConfig,      // config.json or a preset is inconsistent
  kInvalidCheckpoint,  // a safetensors file, index or tensor is malformed or mismatched
  kInvalidArgument,    // a command-line flag or API argument is wrong
  kIo,                 // a file could not be opened, read or written
  kCapacity,           // a request cannot fit in the configured pools
  kUnsupported,        // a format or feature this build does not implement
  kDeviceFatal,        // the device is unusable (a sticky CUDA error): the process must restart
};

const char* to_string(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message);
  ErrorKind kind() const { return kind_; }
  // The message without the "kind: " prefix, for wrapping with more context.
  const std::string& message() const { return message_; }

 private:
  ErrorKind kind_;
  std::string message_;
};

// True for an Error of kind kDeviceFatal: no request's fault, and no later step can succeed.
bool is_device_fatal(const std::exception& e);

[[noreturn]] void assert_failed(const char* expr, const char* file, int line,
                                const std::string& msg);

}  // namespace sparkglm

#define SPARKGLM_ASSERT(cond, msg)                                            \
  do {                                                                        \
    if (!(cond)) ::sparkglm::assert_failed(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
