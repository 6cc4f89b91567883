#include "engine/runtime/generation_request.h"

namespace sparkglm {

const char* to_string(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kTimeout:
      return "timeout";
    case FinishReason::kError:
      return "error";
    case FinishReason::kDeviceFault:
      return "device_fault";
  }
  return "?";
}

}  // namespace sparkglm
