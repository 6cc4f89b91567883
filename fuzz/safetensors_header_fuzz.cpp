// Feeds arbitrary bytes to the safetensors header parser as a whole file. A typed Error is the
// parser rejecting the input, which is correct; anything else (a crash, a sanitizer report, another
// exception) is a bug.
#include <cstddef>
#include <cstdint>

#include "engine/core/error.h"
#include "engine/model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const sparkglm::SafetensorsHeader header =
        sparkglm::parse_safetensors_header(reinterpret_cast<const std::byte*>(data), size);
    // What the parser accepts must hold: every range lies inside the data region.
    for (const auto& e : header.entries) {
      if (e.begin > e.end || e.end > header.data_size) __builtin_trap();
    }
  } catch (const sparkglm::Error&) {
  }
  return 0;
}
